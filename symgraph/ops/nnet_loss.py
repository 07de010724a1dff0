"""Losses of ``tensor.nnet``: cross-entropies, their fused softmax form, one-hot.

* ``categorical_crossentropy(coding_dist, true_dist)``: with integer targets
  (one class index per row) it is ``CrossentropyCategorical1Hot``, i.e.
  ``-log(coding_dist[arange(n), y])``, whose gradient is its own op
  ``CrossentropyCategorical1HotGrad``; with a matrix of probabilities (or a
  one-hot matrix) it is the graph ``-sum(true * log(coding), axis=-1)``.
* ``SoftmaxCrossEntropy1Hot(x, y_idx) -> (nll, sm)``: softmax and the
  cross-entropy of integer targets in one op, computed from the log-softmax
  (``nll = logsumexp(x_i) - x_i[y_i]``), so that ``nll`` stays finite for
  logits of 1000 where ``-log(softmax(x))`` would be ``-log(0) = inf``.  Its
  gradient ``SoftmaxCrossEntropy1HotGrad(dnll, sm, y_idx)`` is ``dnll[:, None]
  * (sm - one_hot(y_idx))``: no division by a softmax that may underflow.  The
  stabilize rewrites of ``opt/stabilize_nnet.py`` build both from
  ``categorical_crossentropy(softmax(x), y)`` and ``-log(softmax(x))[arange(n),
  y]``; ``crossentropy_softmax_1hot(x, y_idx)`` builds them directly.
* ``binary_crossentropy(output, target)`` and ``sigmoid_binary_crossentropy(
  logits, target)`` are element-wise (scalar ops in ``Elemwise``), so fusion
  compiles them into the surrounding loop; a stabilize rewrite turns the first
  of a ``sigmoid`` into the second.
* ``to_one_hot(y, nb_class, dtype=None)`` (alias ``one_hot``).

Integer targets count from the end when negative, as NumPy indexing does
(``-1`` is the last class), so that the fused form keeps the values of
``x[arange(n), y]``; anything outside ``[-k, k)`` is an IndexError naming the
op, the row and the index.  float16 is computed in float32.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.scalar import FloatScalarOp
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["categorical_crossentropy", "crossentropy_categorical_1hot",
           "crossentropy_softmax_1hot", "binary_crossentropy",
           "sigmoid_binary_crossentropy", "to_one_hot", "one_hot",
           "CrossentropyCategorical1Hot", "CrossentropyCategorical1HotGrad",
           "SoftmaxCrossEntropy1Hot", "SoftmaxCrossEntropy1HotGrad",
           "BinaryCrossentropy", "SigmoidBinaryCrossentropy"]


def _m():
    # Graph-building modules, imported when graphs are built (ops.math imports
    # elemwise, which tensor/__init__ imports before this module).
    from symgraph.ops import math, reduce

    return math, reduce


def _work(array):
    """``array`` in the dtype the arithmetic runs in: float16 is widened."""
    return array.astype("float32") if array.dtype == np.float16 else array


def _float_matrix(var, op, what):
    """``var`` as a float matrix (ints converted as softmax converts them)."""
    from symgraph.ops.nnet import _float_input

    var = _float_input(var, f"{op}: {what}")
    if var.ndim != 2:
        raise TypeError(f"{op}: {what} {var} must be a matrix (2-d), got {var.ndim}-d")
    return var


def _index_vector(var, op):
    """``var`` as an integer vector of class indices."""
    var = as_tensor_variable(var)
    if var.dtype not in INT_DTYPES or var.ndim != 1:
        raise TypeError(f"{op}: the targets {var} must be an integer vector of class "
                        f"indices, got a {var.ndim}-d {var.dtype} tensor")
    return var


def _float_vector(var, dtype, op, what):
    """``var`` as a vector of ``dtype`` (a gradient input)."""
    math, _ = _m()
    var = as_tensor_variable(var)
    if var.ndim != 1:
        raise TypeError(f"{op}: {what} {var} must be a vector, got {var.ndim}-d")
    return var if var.dtype == dtype else math.cast(var, dtype)


def _targets(op, y, n_rows, n_classes):
    """The targets as int64 indices in ``[0, n_classes)``; IndexError otherwise."""
    if y.shape[0] != n_rows:
        raise ValueError(f"{op}: the targets have {y.shape[0]} entries but there are "
                         f"{n_rows} rows")
    if y.dtype.kind == "u":
        bad = y >= n_classes
        idx = np.where(bad, 0, y).astype(np.int64)
    else:
        idx = y.astype(np.int64)
        bad = (idx < -n_classes) | (idx >= n_classes)
    if bad.any():
        row = int(np.argmax(bad))
        raise IndexError(f"{op}: target index {int(y[row])} in row {row} is out of range "
                         f"for {n_classes} classes")
    return np.where(idx < 0, idx + n_classes, idx)


def _check_grad_length(op, g, t):
    """A gradient vector has one entry per row, or one for all of them."""
    if g.shape[0] not in (1, t.shape[0]):
        raise ValueError(f"{op}: the gradient has {g.shape[0]} entries but there are "
                         f"{t.shape[0]} rows")


def _rows(n):
    return np.arange(n)


def _arange(n):
    from symgraph.ops.alloc import arange

    return arange(n)


def _sum_if_broadcast(term, like):
    """``term`` (one entry per row) summed to length 1 when ``like``, the
    vector it is the gradient of, was broadcast over the rows."""
    _, reduce = _m()
    return reduce.sum(term, keepdims=True) if like.type.shape[0] == 1 else term


def _is_zero(var):
    from symgraph.ops.constant_values import is_constant_value

    return is_constant_value(var, 0)


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


# -- categorical cross-entropy of a distribution -------------------------------------

class CrossentropyCategorical1Hot(Op):
    """``nll[i] = -log(coding_dist[i, y_idx[i]])``: the cross-entropy of a
    distribution (rows of a matrix) and integer targets (Theano's op)."""

    __props__ = ()

    def make_node(self, coding_dist, y_idx):
        coding = _float_matrix(coding_dist, self, "the distribution")
        y_idx = _index_vector(y_idx, self)
        return Apply(self, [coding, y_idx],
                     [TensorType(coding.dtype, shape=coding.type.shape[:1])()])

    def perform(self, node, inputs, output_storage):
        coding, y = inputs
        t = _targets(self, y, coding.shape[0], coding.shape[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            out = -np.log(_work(coding)[_rows(len(t)), t])
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0],)]

    def L_op(self, inputs, outputs, output_grads):
        coding, y = inputs
        return [CrossentropyCategorical1HotGrad()(output_grads[0], coding, y),
                _disconnected(y)]


