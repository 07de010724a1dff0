"""Batch normalization ops, as Theano's ``theano.tensor.nnet.bn`` defines them.

``AbstractBatchNormTrain(axes)(x, scale, bias, epsilon, running_average_factor
[, running_mean, running_var])`` normalizes ``x`` by the mean and variance of
its elements over ``axes`` (the batch statistics): it returns ``out = (x -
mean) * (scale * invstd) + bias``, ``mean`` and ``invstd = 1 / sqrt(var +
epsilon)``, and, given the running averages, their new values::

    running_mean * (1 - factor) + mean * factor
    running_var * (1 - factor) + (m / (m - 1)) * var * factor

with ``var`` the biased batch variance and ``m`` the number of elements per
channel (so the running variance averages the unbiased variance, as the seed
and cuDNN do; with one element per channel it is NaN, as NumPy's ``var(ddof=1)``).

``AbstractBatchNormInference(axes)(x, scale, bias, mean, var, epsilon)`` is
``(x - mean) * (scale / sqrt(var + epsilon)) + bias`` with given statistics.
``AbstractBatchNormTrainGrad(axes)(x, dy, scale, mean, invstd, epsilon)`` is
the train op's gradient wrt ``x``, ``scale`` and ``bias``.

Every parameter (scale, bias, the statistics) has ``x``'s rank with size 1
along ``axes``: the *reduced shape*.  The user functions in
``symgraph/tensor/nnet/bn.py`` reshape and broadcast them so.

Differences from the seed, on purpose:

* ``epsilon`` may be any positive value: cuDNN's lower bound (1e-5) binds only
  cuDNN, and these ops run on the CPU (a GPU rewrite that chooses cuDNN must
  check it there).
* The train op's gradient also follows its ``mean``, ``invstd`` and running
  average outputs, and ``epsilon`` and ``running_average_factor`` have
  gradients: the seed ignored all of these (its cost could only use ``out``).
* The statistics are computed in float32 for float16 data (stored as float16).

Native code: ``backends/cpu/nnet/batchnorm.py`` (one stable pass over ``x`` for
the statistics, one for the output).
"""

import warnings

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import DISCRETE_DTYPES, FLOAT_DTYPES, TensorType, upcast

__all__ = ["AbstractBatchNormTrain", "AbstractBatchNormTrainGrad",
           "AbstractBatchNormInference", "work_dtype"]


def _m():
    # Element-wise functions, reductions and gradients, imported when graphs
    # are built (they import the tensor package that imports this module).
    from symgraph import gradient
    from symgraph.ops import math, reduce, shape

    return math, reduce, shape, gradient


def work_dtype(dtype):
    """The dtype batch normalization computes in for ``dtype`` data: float16
    is widened to float32."""
    return "float32" if str(dtype) == "float16" else str(dtype)


def _is_zero(var):
    """True when ``var`` is known to be all zeros (``grad`` hands ops zeros for
    the outputs the cost does not use): terms it multiplies are skipped."""
    from symgraph.ops.constant_values import is_constant_value

    return is_constant_value(var, 0)


# -- building nodes ---------------------------------------------------------------------

