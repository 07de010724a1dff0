"""Fills, sums and transposes: work that gradients and hand-written shape code
leave behind.

``second(m, v)`` (Theano's fill) is ``v`` broadcast to ``m``'s shape; ``m`` is
read only for its shape.  Gradients produce chains of them.

Canonicalize (fast_run):

* ``local_second_second``: ``second(second(a, b), c) -> second(a, c)`` when
  ``b`` adds no dimension to ``a``'s shape;
* ``local_fill_sink``: ``op(second(m, v), y) -> second(m, op(v, y))``: the fill
  moves out of element-wise expressions, where it often becomes useless;
* ``local_useless_fill``: ``second(m, v) -> v`` when ``v`` already has the
  result's broadcast pattern (only static size-1 dims broadcast, so the sizes
  are then equal in every program that runs);
* ``local_sum_sum``: ``sum(sum(x, a), b) -> sum(x, a + b)`` (same dtypes);
* ``local_sum_of_alloc``: ``sum(alloc(c, *shape), axes) -> c * n`` (the product
  ``n`` of the summed sizes; 0 when ``n`` is 0, even for an infinite ``c``),
  broadcast over the kept sizes; no loop at all over the filled array;
* ``local_sum_scaled_reuse``: ``sum(c * x) -> c * sum(x)`` for a scale ``c``
  when ``sum(x)`` is computed anyway: two sums of ``x`` become one;
* ``local_sibling_sums``: ``a*sum(f(x)) + b*sum(g(x)) -> sum(a*f(x) + b*g(x))``
  for sums over the same axes of arrays of one shape (an L1 + L2 penalty
  ``l1*sum(abs(W)) + l2*sum(W**2)``): one fused pass over ``W`` instead of
  two.  Float dtypes only; the result differs by rounding (and may stay
  finite where a scaled partial sum overflowed);
* ``local_transpose_dot``: ``dot(a.T, b).T -> dot(b.T, a)`` and the like,
  when that removes transposes.  (``dot(a.T, b.T)`` alone stays: as
  ``dot(b, a).T`` it would hide the dot from the Gemm rewrites, and a
  transposed operand costs nothing, the BLAS reading it in place.)

Specialize (fast_run):

* ``local_fill_to_alloc``: a ``second(m, v)`` that no element-wise op consumes
  (so no fused loop would absorb it) becomes ``alloc(v, *shape)``, its shape
  computed from the graph's inputs: ``m`` itself is no longer computed when
  only its shape was needed (a matrix product read for its number of rows).
"""

import numpy as np

from symgraph.ops import scalar_basic as sb
from symgraph.ops.alloc import Alloc
from symgraph.ops.blas import Dot
from symgraph.ops.elemwise import DimShuffle, Elemwise
from symgraph.ops.reduce import Sum
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, owner_if, shape_feature


def _canonicalize(rewriter, *tags):
    return register(rewriter, "fast_run", *tags, phase="canonicalize")


def _single_client(fgraph, var):
    clients = fgraph.clients.get(var, ())
    return len(clients) == 1 and clients[0][0] != "output" and var not in fgraph.outputs


def _adds_dims(model, extra):
    """True when broadcasting ``extra`` against ``model`` can make a dimension larger."""
    return any(m and not e for m, e in zip(model.type.broadcastable, extra.type.broadcastable))


# ---------------------------------------------------------------------------
# Fills


@node_rewriter([sb.Second])
def local_second_second(fgraph, node):
    """``second(second(a, b), c) -> second(a, c)`` (b's value is never used)."""
    model, value = node.inputs
    inner = owner_if(model, sb.Second)
    if inner is None or inner.inputs[0].ndim != model.ndim or \
            _adds_dims(inner.inputs[0], inner.inputs[1]):
        return None
    new = conform(node.op(inner.inputs[0], value), node.outputs[0])
    return None if new is None else [new]


@node_rewriter([Elemwise])
def local_fill_sink(fgraph, node):
    """``op(second(m, v), y) -> second(m, op(v, y))`` for a fill used only there."""
    if isinstance(node.op.scalar_op, sb.Second) or len(node.outputs) != 1:
        return None
    inputs, models = list(node.inputs), []
    for pos, var in enumerate(inputs):
        fill = owner_if(var, sb.Second)
        if fill is not None and _single_client(fgraph, var) and \
                fill.inputs[1].ndim == var.ndim:
            models.append(fill.inputs[0])
            inputs[pos] = fill.inputs[1]
    if not models:
        return None
    new = node.op(*inputs)
    for model in models:
        if _adds_dims(new, model) or model.ndim != new.ndim:
            new = sb_second(model, new)
    new = conform(new, node.outputs[0], fill_from=models)
    return None if new is None else [new]


def sb_second(model, value):
    """``second(model, value)`` through the user function (dtype of ``value``)."""
    from symgraph.ops.math import second

    return second(model, value)


