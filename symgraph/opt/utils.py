"""Helpers that rewrites share: reading constants, matching elemwise nodes,
and making a replacement have exactly the type of the variable it replaces."""

from symgraph.ops.constant_values import (  # noqa: F401  (shared by the rewrites)
    is_constant_value, is_elemwise, scalar_constant_value)
from symgraph.tensor.type import DISCRETE_DTYPES, TensorType


def owner_if(var, *scalar_classes):
    """``var.owner`` when it is an Elemwise of ``scalar_classes``, else None."""
    node = var.owner
    return node if is_elemwise(node, *scalar_classes) else None


def is_discrete(dtype):
    """bool and integer dtypes: no NaN, no infinity, exact arithmetic."""
    return str(dtype) in DISCRETE_DTYPES


def _needs_broadcast(new_type, old_type):
    # A dimension that is static size 1 in the new variable but may be larger
    # in the old one: the new value must be broadcast to keep the shape.
    return any(n == 1 and o != 1 for n, o in zip(new_type.shape, old_type.shape))


def conform(new, old, fill_from=()):
    """``new`` made to have ``old``'s dtype and shape, or None when impossible.

    The dtype is fixed with a cast.  When ``new`` is broadcastable where
    ``old`` is not, it is broadcast with ``second(model, new)`` by the
    variables in ``fill_from`` (usually the replaced node's inputs).  A more
    general static shape is fine: ``fgraph.replace`` adds a ``specify_shape``.
    """
    from symgraph.ops.math import cast, second

    if not isinstance(new.type, TensorType) or not isinstance(old.type, TensorType):
        return new if new.type == old.type else None
    if new.ndim != old.ndim:
        return None
    if new.dtype != old.dtype:
        new = cast(new, old.dtype)
    for model in fill_from:
        if not _needs_broadcast(new.type, old.type):
            break
        if model is new or getattr(model.type, "ndim", None) != new.ndim:
            continue
        if any(n == 1 and m != 1 for n, m in zip(new.type.shape, model.type.shape)):
            new = second(model, new)
    if _needs_broadcast(new.type, old.type):
        return None
    return new


def fill_like(models, value, dtype):
    """An array of ``value`` in ``dtype`` with the broadcast shape of ``models``.

    It keeps ``models`` as inputs (for their shapes only), as Theano's fill.
    """
    from symgraph.ops.math import second
    from symgraph.tensor.basic import constant

    out = constant(value, dtype=dtype)
    for model in models:
        out = second(model, out)
    return out


def as_dtype(var, dtype):
    """``var`` cast to ``dtype`` (itself when it already has it)."""
    from symgraph.ops.math import cast

    return cast(var, dtype)


def shape_feature(fgraph):
    """The graph's ShapeFeature, attached on first use."""
    from symgraph.opt.shape_feature import ShapeFeature

    return fgraph.ensure_feature(ShapeFeature)
