"""Device memory for the CUDA backend: :class:`DeviceArray`, its caching
allocator, and the runtime's allocator (``c_src/cuda/sg_cuda_memory.cu``).

One library for both devices: nvcc builds it against the CUDA runtime on a
GPU; under ``gpu.emulate`` the host compiler builds the same source with the
emulation header (``cudaMalloc`` is ``malloc`` there), so the emulated device
runs the very allocator, cache and copies a GPU does.  Each build is made
once into the compile cache and loaded with ``ctypes.PyDLL``.

``put``/``get`` copy between host and device; ``memory_stats()`` and
``empty_cache()`` expose the cache (``symgraph.gpu`` re-exports them).
"""

import ctypes
import functools
import sysconfig

import numpy as np

from symgraph.backends.native.allocator import Allocator
from symgraph.backends.native.c_sources import C_SRC

__all__ = ["device_array_class", "put", "get", "from_host", "memory_stats", "empty_cache",
           "synchronize", "allocator", "context_index"]

_SOURCE = "cuda/sg_cuda_memory.cu"


def _emulated():
    from symgraph.config import config

    return bool(config.gpu.emulate)


def context_index(context_name):
    """The device number of a context name: 'cuda' and 'cuda0' are 0, 'cuda1' is 1."""
    digits = str(context_name).lstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits) if digits else 0


@functools.lru_cache(maxsize=2)
def _library(emulated):
    from symgraph.backends.cuda import compiler
    from symgraph.backends.native.cache import environment_parts, make_key
    from symgraph.backends.native.prebuilt import Prebuilt

    source = (C_SRC / _SOURCE).read_text()
    headers = "".join((C_SRC / name).read_text() for name in (
        "sg_kernel.h", "sg_allocator.h", "cuda/sg_cuda_launch.h", "cuda/copy.inc",
        "cuda/sg_cuda_emu.h"))
    include = (sysconfig.get_paths()["include"], np.get_include())
    what = "the device memory library" + (" (emulated)" if emulated else "")

    def build(tmp_dir):
        out = tmp_dir / "lib.so"
        if emulated:
            compiler.build_emulated(source, out, what=what, include_dirs=include)
        else:
            compiler.build_nvcc(source, out, what=what, include_dirs=include)

    mode = "emulated" if emulated else f"nvcc {compiler.nvcc_version()}"
    lib = Prebuilt(what, loader=ctypes.PyDLL, build=build,
                   key=lambda: make_key(source=source, headers=headers, numpy_full=np.__version__,
                                        python_include=include[0], device=mode,
                                        **environment_parts())).cached()
    for name, restype, argtypes in (("sg_cuda_memory_init", ctypes.py_object, (ctypes.c_int,)),
                                    ("sg_cuda_put", ctypes.py_object, (ctypes.py_object,)),
                                    ("sg_cuda_memory_stats", ctypes.py_object, ()),
                                    ("sg_cuda_empty_cache", None, ()),
                                    ("sg_cuda_synchronize", ctypes.c_int, ())):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


#: The kinds of device (emulated: True, GPU: False) whose memory is in use in
#: this process, the latest last.
_IN_USE = []


def _lib():
    """The library of the device in use (the latest initialized), else the flag's."""
    return _library(_IN_USE[-1] if _IN_USE else _emulated())


@functools.lru_cache(maxsize=2)
def _class(emulated, device):
    cls = _library(emulated).sg_cuda_memory_init(device)
    _IN_USE.append(emulated)
    return cls


def device_array_class(context_name="cuda0", emulated=None):
    """The DeviceArray class of the emulated device or the GPU (``emulated``
    None: as the flag ``gpu.emulate`` says), selecting the context's device on
    first use."""
    emulated = _emulated() if emulated is None else emulated
    return _class(emulated, context_index(context_name))


def put(value, context_name="cuda0", emulated=None):
    """``value`` (array-like) copied to a new DeviceArray (of the emulated
    device or the GPU: ``emulated`` None follows the flag ``gpu.emulate``)."""
    emulated = _emulated() if emulated is None else emulated
    device_array_class(context_name, emulated)
    host = np.ascontiguousarray(value)
    if not host.flags.aligned:
        host = host.copy()
    return _library(emulated).sg_cuda_put(host)


def get(array):
    """A host copy of a DeviceArray (a new ndarray)."""
    return array.get()


def from_host(value, emulated=None):
    """A DeviceArray of ``value`` on the emulated device or the GPU, the device
    the flag ``device`` names: how pickles and copies of device arrays come back."""
    from symgraph.config import config

    device = str(config.device)
    return put(value, device if device.startswith("cuda") else "cuda0", emulated)


def memory_stats():
    """The device cache's counters (of the device in use): bytes in use, bytes cached (freed, kept for
    reuse), and the number of device allocations and frees made so far."""
    return _lib().sg_cuda_memory_stats()


def empty_cache():
    """Give the cached (freed) device memory back to the device."""
    _lib().sg_cuda_empty_cache()


def synchronize():
    """Wait until every kernel launched so far has finished (kernels run
    asynchronously; a function returning only updates does not wait)."""
    for emulated in set(_IN_USE):
        _library(emulated).sg_cuda_synchronize()


def _capsule(emulated):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    lib = _library(emulated)
    address = ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_cuda_allocator"))
    return new(address, b"symgraph.allocator", None)


_ALLOCATORS = {
    True: Allocator("emulated cuda", lambda: _capsule(True)),
    False: Allocator("cuda", lambda: _capsule(False)),
}


def allocator():
    """The runtime allocator of the current device's arrays."""
    return _ALLOCATORS[_emulated()]