@node_rewriter([sb.Second])
def local_useless_fill(fgraph, node):
    """``second(m, v) -> v`` when ``v`` already broadcasts like the result."""
    model, value = node.inputs
    out = node.outputs[0]
    if value.ndim != out.ndim or value.type.broadcastable != out.type.broadcastable:
        return None
    new = conform(value, out)
    return None if new is None else [new]


_canonicalize(local_second_second, "fast_compile")
_canonicalize(local_fill_sink)
_canonicalize(local_useless_fill, "fast_compile")


@node_rewriter([sb.Second])
def local_fill_to_alloc(fgraph, node):
    """``second(m, v) -> alloc(v, *shape)`` when no element-wise op consumes it."""
    from symgraph.ops.alloc import alloc

    out = node.outputs[0]
    clients = fgraph.clients.get(out, ())
    if any(c != "output" and isinstance(c.op, Elemwise) for c, _ in clients):
        return None
    shape = shape_feature(fgraph).shape_of(out)
    value = node.inputs[1]
    pad = value.owner
    if pad is not None and isinstance(pad.op, DimShuffle):
        # Alloc aligns the value on the right: leading broadcast dims need no view.
        order = tuple(pad.op.new_order)
        lead = len(order) - pad.inputs[0].ndim
        if order == ("x",) * lead + tuple(range(pad.inputs[0].ndim)):
            value = pad.inputs[0]
    new = conform(alloc(value, *shape), out)
    return None if new is None else [new]


register(local_fill_to_alloc, "fast_run", phase="specialize")


# ---------------------------------------------------------------------------
# Sums


@node_rewriter([Sum])
def local_sum_sum(fgraph, node):
    """``sum(sum(x, a), b) -> sum(x, a + b)`` when both sums have one dtype."""
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, Sum) or \
            not _single_client(fgraph, node.inputs[0]):
        return None
    x = inner.inputs[0]
    if inner.op.dtype != node.op.dtype or inner.op.acc_dtype != node.op.acc_dtype or \
            inner.outputs[0].dtype != node.outputs[0].dtype:
        return None
    first = inner.op.axes(x.ndim)
    kept = [d for d in range(x.ndim) if d not in first]
    second = [kept[a] for a in node.op.axes(len(kept))]
    op = Sum(axis=sorted(first + tuple(second)), dtype=node.op.dtype,
             acc_dtype=node.op.acc_dtype)
    new = conform(op(x), node.outputs[0])
    return None if new is None else [new]


@node_rewriter([Sum])
def local_sum_of_alloc(fgraph, node):
    """``sum(alloc(c, *shape), axes) -> switch(n == 0, 0, c * n)`` over the kept sizes."""
    from symgraph.ops import math as M
    from symgraph.ops.alloc import alloc

    filled = node.inputs[0].owner
    if filled is None or not isinstance(filled.op, Alloc):
        return None
    value, shape = filled.inputs[0], filled.inputs[1:]
    if not all(value.type.broadcastable):
        return None
    out = node.outputs[0]
    axes = node.op.axes(len(shape))
    c = value.dimshuffle([]) if value.ndim else value
    c = M.cast(c, out.dtype)
    if axes:
        n = M.cast(M.mul(*[shape[a] for a in axes]) if len(axes) > 1 else shape[axes[0]],
                   out.dtype)
        total = M.switch(M.eq(n, 0), np.zeros((), dtype=out.dtype), M.mul(c, n))
    else:
        total = c
    kept = [shape[d] for d in range(len(shape)) if d not in axes]
    new = alloc(total, *kept) if kept else total
    new = conform(new, out)
    return None if new is None else [new]


def _scale_and_rest(var):
    """``(scales, x)`` when ``var`` is ``mul(*scales, x)`` with every scale a
    number or a 0-d value broadcast, and ``x`` of the product's broadcast pattern."""
    node = owner_if(var, sb.Mul)
    if node is None:
        return None
    scales, rest = [], []
    for i in node.inputs:
        (scales if all(i.type.broadcastable) else rest).append(i)
    if len(rest) != 1 or not scales or rest[0].type.broadcastable != var.type.broadcastable \
            or rest[0].dtype != var.dtype:
        return None
    return scales, rest[0]


@node_rewriter([Sum])
def local_sum_scaled_reuse(fgraph, node):
    """``sum(c * x) -> c * sum(x)`` when an equal ``sum(x)`` is in the graph."""
    from symgraph.ops import math as M

    found = _scale_and_rest(node.inputs[0])
    if found is None:
        return None
    scales, x = found
    out = node.outputs[0]
    for client, _ in fgraph.clients.get(x, ()):
        if client != "output" and client is not node and client.op == node.op:
            scalars = [s.dimshuffle([]) if s.ndim else s for s in scales]
            new = conform(M.mul(*scalars, client.outputs[0]), out)
            return None if new is None else [new]
    return None


def _same_shape(sf, a, b):
    """True when ``a`` and ``b`` provably have one shape in every run."""
    from symgraph.opt.utils import scalar_constant_value

    if a.ndim != b.ndim or a.type.broadcastable != b.type.broadcastable:
        return False
    for da, db in zip(sf.shape_of(a), sf.shape_of(b)):
        if da is db:
            continue
        va, vb = scalar_constant_value(da), scalar_constant_value(db)
        if va is None or vb is None or va != vb:
            return False
    return True


