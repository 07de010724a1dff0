"""Stable and fused forms of the neural-network losses (``ops/nnet_loss.py``).

Phase ``stabilize`` (tags ``fast_run``, ``stabilize``):

* ``local_softmax_crossentropy_1hot``: ``categorical_crossentropy(softmax(x),
  y_int)`` (``CrossentropyCategorical1Hot(Softmax(x), y)``) becomes the nll of
  the fused ``SoftmaxCrossEntropy1Hot(x, y)``, finite for huge logits;
* ``local_picked_logsoftmax_1hot``: ``-log(softmax(x))[arange(n), y]``
  (``log(softmax)`` is already ``logsoftmax`` here: ``opt/stabilize.py``), and
  ``log(softmax(x))[arange(n), y]`` (negated), become the same fused nll;
* ``local_softmax_crossentropy_1hot_grad``: the gradient of the first form,
  ``SoftmaxGrad(CrossentropyCategorical1HotGrad(g, sm, y), sm)`` for ``sm =
  softmax(x)``, becomes ``SoftmaxCrossEntropy1HotGrad(g, sm, y)``: ``g * (sm -
  one_hot(y))``, without the division by ``sm[i, y_i]`` (0 once it underflows);
* ``local_picked_logsoftmax_1hot_grad`` and ``..._grad_sub``: the same for
  the gradient of the second form, ``SoftmaxGrad((zeros[arange(n), y] += v) /
  sm, sm)`` (from ``log(softmax)``) or ``G - sm * sum(G, 1)`` (from
  ``logsoftmax``, or after ``local_logsoftmax_grad``);
* ``local_sigmoid_binary_crossentropy``: ``binary_crossentropy(sigmoid(z), t)``
  becomes ``sigmoid_binary_crossentropy(z, t)``;
* ``local_sigmoid_binary_crossentropy_grad``: in the gradient of the former,
  ``a / (s * (1 - s)) * s * (1 - s)`` for ``s = sigmoid(z)`` (``1 - s`` is
  ``sigmoid(-z)`` after ``opt/stabilize.py``) becomes ``a``, so that the
  gradient is ``g * (sigmoid(z) - t)``: no ``0 / 0`` once ``s`` rounds to 1.

Phase ``specialize`` (tag ``fast_run``): ``local_share_fused_softmax`` lets the
other users of ``softmax(x)`` (the gradient, typically) take the ``sm`` output
of a fused node on the same ``x``, so that the softmax is computed once.
"""

from symgraph.graph.basic import Constant
from symgraph.ops import nnet
from symgraph.ops import nnet_loss as nl
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from symgraph.ops.alloc import Alloc, ARange
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.shape import Shape_i
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, is_constant_value, owner_if


def _stabilize(rewriter):
    return register(rewriter, "fast_run", "stabilize", phase="stabilize")


def _row_softmax_input(var, op_class=nnet.Softmax):
    """``x`` when ``var`` is ``op_class(axis=1)(x)`` of a matrix, else None."""
    node = var.owner
    if node is None or type(node.op) is not op_class or var.ndim != 2 or \
            node.op._axis(2) != 1:
        return None
    return node.inputs[0]


def _softmax_of(var):
    """``x`` when ``var`` is the row softmax of the matrix ``x`` (a Softmax, or
    the ``sm`` output of a fused node), else None."""
    node = var.owner
    if node is not None and isinstance(node.op, nl.SoftmaxCrossEntropy1Hot) and \
            var is node.outputs[1]:
        return node.inputs[0]
    return _row_softmax_input(var)


def _fused_nll(node_out, x, y, nll):
    """``nll(SoftmaxCrossEntropy1Hot(x, y)[0])`` conformed to stand for ``node_out``."""
    new = conform(nll(nl.SoftmaxCrossEntropy1Hot()(x, y)[0]), node_out)
    return None if new is None else [new]


@node_rewriter([nl.CrossentropyCategorical1Hot])
def local_softmax_crossentropy_1hot(fgraph, node):
    """``CrossentropyCategorical1Hot(softmax(x), y) -> SoftmaxCrossEntropy1Hot(x, y)[0]``."""
    coding, y = node.inputs
    x = _row_softmax_input(coding)
    if x is None:
        return None
    return _fused_nll(node.outputs[0], x, y, lambda nll: nll)


