"""Scratch device memory for kernels' host code, from the device memory cache
(``c_src/cuda/scratch.inc``): a kernel that copies index vectors or packs a
strided array takes a block and gives it back, instead of cudaMalloc and
cudaFree (an allocation each call, and a wait for the whole device)."""

import ctypes

from symgraph.backends.c_family.c_files import c_file

__all__ = ["SUPPORT", "SYMBOLS"]

#: Support code declaring ``sg_cu_scratch`` and ``sg_cu_scratch_release``.
SUPPORT = ("sg_cuda_scratch_v1", c_file("cuda/scratch.inc"))


def _address(name):
    def address():
        from symgraph.backends.cuda.device_memory import _emulated, _library

        return ctypes.cast(getattr(_library(_emulated()), name), ctypes.c_void_p).value
    return address


#: CKernel.symbols of a kernel using scratch memory: the cache's functions.
SYMBOLS = (("sg_cu_scratch_get", _address("sg_cuda_scratch_get")),
           ("sg_cu_scratch_put", _address("sg_cuda_scratch_put")))
