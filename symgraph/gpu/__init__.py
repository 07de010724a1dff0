"""symgraph on the GPU: ``device=cuda`` moves graphs there (``gpu.emulate=True``
runs the same CUDA on the CPU where there is no GPU).

``is_available()`` says whether a GPU can be used; ``placement_report(f)``
lists where a compiled function's nodes run and the transfers between host
and device; ``to_device(array)`` makes a ``DeviceArray`` (what
``shared.get_value(return_internal_type=True)`` returns and ``set_value``
takes); ``memory_stats()`` and ``empty_cache()`` show and release the device
memory cache.
"""

from symgraph.gpu.placement import PlacementReport, placement_report

__all__ = ["is_available", "placement_report", "PlacementReport", "to_device", "memory_stats",
           "empty_cache", "synchronize"]


def is_available():
    """True when the NVIDIA driver is installed and sees at least one GPU
    (a ctypes probe: nothing heavy is imported)."""
    from symgraph.backends.cuda.device import driver_available

    return driver_available() > 0


def to_device(value, context_name=None):
    """``value`` (array-like) copied to a new DeviceArray on ``context_name``
    (default: the device the flag ``device`` names, the emulated one under
    ``gpu.emulate``)."""
    from symgraph.backends.cuda.backend import ensure_device
    from symgraph.backends.cuda.device_memory import put
    from symgraph.config import config

    ensure_device()
    device = str(config.device)
    context = context_name or (device if device.startswith("cuda") else "cuda0")
    return put(value, context)


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