def _is_row_arange(var, x, y):
    """True when ``var`` is ``arange(n)`` for n the number of rows of ``x``
    (its ``Shape_i{0}``, or the static size) or of ``y``."""
    node = var.owner
    if node is None or not isinstance(node.op, ARange):
        return False
    start, stop, step = node.inputs
    if not (is_constant_value(start, 0) and is_constant_value(step, 1)):
        return False
    if isinstance(stop, Constant):
        return x.type.shape[0] is not None and is_constant_value(stop, x.type.shape[0])
    stop_node = stop.owner
    return stop_node is not None and isinstance(stop_node.op, Shape_i) and \
        stop_node.op.i == 0 and stop_node.inputs[0] in (x, y)


@node_rewriter([AdvancedSubtensor])
def local_picked_logsoftmax_1hot(fgraph, node):
    """``logsoftmax(x)[arange(n), y] -> -SoftmaxCrossEntropy1Hot(x, y)[0]`` and
    ``(-logsoftmax(x))[arange(n), y] -> SoftmaxCrossEntropy1Hot(x, y)[0]``
    (row log-softmax of a matrix, ``y`` an integer vector)."""
    from symgraph.ops.math import neg
    from symgraph.ops.subtensor import SYMBOLIC

    if tuple(node.op.idx_list) != (SYMBOLIC, SYMBOLIC) or len(node.inputs) != 3:
        return None
    source, rows, y = node.inputs
    if y.ndim != 1 or not y.dtype.startswith(("int", "uint")):
        return None
    negated = owner_if(source, sb.Neg)
    logsm = negated.inputs[0] if negated is not None else source
    x = _row_softmax_input(logsm, nnet.LogSoftmax)
    if x is None or not _is_row_arange(rows, x, y) and not _is_row_arange(rows, logsm, y):
        return None
    return _fused_nll(node.outputs[0], x, y, (lambda nll: nll) if negated is not None else neg)


@node_rewriter([nnet.SoftmaxGrad])
def local_softmax_crossentropy_1hot_grad(fgraph, node):
    """``SoftmaxGrad(CrossentropyCategorical1HotGrad(g, sm, y), sm) ->
    SoftmaxCrossEntropy1HotGrad(g, sm, y)`` for ``sm`` a row softmax."""
    dy, sm_var = node.inputs
    inner = dy.owner
    if inner is None or not isinstance(inner.op, nl.CrossentropyCategorical1HotGrad):
        return None
    g, coding, y = inner.inputs
    if coding is not sm_var or _softmax_of(sm_var) is None or node.op._axis(2) != 1:
        return None
    new = nl.SoftmaxCrossEntropy1HotGrad()(g, sm_var, y)
    new = conform(new, node.outputs[0])
    return None if new is None else [new]


def _picked_rows_gradient(var, x):
    """``(dnll, y)`` when ``var`` is ``zeros[arange(n), y] += v`` (the gradient of
    ``log(softmax(x))[arange(n), y]`` with respect to the log-softmax), or its
    negation: ``dnll``, the gradient of the rows' ``-log(softmax(x))[i, y_i]``,
    is then ``-v`` (or ``v``).  None for anything else."""
    from symgraph.ops.math import neg
    from symgraph.ops.subtensor import SYMBOLIC

    negated = owner_if(var, sb.Neg)
    node = (negated.inputs[0] if negated is not None else var).owner
    if node is None or not isinstance(node.op, AdvancedIncSubtensor) or \
            node.op.set_instead_of_inc or len(node.inputs) != 4:
        return None
    base, v, rows, y = node.inputs
    zeros = base.owner
    if tuple(node.op.idx_list) != (SYMBOLIC, SYMBOLIC) or y.ndim != 1 or v.ndim > 1 or \
            not y.dtype.startswith(("int", "uint")) or zeros is None or \
            not isinstance(zeros.op, Alloc) or not is_constant_value(zeros.inputs[0], 0) or \
            not (_is_row_arange(rows, x, y) or _is_row_arange(rows, base, y)):
        return None
    v = v if v.ndim == 1 else v.dimshuffle("x")
    return (v if negated is not None else neg(v)), y


