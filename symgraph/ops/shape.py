"""Shape ops: reading a shape, declaring one, reshaping and rearranging axes.

``shape(x)`` is an int64 vector whose static length is ``x.ndim``; ``shape_i(x,
i)`` one entry of it (a constant when the static shape knows it).
``specify_shape`` and ``unbroadcast`` change what the *type* says about a shape
without touching the data.  ``reshape`` returns a view when NumPy can.

Reshaping (``reshape flatten``) lives in ``ops/reshape.py``, joining
(``concatenate stack split``) in ``ops/join.py`` and allocation (``alloc zeros
ones eye arange tile``) in ``ops/alloc.py``; all are re-exported here, so ``symgraph.ops.shape`` is the one place to import them from.
"""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Variable
from symgraph.ops.elemwise import dimshuffle
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["Shape", "Shape_i", "SpecifyShape", "Unbroadcast", "Reshape", "shape", "shape_i",
           "specify_shape", "reshape", "flatten", "squeeze", "transpose", "swapaxes",
           "expand_dims", "shape_padleft", "shape_padright", "shape_padaxis",
           "addbroadcast", "unbroadcast", "patternbroadcast", "as_shape_vector",
           "as_shape_scalars"]


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


def _array_variable(x):
    """``x`` as a tensor, or a device array variable as it is: reading a shape
    needs only the array's descriptor, so it never copies device data back."""
    from symgraph.tensor.gpu_type import GpuArrayType

    if isinstance(getattr(x, "type", None), GpuArrayType):
        return x
    return as_tensor_variable(x)


def _normalize_axis(axis, ndim, who):
    """``axis`` as a non-negative int below ``ndim``, or an IndexError naming ``who``."""
    if not isinstance(axis, (numbers.Integral, np.integer)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise IndexError(f"{who}: axis {axis} is out of range for a {ndim}-d tensor")
    return axis % ndim


# ---------------------------------------------------------------------------
# Constant values of shape-like variables


def constant_int(value):
    """The Python int that ``value`` always holds, or None when unknown at build time.

    Understands Python/NumPy ints, 0-d integer constants, ``shape_i`` of a dimension
    whose static size is known, and element ``i`` of a ``MakeVector`` or ``Shape``.
    Used to infer static shapes; never raises.
    """
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, Variable):
        return None
    if isinstance(value, Constant):
        data = np.asarray(value.data)
        if data.ndim == 0 and data.dtype.kind in "iu":
            return int(data)
        return None
    owner = value.owner
    if owner is None:
        return None
    op = owner.op
    if isinstance(op, Shape_i):
        return owner.inputs[0].type.shape[op.i]
    from symgraph.ops.elemwise import Elemwise
    from symgraph.ops.scalar_basic import Cast

    if isinstance(op, Elemwise) and isinstance(op.scalar_op, Cast) and \
            value.dtype in INT_DTYPES:
        return constant_int(owner.inputs[0])
    from symgraph.ops.subtensor import Subtensor

    if isinstance(op, Subtensor) and len(op.idx_list) == 1 and \
            isinstance(op.idx_list[0], int):
        vec, i = owner.inputs[0], op.idx_list[0]
        if vec.owner is not None and isinstance(vec.owner.op, Shape):
            shp = vec.owner.inputs[0].type.shape
            return shp[i] if -len(shp) <= i < len(shp) else None
        from symgraph.ops.join import MakeVector

        if vec.owner is not None and isinstance(vec.owner.op, MakeVector):
            items = vec.owner.inputs
            return constant_int(items[i]) if -len(items) <= i < len(items) else None
    return None


