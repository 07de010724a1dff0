"""Softmax written out by hand, recognised (issue 13, "optimizer leftovers").

Phase ``stabilize`` (tags ``fast_run``, ``stabilize``), next to
``opt/stabilize_nnet.py``, whose fused ops and helpers these reuse:

* ``local_exp_over_sum_exp``: ``exp(x) / sum(exp(x), axis=a, keepdims=True)``
  (the sum's ``keepdims`` as ``DimShuffle``, so also ``.dimshuffle(0, 'x')``)
  becomes ``softmax(x, axis=a)``, which subtracts the maximum first: finite
  for huge ``x`` where the written form is ``inf / inf``;
* ``local_log_picked_softmax_1hot``: the Theano tutorial's cost,
  ``log(softmax(x)[arange(n), y])`` (the log of the picked probabilities, not
  the picked log-probabilities that ``local_picked_logsoftmax_1hot`` handles),
  becomes ``-SoftmaxCrossEntropy1Hot(x, y)[0]``: the mean (or sum) of its
  negation is then the fused, stable nll, finite where the picked
  probability underflows to 0;
* ``local_log_sum_exp_to_logsoftmax``: ``a - log(sum(exp(a), axis, keepdims=True))``
  (examples/demo.py's log-softmax from primitives) becomes ``logsoftmax(a,
  axis)``, so that its picked rows become the fused nll too;
* ``local_softmax_of_shifted``: ``softmax(x - max(x, axis, keepdims=True))``
  (same axis; also logsoftmax) becomes ``softmax(x)``, which shifts by the
  maximum itself: one pass and one reduction fewer, the same values;
* ``local_log_picked_softmax_1hot_grad``: its gradient, ``SoftmaxGrad(zeros[
  arange(n), y] += v / softmax(x)[arange(n), y], sm)``, becomes
  ``SoftmaxCrossEntropy1HotGrad(-v, sm, y)``: no division by a picked
  probability that underflowed to 0 (``inf * 0``, NaN, otherwise).
"""

from symgraph.ops import nnet
from symgraph.ops import nnet_loss as nl
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from symgraph.ops.alloc import Alloc
from symgraph.ops.elemwise import DimShuffle, Elemwise
from symgraph.ops.reduce import Sum
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.stabilize_nnet import _fused_nll, _is_row_arange, _softmax_of
from symgraph.opt.utils import conform, is_constant_value, owner_if


def _stabilize(rewriter):
    return register(rewriter, "fast_run", "stabilize", phase="stabilize")


# -- exp(x) / sum(exp(x), axis, keepdims=True) -------------------------------------------

def _kept_sum_axis(var, reduce_cls=Sum):
    """``(a, s)`` when ``var`` is ``sum(s, axis=a, keepdims=True)`` (a Sum over one
    axis followed by the DimShuffle that puts that axis back as 1), else None.
    ``reduce_cls`` asks for another reduction (Max) instead."""
    node = var.owner
    if node is None or not isinstance(node.op, DimShuffle):
        return None
    inner = node.inputs[0].owner
    if inner is None or not isinstance(inner.op, reduce_cls):
        return None
    axes = inner.op.axes(inner.inputs[0].ndim)
    if len(axes) != 1:
        return None
    (axis,) = axes
    kept = list(range(var.ndim - 1))
    if tuple(node.op.new_order) != tuple(kept[:axis] + ["x"] + kept[axis:]):
        return None
    return axis, inner.inputs[0]


def _exp_input(var):
    node = owner_if(var, sm.Exp)
    return None if node is None else node.inputs[0]


@node_rewriter([Elemwise])
def local_exp_over_sum_exp(fgraph, node):
    """``exp(x) / sum(exp(x), axis=a, keepdims=True) -> softmax(x, axis=a)``."""
    if not isinstance(node.op.scalar_op, sb.TrueDiv):
        return None
    num, den = node.inputs
    x = _exp_input(num)
    found = _kept_sum_axis(den) if x is not None else None
    if found is None or num.ndim != den.ndim or not x.dtype.startswith("float"):
        return None
    axis, summed = found
    if summed is not num and _exp_input(summed) is not x:
        return None
    new = conform(nnet.softmax(x, axis=axis), node.outputs[0])
    return None if new is None else [new]


# -- log(softmax(x)[arange(n), y]) ----------------------------------------------------

def _picked_softmax(var):
    """``(x, sm, y)`` when ``var`` is ``sm[arange(n), y]`` for ``sm`` the row softmax
    of the matrix ``x`` and ``y`` an integer vector, else None."""
    from symgraph.ops.subtensor import SYMBOLIC

    node = var.owner
    if node is None or not isinstance(node.op, AdvancedSubtensor) or \
            tuple(node.op.idx_list) != (SYMBOLIC, SYMBOLIC) or len(node.inputs) != 3:
        return None
    source, rows, y = node.inputs
    if y.ndim != 1 or not y.dtype.startswith(("int", "uint")):
        return None
    x = _softmax_of(source)
    if x is None or not (_is_row_arange(rows, x, y) or _is_row_arange(rows, source, y)):
        return None
    return x, source, y


