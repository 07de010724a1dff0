"""Max pooling that keeps the argmax for the backward pass.

``MaxPoolGrad(x, maxout, gz)`` finds each window's maximum again, comparing
every element of ``x`` with ``maxout``: it reads ``x`` whole a second time.
When the graph computes ``Pool(x)`` anyway (a training step always does), the
forward pass can record where each maximum was, and the backward pass becomes
a scatter of ``gz`` that reads only the pooled-size arrays.  The rewrite
``local_max_pool_grad_from_argmax`` (``opt/pool_rewrites.py``) makes that
substitution; the user-facing graph keeps ``Pool`` and ``MaxPoolGrad``.

* ``MaxPoolWithArgmax(x) -> (maxout, argmax)``: ``maxout`` is
  ``Pool(mode='max')(x)``; ``argmax`` (same shape) holds, per window, the
  offset of the first maximum in row-major order within the *full* window
  of ``ws`` (padding and the image's end included, so the offset does not
  depend on clipping): offset = sum_i (pos_i - start_i) * prod(ws[i+1:]),
  start_i = out_i * stride_i - pad_i.  A NaN is the maximum of its window
  and the first NaN its argmax: the rule of ``MaxPoolGrad``.  The dtype is
  uint8 for windows of at most 256 elements, int32 beyond.
* ``MaxPoolGradFromArgmax(x, gz, argmax)``: ``MaxPoolGrad``'s result from
  the argmax (``x`` gives only the shape): each window's ``gz`` added at its
  argmax.
* ``MaxPoolArgmaxGather(x, ggx, argmax)``: the transpose (the gradient of
  the former with respect to ``gz``): per window, ``ggx`` at its argmax.
"""

import numpy as np

from symgraph.graph.basic import Apply
from symgraph.ops.pool import PoolBase, work_dtype
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import TensorType

__all__ = ["MaxPoolWithArgmax", "MaxPoolGradFromArgmax", "MaxPoolArgmaxGather",
           "argmax_dtype"]


def argmax_dtype(ws):
    """The dtype of the argmax of windows of shape ``ws``: uint8 when every
    offset fits, else int32."""
    return "uint8" if int(np.prod(ws)) <= 256 else "int32"


def _zeros_like(x):
    from symgraph.ops.math import zeros_like

    return zeros_like(x)


class _ArgmaxBase(PoolBase):
    """Max pooling parameters plus the walk over windows with their argmax."""

    accepted_modes = ("max",)

    def __init__(self, ndim=2, ignore_border=False, mode="max", ws=None, stride=None, pad=None):
        super().__init__(ndim, ignore_border, mode, ws, stride, pad)

    def _positions(self, img_shape, argmax_b, index):
        """The input positions (a tuple of int arrays, one per pooled dim) of the
        argmax ``argmax_b[:, index]`` of window ``index`` for every batch row;
        ValueError for an offset outside the window's input elements."""
        offsets = argmax_b[(slice(None),) + index].astype(np.int64)
        coords = np.unravel_index(np.clip(offsets, 0, int(np.prod(self.ws)) - 1), self.ws)
        pos = [j * st - pd + c for j, c, st, pd in zip(index, coords, self.stride, self.pad)]
        bad = (offsets < 0) | (offsets >= int(np.prod(self.ws)))
        for p, size in zip(pos, img_shape):
            bad |= (p < 0) | (p >= size)
        if bad.any():
            raise ValueError(f"{self}: the argmax holds an offset outside its window "
                             f"(window {index}); it must come from MaxPoolWithArgmax with "
                             f"the same parameters")
        return tuple(pos)

    def _check_argmax(self, x, argmax):
        x = self._check_input(x)
        argmax = as_tensor_variable(argmax)
        if argmax.ndim != x.ndim:
            raise TypeError(f"{self}: the argmax {argmax} ({argmax.ndim}-d) must have the "
                            f"rank of the input {x} ({x.ndim}-d)")
        if argmax.dtype not in ("uint8", "int32", "int64"):
            raise TypeError(f"{self}: the argmax {argmax} must be uint8, int32 or int64, "
                            f"got {argmax.dtype}")
        return x, argmax


