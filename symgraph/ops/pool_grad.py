"""The gradients of ``Pool``: ``MaxPoolGrad``, ``AveragePoolGrad`` and
``DownsampleFactorMaxGradGrad`` (Theano's names and inputs).

* ``MaxPoolGrad(x, maxout, gz)``: the gradient of max pooling with respect to
  ``x``: each window's ``gz`` goes to the first position (row-major within
  the window) where ``x`` equals ``maxout``, a NaN matching a NaN (see
  ``ops/pool.py`` for why the first and not every tied position).  Where
  windows overlap, their contributions add up.
* ``AveragePoolGrad(x, gz)`` (modes ``sum``, ``average_inc_pad``,
  ``average_exc_pad``): each window's ``gz`` (divided by the window's divisor
  for the averages) is added to every input element of the window; ``x``
  gives only the shape.
* ``DownsampleFactorMaxGradGrad(x, maxout, ggx)``: the gradient of
  ``MaxPoolGrad`` with respect to ``gz``: per window, ``ggx`` at the position
  ``MaxPoolGrad`` routes to (0 where no position matches).  It is also max
  pooling's R-op.

Each is linear in its last input and piecewise constant in the others (their
gradients there are zero, as in Theano), and the three form a closed family:
the gradient of each is one of the others.
"""

import numpy as np

from symgraph.graph.basic import Apply
from symgraph.ops.pool import Pool, PoolBase, work_dtype
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import TensorType

__all__ = ["MaxPoolGrad", "AveragePoolGrad", "DownsampleFactorMaxGradGrad"]


def _zeros_like(x):
    from symgraph.ops.math import zeros_like

    return zeros_like(x)


def _first_match(region, maxval):
    """For each row of ``region`` (batch, window elements in row-major order):
    (whether some element equals ``maxval`` (a NaN matching a NaN), the
    index of the first one)."""
    hit = region == maxval[:, None]
    if region.dtype.kind == "f":
        hit |= np.isnan(region) & np.isnan(maxval)[:, None]
    return hit.any(axis=1), hit.argmax(axis=1)


class _MaxGradBase(PoolBase):
    """MaxPoolGrad and DownsampleFactorMaxGradGrad: inputs (x, maxout, g)."""

    accepted_modes = ("max",)

    def __init__(self, ndim=2, ignore_border=False, mode="max", ws=None, stride=None, pad=None):
        super().__init__(ndim, ignore_border, mode, ws, stride, pad)

    def _inputs(self, x, maxout, g, g_name):
        x = self._check_input(x)
        maxout = as_tensor_variable(maxout)
        if maxout.ndim != x.ndim:
            raise TypeError(f"{self}: the pooled maximum {maxout} ({maxout.ndim}-d) must have "
                            f"the rank of the input {x} ({x.ndim}-d)")
        if maxout.dtype != x.dtype:
            raise TypeError(f"{self}: the pooled maximum {maxout} has dtype {maxout.dtype}, "
                            f"but the input {x} has dtype {x.dtype}")
        return x, maxout, self._like_input(x, g, g_name)

    def _windows_of(self, x, maxout):
        """Yield (output index, input slices, has match, first match, batch view
        of x's window, count) per window; x and maxout as (batch, ...)."""
        nd = self.ndim
        xb, _ = self._as_batch(x)
        mb, _ = self._as_batch(maxout)
        if xb.shape[0] == 0:
            return
        for index, slices, count, _ in self.window_items(x.shape[-nd:]):
            sl = (slice(None),) + slices
            region = xb[sl].reshape(xb.shape[0], count)
            has, first = _first_match(region, mb[(slice(None),) + index])
            yield index, sl, has, first, count


