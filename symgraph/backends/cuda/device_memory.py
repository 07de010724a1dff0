"""Device memory for the CUDA backend: :class:`DeviceArray`, its caching
allocator, and the runtime's allocator (``c_src/cuda/sg_cuda_memory.cu``).

One library for both devices: nvcc builds it against the CUDA runtime on a
GPU; under ``gpu.emulate`` the host compiler builds the same source with the
emulation header (``cudaMalloc`` is ``malloc`` there), so the emulated device
runs the very allocator, cache and copies a GPU does.  Each build is made
once into the compile cache and loaded with ``ctypes.PyDLL``.

A process may drive several devices (the flag ``contexts``): each has its own
cache, counters and runtime allocator in the library, every DeviceArray
records its device (``a.device``), and ``copy_to`` moves an array to
another device (``cudaMemcpyPeer``).  Functions take a context name
(``cuda1``, or a name of the flag ``contexts``); None is the default context.

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

__all__ = ["device_array_class", "put", "get", "adopt", "copy_to", "on_device", "from_host",
           "peer_access", "pointer_device", "memory_stats", "empty_cache", "synchronize",
           "allocator", "context_index"]

_SOURCE = "cuda/sg_cuda_memory.cu"


def _emulated():
    from symgraph.config import config

    return bool(config.gpu.emulate)


def context_index(context_name):
    """The device number of a context name: 'cuda' and 'cuda0' are 0, 'cuda1'
    is 1, a name of the flag ``contexts`` its device's; None the default context's."""
    from symgraph.tensor.gpu_contexts import context_name as resolve
    from symgraph.tensor.gpu_contexts import device_number

    return device_number(resolve(context_name))


@functools.lru_cache(maxsize=2)
def _library(emulated):
    from symgraph.backends.cuda import compiler
    from symgraph.backends.native.cache import environment_parts, make_key
    from symgraph.backends.native.prebuilt import Prebuilt

    source = (C_SRC / _SOURCE).read_text()
    # every header the source may include, so that a new one cannot be missed
    # from the key (a stale library would be loaded)
    names = ["sg_kernel.h", "sg_allocator.h"] + sorted(
        p.relative_to(C_SRC).as_posix() for pattern in ("*.h", "*.inc")
        for p in (C_SRC / "cuda").glob(pattern))
    headers = "".join(name + "\0" + (C_SRC / name).read_text() for name in names)
    include = (sysconfig.get_paths()["include"], np.get_include())
    what = "the device memory library" + (" (emulated)" if emulated else "")

    def build(tmp_dir):
        out = tmp_dir / "lib.so"
        if emulated:
            compiler.build_emulated(source, out, what=what, include_dirs=include)
        else:
            compiler.build_nvcc(source, out, what=what, include_dirs=include)

    mode = "emulated" if emulated else \
        f"nvcc {compiler.nvcc_version()} for {','.join(compiler.target_archs())}"
    lib = Prebuilt(what, loader=ctypes.PyDLL, build=build,
                   key=lambda: make_key(source=source, headers=headers, numpy_full=np.__version__,
                                        python_include=include[0], device=mode,
                                        **environment_parts())).cached()
    int_, obj = ctypes.c_int, ctypes.py_object
    for name, restype, argtypes in (("sg_cuda_memory_init", obj, (int_, int_)),
                                    ("sg_cuda_configure_cache", int_,
                                     (int_, int_, ctypes.c_size_t)),
                                    ("sg_cuda_total_memory", ctypes.c_size_t, (int_,)),
                                    ("sg_cuda_device_name", obj, (int_,)),
                                    ("sg_cuda_put", obj, (obj, int_)),
                                    ("sg_cuda_copy_to", obj, (obj, int_)),
                                    ("sg_cuda_memory_stats", obj, (int_,)),
                                    ("sg_cuda_empty_cache", None, (int_,)),
                                    ("sg_cuda_synchronize", int_, (int_,)),
                                    ("sg_cuda_allocator_of", ctypes.c_void_p, (int_,)),
                                    ("sg_cuda_wrap", obj, (obj,) * 5 + (int_,)),
                                    ("sg_cuda_stream_wait", int_, (ctypes.c_size_t,)),
                                    ("sg_cuda_pointer_device", int_, (ctypes.c_size_t,))):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


#: (emulated, device number) of the devices whose memory is in use in this
#: process, in the order they were first used.
_IN_USE = []


#: gpuarray.sched -> how the host waits for the device (cudaSetDeviceFlags):
#: spinning answers fastest and keeps a core busy, a blocking wait sleeps
_SCHEDULES = {"default": 0, "single": 1, "multi": 4}


@functools.lru_cache(maxsize=None)
def _class(emulated, device):
    """Device ``device`` (a number) made ready on first use: checked to exist,
    selected, its cache configured; the DeviceArray class."""
    import sys

    from symgraph.backends.cuda.contexts import check_device
    from symgraph.config import config

    check_device(device, emulated=emulated)
    lib = _library(emulated)
    if emulated:
        # only grows: devices already in use stay usable if the flag shrinks
        _EMULATED_COUNT[0] = max(_EMULATED_COUNT[0], int(config.gpu.emulate_devices))
        lib.sg_cuda_emu_set_device_count(_EMULATED_COUNT[0])
    cls = lib.sg_cuda_memory_init(device, _SCHEDULES[config.gpuarray.sched])
    _IN_USE.append((emulated, device))
    preallocate = float(config.gpuarray.preallocate)
    if preallocate > 0:
        # Theano's meaning: a fraction of the device's memory, or megabytes
        reserve = int(preallocate * lib.sg_cuda_total_memory(device)) if preallocate <= 1 \
            else int(preallocate * 2 ** 20)
        try:
            lib.sg_cuda_configure_cache(device, 1, reserve)
        except MemoryError as exc:
            raise MemoryError(f"gpuarray.preallocate={preallocate:g} asks for {reserve} bytes "
                              f"of cuda{device}, more than it can give ({exc})") from None
    elif preallocate < 0:
        lib.sg_cuda_configure_cache(device, 0, 0)
    if config.print_active_device:
        print(f"symgraph: cuda{device} is {lib.sg_cuda_device_name(device)}", file=sys.stderr)
    return cls


#: The emulated library's device count (gpu.emulate_devices, the largest set so far).
_EMULATED_COUNT = [1]


def device_array_class(context_name="cuda0", emulated=None):
    """The DeviceArray class of the emulated device or the GPU (``emulated``
    None: as the flag ``gpu.emulate`` says), making the context's device ready
    on first use.  One class serves every device (``a.device`` says which)."""
    emulated = _emulated() if emulated is None else emulated
    return _class(emulated, context_index(context_name))


def _ready(context_name, emulated):
    """(the library, the device number) of a context, its device made ready."""
    emulated = _emulated() if emulated is None else emulated
    device = context_index(context_name)
    _class(emulated, device)
    return _library(emulated), device


def put(value, context_name="cuda0", emulated=None):
    """``value`` (array-like) copied to a new DeviceArray on the device of
    ``context_name`` (of the emulated device or the GPU: ``emulated`` None
    follows the flag ``gpu.emulate``)."""
    lib, device = _ready(context_name, emulated)
    # np.ascontiguousarray would make a 0-d value (a learning rate) 1-d
    host = np.asarray(value, order="C")
    if not host.flags.aligned:
        host = host.copy()
    return lib.sg_cuda_put(host, device)


def copy_to(array, context_name, emulated=None):
    """A DeviceArray copied (on the devices, no host round trip) to a new
    contiguous array on the device of ``context_name``."""
    lib, device = _ready(context_name, emulated)
    return lib.sg_cuda_copy_to(array, device)


def on_device(array, context_name, emulated=None):
    """``array`` itself when it is on the device of ``context_name``, else a
    copy there."""
    if array.device == context_index(context_name):
        return array
    return copy_to(array, context_name, emulated)


def adopt(value, context_name="cuda0", emulated=None, in_place=False):
    """A DeviceArray over the memory of ``value``, another GPU library's array
    (its ``__cuda_array_interface__``, version 2 or 3): no copy, ``value`` is
    kept alive as the array's ``base`` and sees every write.  Work queued on
    the stream the interface names is waited for first.  Memory of another
    device than the context's is copied to the context's device instead, or
    with ``in_place`` wrapped on its own device (to read it, not to compute
    on the context's device)."""
    emulated = _emulated() if emulated is None else emulated
    cls = device_array_class(context_name, emulated)
    if isinstance(value, cls):
        return value if in_place else on_device(value, context_name, emulated)
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
    device = context_index(context_name)
    owner = pointer_device(pointer, emulated) if pointer else -1
    if owner < 0 or owner == device:
        return lib.sg_cuda_wrap(value, pointer, dtype, shape, strides, device)
    # Memory of another device (a CuPy array on cuda1 given for dev0): the
    # context's kernels must not read it in place, so it is wrapped on its own
    # device and copied to the context's, as a DeviceArray of another device is.
    _class(emulated, owner)
    wrapped = lib.sg_cuda_wrap(value, pointer, dtype, shape, strides, owner)
    return wrapped if in_place else copy_to(wrapped, context_name, emulated)


def pointer_device(pointer, emulated=None):
    """The number of the device whose memory ``pointer`` (an int) is, or -1
    where CUDA does not tie it to one device (host or managed memory).  The
    emulated devices share the host's memory and answer from their record of
    ``cudaMalloc``'s allocations, as CUDA would."""
    emulated = _emulated() if emulated is None else emulated
    return _library(emulated).sg_cuda_pointer_device(pointer)


@functools.lru_cache(maxsize=1)
def emulator_hooks():
    """{hook symbol of an emulated kernel library: address} of the emulated
    device memory library's functions that say which device an allocation
    is of and which device the calling thread has selected."""
    lib = _library(True)
    return {"cuda_emu_pointer_device_hook":
            ctypes.cast(lib.sg_cuda_pointer_device, ctypes.c_void_p).value,
            "cuda_emu_current_device_hook":
            ctypes.cast(lib.sg_cuda_emu_current_device, ctypes.c_void_p).value}


def get(array):
    """A host copy of a DeviceArray (a new ndarray)."""
    return array.get()


def from_host(value, emulated=None, device=None):
    """A DeviceArray of ``value`` on the emulated device or the GPU, on device
    number ``device`` (None: the one the flag ``device`` names): how pickles
    and copies of device arrays come back."""
    from symgraph.tensor.gpu_contexts import default_context

    return put(value, f"cuda{device}" if device is not None else default_context() or "cuda0",
               emulated)


def peer_access(context_name, peer_context):
    """True when the device of ``context_name`` reads the memory of
    ``peer_context``'s directly (peer access, enabled where the hardware
    allows when both devices are in use); False when copies between them
    are staged through the host."""
    lib, device = _ready(context_name, None)
    _, peer = _ready(peer_context, None)
    return bool(lib.sg_cuda_peer_access(device, peer))


def _device_in_use(context_name):
    """(emulated, number) of the device a statistics call is about: the
    context's, else the default context's when in use, else the first used."""
    if context_name is not None:
        return _emulated(), context_index(context_name)
    from symgraph.tensor.gpu_contexts import default_context

    default = default_context()
    if default is not None and (_emulated(), context_index(default)) in _IN_USE:
        return _emulated(), context_index(default)
    return _IN_USE[0] if _IN_USE else (_emulated(), 0)


def memory_stats(context_name=None):
    """The counters of a device's cache (``context_name``; None: the default
    context's device): bytes in use, bytes cached (freed, kept for reuse), and
    the number of device allocations and frees made so far."""
    emulated, device = _device_in_use(context_name)
    _class(emulated, device)
    return _library(emulated).sg_cuda_memory_stats(device)


def empty_cache(context_name=None):
    """Give the cached (freed) memory of a device back to it (``context_name``;
    None: every device in use)."""
    targets = [_device_in_use(context_name)] if context_name is not None else list(_IN_USE)
    for emulated, device in targets:
        _library(emulated).sg_cuda_empty_cache(device)


def synchronize(context_name=None):
    """Wait until every kernel launched so far has finished, on the device of
    ``context_name`` or (None) on every device in use (kernels run
    asynchronously; a function returning only updates does not wait)."""
    targets = [_device_in_use(context_name)] if context_name is not None else list(_IN_USE)
    for emulated, device in targets:
        _library(emulated).sg_cuda_synchronize(device)


def _capsule(emulated, device):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    _class(emulated, device)
    return new(_library(emulated).sg_cuda_allocator_of(device), b"symgraph.allocator", None)


@functools.lru_cache(maxsize=None)
def _allocator(emulated, device):
    kind = "emulated cuda" if emulated else "cuda"
    return Allocator(f"{kind}{device}", lambda: _capsule(emulated, device))


def allocator(context_name=None):
    """The runtime allocator of the arrays of a context's device (None: the
    default context's); its ``enter`` selects the device before each step."""
    from symgraph.tensor.gpu_contexts import context_name as resolve

    return _allocator(_emulated(), context_index(resolve(context_name)))
