"""Stabilize: numerically stable forms of common expressions.

``log(1 + x) -> log1p(x)``, ``log(1 - x) -> log1p(-x)``, ``exp(x) - 1 ->
expm1(x)``, ``log(sigmoid(x)) -> -softplus(-x)``, ``log(1 - sigmoid(x)) ->
-softplus(x)``, ``1 / (1 + exp(-x)) -> sigmoid(x)``, ``1 - sigmoid(x) ->
sigmoid(-x)``, ``log(exp(x)) -> x``, ``log1p(exp(x)) -> softplus(x)``, ``sqrt(sqr(x)) -> abs(x)``
(no overflow of x*x), ``sqr(sqrt(x)) -> switch(x >= 0, x, NaN)`` (specialize: x
itself, the exact value, where x*x of a rounded root is off by an ulp) and
``log(softmax(x)) -> logsoftmax(x)``.
These change results only where the original lost them (overflow,
cancellation): that is their purpose.

``exp(log(x)) -> x`` is *not* value-preserving for negative x (the original is
NaN), so it fires only when x is known to be non-negative: computed by exp,
sqr, abs, sigmoid, softplus, sqrt, or a constant >= 0.

The replacement is computed in the replaced output's dtype (the input is
cast first), so that e.g. ``log(np.float64(1) + int8_x)``, a float64 result,
is not computed as ``log1p`` of int8, which would be float32.
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.ops import math as M
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.opt.registry import register
from symgraph.opt.rewriter import PatternRewriter, node_rewriter
from symgraph.opt.utils import (as_dtype, conform, is_constant_value, owner_if)


def _stabilize(rewriter, *tags):
    return register(rewriter, "fast_run", *tags, phase="stabilize")


def _replace(node, build, x):
    """``build(x cast to the output dtype)``, conformed to the output's type."""
    out = node.outputs[0]
    new = build(as_dtype(x, out.dtype))
    new = conform(new, out, fill_from=node.inputs)
    return None if new is None else [new]


def _one_plus(var, sign=1):
    """For ``var = 1 + x`` (sign 1) or ``1 - x`` (sign -1): x, or -x; else None.

    Understands n-ary adds with a constant 1 among their inputs.
    """
    node = var.owner
    if var.dtype == "bool":  # bool add is logical or
        return None
    if sign == 1 and owner_if(var, sb.Add) is not None:
        ones = [i for i in node.inputs if is_constant_value(i, 1)]
        if not ones:
            return None
        rest = list(node.inputs)
        rest.remove(ones[0])
        return rest[0] if len(rest) == 1 else M.add(*rest)
    if sign == -1 and owner_if(var, sb.Sub) is not None and \
            is_constant_value(node.inputs[0], 1):
        return node.inputs[1]
    return None


def _negated(var):
    """-var, without a double negation when var already is -v."""
    inner = owner_if(var, sb.Neg)
    return inner.inputs[0] if inner is not None else M.neg(var)


@node_rewriter([sm.Log])
def local_log1p(fgraph, node):
    """``log(1 + x) -> log1p(x)`` and ``log(1 - x) -> log1p(-x)``."""
    (arg,) = node.inputs
    x = _one_plus(arg, 1)
    if x is not None:
        return _replace(node, M.log1p, x)
    x = _one_plus(arg, -1)
    if x is not None and x.dtype != "bool":
        return _replace(node, lambda v: M.log1p(M.neg(v)), x)
    return None


@node_rewriter([sb.Sub])
def local_expm1(fgraph, node):
    """``exp(x) - 1 -> expm1(x)``."""
    a, b = node.inputs
    inner = owner_if(a, sm.Exp)
    if inner is None or not is_constant_value(b, 1):
        return None
    return _replace(node, M.expm1, inner.inputs[0])


@node_rewriter([sm.Log])
def local_log_sigmoid(fgraph, node):
    """``log(sigmoid(x)) -> -softplus(-x)``; ``log(1 - sigmoid(x)) -> -softplus(x)``."""
    (arg,) = node.inputs
    inner = owner_if(arg, sm.Sigmoid)
    if inner is not None:
        return _replace(node, lambda v: M.neg(M.softplus(_negated(v))), inner.inputs[0])
    y = _one_plus(arg, -1)
    inner = owner_if(y, sm.Sigmoid) if y is not None else None
    if inner is not None:
        return _replace(node, lambda v: M.neg(M.softplus(v)), inner.inputs[0])
    return None