@node_rewriter([sm.Log])
def local_log_picked_softmax_1hot(fgraph, node):
    """``log(softmax(x)[arange(n), y]) -> -SoftmaxCrossEntropy1Hot(x, y)[0]``."""
    from symgraph.ops.math import neg

    found = _picked_softmax(node.inputs[0])
    if found is None:
        return None
    x, _, y = found
    return _fused_nll(node.outputs[0], x, y, neg)


def _unnegated(var):
    """``(v, negated)``: ``var`` is ``-v`` when ``negated``, else ``v``."""
    node = owner_if(var, sb.Neg)
    return (var, False) if node is None else (node.inputs[0], True)


@node_rewriter([nnet.SoftmaxGrad])
def local_log_picked_softmax_1hot_grad(fgraph, node):
    """``SoftmaxGrad(zeros[arange(n), y] += v / sm[arange(n), y], sm) ->
    SoftmaxCrossEntropy1HotGrad(-v, sm, y)`` for ``sm`` the row softmax of x (the
    gradient of ``log(sm[arange(n), y])``; negations of the increment or of the
    whole are followed)."""
    from symgraph.ops.math import neg
    from symgraph.ops.subtensor import SYMBOLIC

    dy, sm_var = node.inputs
    if node.op._axis(2) != 1 or _softmax_of(sm_var) is None:
        return None
    inc_var, neg_outer = _unnegated(dy)
    inc = inc_var.owner
    if inc is None or not isinstance(inc.op, AdvancedIncSubtensor) or \
            inc.op.set_instead_of_inc or len(inc.inputs) != 4 or \
            tuple(inc.op.idx_list) != (SYMBOLIC, SYMBOLIC):
        return None
    base, value, rows, y = inc.inputs
    zeros = base.owner
    if zeros is None or not isinstance(zeros.op, Alloc) or \
            not is_constant_value(zeros.inputs[0], 0):
        return None
    quotient, neg_inner = _unnegated(value)
    div = owner_if(quotient, sb.TrueDiv)
    picked = _picked_softmax(div.inputs[1]) if div is not None else None
    if picked is None or picked[1] is not sm_var or picked[2] is not y or \
            not (_is_row_arange(rows, picked[0], y) or _is_row_arange(rows, base, y)):
        return None
    v = div.inputs[0]
    if v.ndim > 1:
        return None
    v = v if v.ndim == 1 else v.dimshuffle("x")
    # The row's nll is -log(sm[i, y_i]): its gradient is -(the log's gradient).
    dnll = v if neg_outer != neg_inner else neg(v)
    new = conform(nl.SoftmaxCrossEntropy1HotGrad()(dnll, sm_var, y), node.outputs[0])
    return None if new is None else [new]


@node_rewriter([sb.Sub])
def local_log_sum_exp_to_logsoftmax(fgraph, node):
    """``a - log(sum(exp(a), axis=k, keepdims=True)) -> logsoftmax(a, axis=k)``."""
    a, right = node.inputs
    log = owner_if(right, sm.Log)
    found = _kept_sum_axis(log.inputs[0]) if log is not None else None
    if found is None or a.ndim != right.ndim or not a.dtype.startswith("float") or \
            _exp_input(found[1]) is not a:
        return None
    new = conform(nnet.logsoftmax(a, axis=found[0]), node.outputs[0])
    return None if new is None else [new]


@node_rewriter([nnet.Softmax, nnet.LogSoftmax, nl.SoftmaxCrossEntropy1Hot])
def local_softmax_of_shifted(fgraph, node):
    """``softmax(x - max(x, axis, keepdims=True)) -> softmax(x)`` (and logsoftmax,
    and the fused row nll): softmax is invariant to the shift, and the kernels
    subtract the maximum themselves."""
    from symgraph.ops.reduce import Max

    sub = owner_if(node.inputs[0], sb.Sub)
    if sub is None:
        return None
    x, shift = sub.inputs
    found = _kept_sum_axis(shift, Max)
    if isinstance(node.op, nl.SoftmaxCrossEntropy1Hot):
        axis = 1
    else:
        axis = node.op._axis(x.ndim)
        axis = axis[0] if isinstance(axis, tuple) and len(axis) == 1 else axis
    if found is None or found[1] is not x or axis != found[0]:
        return None
    outs = node.op(x, *node.inputs[1:])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    new = [conform(o, old) for o, old in zip(outs, node.outputs)]
    return None if any(n is None for n in new) else new


_stabilize(local_exp_over_sum_exp)
_stabilize(local_log_sum_exp_to_logsoftmax)
_stabilize(local_softmax_of_shifted)
_stabilize(local_log_picked_softmax_1hot)
_stabilize(local_log_picked_softmax_1hot_grad)
