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
cache.
"""

from symgraph.gpu.placement import PlacementReport, placement_report

__all__ = ["is_available", "placement_report", "PlacementReport", "to_device",
           "as_device_array", "to_pycuda", "memory_stats", "empty_cache", "synchronize"]


def is_available():
    """True when the NVIDIA driver is installed and sees at least one GPU
    (a ctypes probe: nothing heavy is imported)."""
    from symgraph.backends.cuda.device import driver_available

    return driver_available() > 0


def _context(context_name):
    from symgraph.backends.cuda.backend import ensure_device
    from symgraph.config import config

    ensure_device(fallback=False)
    device = str(config.device)
    return context_name or (device if device.startswith("cuda") else "cuda0")


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
    copy; a DeviceArray is returned as is.  Functions and shared variables
    accept such arrays directly (``shared.set_value(x, borrow=True)``)."""
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


def memory_stats():
    """The device memory cache's counters (a dict): ``bytes_in_use``,
    ``bytes_cached`` (freed, kept for reuse), ``device_mallocs`` and
    ``device_frees`` (calls to the device's allocator so far)."""
    from symgraph.backends.cuda.device_memory import memory_stats as stats

    return stats()


def empty_cache():
    """Give the device memory the cache holds (freed arrays) back to the device."""
    from symgraph.backends.cuda.device_memory import empty_cache as release

    release()


def synchronize():
    """Wait until the device has run every kernel launched so far (a function
    whose results stay on the device returns before its kernels finish)."""
    from symgraph.backends.cuda.device_memory import synchronize as wait

    wait()