def _fused_grad(old, dnll, sm_var, y):
    new = conform(nl.SoftmaxCrossEntropy1HotGrad()(dnll, sm_var, y), old)
    return None if new is None else {old: new}


@node_rewriter([Elemwise])
def local_picked_logsoftmax_1hot_grad(fgraph, node):
    """The gradient of ``log(softmax(x))[arange(n), y]``: ``SoftmaxGrad(G / sm, sm)``
    with ``G = zeros[arange(n), y] += v`` becomes ``SoftmaxCrossEntropy1HotGrad(-v,
    sm, y)`` (the row's nll is ``-log(sm[i, y_i])``, so its gradient is ``-v``).

    Tracks the division, which the driver visits before the SoftmaxGrad: the
    general ``local_logsoftmax_grad`` (``opt/stabilize.py``) would otherwise
    rewrite the SoftmaxGrad first (``local_picked_logsoftmax_1hot_grad_sub``
    then recognises its result)."""
    if not isinstance(node.op.scalar_op, sb.TrueDiv):
        return None
    num, sm_var = node.inputs
    x = _softmax_of(sm_var)
    found = _picked_rows_gradient(num, x) if x is not None else None
    if found is None:
        return None
    for client, _ in fgraph.clients.get(node.outputs[0], ()):
        if client != "output" and isinstance(client.op, nnet.SoftmaxGrad) and \
                client.inputs == [node.outputs[0], sm_var] and client.op._axis(2) == 1:
            return _fused_grad(client.outputs[0], found[0], sm_var, found[1])
    return None


def _row_sum_of(var, g):
    """True when ``var`` is ``sum(g, axis=1, keepdims=True)`` of the matrix ``g``."""
    from symgraph.ops.elemwise import DimShuffle
    from symgraph.ops.reduce import Sum

    node = var.owner
    if node is None or not isinstance(node.op, DimShuffle) or node.op.new_order != (0, "x"):
        return False
    inner = node.inputs[0].owner
    return inner is not None and isinstance(inner.op, Sum) and \
        tuple(inner.op.axis) == (1,) and inner.inputs[0] is g


def _softmax_like(var):
    """``(x, sm)`` when ``var`` is the row softmax of ``x`` (or ``exp`` of its
    row log-softmax, as LogSoftmax's gradient writes it); else None."""
    x = _softmax_of(var)
    if x is not None:
        return x, var
    inner = owner_if(var, sm.Exp)
    x = _row_softmax_input(inner.inputs[0], nnet.LogSoftmax) if inner is not None else None
    return None if x is None else (x, nnet.softmax(x))


@node_rewriter([Elemwise])
def local_picked_logsoftmax_1hot_grad_sub(fgraph, node):
    """``G - sm * sum(G, axis=1, keepdims=True) -> SoftmaxCrossEntropy1HotGrad(-v,
    sm, y)`` for ``G = zeros[arange(n), y] += v`` and ``sm`` the row softmax of x
    (or ``exp(logsoftmax(x))``): the gradient of ``log(softmax(x))[arange(n),
    y]`` as ``LogSoftmax``'s gradient and ``local_logsoftmax_grad`` write it."""
    if not isinstance(node.op.scalar_op, sb.Sub):
        return None
    g, prod = node.inputs
    mul = owner_if(prod, sb.Mul)
    if mul is None or len(mul.inputs) != 2:
        return None
    for a, b in (mul.inputs, mul.inputs[::-1]):
        like = _softmax_like(a)
        if like is None or not _row_sum_of(b, g):
            continue
        found = _picked_rows_gradient(g, like[0])
        if found is not None:
            return _fused_grad(node.outputs[0], found[0], like[1], found[1])
    return None