class CrossentropyCategorical1HotGrad(Op):
    """The gradient of ``CrossentropyCategorical1Hot``: zeros, except
    ``out[i, y_idx[i]] = -g[i] / coding_dist[i, y_idx[i]]``."""

    __props__ = ()

    def make_node(self, g_nll, coding_dist, y_idx):
        coding = _float_matrix(coding_dist, self, "the distribution")
        g_nll = _float_vector(g_nll, coding.dtype, self, "the gradient")
        y_idx = _index_vector(y_idx, self)
        return Apply(self, [g_nll, coding, y_idx], [coding.type.clone()()])

    def perform(self, node, inputs, output_storage):
        g, coding, y = inputs
        t = _targets(self, y, coding.shape[0], coding.shape[1])
        _check_grad_length(self, g, t)
        g = np.broadcast_to(_work(g), t.shape)
        out = np.zeros(coding.shape, dtype=_work(coding).dtype)
        rows = _rows(len(t))
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows, t] = -g / _work(coding)[rows, t]
        output_storage[0][0] = out.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[1])]

    def L_op(self, inputs, outputs, output_grads):
        g, coding, y = inputs
        (gz,) = output_grads
        rows = _arange(y.shape[0])
        picked_gz, picked_c = gz[rows, y], coding[rows, y]
        # out[i, t_i] = -g_i / c_it: d/dg_i = -gz_it / c_it, d/dc_it = g_i gz_it / c_it^2,
        # which is this op again with -g_i gz_it / c_it as its gradient input.
        return [_sum_if_broadcast(-picked_gz / picked_c, g),
                CrossentropyCategorical1HotGrad()(-g * picked_gz / picked_c, coding, y),
                _disconnected(y)]


# -- the fused softmax cross-entropy --------------------------------------------------