class _BatchNormOp(Op):
    """An op normalizing over ``axes``: the axes checked when a node is built."""

    __props__ = ("axes",)

    def __init__(self, axes=(0,)):
        if isinstance(axes, (int, np.integer)) or not isinstance(axes, (tuple, list)):
            raise TypeError(f"{type(self).__name__}: axes must be a tuple of ints, got {axes!r}")
        if any(isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer))
               for a in axes):
            raise TypeError(f"{type(self).__name__}: axes must be a tuple of ints, got {axes!r}")
        if not axes:
            raise ValueError(f"{type(self).__name__}: there must be at least one axis to "
                             f"normalize over")
        if len(set(axes)) != len(axes):
            raise ValueError(f"{type(self).__name__}: axes {tuple(axes)} repeat an axis")
        self.axes = tuple(sorted(int(a) for a in axes))

    def _check_axes(self, ndim):
        if self.axes[0] < 0 or self.axes[-1] >= ndim:
            raise ValueError(f"{self}: axes should be in range(0, {ndim}) for a {ndim}-d "
                             f"input, but {self.axes} were given")

    def _tensors(self, names, values):
        """The tensor inputs in their common float dtype (ints become float64)."""
        tensors = [as_tensor_variable(v) for v in values]
        for name, t in zip(names, tensors):
            if not isinstance(t.type, TensorType) or t.dtype not in FLOAT_DTYPES + DISCRETE_DTYPES:
                raise TypeError(f"{self}: {name} ({t}) must be a real tensor, got {t.type}")
        dtype = upcast(*[t.dtype for t in tensors])
        if dtype not in FLOAT_DTYPES:
            dtype = "float64"
        math = _m()[0]
        return [math.cast(t, dtype) for t in tensors], dtype

    def _params(self, x, names, params):
        """Check that each parameter has ``x``'s rank and size 1 along the axes
        (declared broadcastable there when its static shape does not say)."""
        shape = _m()[2]
        self._check_axes(x.ndim)
        out = []
        for name, p in zip(names, params):
            if p.ndim != x.ndim:
                raise ValueError(f"{self}: {name} ({p}) must have the rank of x ({x.ndim}), "
                                 f"got {p.ndim} dimensions")
            for d in range(x.ndim):
                s, xs = p.type.shape[d], x.type.shape[d]
                if d in self.axes and s not in (None, 1):
                    raise ValueError(f"{self}: {name} ({p}) must have size 1 along the "
                                     f"normalized axes {self.axes}, but dimension {d} has "
                                     f"size {s}")
                if d not in self.axes and None not in (s, xs) and s != xs:
                    raise ValueError(f"{self}: {name} ({p}) has size {s} in dimension {d}, "
                                     f"where x has {xs}")
            if any(p.type.shape[a] != 1 for a in self.axes):
                p = shape.addbroadcast(p, *self.axes)
            out.append(p)
        return out

    def _scalar(self, name, value, dtype):
        """A 0-d float input (epsilon, the running average factor) in ``dtype``."""
        value = as_tensor_variable(value)
        if not isinstance(value.type, TensorType) or value.ndim != 0:
            raise TypeError(f"{self}: {name} must be a scalar, got {value} of type {value.type}")
        if value.dtype not in FLOAT_DTYPES + DISCRETE_DTYPES:
            raise TypeError(f"{self}: {name} must be real, got dtype {value.dtype}")
        return _m()[0].cast(value, dtype)

    def _reduced_type(self, x, params, dtype):
        """The type of a statistic: x's static shape with 1 along the axes."""
        shape = []
        for d in range(x.ndim):
            known = [s for s in [x.type.shape[d]] + [p.type.shape[d] for p in params]
                     if s is not None]
            shape.append(1 if d in self.axes else (known[0] if known else None))
        return TensorType(dtype, shape=tuple(shape))

    def _reduced_shape(self, x_shape):
        """The symbolic reduced shape for ``infer_shape``."""
        one = constant(1, dtype="int64")
        return tuple(one if d in self.axes else s for d, s in enumerate(x_shape))

    # -- run-time checks shared by the performs ----------------------------------------

    def _check_values(self, x, names, params):
        if x.ndim <= self.axes[-1]:
            raise ValueError(f"{self}: x has {x.ndim} dimensions, fewer than the axes "
                             f"{self.axes} need")
        want = tuple(1 if d in self.axes else s for d, s in enumerate(x.shape))
        for name, p in zip(names, params):
            if p.shape != want:
                raise ValueError(f"{self}: {name} has shape {p.shape}, but x of shape "
                                 f"{x.shape} normalized over axes {self.axes} needs {want}")

    def _count(self, x_shape):
        return int(np.prod([x_shape[a] for a in self.axes], dtype=np.int64))


def _statistics(x, axes, work):
    """Mean and biased variance of ``x`` over ``axes``, accumulated in float64
    as the C kernels accumulate (float32 sums of data far from zero lose the
    digits DebugMode compares), returned in ``work`` (NaN when empty)."""
    xw = x.astype(work, copy=False)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = xw.mean(axes, keepdims=True, dtype="float64")
        var = np.square(xw - mean).mean(axes, keepdims=True, dtype="float64")
    return xw, mean.astype(work), var.astype(work)


def unbiased_correction(m):
    """``m / (m - 1)``: the factor from the biased to the unbiased variance of
    ``m`` elements (inf for one element, so that the variance becomes NaN)."""
    return np.inf if m == 1 else m / (m - 1)


# -- the train op -----------------------------------------------------------------------