class MaxPoolWithArgmax(_ArgmaxBase):
    """Max pooling with a second output, the argmax of each window (see the
    module docstring); ``MaxPoolWithArgmax(...)(x) -> [maxout, argmax]``."""

    def make_node(self, x):
        x = self._check_input(x)
        shape = self.static_out_shape(x.type)
        return Apply(self, [x], [TensorType(x.dtype, shape=shape)(),
                                 TensorType(argmax_dtype(self.ws), shape=shape)()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        nd = self.ndim
        batch, lead = self._as_batch(x)
        pooled = self.out_size(x.shape[-nd:])
        out = np.empty((batch.shape[0],) + pooled, dtype=x.dtype)
        arg = np.empty((batch.shape[0],) + pooled, dtype=node.outputs[1].dtype)
        if out.size:
            from symgraph.ops.pool_grad import _first_match

            for index, slices, count, _ in self.window_items(x.shape[-nd:]):
                region = batch[(slice(None),) + slices].reshape(batch.shape[0], count)
                value = region.max(axis=1)
                _, first = _first_match(region, value)
                # the position within the clipped window, then in the full one
                clipped = np.unravel_index(first, [s.stop - s.start for s in slices])
                offset = np.zeros(batch.shape[0], dtype=np.int64)
                for i, (j, c, s) in enumerate(zip(index, clipped, slices)):
                    start = j * self.stride[i] - self.pad[i]
                    offset = offset * self.ws[i] + (s.start - start + c)
                out[(slice(None),) + index] = value
                arg[(slice(None),) + index] = offset
        output_storage[0][0] = out.reshape(lead + pooled)
        output_storage[1][0] = arg.reshape(lead + pooled)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = input_shapes[0]
        pooled = tuple(shape[:-self.ndim]) + tuple(self.symbolic_out_size(shape[-self.ndim:]))
        return [pooled, pooled]

    def connection_pattern(self, node):
        # the argmax is piecewise constant in x: no gradient flows through it
        return [[True, False]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import is_disconnected

        (x,), gz = inputs, output_grads[0]
        if is_disconnected(gz):
            return [_zeros_like(x)]
        return [MaxPoolGradFromArgmax(**self.params())(x, gz, outputs[1])]


class MaxPoolGradFromArgmax(_ArgmaxBase):
    """The gradient of max pooling from the argmax:
    ``MaxPoolGradFromArgmax(...)(x, gz, argmax)`` adds each window's ``gz`` at
    its argmax; the result has x's shape (``x`` gives only the shape)."""

    def make_node(self, x, gz, argmax):
        x, argmax = self._check_argmax(x, argmax)
        gz = self._like_input(x, gz, "output gradient")
        return Apply(self, [x, gz, argmax], [TensorType(x.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, gz, argmax = inputs
        nd = self.ndim
        self._check_pooled(x.shape, gz, "output gradient")
        self._check_pooled(x.shape, argmax, "argmax")
        xb, _ = self._as_batch(x)
        gb, _ = self._as_batch(gz)
        ab, _ = self._as_batch(argmax)
        gx = np.zeros(xb.shape, dtype=work_dtype(x.dtype))
        rows = np.arange(xb.shape[0])
        if xb.shape[0]:
            for index, _, _, _ in self.window_items(x.shape[-nd:]):
                pos = self._positions(x.shape[-nd:], ab, index)
                # one window: every batch row hits its own plane, no collisions
                gx[(rows,) + pos] += gb[(slice(None),) + index]
        output_storage[0][0] = gx.reshape(x.shape).astype(x.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def connection_pattern(self, node):
        return [[False], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        x, _, argmax = inputs
        (ggx,) = output_grads
        return [disconnected_grad_for(x),
                MaxPoolArgmaxGather(**self.params())(x, ggx, argmax),
                disconnected_grad_for(argmax)]


class MaxPoolArgmaxGather(_ArgmaxBase):
    """Per window, the element of ``ggx`` (x's shape) at the window's argmax:
    ``MaxPoolArgmaxGather(...)(x, ggx, argmax)`` has argmax's shape; the
    transpose of ``MaxPoolGradFromArgmax`` (its gradient with respect to gz)."""

    def make_node(self, x, ggx, argmax):
        x, argmax = self._check_argmax(x, argmax)
        ggx = self._like_input(x, ggx, "input-shaped gradient")
        return Apply(self, [x, ggx, argmax],
                     [TensorType(x.dtype, shape=argmax.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, ggx, argmax = inputs
        nd = self.ndim
        self._check_pooled(x.shape, argmax, "argmax")
        if ggx.shape != x.shape:
            raise ValueError(f"{self}: the input-shaped gradient has shape {ggx.shape} but "
                             f"the input has shape {x.shape}")
        ggb, _ = self._as_batch(ggx)
        ab, _ = self._as_batch(argmax)
        out = np.zeros(ab.shape, dtype=x.dtype)
        rows = np.arange(ggb.shape[0])
        if ggb.shape[0]:
            for index, _, _, _ in self.window_items(x.shape[-nd:]):
                pos = self._positions(x.shape[-nd:], ab, index)
                out[(slice(None),) + index] = ggb[(rows,) + pos]
        output_storage[0][0] = out.reshape(argmax.shape)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[2])]

    def connection_pattern(self, node):
        return [[False], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        x, _, argmax = inputs
        (gz,) = output_grads
        return [disconnected_grad_for(x),
                MaxPoolGradFromArgmax(**self.params())(x, gz, argmax),
                disconnected_grad_for(argmax)]
