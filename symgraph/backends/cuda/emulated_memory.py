"""The emulated device's memory (``gpu.emulate``): arrays of a class of their own.

Emulated device memory is host memory, but its arrays are
:class:`EmulatedDeviceArray` instances, so that a value that skipped a
transfer is caught as it would be on a GPU (``GpuArrayType.filter`` refuses a
host array where a device array belongs).  The runtime makes and views them
through the allocator of ``c_src/cuda/sg_emu_allocator.c``, built once into the
compile cache.
"""

import ctypes
import functools
import sysconfig

import numpy as np

from symgraph.backends.native.allocator import Allocator
from symgraph.backends.native.c_sources import C_SRC

__all__ = ["EmulatedDeviceArray", "put", "get", "EMULATED_ALLOCATOR"]


class EmulatedDeviceArray(np.ndarray):
    """An array in the emulated device's memory (host memory underneath).
    ``get()`` copies it to a new host ndarray, as PyCUDA's ``GPUArray.get``."""

    def get(self):
        """A host copy (a plain ndarray)."""
        return np.array(self, copy=True).view(np.ndarray)

    def __repr__(self):
        return f"EmulatedDeviceArray({self.get()!r})"


def put(value, context_name):
    """``value`` copied into the emulated device's memory."""
    return np.array(value, copy=True, order="C").view(EmulatedDeviceArray)


def get(array):
    """A host copy of an emulated device array."""
    return np.array(array, copy=True).view(np.ndarray)


@functools.lru_cache(maxsize=1)
def _library():
    from symgraph.backends.cpu.compiler import compile_library
    from symgraph.backends.native.cache import environment_parts, make_key
    from symgraph.backends.native.prebuilt import Prebuilt

    source = (C_SRC / "cuda" / "sg_emu_allocator.c").read_text()
    headers = "".join((C_SRC / name).read_text() for name in ("sg_kernel.h", "sg_allocator.h"))
    include = (sysconfig.get_paths()["include"], np.get_include())

    def build(tmp_dir):
        compile_library(source, tmp_dir / "lib.so", include_dirs=include,
                        what="the emulated device's allocator")

    lib = Prebuilt("the emulated device's allocator", loader=ctypes.PyDLL, build=build,
                   key=lambda: make_key(source=source, headers=headers, numpy_full=np.__version__,
                                        python_include=include[0],
                                        **environment_parts())).cached()
    lib.sg_emu_allocator_init.argtypes = (ctypes.py_object,)
    lib.sg_emu_allocator_init.restype = ctypes.c_int
    if lib.sg_emu_allocator_init(EmulatedDeviceArray) != 0:
        raise RuntimeError("the emulated device's allocator did not start")
    return lib


def _capsule():
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    address = ctypes.addressof(ctypes.c_char.in_dll(_library(), "sg_emu_allocator"))
    return new(address, b"symgraph.allocator", None)


#: The runtime allocator of the emulated device's arrays.
EMULATED_ALLOCATOR = Allocator("emulated cuda", _capsule)
