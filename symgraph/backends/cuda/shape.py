"""CUDA of ``Reshape``: a view of the device array when its strides allow (the
CPU kernel's descriptor code, which reads no data), else a copy on the device
(``c_src/cuda/copy.inc``).  The target shape is read on the host."""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.cpu.shape.codegen import reshape_kernel

__all__ = ["COPY_SUPPORT", "SHAPE_STR", "reshape_reason", "reshape_lowering"]

#: Support code: ``sg_cu_copy_flat(dst, src, itemsize, err)``.
COPY_SUPPORT = ("sg_cuda_copy_flat_v1", c_file("cuda/copy.inc"))

#: Support code (host C, needs ``<stdio.h>``): a shape as Python prints it,
#: ``(3, 4)``, ``(3,)``, ``()``, from sizes (``sg_cuda_dims_str``) or from an
#: array (``sg_cuda_shape_str``), so the device's shape errors can name shapes
#: with the CPU kernels' words.
SHAPE_STR = ("sg_cuda_shape_str_v1", r"""
static inline void sg_cuda_dims_str(const int64_t *shape, int ndim, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < n) snprintf(buf + used, n - used, ndim == 1 ? ",)" : ")");
}
static inline void sg_cuda_shape_str(const sg_array *a, char *buf, size_t n) {
    sg_cuda_dims_str(a->shape, a->ndim, buf, n);
}
""")

_MAX_DIMS = 8


def reshape_reason(node):
    """None when the Reshape ``node`` runs on the device, else why not."""
    if node.inputs[0].ndim > _MAX_DIMS:
        return f"reshaping an array of more than {_MAX_DIMS} dimensions"
    return None


def reshape_lowering(op, node):
    """The Reshape kernel with a device copy, or None."""
    if reshape_reason(node) is not None:
        return None
    return reshape_kernel(op, node, copy="    return sg_cu_copy_flat(&out[0], &in[0], {size}, err);",
                          support=(COPY_SUPPORT,))
