"""Is there a GPU?  A ctypes probe of the NVIDIA driver, importing nothing heavy.

``libcuda.so.1`` is the driver itself: without it (no driver installed) there
is no GPU to use; with it, ``cuInit(0)`` and ``cuDeviceGetCount`` say how many
devices it sees.  Never PyCUDA: importing it to find out costs far more, and
fails in other ways.
"""

import ctypes
import functools

__all__ = ["driver_available", "driver_version"]


@functools.lru_cache(maxsize=1)
def _driver():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    try:
        if lib.cuInit(0) != 0:
            return None
    except AttributeError:       # not the driver library
        return None
    return lib


def driver_available():
    """The number of CUDA devices the driver sees (0 without a driver); never raises."""
    lib = _driver()
    if lib is None:
        return 0
    count = ctypes.c_int(0)
    try:
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except AttributeError:
        return 0
    return count.value


def driver_version():
    """The driver's CUDA API version (e.g. 13000), or None without a driver."""
    lib = _driver()
    if lib is None:
        return None
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value
