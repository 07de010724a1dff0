"""What a reduction kernel computes (``ReduceSpec``) and the C of its
identities and combining rules, for the generators of ``reduce/codegen.py``
and of the support library's drivers (``reduce/drivers.py``)."""

from dataclasses import dataclass

__all__ = ["KINDS", "ReduceSpec", "identity", "combine", "is_float"]

# -- what a kernel computes -----------------------------------------------------

KINDS = ("sum", "prod", "max", "min", "all", "any", "argmax", "argmin")


@dataclass(frozen=True)
class ReduceSpec:
    """One reduction kernel to generate.

    ``kind``: one of KINDS.  ``in_dtypes``/``in_broadcastable``: the inputs
    (all of rank ``len(in_broadcastable[0])``, the element-wise shape; one
    input for a plain reduction).  ``axes``: the reduced dimensions.
    ``acc_dtype``, ``out_dtype``: accumulator and result.  ``element(names)``
    maps C names holding the inputs' values (converted to ``in_compute``,
    default ``in_dtypes``, in their C compute types; a name may be used more
    than once) to one element's C expression (in the accumulator's compute
    type), or to ``(statements, expression)``.
    ``name``: the op, for messages; ``empty_message``: the Python message for
    an empty group with ``{shape}`` where the shape goes (None: an empty group
    gives the identity).  ``fused``: check broadcasting as Elemwise does
    (``elemwise_name`` names it in messages) and hoist inputs that are
    constant over a group.  ``support``/``headers``: what ``element`` needs;
    ``extra``: (key, value) items of the CKernel's ``extra`` (libraries).
    """

    kind: str
    in_dtypes: tuple
    in_broadcastable: tuple
    axes: tuple
    acc_dtype: str
    out_dtype: str
    element: object
    name: str
    empty_message: object = None
    fused: bool = False
    elemwise_name: str = ""
    in_compute: tuple = ()
    support: tuple = ()
    headers: tuple = ()
    extra: tuple = ()


_INT_LIMITS = {
    "int8": ("INT8_MIN", "INT8_MAX"), "int16": ("INT16_MIN", "INT16_MAX"),
    "int32": ("INT32_MIN", "INT32_MAX"), "int64": ("INT64_MIN", "INT64_MAX"),
    "uint8": ("0", "UINT8_MAX"), "uint16": ("0", "UINT16_MAX"),
    "uint32": ("0", "UINT32_MAX"), "uint64": ("0", "UINT64_MAX"), "bool": ("0", "1"),
}


def is_float(dtype):
    """True for float16/32/64 (the dtypes with NaN, infinities and pairwise sums)."""
    return dtype.startswith("float")


def identity(kind, acc_dtype):
    """The C literal every accumulator starts from (max/min: the extreme value,
    which is safe because their groups are never empty)."""
    if kind in ("sum", "any"):
        return "0"
    if kind in ("prod", "all"):
        return "1"
    if is_float(acc_dtype):
        return "(-INFINITY)" if kind == "max" else "INFINITY"
    lo, hi = _INT_LIMITS[acc_dtype]
    return lo if kind == "max" else hi


def combine(kind, acc_dtype, a, b):
    """C for combining accumulator ``a`` with ``b`` (two variable names).

    Max/min keep NumPy's rule ``(a >= b || isnan(a)) ? a : b``: a NaN on
    either side wins, and the select vectorizes (no branch)."""
    if kind == "sum":
        return f"({a} + {b})"
    if kind == "prod":
        return f"({a} * {b})"
    if kind == "all":
        return f"({a} & {b})"
    if kind == "any":
        return f"({a} | {b})"
    cmp = ">=" if kind == "max" else "<="
    if is_float(acc_dtype):
        return f"(({a} {cmp} {b} || {a} != {a}) ? {a} : {b})"
    return f"({a} {cmp} {b} ? {a} : {b})"
