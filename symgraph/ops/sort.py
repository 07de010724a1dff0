"""Sorting and gathering: ``sort``, ``argsort``, ``take``, ``take_along_axis``,
and ``repeat`` with a count per element.

``Sort`` and ``ArgSort`` run NumPy's sorts (no native kernel; the schedule
calls their ``perform``).  The gradient of ``sort`` sends each output
gradient back to the element that landed there; ``take`` and
``take_along_axis`` are advanced indexing, so their gradients are the
indexing ones.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["Sort", "ArgSort", "sort", "argsort", "take", "take_along_axis",
           "RepeatIndices", "repeat"]

_KINDS = ("quicksort", "mergesort", "heapsort", "stable")


class _SortBase(Op):
    __props__ = ("axis", "kind")

    def __init__(self, axis=-1, kind="quicksort"):
        if kind not in _KINDS:
            raise ValueError(f"{type(self).__name__}: kind must be one of {_KINDS}, got "
                             f"{kind!r}")
        self.axis, self.kind = int(axis), kind

    def _check(self, x):
        x = as_tensor_variable(x)
        if not -x.ndim <= self.axis < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{self}: axis {self.axis} is out of range for {x} "
                             f"({x.ndim}-d); flatten a scalar first")
        if x.dtype.startswith("complex"):
            raise TypeError(f"{self}: complex values have no order here; sort their real "
                            f"or imaginary part")
        return x

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class Sort(_SortBase):
    """``np.sort(x, axis, kind)``."""

    def make_node(self, x):
        x = self._check(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.sort(inputs[0], axis=self.axis, kind=self.kind)

    def grad(self, inputs, output_grads):
        (x,), (gz,) = inputs, output_grads
        order = ArgSort(self.axis, self.kind)(x)
        inverse = ArgSort(self.axis, "stable")(order)  # where each element went
        return [take_along_axis(gz, inverse, self.axis)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        order = ArgSort(self.axis, self.kind)(inputs[0])
        return [take_along_axis(eval_points[0], order, self.axis)]


class ArgSort(_SortBase):
    """``np.argsort(x, axis, kind)``: int64 indices."""

    def make_node(self, x):
        x = self._check(x)
        return Apply(self, [x], [TensorType("int64", shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.argsort(inputs[0], axis=self.axis, kind=self.kind) \
            .astype("int64", copy=False)

    def connection_pattern(self, node):
        return [[False]]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [disconnected_grad_for(inputs[0])]


def _flat_or(x, axis):
    from symgraph.ops.shape import flatten

    x = as_tensor_variable(x)
    return (flatten(x, 1), 0) if axis is None else (x, axis)


def _check_order(order, who):
    if order is not None:
        raise NotImplementedError(f"{who}: order= (sorting structured arrays) has no "
                                  f"symbolic equivalent")


def sort(a, axis=-1, kind="quicksort", order=None):
    """``a`` sorted along ``axis`` (the flattened ``a`` when axis is None), as
    NumPy's ``sort``; differentiable."""
    _check_order(order, "sort")
    a, axis = _flat_or(a, axis)
    return Sort(axis, kind)(a)


def argsort(a, axis=-1, kind="quicksort", order=None):
    """The int64 indices that sort ``a`` along ``axis`` (NumPy's ``argsort``)."""
    _check_order(order, "argsort")
    a, axis = _flat_or(a, axis)
    return ArgSort(axis, kind)(a)


def _axis_grid(shape, ndim, axis):
    """``arange(shape[axis])`` shaped to broadcast along dimension ``axis``."""
    from symgraph.ops.alloc import arange

    pattern = ["x"] * ndim
    pattern[axis] = 0
    return arange(shape[axis]).dimshuffle(pattern)


def take_along_axis(a, indices, axis):
    """``np.take_along_axis``: ``out[..., i, ...] = a[..., indices[..., i, ...], ...]``
    with ``indices`` of ``a``'s rank; differentiable in ``a``."""
    from symgraph.ops.shape import _normalize_axis

    a, indices = as_tensor_variable(a), as_tensor_variable(indices)
    if indices.ndim != a.ndim or indices.dtype not in INT_DTYPES:
        raise TypeError(f"take_along_axis: indices must be an integer tensor of {a.ndim} "
                        f"dimensions, got {indices.type}")
    axis = _normalize_axis(axis, a.ndim, "take_along_axis")
    index = tuple(indices if d == axis else _axis_grid(a.shape, a.ndim, d)
                  for d in range(a.ndim))
    return a[index]


def take(a, indices, axis=None, mode="raise"):
    """NumPy's ``take``: the entries of ``a`` (flattened when ``axis`` is None)
    at ``indices`` (any shape) along ``axis``.  ``mode``: 'raise' (an index
    out of range is an error), 'wrap' (taken modulo the length) or 'clip'."""
    from symgraph.ops import math
    from symgraph.ops.shape import _normalize_axis

    a, axis = _flat_or(a, axis)
    indices = as_tensor_variable(indices)
    if indices.dtype not in INT_DTYPES:
        raise TypeError(f"take: indices must be integers, got {indices} of type "
                        f"{indices.type}")
    axis = _normalize_axis(axis, a.ndim, "take")
    if mode == "wrap":
        indices = math.mod(indices, a.shape[axis])
    elif mode == "clip":
        indices = math.clip(indices, 0, a.shape[axis] - 1)
    elif mode != "raise":
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return a[(slice(None),) * axis + (indices,)]


class RepeatIndices(Op):
    """``np.repeat(arange(len(repeats)), repeats)``: the positions that
    ``repeat`` reads, for a vector of counts."""

    __props__ = ()

    def make_node(self, repeats):
        repeats = as_tensor_variable(repeats)
        if repeats.ndim != 1 or repeats.dtype not in INT_DTYPES:
            raise TypeError(f"repeat: repeats must be an integer vector or scalar, got "
                            f"{repeats.type}")
        return Apply(self, [repeats], [TensorType("int64", shape=(None,))()])

    def perform(self, node, inputs, output_storage):
        (repeats,) = inputs
        if (repeats < 0).any():
            raise ValueError(f"repeat: counts must be non-negative, got {repeats}")
        output_storage[0][0] = np.repeat(np.arange(len(repeats), dtype="int64"), repeats)

    def connection_pattern(self, node):
        return [[False]]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [disconnected_grad_for(inputs[0])]


def repeat(x, repeats, axis=None):
    """NumPy's ``repeat``: each element of ``x`` (flattened when ``axis`` is
    None) repeated ``repeats`` times along ``axis``; ``repeats`` is a count
    or an integer vector of one count per element."""
    from symgraph.ops import alloc

    repeats = as_tensor_variable(repeats)
    if repeats.ndim == 0:
        return alloc.repeat(x, repeats, axis)
    x, axis = _flat_or(x, axis)
    return take(x, RepeatIndices()(repeats), axis)