def _scaled_term(coef, leaf, dtype):
    """``(positive?, expression)`` for ``coef * leaf`` (None: a zero constant
    term, or a symbolic scale of another dtype that would change the result's)."""
    from symgraph.ops import math as M
    from symgraph.opt.canonicalize_algebra import _coef_expr

    number, sym = _coef_expr([coef], dtype)
    if sym is not None:
        if sym.dtype != dtype:
            return None
        return True, sym if leaf is None else M.mul(sym, leaf)
    with np.errstate(all="ignore"):
        number = np.asarray(number).astype(dtype)
    negative = number < 0
    size = -number if negative else number
    if leaf is None:
        return None if number == 0 else (not negative, size)
    return not negative, leaf if size == 1 else M.mul(size, leaf)


_LINEAR = (sb.Add, sb.Sub, sb.Neg, sb.Mul)


def _is_sum(var):
    return var.owner is not None and type(var.owner.op) is Sum


@node_rewriter([sb.Add, sb.Sub])
def local_sibling_sums(fgraph, node):
    """``a*sum(f(x), axes) + b*sum(g(x), axes) -> sum(a*f(x) + b*g(x), axes)``
    when the summed arrays have one shape: one reduction, one pass.

    Scales are constants or 0-d values of the result's dtype; each sum must be
    used only by this expression (else it is computed anyway).
    """
    from symgraph.opt.canonicalize_algebra import _Coef, _linear_terms, _signed_sum
    from symgraph.tensor.basic import as_tensor_variable

    out = node.outputs[0]
    if not out.dtype.startswith("float"):
        return None
    terms = []
    # A 0-d sum, or a 0-d sum of sums, is a term, never a scale.
    _linear_terms(fgraph, out, _Coef(1), out, terms, top=True,
                  is_term=lambda v: _is_sum(v) or owner_if(v, *_LINEAR) is not None)

    def summed(leaf):
        owner = None if leaf is None else leaf.owner
        return owner is not None and type(owner.op) is Sum and \
            _single_client(fgraph, leaf) and owner.inputs[0].dtype == out.dtype and \
            leaf.dtype == out.dtype

    sums, rest = [], []
    for k, (coef, leaf) in enumerate(terms):
        (sums if summed(leaf) else rest).append((k, coef, leaf))
    if len(sums) < 2:
        return None
    sf = shape_feature(fgraph)
    groups = []  # (sum op, its summed array, [(term index, coef, leaf)])
    for k, coef, leaf in sums:
        op, x = leaf.owner.op, leaf.owner.inputs[0]
        for group in groups:
            if group[0] == op and _same_shape(sf, group[1], x):
                group[2].append((k, coef, leaf))
                break
        else:
            groups.append((op, x, [(k, coef, leaf)]))
    if all(len(members) == 1 for _, _, members in groups):
        return None
    dtype = out.dtype
    entries = []  # (term index, positive?, expression)
    for op, _, members in groups:
        if len(members) == 1:
            rest += members
            continue
        scaled = [_scaled_term(c, leaf.owner.inputs[0], dtype) for _, c, leaf in members]
        if any(s is None for s in scaled):
            return None
        entries.append((members[0][0], True,
                        op(_signed_sum([(p, e, False) for p, e in scaled]))))
    for k, coef, leaf in rest:
        scaled = _scaled_term(coef, leaf, dtype)
        if scaled is None:
            if leaf is not None:
                return None
            continue
        entries.append((k, scaled[0], scaled[1]))
    entries.sort(key=lambda e: e[0])
    new = _signed_sum([(p, e, False) for _, p, e in entries])
    new = conform(as_tensor_variable(new), out, fill_from=list(node.inputs))
    return None if new is None else [new]


_canonicalize(local_sum_sum)
_canonicalize(local_sum_of_alloc)
_canonicalize(local_sum_scaled_reuse)
_canonicalize(local_sibling_sums)


# ---------------------------------------------------------------------------
# Transposes around dot


def _transposed(var):
    """``v`` when ``var`` is the transpose ``v.T`` of a matrix, else None."""
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and \
            tuple(node.op.new_order) == (1, 0):
        return node.inputs[0]
    return None


@node_rewriter([DimShuffle])
def local_transpose_dot(fgraph, node):
    """``dot(a, b).T -> dot(b.T, a.T)`` when a or b is itself a transpose."""
    if tuple(node.op.new_order) != (1, 0):
        return None
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, Dot) or \
            not _single_client(fgraph, node.inputs[0]):
        return None
    a, b = inner.inputs
    if a.ndim != 2 or b.ndim != 2 or (_transposed(a) is None and _transposed(b) is None):
        return None
    new = conform(inner.op(b.T, a.T), node.outputs[0])
    return None if new is None else [new]


_canonicalize(local_transpose_dot)
