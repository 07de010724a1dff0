"""CUDA for the transfers: host to device and back, with ``cudaMemcpy``, and
between two devices (``GpuToGpu``) through the device memory library.

A host input of any strides is first packed into a contiguous host buffer (the
device side is always C-contiguous); device arrays come back with one copy.
Under ``gpu.emulate`` ``cudaMemcpy`` is the emulation header's (host memory
both sides), so the same kernels run there.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.c_family.c_types import c_type, has_c_type
from symgraph.backends.cuda import scratch
from symgraph.backends.native.kernel import CKernel

__all__ = ["gpu_from_host_lowering", "host_from_gpu_lowering", "gpu_to_gpu_lowering"]

_SHAPE = """
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    (void)err;
    for (int d = 0; d < in[0].ndim; d++) out_shapes[d] = in[0].shape[d];
    return 0;
}
"""

# Packs a strided host array into contiguous memory, one element at a time
# (itemsize bytes): the rare non-contiguous input, not the fast path.
_PACK = ("sg_cuda_pack_v1", """
static void sg_cuda_pack(const sg_array *a, int64_t itemsize, char *dst) {
    int64_t n = sg_size(a);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = a->ndim - 1; d >= 0; d--) {
            off += (rem % a->shape[d]) * a->strides[d];
            rem /= a->shape[d];
        }
        memcpy(dst + i * itemsize, a->data + off, (size_t)itemsize);
    }
}
""")


def gpu_from_host_lowering(op, node):
    """CUDA of GpuFromHost: copy (packing first when strided) to the device."""
    dtype = str(node.inputs[0].dtype)
    if not has_c_type(dtype):
        return None
    source = _SHAPE + c_file("cuda/transfer_to_device.inc", T=c_type(dtype))
    return CKernel(source=source, support=(_PACK,), headers=("<stdlib.h>",), version=1)


# Gathers a strided device array (a view: a transpose, a slice) into contiguous
# device memory, one element of itemsize bytes per thread of a grid-stride loop.
_GATHER = ("sg_cuda_gather_v1", """
typedef struct { int ndim; int64_t n, itemsize; int64_t shape[8], strides[8]; } sg_cuda_geom;

__global__ void sg_cuda_gather(sg_cuda_geom g, const char *src, char *dst) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n;
         i += (int64_t)blockDim.x * gridDim.x) {
        int64_t rem = i, off = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            off += (rem % g.shape[d]) * g.strides[d];
            rem /= g.shape[d];
        }
        for (int64_t b = 0; b < g.itemsize; b++) dst[i * g.itemsize + b] = src[off + b];
    }
}
""")


def host_from_gpu_lowering(op, node):
    """CUDA of HostFromGpu: one copy of a contiguous device array to the host."""
    dtype = str(node.outputs[0].dtype)
    if not has_c_type(dtype):
        return None
    source = _SHAPE + c_file("cuda/transfer_from_device.inc", T=c_type(dtype))
    return CKernel(source=source, support=(_GATHER, scratch.SUPPORT), symbols=scratch.SYMBOLS,
                   version=3)


def peer_copy_address():
    """The address of the device memory library's ``sg_cuda_peer_copy``."""
    import ctypes

    from symgraph.backends.cuda.device_memory import _emulated, _library

    return ctypes.cast(_library(_emulated()).sg_cuda_peer_copy, ctypes.c_void_p).value


def gpu_to_gpu_lowering(op, node):
    """CUDA of GpuToGpu: a copy from the input's device to the output's (the
    device numbers are fixed when the process's contexts are: they are part
    of the kernel's text, so of its cache key)."""
    from symgraph.tensor.gpu_contexts import device_number

    dtype = str(node.outputs[0].dtype)
    if not has_c_type(dtype):
        return None
    source = _SHAPE + c_file("cuda/transfer_between_devices.inc", T=c_type(dtype),
                             SRC=device_number(node.inputs[0].type.context_name),
                             DST=device_number(node.outputs[0].type.context_name))
    return CKernel(source=source, symbols=(("sg_cu_peer_copy", peer_copy_address),),
                   version=1)
