"""Is there a GPU?  A ctypes probe of the NVIDIA driver, importing nothing heavy.

``libcuda.so.1`` is the driver itself: without it (no driver installed) there
is no GPU to use; with it, ``cuInit(0)`` and ``cuDeviceGetCount`` say how many
devices it sees.  Never PyCUDA: importing it to find out costs far more, and
fails in other ways.
"""

import ctypes
import functools

__all__ = ["compute_capabilities", "driver_available", "driver_version", "missing"]


@functools.lru_cache(maxsize=1)
def _probe():
    """(the driver library or None, why not)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, "the NVIDIA driver is not installed (libcuda.so.1 cannot be loaded)"
    try:
        code = lib.cuInit(0)
    except AttributeError:
        return None, "libcuda.so.1 is not the NVIDIA driver (it has no cuInit)"
    if code != 0:
        return None, (f"the NVIDIA driver does not start (cuInit returned {code}: no GPU, "
                      "or a driver that does not match the kernel module)")
    return lib, None


def _driver():
    return _probe()[0]


def missing():
    """What stands between this process and a usable GPU (a sentence), or None:
    the driver, a device, the CUDA toolkit's nvcc."""
    lib, why = _probe()
    if lib is None:
        return why
    if driver_available() == 0:
        return "the NVIDIA driver sees no CUDA device"
    from symgraph.backends.cuda.compiler import cuda_root, nvcc_path

    if nvcc_path() is None:
        return (f"the CUDA toolkit's nvcc is not under {cuda_root()} (install the toolkit, "
                "or name it with the flag cuda.root or $CUDA_ROOT)")
    return None


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


#: cuDeviceGetAttribute's numbers for the compute capability.
_CC_MAJOR, _CC_MINOR = 75, 76


def compute_capabilities():
    """The compute capability of each device the driver sees, as nvcc names
    them ("90" for 9.0), in device order; empty without a driver or a device."""
    lib = _driver()
    found = []
    for ordinal in range(driver_available()):
        device, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            continue
        if lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device) != 0 or \
                lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device) != 0:
            continue
        found.append(f"{major.value}{minor.value}")
    return found
