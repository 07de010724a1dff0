"""Pooling whose window, stride and padding are symbolic (Theano's ``Pool``
took them as inputs): ``pool_2d(x, ws=T.ivector())``.

``PoolDynamic(ndim, ignore_border, mode)`` has inputs ``(x, ws, stride,
pad)``, three int vectors of length ``ndim``.  Each call builds the static
:class:`~symgraph.ops.pool.Pool` for the values it gets and runs that op's
``perform``, so the semantics (output size, padding, NaN, ties) are
``Pool``'s and bad values get ``Pool``'s errors.  The pooled dimensions have
no static size.  When the rewrites find the parameters constant, the
``pool_dynamic_static`` rewrite (``opt/pool_rewrites.py``) puts the static
ops, and their native kernels, in its place.
"""

from symgraph.graph.basic import Apply, Op
from symgraph.ops.pool import MODES, Pool, _ALIASES
from symgraph.ops.pool_grad import AveragePoolGrad, MaxPoolGrad
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["PoolDynamic", "PoolDynamicGrad", "as_window_vector"]


def as_window_vector(value, nd, what):
    """``value`` (a tuple of ints or int scalars, or an int vector) as an int64
    vector of static length ``nd``."""
    from symgraph.ops.math import cast
    from symgraph.ops.shape import specify_shape

    if isinstance(value, (tuple, list)):
        if len(value) != nd:
            raise ValueError(f"pool: {what} must have {nd} entries (one per pooled "
                             f"dimension), got {value!r}")
        from symgraph.ops.join import stack

        value = stack([as_tensor_variable(v) for v in value])
    vec = as_tensor_variable(value)
    if vec.ndim != 1 or vec.dtype not in INT_DTYPES:
        raise TypeError(f"pool: {what} must be an integer vector of length {nd}, got {vec} "
                        f"of type {vec.type}")
    if vec.type.shape[0] is None:
        vec = specify_shape(vec, (nd,))
    elif vec.type.shape[0] != nd:
        raise ValueError(f"pool: {what} must have {nd} entries, got {vec.type.shape[0]}")
    return vec if vec.dtype == "int64" else cast(vec, "int64")


class _DynamicBase(Op):
    __props__ = ("ndim", "ignore_border", "mode")

    def __init__(self, ndim=2, ignore_border=False, mode="max"):
        mode = _ALIASES.get(mode, mode)
        if ndim not in (2, 3) or mode not in MODES:
            raise ValueError(f"{type(self).__name__}: ndim must be 2 or 3 and mode one of "
                             f"{MODES}, got {ndim!r}, {mode!r}")
        self.ndim, self.ignore_border, self.mode = int(ndim), bool(ignore_border), mode

    def static_params(self, ws, stride, pad):
        """The keywords of the static ops for these parameter values."""
        return dict(ndim=self.ndim, ignore_border=self.ignore_border,
                    ws=tuple(int(v) for v in ws), stride=tuple(int(v) for v in stride),
                    pad=tuple(int(v) for v in pad))

    def _params(self, ws, stride, pad):
        return [as_window_vector(v, self.ndim, what)
                for v, what in ((ws, "ws"), (stride, "stride"), (pad, "pad"))]

    def _check_x(self, x):
        x = as_tensor_variable(x)
        if x.ndim < self.ndim or x.dtype not in FLOAT_DTYPES + INT_DTYPES:
            raise TypeError(f"{self}: the input {x} must be a real tensor of at least "
                            f"{self.ndim} dimensions, got {x.type}")
        if self.mode.startswith("average") and x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: average pooling needs a float input, got {x.dtype}")
        return x

    def connection_pattern(self, node):
        n_data = len(node.inputs) - 3
        return [[True]] * n_data + [[False]] * 3


class PoolDynamic(_DynamicBase):
    """``Pool`` with the parameters as inputs: ``PoolDynamic(...)(x, ws, stride, pad)``."""

    def make_node(self, x, ws, stride, pad):
        x = self._check_x(x)
        params = self._params(ws, stride, pad)
        shape = x.type.shape[:-self.ndim] + (None,) * self.ndim
        return Apply(self, [x] + params, [TensorType(x.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        x, ws, stride, pad = inputs
        Pool(mode=self.mode, **self.static_params(ws, stride, pad)).perform(
            None, [x], output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops import math

        _, ws, stride, pad = node.inputs
        shape = input_shapes[0]
        out = list(shape[:-self.ndim])
        for d, size in enumerate(shape[-self.ndim:]):
            w, s, p = ws[d], stride[d], pad[d]
            n = size + 2 * p
            if self.ignore_border:
                pooled = math.maximum((n - w) // s + 1, 0)
            else:
                pooled = math.switch(math.ge(s, w), (n - 1) // s + 1,
                                     math.maximum((n - 1 - w) // s + 1, 0) + 1)
            out.append(math.cast(math.switch(math.eq(size, 0), 0, pooled), "int64"))
        return [tuple(out)]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        x, ws, stride, pad = inputs
        grad_op = PoolDynamicGrad(self.ndim, self.ignore_border, self.mode)
        return [grad_op(x, outputs[0], output_grads[0], ws, stride, pad)] + \
            [disconnected_grad_for(v) for v in (ws, stride, pad)]


class PoolDynamicGrad(_DynamicBase):
    """The gradient of :class:`PoolDynamic` with respect to ``x``:
    ``PoolDynamicGrad(...)(x, out, gz, ws, stride, pad)`` (``out``, the
    pooled output, is read by max pooling only)."""

    def make_node(self, x, out, gz, ws, stride, pad):
        x = self._check_x(x)
        out, gz = as_tensor_variable(out), as_tensor_variable(gz)
        if out.ndim != x.ndim or gz.ndim != x.ndim:
            raise TypeError(f"{self}: the pooled output and its gradient must have the "
                            f"input's rank {x.ndim}")
        if gz.dtype != x.dtype:
            from symgraph.ops.math import cast

            gz = cast(gz, x.dtype)
        params = self._params(ws, stride, pad)
        return Apply(self, [x, out, gz] + params, [x.type()])

    def static_op(self, ws, stride, pad):
        """The static gradient op for these parameter values."""
        params = self.static_params(ws, stride, pad)
        if self.mode == "max":
            return MaxPoolGrad(**params)
        return AveragePoolGrad(mode=self.mode, **params)

    def perform(self, node, inputs, output_storage):
        x, out, gz, ws, stride, pad = inputs
        op = self.static_op(ws, stride, pad)
        data = [x, out, gz] if self.mode == "max" else [x, gz]
        op.perform(None, data, output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import grad_not_implemented

        return [grad_not_implemented(self, i, v, "second derivatives of pooling with a "
                                     "symbolic window") for i, v in enumerate(inputs)]