class MaxPoolGrad(_MaxGradBase):
    """The gradient of max pooling: ``MaxPoolGrad(...)(x, maxout, gz)``, with
    ``maxout = Pool(...)(x)`` and ``gz`` the gradient of the cost with respect
    to it; returns the gradient with respect to ``x`` (x's shape)."""

    def make_node(self, x, maxout, gz):
        x, maxout, gz = self._inputs(x, maxout, gz, "output gradient")
        return Apply(self, [x, maxout, gz], [TensorType(x.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, maxout, gz = inputs
        self._check_pooled(x.shape, maxout, "pooled maximum")
        self._check_pooled(x.shape, gz, "output gradient")
        xb, _ = self._as_batch(x)
        gb, _ = self._as_batch(gz)
        gx = np.zeros(xb.shape, dtype=work_dtype(x.dtype))
        rows = np.arange(xb.shape[0])
        for index, sl, has, first, count in self._windows_of(x, maxout):
            contrib = np.zeros((xb.shape[0], count), dtype=gx.dtype)
            contrib[rows[has], first[has]] = gb[(slice(None),) + index][has]
            gx[sl] += contrib.reshape(gx[sl].shape)
        output_storage[0][0] = gx.reshape(x.shape).astype(x.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        x, maxout, _ = inputs
        (ggx,) = output_grads
        return [_zeros_like(x), _zeros_like(maxout),
                DownsampleFactorMaxGradGrad(**self.params())(x, maxout, ggx)]

    def R_op(self, inputs, eval_points):
        x, maxout, _ = inputs
        if eval_points[2] is not None:
            return [self(x, maxout, eval_points[2])]
        return [None if all(e is None for e in eval_points) else _zeros_like(x)]


class DownsampleFactorMaxGradGrad(_MaxGradBase):
    """The gradient of ``MaxPoolGrad`` with respect to its ``gz``:
    ``DownsampleFactorMaxGradGrad(...)(x, maxout, ggx)`` has maxout's shape and
    holds, per window, ``ggx`` at the position MaxPoolGrad routes to."""

    def make_node(self, x, maxout, ggx):
        x, maxout, ggx = self._inputs(x, maxout, ggx, "input-shaped gradient")
        return Apply(self, [x, maxout, ggx], [TensorType(x.dtype, shape=maxout.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, maxout, ggx = inputs
        self._check_pooled(x.shape, maxout, "pooled maximum")
        if ggx.shape != x.shape:
            raise ValueError(f"{self}: the input-shaped gradient has shape {ggx.shape} but "
                             f"the input has shape {x.shape}")
        ggb, _ = self._as_batch(ggx)
        out = np.zeros(maxout.shape, dtype=x.dtype)
        ob, _ = self._as_batch(out)
        rows = np.arange(ggb.shape[0])
        for index, sl, has, first, count in self._windows_of(x, maxout):
            region = ggb[sl].reshape(ggb.shape[0], count)
            ob[(slice(None),) + index] = np.where(has, region[rows, first], 0)
        output_storage[0][0] = ob.reshape(maxout.shape)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[1])]

    def L_op(self, inputs, outputs, output_grads):
        x, maxout, _ = inputs
        (gz,) = output_grads
        return [_zeros_like(x), _zeros_like(maxout), MaxPoolGrad(**self.params())(x, maxout, gz)]

    def R_op(self, inputs, eval_points):
        x, maxout, _ = inputs
        if eval_points[2] is not None:
            return [self(x, maxout, eval_points[2])]
        return [None if all(e is None for e in eval_points) else _zeros_like(maxout)]


class AveragePoolGrad(PoolBase):
    """The gradient of sum and average pooling: ``AveragePoolGrad(...)(x, gz)``
    spreads each window's ``gz`` over the window's input elements (divided by
    the window's divisor for the averages); the result has x's shape."""

    accepted_modes = ("sum", "average_inc_pad", "average_exc_pad")

    def __init__(self, ndim=2, ignore_border=False, mode="average_inc_pad", ws=None,
                 stride=None, pad=None):
        super().__init__(ndim, ignore_border, mode, ws, stride, pad)

    def make_node(self, x, gz):
        x = self._check_input(x)
        gz = self._like_input(x, gz, "output gradient")
        return Apply(self, [x, gz], [TensorType(x.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, gz = inputs
        nd = self.ndim
        self._check_pooled(x.shape, gz, "output gradient")
        xb, _ = self._as_batch(x)
        gb, _ = self._as_batch(gz)
        work = work_dtype(x.dtype)
        gx = np.zeros(xb.shape, dtype=work)
        if xb.shape[0]:
            for index, slices, count, count_inc in self.window_items(x.shape[-nd:]):
                value = gb[(slice(None),) + index].astype(work)
                if self.mode == "average_exc_pad":
                    value = value / work.type(count)
                elif self.mode == "average_inc_pad":
                    value = value / work.type(count_inc)
                gx[(slice(None),) + slices] += value.reshape((-1,) + (1,) * nd)
        output_storage[0][0] = gx.reshape(x.shape).astype(x.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def L_op(self, inputs, outputs, output_grads):
        x, _ = inputs
        (ggx,) = output_grads
        # The map gz -> gx is the transpose of the (linear) pooling.
        return [_zeros_like(x), Pool(mode=self.mode, **self.params())(ggx)]

    def R_op(self, inputs, eval_points):
        x, _ = inputs
        if eval_points[1] is not None:
            return [self(x, eval_points[1])]
        return [None if eval_points[0] is None else _zeros_like(x)]
