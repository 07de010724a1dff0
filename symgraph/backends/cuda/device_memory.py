"""Device memory for the CUDA backend: :class:`DeviceArray`, its caching
allocator, and the runtime's allocator (``c_src/cuda/sg_cuda_memory.cu``).

One library for both devices: nvcc builds it against the CUDA runtime on a
GPU; under ``gpu.emulate`` the host compiler builds the same source with the
emulation header (``cudaMalloc`` is ``malloc`` there), so the emulated device
runs the very allocator, cache and copies a GPU does.  Each build is made
once into the compile cache and loaded with ``ctypes.PyDLL``.

``put``/``get`` copy between host and device; ``adopt`` wraps another GPU
library's array (anything with ``__cuda_array_interface__``: PyCUDA's
``GPUArray``, CuPy, PyTorch, Numba) without a copy, and DeviceArrays export
the same interface; ``memory_stats()`` and ``empty_cache()`` expose the cache
(``symgraph.gpu`` re-exports them).
"""

import ctypes
import functools
import sysconfig

import numpy as np

from symgraph.backends.native.allocator import Allocator
from symgraph.backends.native.c_sources import C_SRC

__all__ = ["device_array_class", "put", "get", "adopt", "from_host", "memory_stats",
           "empty_cache", "synchronize", "allocator", "context_index"]

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
    for name, restype, argtypes in (("sg_cuda_memory_init", ctypes.py_object,
                                     (ctypes.c_int, ctypes.c_int)),
                                    ("sg_cuda_configure_cache", ctypes.c_int,
                                     (ctypes.c_int, ctypes.c_size_t)),
                                    ("sg_cuda_total_memory", ctypes.c_size_t, ()),
                                    ("sg_cuda_device_name", ctypes.py_object, ()),
                                    ("sg_cuda_put", ctypes.py_object, (ctypes.py_object,)),
                                    ("sg_cuda_memory_stats", ctypes.py_object, ()),
                                    ("sg_cuda_empty_cache", None, ()),
                                    ("sg_cuda_synchronize", ctypes.c_int, ()),
                                    ("sg_cuda_wrap", ctypes.py_object, (ctypes.py_object,) * 5),
                                    ("sg_cuda_stream_wait", ctypes.c_int, (ctypes.c_size_t,))):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


#: The kinds of device (emulated: True, GPU: False) whose memory is in use in
#: this process, the latest last.
_IN_USE = []


def _lib():
    """The library of the device in use (the latest initialized), else the flag's."""
    return _library(_IN_USE[-1] if _IN_USE else _emulated())


#: gpuarray.sched -> how the host waits for the device (cudaSetDeviceFlags):
#: spinning answers fastest and keeps a core busy, a blocking wait sleeps
_SCHEDULES = {"default": 0, "single": 1, "multi": 4}


@functools.lru_cache(maxsize=2)
def _class(emulated, device):
    import sys

    from symgraph.config import config

    lib = _library(emulated)
    cls = lib.sg_cuda_memory_init(device, _SCHEDULES[config.gpuarray.sched])
    _IN_USE.append(emulated)
    preallocate = float(config.gpuarray.preallocate)
    if preallocate > 0:
        # Theano's meaning: a fraction of the device's memory, or megabytes
        reserve = int(preallocate * lib.sg_cuda_total_memory()) if preallocate <= 1 \
            else int(preallocate * 2 ** 20)
        try:
            lib.sg_cuda_configure_cache(1, reserve)
        except MemoryError as exc:
            raise MemoryError(f"gpuarray.preallocate={preallocate:g} asks for {reserve} bytes "
                              f"of cuda{device}, more than it can give ({exc})") from None
    elif preallocate < 0:
        lib.sg_cuda_configure_cache(0, 0)
    if config.print_active_device:
        print(f"symgraph: cuda{device} is {lib.sg_cuda_device_name()}", file=sys.stderr)
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


def adopt(value, context_name="cuda0", emulated=None):
    """A DeviceArray over the memory of ``value``, another GPU library's array
    (its ``__cuda_array_interface__``, version 2 or 3): no copy, ``value`` is
    kept alive as the array's ``base`` and sees every write.  Work queued on
    the stream the interface names is waited for first."""
    emulated = _emulated() if emulated is None else emulated
    cls = device_array_class(context_name, emulated)
    if isinstance(value, cls):
        return value
    what = type(value).__name__
    try:
        face = value.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"a {what} is not a device array: it has no __cuda_array_interface__"
                        ) from None
    version = face.get("version", 0)
    if version < 2:
        raise TypeError(f"the __cuda_array_interface__ of a {what} is version {version}; "
                        "symgraph reads versions 2 and 3")
    if face.get("mask") is not None:
        raise TypeError(f"a {what} with a mask (__cuda_array_interface__['mask']) cannot be "
                        "used as a device array")
    try:
        dtype = np.dtype(face["typestr"])
    except TypeError:
        raise TypeError(f"the element type {face['typestr']!r} of a {what} is not one "
                        "symgraph knows") from None
    if dtype.byteorder not in "=|" and dtype.byteorder != np.dtype(dtype.type).byteorder:
        raise TypeError(f"a {what} of byte-swapped {dtype}: device arrays are native-endian")
    dtype = dtype.newbyteorder("=")
    shape = tuple(int(n) for n in face["shape"])
    strides = face.get("strides")
    if strides is None:
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    strides = tuple(int(s) for s in strides)
    pointer, readonly = face["data"]
    pointer = int(pointer or 0)
    if readonly:
        raise TypeError(f"a read-only {what}: symgraph may write into the arrays it is given "
                        "(copy it first)")
    if pointer % dtype.itemsize or any(s % dtype.itemsize for s in strides):
        raise ValueError(f"a {what} whose address or strides are not multiples of its "
                         f"element size ({dtype.itemsize} bytes): device kernels need "
                         "aligned elements")
    stream = face.get("stream")
    lib = _library(emulated)
    # 1 and 2 are the default streams (legacy, per-thread): the legacy one is
    # the stream symgraph launches on, the per-thread one waits for it
    if stream not in (None, 1, 2) and lib.sg_cuda_stream_wait(int(stream)):
        raise RuntimeError(f"waiting for the stream of a {what} failed")
    return lib.sg_cuda_wrap(value, pointer, dtype, shape, strides)


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
