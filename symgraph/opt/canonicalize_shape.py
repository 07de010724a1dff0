"""Canonicalize, shapes: shape reads, reshapes, dimshuffles and specify_shape.

* A shape the type knows statically becomes a constant.
* ``shape(x)``, ``shape_i(x, i)`` and ``x.shape[i]`` of an intermediate ``x``
  are computed from the inputs' shapes (``ShapeFeature``), so that asking for
  a shape does not force computing ``x``.
* Reshapes to the same shape, identity dimshuffles and specify_shape that
  add nothing to the type disappear; chains of dimshuffles, reshapes and
  specify_shapes collapse into one.
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.ops.elemwise import DimShuffle
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, shape_feature

_SHAPE = "symgraph.ops.shape:Shape"
_SHAPE_I = "symgraph.ops.shape:Shape_i"
_SPECIFY_SHAPE = "symgraph.ops.shape:SpecifyShape"
_RESHAPE = "symgraph.ops.shape:Reshape"
_SUBTENSOR = "symgraph.ops.subtensor:Subtensor"


def _canonicalize(rewriter, *tags):
    return register(rewriter, "fast_run", *tags, phase="canonicalize")


def _shape_ops():
    from symgraph.ops import shape

    return shape


def _make_vector(scalars):
    from symgraph.ops.join import MakeVector

    return MakeVector("int64")(*scalars)


# ---------------------------------------------------------------------------
# Reading shapes


@node_rewriter([_SHAPE])
def local_shape_known(fgraph, node):
    """``shape(x)``: a constant when x's type knows it, else built from the
    inputs' shapes when x is computed by an op with infer_shape."""
    (x,) = node.inputs
    if None not in x.type.shape:
        from symgraph.tensor.basic import constant

        return [constant(np.asarray(x.type.shape, dtype="int64"))]
    if x.owner is None:
        return None
    feature = shape_feature(fgraph)
    if feature.depends_on_value(x):
        return None
    return [_make_vector(feature.shape_of(x))]


@node_rewriter([_SHAPE_I])
def local_shape_i_known(fgraph, node):
    """``shape_i(x, i)``: a constant when static, else from the inputs' shapes."""
    (x,) = node.inputs
    i = node.op.i
    if x.type.shape[i] is not None:
        from symgraph.tensor.basic import constant

        return [constant(x.type.shape[i], dtype="int64")]
    if x.owner is None:
        return None
    feature = shape_feature(fgraph)
    if feature.depends_on_value(x):
        return None
    new = feature.shape_i(x, i)
    owner = new.owner
    if owner is not None and isinstance(owner.op, type(node.op)) and owner.inputs[0] is x:
        return None  # the same read: no progress
    return [conform(new, node.outputs[0])]


@node_rewriter([_SUBTENSOR])
def local_subtensor_of_shape(fgraph, node):
    """``x.shape[i] -> shape_i(x, i)``; ``make_vector(a, b, c)[1] -> b``."""
    from symgraph.ops.join import MakeVector

    idx = node.op.idx_list
    if len(idx) != 1 or not isinstance(idx[0], (int, np.integer)) or len(node.inputs) != 1:
        return None
    vec = node.inputs[0]
    owner = vec.owner
    if owner is None:
        return None
    i = int(idx[0])
    if isinstance(owner.op, _shape_ops().Shape):
        x = owner.inputs[0]
        if not -x.ndim <= i < x.ndim:
            return None
        return [conform(_shape_ops().shape_i(x, i % x.ndim), node.outputs[0])]
    if isinstance(owner.op, MakeVector):
        items = owner.inputs
        if not -len(items) <= i < len(items):
            return None
        return [conform(items[i], node.outputs[0])]
    return None


_canonicalize(local_shape_known)
_canonicalize(local_shape_i_known)
_canonicalize(local_subtensor_of_shape)


# ---------------------------------------------------------------------------
# Declaring shapes


