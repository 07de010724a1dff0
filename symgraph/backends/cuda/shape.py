"""CUDA of ``Reshape``: a view of the device array when its strides allow (the
CPU kernel's descriptor code, which reads no data), else a copy on the device
(``c_src/cuda/copy.inc``).  The target shape is read on the host."""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.cpu.shape.codegen import reshape_kernel

__all__ = ["COPY_SUPPORT", "reshape_reason", "reshape_lowering"]

#: Support code: ``sg_cu_copy_flat(dst, src, itemsize, err)``.
COPY_SUPPORT = ("sg_cuda_copy_flat_v1", c_file("cuda/copy.inc"))

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