class SoftmaxCrossEntropy1Hot(Op):
    """``(nll, sm)`` for logits ``x`` (a matrix) and integer targets ``y_idx``:
    ``sm = softmax(x)`` over the rows and ``nll[i] = -log(sm[i, y_idx[i]])``,
    computed as ``logsumexp(x[i]) - x[i, y_idx[i]]`` (finite for any finite x)."""

    __props__ = ()

    def make_node(self, x, y_idx):
        x = _float_matrix(x, self, "the logits")
        y_idx = _index_vector(y_idx, self)
        return Apply(self, [x, y_idx], [TensorType(x.dtype, shape=x.type.shape[:1])(),
                                        x.type.clone()()])

    @staticmethod
    def compute(x, t):
        """(nll, sm) in NumPy for float32/64 logits and targets in range."""
        shifted = x - np.max(x, axis=1, keepdims=True)
        e = np.exp(shifted)
        s = np.sum(e, axis=1)
        return np.log(s) - shifted[_rows(len(t)), t], e / s[:, None]

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        t = _targets(self, y, x.shape[0], x.shape[1])
        dtype = node.outputs[0].dtype
        if x.shape[0] == 0:
            nll, sm = np.empty(0), np.empty(x.shape)
        else:
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                nll, sm = self.compute(_work(x), t)
        output_storage[0][0] = np.asarray(nll).astype(dtype, copy=False)
        output_storage[1][0] = np.asarray(sm).astype(dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0],), tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.ops.nnet import SoftmaxGrad

        x, y = inputs
        g_nll, g_sm = output_grads
        sm = outputs[1]
        terms = []
        if not _is_zero(g_nll):
            terms.append(SoftmaxCrossEntropy1HotGrad()(g_nll, sm, y))
        if not _is_zero(g_sm):
            terms.append(SoftmaxGrad(1)(g_sm, sm))
        if not terms:
            return [_m()[0].zeros_like(x), _disconnected(y)]
        return [terms[0] if len(terms) == 1 else terms[0] + terms[1], _disconnected(y)]


class SoftmaxCrossEntropy1HotGrad(Op):
    """The gradient of ``SoftmaxCrossEntropy1Hot``'s ``nll`` with respect to
    the logits: ``dx = dnll[:, None] * (sm - one_hot(y_idx))``.

    ``dnll`` is a vector with one entry per row, or of static length 1
    (broadcast over the rows, as the gradient of a sum may be)."""

    __props__ = ()

    def make_node(self, dnll, sm, y_idx):
        sm = _float_matrix(sm, self, "the softmax")
        dnll = _float_vector(dnll, sm.dtype, self, "the gradient")
        y_idx = _index_vector(y_idx, self)
        return Apply(self, [dnll, sm, y_idx], [sm.type.clone()()])

    def perform(self, node, inputs, output_storage):
        dnll, sm, y = inputs
        t = _targets(self, y, sm.shape[0], sm.shape[1])
        _check_grad_length(self, dnll, t)
        sm = _work(sm)
        onehot = np.zeros_like(sm)
        onehot[_rows(len(t)), t] = 1
        out = _work(dnll)[:, None] * (sm - onehot)
        output_storage[0][0] = out.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[1])]

    def L_op(self, inputs, outputs, output_grads):
        _, reduce = _m()
        dnll, sm, y = inputs
        (gz,) = output_grads
        g_dnll = reduce.sum(gz * sm, axis=1) - gz[_arange(y.shape[0]), y]
        return [_sum_if_broadcast(g_dnll, dnll), gz * dnll.dimshuffle(0, "x"), _disconnected(y)]


# -- binary cross-entropies, element-wise ---------------------------------------------

class BinaryCrossentropy(FloatScalarOp):
    """``-(t * log(o) + (1 - t) * log(1 - o))`` for a probability ``o`` and a
    target ``t`` (Theano's formula; ``log1p(-o)`` for the second log)."""

    nin = 2

    @property
    def name(self):
        return "binary_crossentropy"

    def impl(self, o, t):
        with np.errstate(divide="ignore", invalid="ignore"):
            return -(t * np.log(o) + (1 - t) * np.log1p(-o))

    def grad(self, inputs, outputs, output_grads):
        math, _ = _m()
        o, t = inputs
        (g,) = output_grads
        return [g * (o - t) / (o * (1.0 - o)), g * (math.log1p(-o) - math.log(o))]


