"""Canonicalize, arithmetic: one form for equivalent element-wise expressions.

Rewrites here keep values exactly, except for floating-point reassociation
(``(a + b) + c`` becomes ``a + b + c`` and constants gather), as every
optimizing compiler of this lineage does.  Rewrites that would change results
for NaN, Inf or zero inputs are tagged ``unsafe`` and are *not* in fast_run:

* ``x * 0 -> 0``: NaN * 0 and Inf * 0 are NaN.  In fast_run only when every
  input is an integer or bool (no NaN, no Inf); for floats, with the ``unsafe``
  tag (``optimizer_including=unsafe``).
* ``x - x -> 0``: Inf - Inf is NaN.  Same rule.
* ``x / x -> 1``: 0 / 0 is NaN for every dtype: ``unsafe`` only.

Theano applied all three unconditionally; symgraph keeps optimized and
unoptimized results equal, which the property-based tests check.

Every replacement has exactly the replaced variable's dtype (cast when
needed) and shape (broadcast with ``second`` when needed).
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.ops import scalar_basic as sb
from symgraph.ops.elemwise import Elemwise
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, fill_like, is_constant_value, is_discrete, owner_if


def _canonicalize(rewriter, *tags):
    return register(rewriter, "fast_run", *tags, phase="canonicalize")


def _nary(scalar_cls, inputs):
    """``scalar_cls`` (Add or Mul) applied to ``inputs``; the input itself when alone."""
    if len(inputs) == 1:
        return inputs[0]
    return Elemwise(scalar_cls(len(inputs)))(*inputs)


# ---------------------------------------------------------------------------
# Neutral and absorbing elements


@node_rewriter([sb.Add, sb.Mul])
def local_neutral_element(fgraph, node):
    """``x + 0 -> x``, ``x * 1 -> x`` (kept: the output's dtype and shape)."""
    scalar_op = node.op.scalar_op
    neutral = 0 if isinstance(scalar_op, sb.Add) else 1
    kept = [i for i in node.inputs if not is_constant_value(i, neutral)]
    if len(kept) == len(node.inputs):
        return None
    dropped = [i for i in node.inputs if i not in kept]
    if not kept:
        kept = [dropped.pop()]
    new = conform(_nary(type(scalar_op), kept), node.outputs[0], fill_from=dropped)
    return None if new is None else [new]


def _mul_by_zero(node, allow_float):
    if not any(is_constant_value(i, 0) for i in node.inputs):
        return None
    exact = all(is_discrete(i.dtype) if not isinstance(i, Constant)
                else np.isfinite(i.data).all() for i in node.inputs)
    if not (exact or allow_float):
        return None
    out = node.outputs[0]
    return [fill_like(node.inputs, 0, out.dtype)]


@node_rewriter([sb.Mul])
def local_mul_zero(fgraph, node):
    """``x * 0 -> zeros`` (shape and dtype kept) when no input can be NaN or Inf."""
    return _mul_by_zero(node, allow_float=False)


@node_rewriter([sb.Mul])
def local_mul_zero_unsafe(fgraph, node):
    """``x * 0 -> zeros`` for floats too (wrong for NaN and Inf x): tag ``unsafe``."""
    return _mul_by_zero(node, allow_float=True)


def _self_op(node, value, allow_float):
    x, y = node.inputs
    if x is not y or not (is_discrete(x.dtype) or allow_float):
        return None
    return [fill_like([x], value, node.outputs[0].dtype)]


@node_rewriter([sb.Sub])
def local_sub_self(fgraph, node):
    """``x - x -> zeros`` for integers (exact: no NaN or Inf)."""
    return _self_op(node, 0, allow_float=False)


@node_rewriter([sb.Sub])
def local_sub_self_unsafe(fgraph, node):
    """``x - x -> zeros`` for floats too (wrong for Inf and NaN): tag ``unsafe``."""
    return _self_op(node, 0, allow_float=True)


@node_rewriter([sb.TrueDiv])
def local_div_self_unsafe(fgraph, node):
    """``x / x -> ones`` (wrong for x == 0, Inf, NaN): tag ``unsafe``."""
    return _self_op(node, 1, allow_float=True)


_canonicalize(local_neutral_element, "fast_compile")
_canonicalize(local_mul_zero, "fast_compile")
_canonicalize(local_sub_self, "fast_compile")
register(local_mul_zero_unsafe, "unsafe", phase="canonicalize")
register(local_sub_self_unsafe, "unsafe", phase="canonicalize")
register(local_div_self_unsafe, "unsafe", phase="canonicalize")


# ---------------------------------------------------------------------------
# Negation


@node_rewriter([sb.Neg])
def local_double_neg(fgraph, node):
    """``-(-x) -> x`` (exact for every dtype, wrap-around included)."""
    inner = owner_if(node.inputs[0], sb.Neg)
    if inner is None:
        return None
    return [conform(inner.inputs[0], node.outputs[0])]


_canonicalize(local_double_neg, "fast_compile")


# ---------------------------------------------------------------------------
# n-ary add and mul


def _same_dtype_if_discrete(inputs, out):
    # Integer add/mul evaluate left to right, each step in the dtype of what
    # came before: regrouping mixed integer dtypes could move an overflow.
    # With one dtype, wrap-around arithmetic is associative and exact.
    return not is_discrete(out.dtype) or all(i.dtype == out.dtype for i in inputs)


@node_rewriter([sb.Add, sb.Mul])
def local_flatten_nary(fgraph, node):
    """``(a + b) + c -> add(a, b, c)``, same for mul.

    Only an inner node used nowhere else (else its work would be done twice)
    and of the outer output's dtype (an inner int8 sum that overflows must keep
    overflowing the same way).
    """
    cls = type(node.op.scalar_op)
    out = node.outputs[0]
    inputs, changed = [], False
    for var in node.inputs:
        inner = owner_if(var, cls)
        if inner is not None and var.dtype == out.dtype and \
                len(fgraph.clients.get(var, ())) == 1 and var not in fgraph.outputs:
            inputs.extend(inner.inputs)
            changed = True
        else:
            inputs.append(var)
    if not changed or not _same_dtype_if_discrete(inputs, out):
        return None
    new = conform(_nary(cls, inputs), out)
    return None if new is None else [new]


@node_rewriter([sb.Add, sb.Mul])
def local_gather_constants(fgraph, node):
    """``2 * x * 3 -> 6 * x``: the constant inputs of an n-ary add/mul become one.

    The constants are combined in the output's dtype (integer wrap-around is
    associative, so ints stay exact).
    """
    consts = [i for i in node.inputs if isinstance(i, Constant)]
    out = node.outputs[0]
    if len(consts) < 2 or not _same_dtype_if_discrete(node.inputs, out):
        return None
    dtype = out.type.numpy_dtype
    with np.errstate(all="ignore"):
        value = np.asarray(consts[0].data, dtype=dtype)
        for c in consts[1:]:
            value = node.op.scalar_op.impl(value, np.asarray(c.data, dtype=dtype))
    from symgraph.tensor.basic import constant

    combined = constant(np.asarray(value, dtype=dtype), dtype=out.dtype)
    first = node.inputs.index(consts[0])
    inputs = [i for i in node.inputs if not isinstance(i, Constant)]
    inputs.insert(min(first, len(inputs)), combined)
    new = conform(_nary(type(node.op.scalar_op), inputs), out)
    return None if new is None else [new]


_canonicalize(local_flatten_nary)
_canonicalize(local_gather_constants, "fast_compile")


# ---------------------------------------------------------------------------
# Casts


@node_rewriter([sb.Cast])
def local_useless_cast(fgraph, node):
    """``cast(x, x.dtype) -> x``."""
    (x,) = node.inputs
    if x.dtype != node.outputs[0].dtype:
        return None
    return [x]


def lossless_cast(src, dst):
    """True when every value of dtype ``src`` is exactly a value of ``dst``.

    Stricter than NumPy's 'safe' casting, which allows int64 -> float64.
    """
    src, dst = np.dtype(src), np.dtype(dst)
    if not np.can_cast(src, dst, "safe"):
        return False
    if src.kind in "iu" and dst.kind in "fc":
        mantissa = np.finfo(dst).nmant + 1
        return np.iinfo(src).bits - (src.kind == "i") <= mantissa
    return True


@node_rewriter([sb.Cast])
def local_cast_cast(fgraph, node):
    """``cast(cast(x, a), b) -> cast(x, b)`` when the inner cast loses nothing."""
    inner = owner_if(node.inputs[0], sb.Cast)
    if inner is None:
        return None
    x = inner.inputs[0]
    if not lossless_cast(x.dtype, inner.outputs[0].dtype):
        return None
    return [conform(x, node.outputs[0])]


_canonicalize(local_useless_cast, "fast_compile")
_canonicalize(local_cast_cast, "fast_compile")
