"""Softmax and log-softmax: ``Softmax``, ``LogSoftmax`` and ``SoftmaxGrad``.

``softmax(x, axis)`` is ``exp(x) / sum(exp(x), axis)``, computed as NumPy and
cuDNN do: the maximum over ``axis`` is subtracted first, so that rows of large
logits (1000) give finite results.  ``logsoftmax`` computes ``x - max -
log(sum(exp(x - max)))`` directly, so it stays finite where ``log(softmax(x))``
would be ``log(0) = -inf``; the stabilize rewrite ``local_log_softmax``
(``opt/stabilize.py``) turns the latter into the former, and
``local_logsoftmax_grad`` does the same for its gradient.

``axis`` is any dimension (negative counts from the end) or None for all the
elements at once (PyTensor's meaning); Theano's ``T.nnet.softmax`` is the
``axis=-1`` case on a matrix.  Integer and bool inputs are converted to float
first (Theano's ``upgrade_to_float``: small ints to float32, others to
float64); float16 is computed in float32 and returned as float16.

The gradient of ``Softmax`` is its own op, ``SoftmaxGrad(axis)(dy, sm)``
(``dy * sm - sm * sum(dy * sm, axis)``), rather than a graph of element-wise
nodes: that is what lets ``local_logsoftmax_grad`` recognise the gradient of
``log(softmax(x))``, whose ``dy = g / sm`` divides by a softmax that may have
underflowed to zero.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import DISCRETE_DTYPES, TensorType, upgrade_to_float

__all__ = ["softmax", "logsoftmax", "log_softmax"]


def _m():
    # The element-wise functions and the reductions, imported when graphs are
    # built: ops.math imports elemwise, which is imported by tensor/__init__
    # before this module.
    from symgraph.ops import math, reduce

    return math, reduce


def _normalize_axis(axis, ndim, name):
    """``axis`` as a dimension in ``range(ndim)``, or None; errors name ``name``."""
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}: axis must be an int or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for a {ndim}-d input"
                         + (" (use axis=None for a 0-d input)" if ndim == 0 else ""))
    return int(axis) % ndim


def _float_input(x, name):
    """``x`` as a float tensor: ints and bools converted, complex refused."""
    x = as_tensor_variable(x)
    if x.dtype in DISCRETE_DTYPES:
        math, _ = _m()
        return math.cast(x, upgrade_to_float(x.dtype))
    if not x.dtype.startswith("float"):
        raise TypeError(f"{name}: the input {x} must be real, got dtype {x.dtype}")
    return x


def _sum_keep(var, axis):
    """``sum(var, axis, keepdims=True)`` (axis None: every element)."""
    _, reduce = _m()
    return reduce.sum(var, axis=axis, keepdims=True)


def _work(array):
    """``array`` in the dtype the arithmetic runs in: float16 is widened."""
    return array.astype("float32") if array.dtype == np.float16 else array


class _AxisOp(Op):
    """An op over one ``axis`` of its input (None: all of it): the axis is
    checked against the input's rank when a node is built."""

    __props__ = ("axis",)

    def __init__(self, axis=-1):
        if axis is not None and (isinstance(axis, (bool, np.bool_)) or
                                 not isinstance(axis, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}: axis must be an int or None, got {axis!r}")
        self.axis = None if axis is None else int(axis)

    def _axis(self, ndim):
        """The op's axis for an ``ndim``-d input, in range(ndim), or None."""
        return _normalize_axis(self.axis, ndim, str(self))

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[-1])]