@node_rewriter([sb.TrueDiv, sb.Reciprocal])
def local_sigmoid(fgraph, node):
    """``1 / (1 + exp(-x)) -> sigmoid(x)`` (and ``1 / (1 + exp(x)) -> sigmoid(-x)``)."""
    if len(node.inputs) == 2:
        num, den = node.inputs
        if not is_constant_value(num, 1):
            return None
    else:
        (den,) = node.inputs
    arg = _one_plus(den, 1)
    inner = owner_if(arg, sm.Exp) if arg is not None else None
    if inner is None:
        return None
    return _replace(node, lambda v: M.sigmoid(_negated(v)), inner.inputs[0])


def _drop_one(factors, var):
    """``factors`` without its first occurrence of ``var`` (by identity)."""
    pos = next(k for k, f in enumerate(factors) if f is var)
    return factors[:pos] + factors[pos + 1:]


@node_rewriter([sb.Mul, sb.TrueDiv])
def local_exp_over_one_plus_exp(fgraph, node):
    """``a * exp(x) / (1 + exp(x)) -> a * sigmoid(x)`` among the factors of a
    product (the gradient of ``log(1 + exp(x))``: inf / inf, NaN, for large x),
    and ``sigmoid(-x) * exp(x) -> sigmoid(x)`` (0 * inf, NaN, otherwise)."""
    from symgraph.opt.canonicalize_algebra import _factors

    out = node.outputs[0]
    if not out.dtype.startswith("float"):
        return None
    num, den = [], []
    _factors(fgraph, out, num, den, top=True)
    # sigmoid(-x) * exp(x), what local_sigmoid makes of 1 / (1 + exp(x)) first.
    for s_var in num:
        sig = owner_if(s_var, sm.Sigmoid)
        neg = owner_if(sig.inputs[0], sb.Neg) if sig is not None else None
        exp = next((n for n in num if neg is not None and owner_if(n, sm.Exp) is not None
                    and n.owner.inputs[0] is neg.inputs[0]), None)
        if exp is not None:
            num = _drop_one(_drop_one(num, s_var), exp) + [M.sigmoid(neg.inputs[0])]
            new = M.mul(*num) if len(num) > 1 else num[0]
            if den:
                new = M.true_div(new, M.mul(*den) if len(den) > 1 else den[0])
            new = conform(new, out, fill_from=list(node.inputs))
            return None if new is None else [new]
    for d in den:
        arg = _one_plus(d, 1)
        if arg is not None and owner_if(arg, sm.Exp) is not None and \
                any(n is arg for n in num):
            # One factor each: exp(x)**2 / (1 + exp(x))**2 keeps one of each.
            num = _drop_one(num, arg) + [M.sigmoid(arg.owner.inputs[0])]
            den = _drop_one(den, d)
            new = M.mul(*num) if len(num) > 1 else num[0]
            if den:
                new = M.true_div(new, M.mul(*den) if len(den) > 1 else den[0])
            new = conform(new, out, fill_from=list(node.inputs) + [d, arg])
            return None if new is None else [new]
    return None


@node_rewriter([sb.Sub])
def local_one_minus_sigmoid(fgraph, node):
    """``1 - sigmoid(x) -> sigmoid(-x)`` (no cancellation for large x)."""
    y = _one_plus(node.outputs[0], -1)
    inner = owner_if(y, sm.Sigmoid) if y is not None else None
    if inner is None:
        return None
    return _replace(node, lambda v: M.sigmoid(_negated(v)), inner.inputs[0])


_stabilize(local_log1p)
_stabilize(local_expm1)
_stabilize(local_log_sigmoid)
_stabilize(local_sigmoid)
_stabilize(local_one_minus_sigmoid)
_stabilize(local_exp_over_one_plus_exp)


# ---------------------------------------------------------------------------
# Inverse pairs


# log(exp(x)) == x wherever exp(x) does not overflow, and better where it does.
local_log_exp = PatternRewriter((sm.Log, (sm.Exp, "x")), "x", name="local_log_exp",
                                allow_multiple_clients=True)

_NON_NEGATIVE = (sm.Exp, sb.Sqr, sb.Abs, sm.Sigmoid, sm.Softplus, sm.Sqrt)


def is_non_negative(var):
    """True when every element of ``var`` is known to be >= 0 (or NaN)."""
    if isinstance(var, Constant):
        data = np.asarray(var.data)
        return data.dtype.kind in "biuf" and bool(np.all(~(data < 0)))
    return owner_if(var, *_NON_NEGATIVE) is not None or \
        (var.dtype.startswith("uint") or var.dtype == "bool")