class AbstractBatchNormTrain(_BatchNormOp):
    """Batch normalization with batch statistics (see the module docstring).

    ``make_node(x, scale, bias, epsilon=1e-4, running_average_factor=0.1,
    running_mean=None, running_var=None)``; outputs ``out, mean, invstd`` and,
    with running averages, ``new_running_mean, new_running_var``.
    """

    _NAMES = ("x", "scale", "bias", "running_mean", "running_var")

    def make_node(self, x, scale, bias, epsilon=1e-4, running_average_factor=0.1,
                  running_mean=None, running_var=None):
        if (running_mean is None) != (running_var is None):
            raise ValueError(f"{self}: running_mean and running_var must be given together")
        running = running_mean is not None
        names = self._NAMES if running else self._NAMES[:3]
        values = [x, scale, bias] + ([running_mean, running_var] if running else [])
        tensors, dtype = self._tensors(names, values)
        x = tensors[0]
        params = self._params(x, names[1:], tensors[1:])
        work = work_dtype(dtype)
        epsilon = self._scalar("epsilon", epsilon, work)
        factor = self._scalar("running_average_factor", running_average_factor, work)
        stat = self._reduced_type(x, params, dtype)
        inputs = [x, params[0], params[1], epsilon, factor] + params[2:]
        outputs = [x.type.clone(dtype=dtype)(), stat(), stat()]
        outputs += [stat() for _ in params[2:]]
        return Apply(self, inputs, outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        reduced = self._reduced_shape(input_shapes[0])
        return [tuple(input_shapes[0])] + [reduced] * (len(node.outputs) - 1)

    def connection_pattern(self, node):
        # out, mean, invstd[, new_running_mean, new_running_var]
        rows = [[True, True, True, True, True],      # x
                [True, False, False, False, False],  # scale
                [True, False, False, False, False],  # bias
                [True, False, True, False, False],   # epsilon
                [False, False, False, True, True],   # running_average_factor
                [False, False, False, True, False],  # running_mean
                [False, False, False, False, True]]  # running_var
        n = len(node.outputs)
        return [row[:n] for row in rows[:len(node.inputs)]]

    def perform(self, node, inputs, output_storage):
        x, scale, bias, epsilon, factor = inputs[:5]
        running = inputs[5:]
        self._check_values(x, self._NAMES[1:3] + self._NAMES[3:3 + len(running)],
                           [scale, bias] + list(running))
        dtype = node.outputs[0].dtype
        work = work_dtype(dtype)
        xw, mean, var = _statistics(x, self.axes, work)
        with np.errstate(all="ignore"):
            invstd = (1 / np.sqrt(var + epsilon.astype(work))).astype(work)
            out = (xw - mean) * (scale.astype(work) * invstd) + bias.astype(work)
            results = [out, mean, invstd]
            if running:
                f = factor.astype(work)
                keep = (1 - f).astype(work)
                correction = np.asarray(unbiased_correction(self._count(x.shape)), dtype=work)
                results.append(running[0].astype(work) * keep + mean * f)
                results.append(running[1].astype(work) * keep + (var * correction) * f)
        for cell, value in zip(output_storage, results):
            cell[0] = np.asarray(value).astype(dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        math, reduce, _, gradient = _m()
        x, scale, bias, epsilon, factor = inputs[:5]
        running = inputs[5:]
        _, mean, invstd = outputs[:3]
        g_out, g_mean, g_invstd = output_grads[:3]
        axes = self.axes
        dtype = x.dtype
        m = math.cast(reduce._count(x, axes), dtype)
        x_diff = x - mean
        g_x, g_scale, g_bias = AbstractBatchNormTrainGrad(axes)(
            x, g_out, scale, mean, invstd, epsilon)
        # d out / d epsilon = -scale * x_diff * invstd**3 / 2, and sum(g_out *
        # x_diff) = g_scale / invstd.
        g_eps_terms = [g_scale * scale * math.sqr(invstd)]
        if not _is_zero(g_mean):
            g_x = g_x + g_mean / m
        if not _is_zero(g_invstd):
            # invstd = (var + eps)**-1/2 and d var / d x = 2 x_diff / m.
            cube = invstd * math.sqr(invstd)
            g_x = g_x - g_invstd * cube * x_diff / m
            g_eps_terms.append(g_invstd * cube)
        g_eps = -0.5 * reduce.sum(g_eps_terms[0] if len(g_eps_terms) == 1
                                  else g_eps_terms[0] + g_eps_terms[1])
        grads = [g_x, g_scale, g_bias, math.cast(g_eps, epsilon.dtype)]
        if not running:
            return grads + [gradient.disconnected_grad_for(factor)]
        g_rm, g_rv = output_grads[3:5]
        rm, rv = running
        keep = 1 - factor
        g_factor = []
        if not _is_zero(g_rm):
            g_x = g_x + g_rm * factor / m
            g_factor.append(reduce.sum(g_rm * (mean - rm)))
        if not _is_zero(g_rv):
            var = reduce.mean(math.sqr(x_diff), axis=axes, keepdims=True)
            # new_running_var has (m / (m - 1)) * var: d / d x = 2 x_diff / (m - 1).
            g_x = g_x + g_rv * factor * 2 * x_diff / (m - 1)
            g_factor.append(reduce.sum(g_rv * (var * m / (m - 1) - rv)))
        grads[0] = g_x
        if g_factor:
            total = g_factor[0] if len(g_factor) == 1 else g_factor[0] + g_factor[1]
            g_f = math.cast(total, factor.dtype)
        else:
            g_f = gradient.disconnected_grad_for(factor)
        return grads + [g_f, g_rm * keep, g_rv * keep]


# -- its gradient -----------------------------------------------------------------------

def train_grad_graph(axes, x, dy, scale, mean, invstd):
    """The outputs of ``AbstractBatchNormTrainGrad(axes)`` as an element-wise
    and reduction graph: ``[g_x, g_scale, g_bias]``."""
    math, reduce, _, _ = _m()
    x_diff = x - mean
    mean_dy_x_diff = reduce.mean(dy * x_diff, axis=axes, keepdims=True)
    c = dy * invstd - x_diff * mean_dy_x_diff * (invstd * math.sqr(invstd))
    g_x = scale * (c - reduce.mean(c, axis=axes, keepdims=True))
    g_scale = reduce.sum(dy * invstd * x_diff, axis=axes, keepdims=True)
    g_bias = reduce.sum(dy, axis=axes, keepdims=True)
    return [g_x, g_scale, g_bias]


class AbstractBatchNormTrainGrad(_BatchNormOp):
    """The gradient of ``AbstractBatchNormTrain``'s ``out`` wrt ``x``, ``scale``
    and ``bias``: ``make_node(x, dy, scale, x_mean, x_invstd, epsilon=1e-4)``
    with the train op's ``mean`` and ``invstd``.

    With ``c = dy * invstd - (x - mean) * mean(dy * (x - mean)) * invstd**3``:
    ``g_x = scale * (c - mean(c))``, ``g_scale = sum(dy * invstd * (x - mean))``,
    ``g_bias = sum(dy)`` (means and sums over the axes).  ``epsilon`` is kept
    as an input, as the seed's, for implementations that recompute invstd.
    """

    _NAMES = ("x", "dy", "scale", "x_mean", "x_invstd")

    def make_node(self, x, dy, scale, x_mean, x_invstd, epsilon=1e-4):
        tensors, dtype = self._tensors(self._NAMES, [x, dy, scale, x_mean, x_invstd])
        x, dy = tensors[:2]
        if dy.ndim != x.ndim:
            raise ValueError(f"{self}: dy ({dy}) must have the rank of x ({x.ndim}), got "
                             f"{dy.ndim} dimensions")
        params = self._params(x, self._NAMES[2:], tensors[2:])
        epsilon = self._scalar("epsilon", epsilon, work_dtype(dtype))
        stat = self._reduced_type(x, params, dtype)
        return Apply(self, [x, dy] + params + [epsilon],
                     [x.type.clone(dtype=dtype)(), stat(), stat()])

    def infer_shape(self, fgraph, node, input_shapes):
        reduced = self._reduced_shape(input_shapes[0])
        return [tuple(input_shapes[0]), reduced, reduced]

    def connection_pattern(self, node):
        return [[True, True, False],    # x
                [True, True, True],     # dy
                [True, False, False],   # scale
                [True, True, False],    # x_mean
                [True, True, False],    # x_invstd
                [False, False, False]]  # epsilon

    def perform(self, node, inputs, output_storage):
        x, dy, scale, mean, invstd, _ = inputs
        if dy.shape != x.shape:
            raise ValueError(f"{self}: dy has shape {dy.shape}, but x has shape {x.shape}")
        self._check_values(x, self._NAMES[2:], [scale, mean, invstd])
        dtype = node.outputs[0].dtype
        work = work_dtype(dtype)
        axes = self.axes
        xw, dyw = x.astype(work, copy=False), dy.astype(work, copy=False)
        mean, invstd = mean.astype(work), invstd.astype(work)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            x_diff = xw - mean
            mean_dy_x_diff = np.mean(dyw * x_diff, axis=axes, keepdims=True, dtype=work)
            c = dyw * invstd - x_diff * mean_dy_x_diff * invstd ** 3
            g_x = scale.astype(work) * (c - np.mean(c, axis=axes, keepdims=True, dtype=work))
            g_scale = np.sum(dyw * invstd * x_diff, axis=axes, keepdims=True, dtype=work)
            g_bias = np.sum(dyw, axis=axes, keepdims=True, dtype=work)
        for cell, value in zip(output_storage, (g_x, g_scale, g_bias)):
            cell[0] = np.asarray(value).astype(dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        # The second derivative: differentiate the op's formula as a graph.
        # The formula is built on stand-ins for the inputs, so that the
        # derivatives are partial ones (dy, for one, usually depends on scale
        # and x itself), then the inputs are put back.
        from symgraph.graph.basic import clone_replace

        _, _, _, gradient = _m()
        epsilon = inputs[5]
        if all(_is_zero(g) for g in output_grads):
            return [gradient.disconnected_grad_for(v) for v in inputs]
        stand_ins = [v.type() for v in inputs[:5]]
        expanded = train_grad_graph(self.axes, *stand_ins)
        known = {e: g for e, g in zip(expanded, output_grads) if not _is_zero(g)}
        grads = gradient.grad(None, stand_ins, known_grads=known, disconnected_inputs="ignore",
                              return_disconnected="Disconnected")
        connected = [i for i, g in enumerate(grads) if not gradient.is_disconnected(g)]
        real = clone_replace([grads[i] for i in connected], dict(zip(stand_ins, inputs[:5])))
        for i, g in zip(connected, real):
            grads[i] = g
        return list(grads) + [gradient.disconnected_grad_for(epsilon)]


# -- inference ----------------------------------------------------------------------------

class AbstractBatchNormInference(_BatchNormOp):
    """Batch normalization with given statistics: ``make_node(x, scale, bias,
    estimated_mean, estimated_variance, epsilon=1e-4)`` is ``(x - mean) *
    (scale / sqrt(var + epsilon)) + bias``."""

    _NAMES = ("x", "scale", "bias", "estimated_mean", "estimated_variance")

    def make_node(self, x, scale, bias, estimated_mean, estimated_variance, epsilon=1e-4):
        tensors, dtype = self._tensors(self._NAMES, [x, scale, bias, estimated_mean,
                                                     estimated_variance])
        x = tensors[0]
        params = self._params(x, self._NAMES[1:], tensors[1:])
        epsilon = self._scalar("epsilon", epsilon, work_dtype(dtype))
        return Apply(self, [x] + params + [epsilon], [x.type.clone(dtype=dtype)()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        x, scale, bias, mean, var, epsilon = inputs
        self._check_values(x, self._NAMES[1:], [scale, bias, mean, var])
        dtype = node.outputs[0].dtype
        work = work_dtype(dtype)
        w = [a.astype(work, copy=False) for a in (x, scale, bias, mean, var, epsilon)]
        with np.errstate(all="ignore"):
            out = (w[0] - w[3]) * (w[1] / np.sqrt(w[4] + w[5])) + w[2]
        output_storage[0][0] = np.asarray(out).astype(dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        math, reduce, _, _ = _m()
        x, scale, bias, mean, var, epsilon = inputs
        (dy,) = output_grads
        axes = self.axes
        var_eps = var + epsilon
        std = math.sqrt(var_eps)
        x_diff = x - mean
        sum_dy = reduce.sum(dy, axis=axes, keepdims=True)
        sum_dy_x_diff = reduce.sum(dy * x_diff, axis=axes, keepdims=True)
        g_x = dy * (scale / std)
        g_scale = sum_dy_x_diff / std
        g_mean = -sum_dy * (scale / std)
        g_var = -sum_dy_x_diff * (scale / (2 * var_eps * std))
        g_eps = math.cast(reduce.sum(g_var), epsilon.dtype)
        return [g_x, g_scale, sum_dy, g_mean, g_var, g_eps]