_stabilize(local_softmax_crossentropy_1hot)
_stabilize(local_picked_logsoftmax_1hot)
_stabilize(local_softmax_crossentropy_1hot_grad)
_stabilize(local_picked_logsoftmax_1hot_grad)
_stabilize(local_picked_logsoftmax_1hot_grad_sub)


@node_rewriter([nnet.Softmax])
def local_share_fused_softmax(fgraph, node):
    """``softmax(x) -> SoftmaxCrossEntropy1Hot(x, y)[1]`` when the graph computes
    that fused node anyway (the gradient of the fused loss uses the softmax):
    one softmax instead of two.  In ``specialize``, after the stabilize rewrites
    that recognise ``Softmax`` nodes."""
    (x,) = node.inputs
    if x.ndim != 2 or node.op._axis(2) != 1:
        return None
    for client, _ in fgraph.clients.get(x, ()):
        if client != "output" and isinstance(client.op, nl.SoftmaxCrossEntropy1Hot) and \
                client.outputs[1].type == node.outputs[0].type:
            return [client.outputs[1]]
    return None


register(local_share_fused_softmax, "fast_run", phase="specialize")


# -- binary cross-entropy of a sigmoid --------------------------------------------------

@node_rewriter([Elemwise])
def local_sigmoid_binary_crossentropy(fgraph, node):
    """``binary_crossentropy(sigmoid(z), t) -> sigmoid_binary_crossentropy(z, t)``."""
    if not isinstance(node.op.scalar_op, nl.BinaryCrossentropy):
        return None
    output, target = node.inputs
    inner = owner_if(output, sm.Sigmoid)
    if inner is None:
        return None
    new = nl.sigmoid_binary_crossentropy(inner.inputs[0], target)
    new = conform(new, node.outputs[0], fill_from=node.inputs)
    return None if new is None else [new]


_stabilize(local_sigmoid_binary_crossentropy)


def _complements(var, s, z):
    """True when ``var`` is ``1 - s`` or ``sigmoid(-z)``, for ``s = sigmoid(z)``."""
    sub = owner_if(var, sb.Sub)
    if sub is not None:
        return is_constant_value(sub.inputs[0], 1) and sub.inputs[1] is s
    inner = owner_if(var, sm.Sigmoid)
    neg = owner_if(inner.inputs[0], sb.Neg) if inner is not None else None
    return neg is not None and neg.inputs[0] is z


def _take(factors, pred):
    """Remove and return the first factor satisfying ``pred`` (None when none does)."""
    for k, f in enumerate(factors):
        if pred(f):
            return factors.pop(k)
    return None


@node_rewriter([Elemwise])
def local_sigmoid_binary_crossentropy_grad(fgraph, node):
    """``a / (s * (1 - s)) * s * (1 - s) -> a`` for ``s = sigmoid(z)`` (``1 - s``
    also as ``sigmoid(-z)``): the gradient of ``binary_crossentropy(sigmoid(z),
    t)`` with respect to z, ``(s - t) / (s (1 - s)) * s (1 - s)``, is then ``s -
    t``, where the original is ``0 / 0`` once ``s`` rounds to 0 or 1."""
    from symgraph.ops.math import mul

    if not isinstance(node.op.scalar_op, sb.Mul):
        return None
    for k, factor in enumerate(node.inputs):
        div = owner_if(factor, sb.TrueDiv)
        den = owner_if(div.inputs[1], sb.Mul) if div is not None else None
        if den is None or len(den.inputs) != 2:
            continue
        for s, c in (den.inputs, den.inputs[::-1]):
            inner = owner_if(s, sm.Sigmoid)
            if inner is None or not _complements(c, s, inner.inputs[0]):
                continue
            rest = list(node.inputs[:k]) + list(node.inputs[k + 1:])
            found_s = _take(rest, lambda f, s=s: f is s)
            found_c = _take(rest, lambda f, s=s, z=inner.inputs[0]: _complements(f, s, z))
            if found_s is None or found_c is None:
                continue
            new = mul(div.inputs[0], *rest) if rest else div.inputs[0]
            new = conform(new, node.outputs[0], fill_from=node.inputs)
            return None if new is None else [new]
    return None


_stabilize(local_sigmoid_binary_crossentropy_grad)
