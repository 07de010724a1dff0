"""Scratch device memory for kernels' host code, from the device memory cache
(``c_src/cuda/scratch.inc``): a kernel that copies index vectors or packs a
strided array takes a block and gives it back, instead of cudaMalloc and
cudaFree (an allocation each call, and a wait for the whole device)."""

import ctypes

from symgraph.backends.c_family.c_files import c_file

__all__ = ["SUPPORT", "SYMBOLS", "scratch_get_address", "scratch_put_address"]

#: Support code declaring ``sg_cu_scratch`` and ``sg_cu_scratch_release``.
SUPPORT = ("sg_cuda_scratch_v1", c_file("cuda/scratch.inc"))


def _address(name):
    from symgraph.backends.cuda.device_memory import _emulated, _library

    return ctypes.cast(getattr(_library(_emulated()), name), ctypes.c_void_p).value


def scratch_get_address():
    """The address of the device memory library's ``sg_cuda_scratch_get``."""
    return _address("sg_cuda_scratch_get")


def scratch_put_address():
    """The address of the device memory library's ``sg_cuda_scratch_put``."""
    return _address("sg_cuda_scratch_put")


#: CKernel.symbols of a kernel using scratch memory: the cache's functions
#: (module-level functions, so that stored functions can name them).
SYMBOLS = (("sg_cu_scratch_get", scratch_get_address),
           ("sg_cu_scratch_put", scratch_put_address))