class _Unary(_AxisOp):
    """Softmax and LogSoftmax: one float input, an output of its type."""

    def make_node(self, x):
        x = _float_input(x, str(self))
        self._axis(x.ndim)  # the error for an axis out of range, now rather than later
        return Apply(self, [x], [x.type.clone()()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        out_dtype = node.outputs[0].dtype
        if x.size == 0:
            output_storage[0][0] = np.empty(x.shape, dtype=out_dtype)
            return
        # A row of -inf (or one with +inf) is NaN, as NumPy's and SciPy's.
        with np.errstate(invalid="ignore", over="ignore"):
            result = self.compute(_work(x), self._axis(x.ndim))
        output_storage[0][0] = np.asarray(result).astype(out_dtype, copy=False)


class Softmax(_Unary):
    """``exp(x) / sum(exp(x), axis)``, the maximum over ``axis`` subtracted
    first so that large logits do not overflow."""

    @staticmethod
    def compute(x, axis):
        """The NumPy computation on a float32/float64 array."""
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)

    def L_op(self, inputs, outputs, output_grads):
        return [SoftmaxGrad(self.axis)(output_grads[0], outputs[0])]

    def R_op(self, inputs, eval_points):
        # The Jacobian diag(sm) - sm sm^T is symmetric: J v is SoftmaxGrad(v, sm).
        if eval_points[0] is None:
            return [None]
        return [SoftmaxGrad(self.axis)(eval_points[0], self(inputs[0]))]


class LogSoftmax(_Unary):
    """``x - log(sum(exp(x), axis))``, computed as ``(x - max) -
    log(sum(exp(x - max)))``: finite wherever x is, unlike ``log(softmax(x))``."""

    @staticmethod
    def compute(x, axis):
        """The NumPy computation on a float32/float64 array."""
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))

    def L_op(self, inputs, outputs, output_grads):
        math, _ = _m()
        (gz,), (out,) = output_grads, outputs
        axis = self._axis(out.ndim)
        # exp(out) is the softmax: d logsoftmax_i / d x_k = delta_ik - sm_k.
        return [gz - math.exp(out) * _sum_keep(gz, axis)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        math, _ = _m()
        (x,), (v,) = inputs, eval_points
        axis = self._axis(x.ndim)
        return [v - _sum_keep(math.exp(self(x)) * v, axis)]


class SoftmaxGrad(_AxisOp):
    """The gradient of ``Softmax(axis)``: ``SoftmaxGrad(axis)(dy, sm)`` is
    ``dy * sm - sm * sum(dy * sm, axis)``, for ``sm`` a softmax output and
    ``dy`` the gradient of the cost with respect to it."""

    def make_node(self, dy, sm):
        math, _ = _m()
        sm = as_tensor_variable(sm)
        dy = as_tensor_variable(dy)
        if not sm.dtype.startswith("float"):
            raise TypeError(f"{self}: the softmax input {sm} must be a float tensor, "
                            f"got dtype {sm.dtype}")
        if dy.ndim != sm.ndim:
            raise TypeError(f"{self}: the gradient {dy} ({dy.ndim}-d) and the softmax "
                            f"{sm} ({sm.ndim}-d) must have the same rank")
        self._axis(sm.ndim)
        if dy.dtype != sm.dtype:
            dy = math.cast(dy, sm.dtype)
        if any(d == 1 and s != 1 for d, s in zip(dy.type.shape, sm.type.shape)):
            # A broadcast gradient: give it sm's shape, so that the sum over
            # the axis counts each of its elements once per position.
            dy = math.second(sm, dy)
        return Apply(self, [dy, sm], [sm.type.clone()()])

    def perform(self, node, inputs, output_storage):
        dy, sm = inputs
        out_dtype = node.outputs[0].dtype
        if dy.shape != sm.shape:
            raise ValueError(f"{self}: the gradient has shape {dy.shape} but the softmax "
                             f"has shape {sm.shape}")
        if sm.size == 0:
            output_storage[0][0] = np.empty(sm.shape, dtype=out_dtype)
            return
        dy, sm = _work(dy), _work(sm)
        dy_sm = dy * sm
        result = dy_sm - sm * np.sum(dy_sm, axis=self._axis(sm.ndim), keepdims=True)
        output_storage[0][0] = np.asarray(result).astype(out_dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        (dy, sm), (g,) = inputs, output_grads
        axis = self._axis(sm.ndim)
        # out_i = sm_i * (dy_i - s), s = sum_j dy_j sm_j.  The map dy -> out is
        # the (symmetric) softmax Jacobian; d out_i / d sm_k = delta_ik (dy_i - s)
        # - sm_i dy_k.
        g_dy = SoftmaxGrad(self.axis)(g, sm)
        g_sm = g * (dy - _sum_keep(dy * sm, axis)) - dy * _sum_keep(g * sm, axis)
        return [g_dy, g_sm]

    def R_op(self, inputs, eval_points):
        (dy, sm), (e_dy, e_sm) = inputs, eval_points
        axis = self._axis(sm.ndim)
        terms = []
        if e_dy is not None:
            terms.append(SoftmaxGrad(self.axis)(e_dy, sm))
        if e_sm is not None:
            terms.append(e_sm * (dy - _sum_keep(dy * sm, axis)) - sm * _sum_keep(dy * e_sm, axis))
        if not terms:
            return [None]
        return [terms[0] if len(terms) == 1 else terms[0] + terms[1]]


# -- user functions -------------------------------------------------------------------

def _apply(op_class, name, x, axis):
    x = _float_input(x, name)
    # The axis in range(ndim), so that softmax(x, -1) and softmax(x, 1) merge.
    return op_class(_normalize_axis(axis, x.ndim, name))(x)


_NO_AXIS = object()


def softmax(x, axis=_NO_AXIS):
    """``exp(x) / sum(exp(x), axis, keepdims=True)``, stable for large ``x``.

    ``axis``: the dimension to normalize over (default the last, Theano's
    ``T.nnet.softmax`` on a matrix), or None for all the elements together.
    Called as Theano 1.0 called it, without ``axis``, a vector gives a 1 x n
    matrix (Theano padded vectors on the left; the slot-filling tutorial
    indexes ``s[:, 0, :]``); ``softmax(v, axis=-1)`` is a vector.
    Int and bool inputs are converted to float first; float16 is computed in
    float32.  ``log(softmax(x))`` is rewritten to ``logsoftmax(x)``.
    """
    if axis is _NO_AXIS:
        axis = -1
        if getattr(x, "ndim", np.ndim(x)) == 1:
            from symgraph.ops.shape import shape_padleft

            x = shape_padleft(_float_input(x, "softmax"), 1)
    return _apply(Softmax, "softmax", x, axis)


def logsoftmax(x, axis=-1):
    """``log(softmax(x, axis))``, computed as ``x - logsumexp(x, axis)``: finite
    wherever ``x`` is, with a gradient that stays finite too."""
    return _apply(LogSoftmax, "logsoftmax", x, axis)


log_softmax = logsoftmax
