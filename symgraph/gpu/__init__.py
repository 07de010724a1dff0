"""symgraph on the GPU: ``device=cuda`` moves graphs there (``gpu.emulate=True``
runs the same CUDA on the CPU where there is no GPU).

``is_available()`` says whether a GPU can be used; ``placement_report(f)``
lists where a compiled function's nodes run and the transfers between host
and device; ``to_device(array)`` makes a ``DeviceArray`` (what
``shared.get_value(return_internal_type=True)`` returns and ``set_value``
takes); ``as_device_array(x)`` uses another GPU library's array in place
(anything with ``__cuda_array_interface__``: PyCUDA's ``GPUArray``, CuPy,
PyTorch, Numba) and ``to_pycuda(a)`` gives a DeviceArray to PyCUDA;
``memory_stats()`` and ``empty_cache()`` show and release the device memory
cache.  Where a process drives several devices (the flag ``contexts``), each
takes a context (``memory_stats('dev1')``); ``contexts()`` lists them.
"""

from symgraph.gpu.placement import PlacementReport, placement_report
from symgraph.tensor.gpu_contexts import ContextError

__all__ = ["is_available", "placement_report", "PlacementReport", "to_device",
           "as_device_array", "to_pycuda", "memory_stats", "empty_cache", "synchronize",
           "contexts", "peer_access", "ContextError", "DeviceArray"]


class _DeviceArrayType(type):
    def __instancecheck__(cls, value):
        # the class is made by the device memory library when a device is
        # first used, one for the GPU and one for the emulated device: both
        # are named symgraph.gpu.DeviceArray
        kind = type(value)
        return kind.__name__ == "DeviceArray" and kind.__module__ == __name__


class DeviceArray(metaclass=_DeviceArrayType):
    """The type of symgraph's device arrays, for ``isinstance(x,
    symgraph.gpu.DeviceArray)`` (True for an array on any device, the GPU's or
    the emulated one's).  Nothing is made from it: ``to_device(value)``,
    ``as_device_array(x)``, device shared variables and functions' device
    outputs give the arrays.  An array has ``shape``, ``dtype``, ``strides``,
    ``device`` and ``ptr``, basic indexing (views), ``get()``, ``copy()``,
    ``item()``, ``float()``/``int()``/``bool()``, and CUDA's array interface."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("a DeviceArray is not made directly: use "
                        "symgraph.gpu.to_device(value) or symgraph.gpu.as_device_array(x)")


def is_available():
    """True when the NVIDIA driver is installed and sees at least one GPU
    (a ctypes probe: nothing heavy is imported)."""
    from symgraph.backends.cuda.device import driver_available

    return driver_available() > 0


def _context(context_name):
    """The context a facade call is about, its device made ready: the one
    named, else the default context (the flag device), else the first of the
    flag contexts."""
    from symgraph.backends.cuda.backend import ensure_device
    from symgraph.tensor.gpu_contexts import context_map, context_name as resolve
    from symgraph.tensor.gpu_contexts import default_context

    ensure_device(fallback=False)
    if context_name is not None:
        return resolve(context_name)
    return default_context() or next(iter(context_map()), "cuda0")


def contexts():
    """{context name: device name} of the contexts this process can use: the
    flag ``contexts``'s names and the device of the flag ``device`` (as
    'cuda<N>')."""
    from symgraph.tensor.gpu_contexts import context_map, default_context

    found = {}
    if default_context() is not None:
        found[default_context()] = default_context()
    found.update(context_map())
    return found


def to_device(value, context_name=None):
    """``value`` copied to a new DeviceArray on ``context_name`` (default: the
    device the flag ``device`` names, the emulated one under ``gpu.emulate``).
    ``value`` is array-like (copied from the host) or another GPU library's
    array (copied on the device)."""
    from symgraph.tensor.gpu_type import to_device as copy_to

    return copy_to(value, _context(context_name))


def as_device_array(value, context_name=None):
    """Another GPU library's array (PyCUDA's ``GPUArray``, a CuPy array, a CUDA
    ``torch.Tensor``, a Numba device array: anything with
    ``__cuda_array_interface__``) as a DeviceArray over the same memory, no
    copy; a DeviceArray is returned as is.  Memory on another device than
    the context's is copied there instead (kernels read their own device's).
    Functions and shared variables accept such arrays directly
    (``shared.set_value(x, borrow=True)``)."""
    from symgraph.backends.cuda.device_memory import adopt

    return adopt(value, _context(context_name))


def to_pycuda(array):
    """A DeviceArray as a ``pycuda.gpuarray.GPUArray`` over the same memory (no
    copy; the GPUArray keeps ``array`` alive).  PyCUDA must use the device's
    primary context, where symgraph's memory lives: ``import
    pycuda.autoprimaryctx`` rather than ``pycuda.autoinit``."""
    try:
        from pycuda import gpuarray
    except ImportError:
        raise ImportError("to_pycuda needs PyCUDA: pip install symgraph[gpu]") from None
    return gpuarray.GPUArray(array.shape, array.dtype, gpudata=array.ptr,
                             strides=array.strides, base=array)


def peer_access(context, peer):
    """True when the device of ``context`` reads ``peer``'s memory directly
    (copies between them skip the host), False when the driver stages them
    through the host.  Both are contexts (devices or names of the flag
    ``contexts``)."""
    from symgraph.backends.cuda.device_memory import peer_access as access

    return access(_context(context), _context(peer))


def memory_stats(context=None):
    """The counters of a device's memory cache (a dict): ``bytes_in_use``,
    ``bytes_cached`` (freed, kept for reuse), ``device_mallocs`` and
    ``device_frees`` (calls to the device's allocator so far).  ``context``:
    a device or a name of the flag ``contexts``; None, the default context."""
    from symgraph.backends.cuda.device_memory import memory_stats as stats

    return stats(None if context is None else _context(context))


def empty_cache(context=None):
    """Give the device memory the cache holds (freed arrays) back to the
    device of ``context`` (None: to every device in use)."""
    from symgraph.backends.cuda.device_memory import empty_cache as release

    release(None if context is None else _context(context))


def synchronize(context=None):
    """Wait until the device of ``context`` (None: every device in use) has run
    every kernel launched so far (a function whose results stay on the device
    returns before its kernels finish)."""
    from symgraph.backends.cuda.device_memory import synchronize as wait

    wait(None if context is None else _context(context))