def as_shape_scalars(shape, who="shape"):
    """``shape`` (an int, a sequence of ints / int scalars, or an int vector of
    static length) as a list of int64 scalar variables."""
    from symgraph.ops.math import cast

    if isinstance(shape, (numbers.Integral, np.integer)) or \
            (isinstance(shape, Variable) and shape.ndim == 0):
        shape = [shape]
    if isinstance(shape, (list, tuple)):
        out = []
        for s in shape:
            if isinstance(s, (numbers.Integral, np.integer)) and not isinstance(s, bool):
                out.append(constant(int(s), dtype="int64"))
                continue
            s = as_tensor_variable(s)
            if s.ndim != 0 or s.dtype not in INT_DTYPES:
                raise TypeError(f"{who}: shape entries must be int scalars, got {s} "
                                f"of type {s.type}")
            out.append(cast(s, "int64"))
        return out
    vec = as_tensor_variable(shape)
    if vec.ndim != 1 or vec.dtype not in INT_DTYPES:
        raise TypeError(f"{who}: a shape must be an int vector or a tuple, got {vec.type}")
    if vec.type.shape[0] is None:
        raise ValueError(f"{who}: the shape vector {vec} has no static length; give a "
                         f"tuple, or specify_shape the vector")
    if vec.owner is not None and isinstance(vec.owner.op, Shape):
        return [shape_i(vec.owner.inputs[0], i) for i in range(vec.type.shape[0])]
    from symgraph.ops.subtensor import getitem

    return [cast(getitem(vec, i), "int64") for i in range(vec.type.shape[0])]


def as_shape_vector(shape, who="shape"):
    """``shape`` as an int64 vector variable of static length (see as_shape_scalars)."""
    if isinstance(shape, Variable) and shape.ndim == 1:
        from symgraph.ops.math import cast

        if shape.dtype not in INT_DTYPES:
            raise TypeError(f"{who}: a shape must be an int vector, got {shape.type}")
        if shape.type.shape[0] is None:
            raise ValueError(f"{who}: the shape vector {shape} has no static length")
        return cast(shape, "int64")
    from symgraph.ops.join import MakeVector

    scalars = as_shape_scalars(shape, who)
    return MakeVector("int64")(*scalars)


# ---------------------------------------------------------------------------
# Reading shapes