class SigmoidBinaryCrossentropy(FloatScalarOp):
    """``binary_crossentropy(sigmoid(z), t)`` for logits ``z``, computed as
    ``max(z, 0) - z * t + log1p(exp(-|z|))``: finite for any finite z."""

    nin = 2

    @property
    def name(self):
        return "sigmoid_binary_crossentropy"

    def impl(self, z, t):
        return np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z)))

    def grad(self, inputs, outputs, output_grads):
        math, _ = _m()
        z, t = inputs
        (g,) = output_grads
        return [g * (math.sigmoid(z) - t), -g * z]


# -- user functions -------------------------------------------------------------------

def crossentropy_categorical_1hot(coding_dist, y_idx):
    """``-log(coding_dist[arange(n), y_idx])`` (Theano's name for the op)."""
    return CrossentropyCategorical1Hot()(coding_dist, y_idx)


def categorical_crossentropy(coding_dist, true_dist):
    """The cross-entropy of each row of ``coding_dist`` and its target.

    ``coding_dist``: probabilities, one distribution per row (typically
    ``softmax(x)``).  ``true_dist``: an integer vector of class indices
    (``-log(coding_dist[arange(n), true_dist])``) or a matrix of target
    probabilities such as a one-hot matrix (``-sum(true_dist *
    log(coding_dist), axis=-1)``).  Returns one value per row.

    ``categorical_crossentropy(softmax(x), y)`` is rewritten into the stable
    fused op ``SoftmaxCrossEntropy1Hot`` (values and gradient finite for huge
    logits); with probability targets ``log(softmax(x))`` becomes
    ``logsoftmax(x)``.
    """
    math, reduce = _m()
    coding_dist = as_tensor_variable(coding_dist)
    true_dist = as_tensor_variable(true_dist)
    if true_dist.ndim == coding_dist.ndim:
        return -reduce.sum(true_dist * math.log(coding_dist), axis=coding_dist.ndim - 1)
    if true_dist.ndim == coding_dist.ndim - 1:
        return crossentropy_categorical_1hot(coding_dist, true_dist)
    raise TypeError(f"categorical_crossentropy: the targets {true_dist} must be an integer "
                    f"vector with one class index per row, or have the shape of the "
                    f"distribution; got a {true_dist.ndim}-d target for a "
                    f"{coding_dist.ndim}-d distribution")


def crossentropy_softmax_1hot(x, y_idx):
    """``(nll, softmax(x))`` for logits ``x`` and integer targets, in one
    stable op (Theano's function, without the bias)."""
    nll, sm = SoftmaxCrossEntropy1Hot()(x, y_idx)
    return nll, sm


_bce = Elemwise(BinaryCrossentropy())
_sbce = Elemwise(SigmoidBinaryCrossentropy())


def binary_crossentropy(output, target):
    """``-(target * log(output) + (1 - target) * log(1 - output))``, element-wise.

    ``output`` are probabilities; for logits use
    ``sigmoid_binary_crossentropy`` (``binary_crossentropy(sigmoid(z), t)``
    is rewritten into it).
    """
    return _bce(output, target)


def sigmoid_binary_crossentropy(output, target):
    """``binary_crossentropy(sigmoid(output), target)`` for logits ``output``,
    computed stably (``softplus(output) - output * target``), with the
    gradient ``sigmoid(output) - target``."""
    return _sbce(output, target)


def to_one_hot(y, nb_class, dtype=None):
    """A ``(len(y), nb_class)`` matrix of zeros with a one at ``[i, y[i]]``.

    ``y``: an integer vector of class indices; ``dtype``: the result's dtype
    (default ``config.floatX``).  An index outside ``[-nb_class, nb_class)``
    is an IndexError when the function runs.
    """
    from symgraph.config import config
    from symgraph.ops.alloc import zeros
    from symgraph.ops.subtensor import set_subtensor

    y = _index_vector(y, "to_one_hot")
    out = zeros((y.shape[0], nb_class), dtype=dtype or config.floatX)
    return set_subtensor(out[_arange(y.shape[0]), y], 1)


one_hot = to_one_hot