@node_rewriter([_SPECIFY_SHAPE])
def local_useless_specify_shape(fgraph, node):
    """``specify_shape(x, s) -> x`` when x's type already says s; nested
    specify_shapes with static sizes only become one."""
    x = node.inputs[0]
    out = node.outputs[0]
    if out.type == x.type and len(node.inputs) == 1:
        return [x]
    inner = x.owner
    if inner is not None and isinstance(inner.op, type(node.op)) and \
            len(node.inputs) == 1 and len(inner.inputs) == 1:
        merged = tuple(o if o is not None else i
                       for o, i in zip(node.op.shape, inner.op.shape))
        return [type(node.op)(merged)(inner.inputs[0])]
    return None


_canonicalize(local_useless_specify_shape, "fast_compile")


# ---------------------------------------------------------------------------
# Reshapes


def _is_dim_of(entry, x, dim):
    """True when the shape entry ``entry`` always equals ``x.shape[dim]``."""
    shape = _shape_ops()
    known = shape.constant_int(entry)
    if known is not None:
        return known == x.type.shape[dim]
    owner = entry.owner
    while owner is not None and _is_int_cast(owner):
        entry = owner.inputs[0]
        owner = entry.owner
    if owner is None:
        return False
    if isinstance(owner.op, shape.Shape_i):
        return owner.inputs[0] is x and owner.op.i == dim
    return False


def _is_int_cast(node):
    from symgraph.opt.utils import is_elemwise
    from symgraph.ops.scalar_basic import Cast

    return is_elemwise(node, Cast) and node.outputs[0].dtype.startswith("int")


def _shape_entries(vec, ndim):
    """The entries of a shape vector as variables or ints, or None when unknown."""
    from symgraph.ops.join import MakeVector

    if isinstance(vec, Constant):
        return [int(v) for v in np.asarray(vec.data)]
    owner = vec.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return list(owner.inputs)
    return None


@node_rewriter([_RESHAPE])
def local_useless_reshape(fgraph, node):
    """``reshape(x, x.shape) -> x`` (also entry by entry, and ``reshape(v, -1)``
    of a vector)."""
    x, vec = node.inputs
    out = node.outputs[0]
    if out.ndim != x.ndim:
        return None
    owner = vec.owner
    if owner is not None and isinstance(owner.op, _shape_ops().Shape) and \
            owner.inputs[0] is x:
        return [x]
    entries = _shape_entries(vec, out.ndim)
    if entries is None:
        return None
    for dim, entry in enumerate(entries):
        if isinstance(entry, int):
            if entry == x.type.shape[dim] or (entry == -1 and x.ndim == 1):
                continue
            return None
        if not _is_dim_of(entry, x, dim):
            return None
    return [x]


@node_rewriter([_RESHAPE])
def local_reshape_reshape(fgraph, node):
    """``reshape(reshape(x, s1), s2) -> reshape(x, s2)`` (C order both times)."""
    x, vec = node.inputs
    inner = x.owner
    if inner is None or not isinstance(inner.op, type(node.op)):
        return None
    return [type(node.op)(node.op.ndim)(inner.inputs[0], vec)]


_canonicalize(local_useless_reshape, "fast_compile")
_canonicalize(local_reshape_reshape)


# ---------------------------------------------------------------------------
# DimShuffles


def _is_identity(order, x):
    """True when dimshuffling ``x`` by ``order`` gives ``x`` back: each dimension
    stays in place, or a size-1 dimension is dropped and re-added in place."""
    return len(order) == x.ndim and all(
        o == i or (o == "x" and x.type.shape[i] == 1) for i, o in enumerate(order))


@node_rewriter([DimShuffle])
def local_dimshuffle_identity(fgraph, node):
    """``x.dimshuffle(0, 1, ..., n-1) -> x``."""
    if not _is_identity(node.op.new_order, node.inputs[0]):
        return None
    return [node.inputs[0]]


@node_rewriter([DimShuffle])
def local_dimshuffle_dimshuffle(fgraph, node):
    """Two dimshuffles in a row become one (or none, when they cancel out)."""
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, DimShuffle):
        return None
    inner_order = inner.op.new_order
    order = tuple("x" if d == "x" else inner_order[d] for d in node.op.new_order)
    x = inner.inputs[0]
    if _is_identity(order, x):
        return [x]
    return [DimShuffle(x.ndim, order)(x)]


_canonicalize(local_dimshuffle_identity, "fast_compile")
_canonicalize(local_dimshuffle_dimshuffle, "fast_compile")