@node_rewriter([sm.Log1p])
def local_log1p_exp(fgraph, node):
    """``log1p(exp(x)) -> softplus(x)`` (finite where exp(x) overflows)."""
    inner = owner_if(node.inputs[0], sm.Exp)
    if inner is None:
        return None
    return _replace(node, M.softplus, inner.inputs[0])


@node_rewriter([sm.Sqrt])
def local_sqrt_sqr(fgraph, node):
    """``sqrt(sqr(x)) -> abs(x)`` (x*x overflows for |x| > 1e154 in float64)."""
    inner = owner_if(node.inputs[0], sb.Sqr)
    if inner is None or not node.outputs[0].dtype.startswith("float") or \
            inner.inputs[0].dtype != node.outputs[0].dtype:
        return None
    return _replace(node, M.abs_, inner.inputs[0])


@node_rewriter([sb.Sqr])
def local_sqr_sqrt(fgraph, node):
    """``sqr(sqrt(x)) -> switch(x >= 0, x, NaN)``: NaN for negative x, as before."""
    inner = owner_if(node.inputs[0], sm.Sqrt)
    out = node.outputs[0]
    if inner is None or inner.inputs[0].dtype != out.dtype:
        return None
    x = inner.inputs[0]
    return _replace(node, lambda v: M.switch(M.ge(v, 0), v, np.asarray(np.nan, out.dtype)), x)


_stabilize(local_log1p_exp)
_stabilize(local_sqrt_sqr)
register(local_sqr_sqrt, "fast_run", phase="specialize")


local_exp_log = PatternRewriter((sm.Exp, (sm.Log, "x")), "x", name="local_exp_log",
                                constraints={"x": is_non_negative},
                                allow_multiple_clients=True)

_stabilize(local_log_exp)
_stabilize(local_exp_log)


# ---------------------------------------------------------------------------
# log(softmax(x)): softmax lives in symgraph/ops/nnet.py, added by a later
# issue.  The rewrite resolves the op when it runs and does nothing while the
# module or the op does not exist.


def _nnet_op(name):
    try:
        from symgraph.ops import nnet
    except ImportError:
        return None
    return getattr(nnet, name, None)


@node_rewriter([sm.Log])
def local_log_softmax(fgraph, node):
    """``log(softmax(x)) -> logsoftmax(x)`` (same axis); inactive until
    ``symgraph.ops.nnet`` defines ``Softmax`` and ``LogSoftmax``."""
    softmax_cls, logsoftmax_cls = _nnet_op("Softmax"), _nnet_op("LogSoftmax")
    inner = node.inputs[0].owner
    if softmax_cls is None or logsoftmax_cls is None or inner is None or \
            not isinstance(inner.op, softmax_cls):
        return None
    # Both ops are parameterized the same way (the axis): same props.
    new = logsoftmax_cls(**inner.op._props_dict())(*inner.inputs)
    new = conform(new, node.outputs[0])
    return None if new is None else [new]


_stabilize(local_log_softmax)


@node_rewriter(["symgraph.ops.nnet:SoftmaxGrad"])
def local_logsoftmax_grad(fgraph, node):
    """``SoftmaxGrad(g / sm, sm) -> g - sum(g, axis) * sm`` for ``sm = softmax(x)``:
    the gradient of ``log(softmax(x))`` without dividing by a softmax that may
    have underflowed to 0 (which gives NaN where the true gradient is finite)."""
    from symgraph.ops.reduce import sum as sum_

    softmax_cls = _nnet_op("Softmax")
    dy, sm_var = node.inputs
    div = owner_if(dy, sb.TrueDiv)
    inner = sm_var.owner
    if softmax_cls is None or div is None or div.inputs[1] is not sm_var or \
            inner is None or not isinstance(inner.op, softmax_cls) or \
            inner.op._props_dict() != node.op._props_dict():
        return None
    g = div.inputs[0]
    if any(a == 1 and b != 1 for a, b in zip(g.type.shape, sm_var.type.shape)):
        g = M.second(sm_var, g)  # broadcast first: the sum counts every position
    new = g - sum_(g, axis=node.op.axis, keepdims=True) * sm_var
    new = conform(new, node.outputs[0], fill_from=[sm_var])
    return None if new is None else [new]


_stabilize(local_logsoftmax_grad)