class Shape(Op):
    """The shape of a tensor, as an int64 vector of static length ``ndim``."""

    def make_node(self, x):
        x = _array_variable(x)
        return Apply(self, [x], [TensorType("int64", shape=(x.ndim,))()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs[0].shape, dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [(constant(node.inputs[0].ndim, dtype="int64"),)]

    def connection_pattern(self, node):
        return [[False]]

    def grad(self, inputs, output_grads):
        return [_disconnected(inputs[0])]

    def R_op(self, inputs, eval_points):
        return [None]


_shape = Shape()


def shape(x):
    """The shape of ``x``: an int64 vector of static length ``x.ndim``."""
    return _shape(x)


class Shape_i(Op):
    """Dimension ``i`` of a tensor's shape, as an int64 scalar."""

    __props__ = ("i",)

    def __init__(self, i):
        self.i = int(i)

    def make_node(self, x):
        x = _array_variable(x)
        if not 0 <= self.i < x.ndim:
            raise IndexError(f"{self}: {x} has only {x.ndim} dimensions")
        return Apply(self, [x], [TensorType("int64", shape=())()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs[0].shape[self.i], dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def connection_pattern(self, node):
        return [[False]]

    def grad(self, inputs, output_grads):
        return [_disconnected(inputs[0])]


def shape_i(x, i):
    """Dimension ``i`` of ``x``'s shape: an int64 scalar (a constant when known statically)."""
    x = _array_variable(x)
    i = _normalize_axis(i, x.ndim, "shape_i")
    if x.type.shape[i] is not None:
        return constant(x.type.shape[i], dtype="int64")
    return Shape_i(i)(x)


# ---------------------------------------------------------------------------
# Declaring shapes


class SpecifyShape(Op):
    """``x`` unchanged, with a more specific static shape, checked at run time.

    ``shape`` holds an int (a static size), None (unknown) or ``'?'`` (a size
    given by the next extra input, an int scalar) per dimension.
    """

    __props__ = ("shape",)
    view_map = {0: [0]}

    def __init__(self, shape):
        self.shape = tuple(s if s is None or s == "?" else int(s) for s in shape)

    def make_node(self, x, *sizes):
        x = as_tensor_variable(x)
        if x.ndim != len(self.shape):
            raise ValueError(f"{self}: {x} has {x.ndim} dimensions, the specified shape "
                             f"has {len(self.shape)}")
        if len(sizes) != self.shape.count("?"):
            raise TypeError(f"{self} expects {self.shape.count('?')} size inputs")
        sizes = [as_tensor_variable(s) for s in sizes]
        out_shape = []
        for dim, (have, want) in enumerate(zip(x.type.shape, self.shape)):
            if isinstance(want, int) and have is not None and have != want:
                raise ValueError(f"{self}: {x} has static size {have} in dimension {dim}, "
                                 f"which contradicts the specified size {want}")
            out_shape.append(want if isinstance(want, int) else have)
        return Apply(self, [x] + sizes, [x.type.clone(shape=tuple(out_shape))()])

    def perform(self, node, inputs, output_storage):
        x, sizes = inputs[0], iter(inputs[1:])
        want = [s if s != "?" else int(next(sizes)) for s in self.shape]
        for dim, w in enumerate(want):
            if w is not None and x.shape[dim] != w:
                expected = tuple("?" if w is None else w for w in want)
                raise AssertionError(f"SpecifyShape: {node.inputs[0]} was specified to have "
                                     f"shape {expected}, but got shape {x.shape} "
                                     f"(dimension {dim} differs)")
        output_storage[0][0] = x

    def infer_shape(self, fgraph, node, input_shapes):
        sizes = iter(node.inputs[1:])
        out = []
        for have, want in zip(input_shapes[0], self.shape):
            if want == "?":
                out.append(next(sizes))
            elif want is None:
                out.append(have)
            else:
                out.append(constant(want, dtype="int64"))
        return [tuple(out)]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def grad(self, inputs, output_grads):
        return [output_grads[0]] + [_disconnected(s) for s in inputs[1:]]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self.make_node(eval_points[0], *inputs[1:]).outputs[0]]


def specify_shape(x, shape):
    """``x`` declared to have ``shape`` (ints, None for unknown, or int scalars).

    Returns ``x`` itself when the type already says as much.
    """
    x = as_tensor_variable(x)
    if isinstance(shape, (numbers.Integral, np.integer)):
        shape = (shape,)
    if isinstance(shape, Variable):
        shape = as_shape_scalars(shape, "specify_shape")
    shape = tuple(shape)
    if len(shape) != x.ndim:
        raise ValueError(f"specify_shape: {x} has {x.ndim} dimensions, the shape "
                         f"{shape} has {len(shape)}")
    props, extra = [], []
    for s in shape:
        if s is None:
            props.append(None)
            continue
        known = constant_int(s)
        if known is not None:
            props.append(known)
        else:
            props.append("?")
            extra.append(as_shape_scalars([s], "specify_shape")[0])
    if not extra and all(p is None or p == h for p, h in zip(props, x.type.shape)):
        return x
    return SpecifyShape(props)(x, *extra)


class Unbroadcast(Op):
    """``x`` with its static sizes on ``axes`` forgotten (the data is unchanged)."""

    __props__ = ("axes",)
    view_map = {0: [0]}

    def __init__(self, axes):
        self.axes = tuple(sorted(set(int(a) for a in axes)))

    def make_node(self, x):
        x = as_tensor_variable(x)
        for a in self.axes:
            if not 0 <= a < x.ndim:
                raise IndexError(f"{self}: axis {a} is out of range for {x.ndim}-d {x}")
        shape = tuple(None if d in self.axes else s for d, s in enumerate(x.type.shape))
        return Apply(self, [x], [x.type.clone(shape=shape)()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [specify_shape(output_grads[0], inputs[0].type.shape)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else self(eval_points[0])]


def addbroadcast(x, *axes):
    """``x`` with dimensions ``axes`` declared broadcastable (size 1, checked at run time)."""
    x = as_tensor_variable(x)
    axes = {_normalize_axis(a, x.ndim, "addbroadcast") for a in axes}
    return specify_shape(x, [1 if d in axes else None for d in range(x.ndim)])


def unbroadcast(x, *axes):
    """``x`` with dimensions ``axes`` no longer declared broadcastable."""
    x = as_tensor_variable(x)
    axes = [_normalize_axis(a, x.ndim, "unbroadcast") for a in axes]
    axes = [a for a in axes if x.type.shape[a] is not None]
    if not axes:
        return x
    return Unbroadcast(axes)(x)


def patternbroadcast(x, broadcastable):
    """``x`` with exactly the broadcastable pattern given (one bool per dimension)."""
    x = as_tensor_variable(x)
    if len(broadcastable) != x.ndim:
        raise ValueError(f"patternbroadcast: pattern {tuple(broadcastable)} has "
                         f"{len(broadcastable)} entries, {x} has {x.ndim} dimensions")
    x = unbroadcast(x, *[d for d, b in enumerate(broadcastable)
                         if not b and x.type.shape[d] is not None])
    return addbroadcast(x, *[d for d, b in enumerate(broadcastable) if b])


# ---------------------------------------------------------------------------
# Rearranging axes (all DimShuffles)


def transpose(x, axes=None):
    """``x`` with its axes permuted (reversed when ``axes`` is None)."""
    x = as_tensor_variable(x)
    if axes is None:
        axes = list(range(x.ndim))[::-1]
    axes = [_normalize_axis(a, x.ndim, "transpose") for a in axes]
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {x.ndim} dims")
    return dimshuffle(x, axes)


def swapaxes(x, axis1, axis2):
    """``x`` with two axes exchanged."""
    x = as_tensor_variable(x)
    a = _normalize_axis(axis1, x.ndim, "swapaxes")
    b = _normalize_axis(axis2, x.ndim, "swapaxes")
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return dimshuffle(x, order)


def squeeze(x, axis=None):
    """``x`` without size-1 dimensions: the broadcastable ones when ``axis`` is None,
    else those listed (checked to be 1 at run time)."""
    x = as_tensor_variable(x)
    if axis is None:
        axes = [d for d, b in enumerate(x.broadcastable) if b]
    else:
        if isinstance(axis, (numbers.Integral, np.integer)):
            axis = (axis,)
        axes = sorted({_normalize_axis(a, x.ndim, "squeeze") for a in axis})
        for a in axes:
            if x.type.shape[a] not in (None, 1):
                raise ValueError(f"squeeze: dimension {a} of {x} has size {x.type.shape[a]}")
        x = addbroadcast(x, *axes)
    return dimshuffle(x, [d for d in range(x.ndim) if d not in axes])


def expand_dims(x, axis):
    """``x`` with size-1 dimensions inserted at ``axis`` (positions in the result)."""
    x = as_tensor_variable(x)
    if isinstance(axis, (numbers.Integral, np.integer)):
        axis = (axis,)
    out_ndim = x.ndim + len(axis)
    axis = {_normalize_axis(a, out_ndim, "expand_dims") for a in axis}
    if len(axis) != out_ndim - x.ndim:
        raise ValueError("expand_dims: repeated axis")
    dims = iter(range(x.ndim))
    return dimshuffle(x, ["x" if d in axis else next(dims) for d in range(out_ndim)])


def shape_padleft(x, n_ones=1):
    """``x`` with ``n_ones`` broadcastable dimensions added on the left."""
    x = as_tensor_variable(x)
    return dimshuffle(x, ["x"] * n_ones + list(range(x.ndim)))


def shape_padright(x, n_ones=1):
    """``x`` with ``n_ones`` broadcastable dimensions added on the right."""
    x = as_tensor_variable(x)
    return dimshuffle(x, list(range(x.ndim)) + ["x"] * n_ones)


def shape_padaxis(x, axis):
    """``x`` with one broadcastable dimension inserted at ``axis`` (NumPy's expand_dims)."""
    return expand_dims(x, axis)


# The other shape families, re-exported (imported last: they import this module).
from symgraph.ops.join import *  # noqa: E402,F401,F403
from symgraph.ops.join import __all__ as _join_all  # noqa: E402
from symgraph.ops.alloc import *  # noqa: E402,F401,F403
from symgraph.ops.alloc import __all__ as _alloc_all  # noqa: E402
from symgraph.ops.reshape import Reshape, flatten, reshape  # noqa: E402,F401

__all__ += _join_all + _alloc_all
