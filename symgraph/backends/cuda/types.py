"""The CUDA types arrays are stored in."""

from symgraph.backends.c_family.c_types import c_type

__all__ = ["storage_type"]


def storage_type(dtype):
    """The CUDA type an array of ``dtype`` is stored in: float16 is ``__half``
    (converted to float for arithmetic: nvcc has no ``_Float16``), the others
    their C type."""
    return "__half" if str(dtype) == "float16" else c_type(dtype)
