"""Theano's ``tensor.extra_ops``: cumulative sums and products, ``searchsorted``,
``unique``, and the functions that compose existing ops (``diff``,
``bincount``, ``compress``, ``bartlett``, ``fill_diagonal``,
``fill_diagonal_offset``, ``to_one_hot``, ``unravel_index``,
``ravel_multi_index``).

``CumOp``, ``SearchsortedOp`` and ``Unique`` run NumPy (no native code yet).
The gradient of ``cumsum`` is the reversed cumulative sum of the output
gradient; that of ``cumprod`` divides by the input, as Theano's does, so it is
not finite where an input is zero.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["CumOp", "SearchsortedOp", "Unique", "cumsum", "cumprod", "searchsorted",
           "unique", "diff", "bincount", "compress", "bartlett", "fill_diagonal",
           "fill_diagonal_offset", "to_one_hot", "unravel_index", "ravel_multi_index"]


def _m():
    from symgraph.ops import math

    return math


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


def _flip(x, axis):
    return x[(slice(None),) * axis + (slice(None, None, -1),)]


class CumOp(Op):
    """``np.cumsum`` or ``np.cumprod`` along ``axis`` (None: of the flattened
    input, as NumPy)."""

    __props__ = ("axis", "mode")

    def __init__(self, axis=None, mode="add"):
        if mode not in ("add", "mul"):
            raise ValueError(f"CumOp: mode must be 'add' or 'mul', got {mode!r}")
        self.axis, self.mode = (None if axis is None else int(axis)), mode

    def make_node(self, x):
        x = as_tensor_variable(x)
        if self.axis is None:
            out = TensorType(x.dtype, shape=(None,))()
        else:
            if not -x.ndim <= self.axis < x.ndim:
                raise ValueError(f"cum{'sum' if self.mode == 'add' else 'prod'}: axis "
                                 f"{self.axis} is out of range for {x.ndim} dimensions")
            out = x.type()
        if x.dtype == "bool" or (x.dtype in INT_DTYPES and np.dtype(x.dtype).itemsize < 8):
            # NumPy accumulates small integers in the platform integer
            dtype = "uint64" if x.dtype.startswith("uint") and x.dtype != "bool" else "int64"
            out = out.type.clone(dtype=dtype)()
        return Apply(self, [x], [out])

    def perform(self, node, inputs, output_storage):
        fn = np.cumsum if self.mode == "add" else np.cumprod
        output_storage[0][0] = np.asarray(fn(inputs[0], axis=self.axis),
                                          dtype=node.outputs[0].dtype)

    def L_op(self, inputs, outputs, output_grads):
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        if self.axis is None:
            flat_x = x.flatten()
            if self.mode == "add":
                return [_flip(CumOp(0)(_flip(gz, 0)), 0).reshape(x.shape)]
            return [(_flip(CumOp(0)(_flip(gz * z, 0)), 0) / flat_x).reshape(x.shape)]
        axis = self.axis % x.ndim
        if self.mode == "add":
            return [_flip(CumOp(axis)(_flip(gz, axis)), axis)]
        return [_flip(CumOp(axis)(_flip(gz * z, axis)), axis) / x]

    def infer_shape(self, fgraph, node, input_shapes):
        if self.axis is None:
            size = 1
            for s in input_shapes[0]:
                size = size * s
            return [(size,)]
        return [input_shapes[0]]


def cumsum(x, axis=None):
    """The cumulative sum along ``axis`` (of the flattened ``x`` when None)."""
    return CumOp(axis, "add")(x)


def cumprod(x, axis=None):
    """The cumulative product along ``axis`` (of the flattened ``x`` when None)."""
    return CumOp(axis, "mul")(x)


class SearchsortedOp(Op):
    """``np.searchsorted(x, v, side, sorter)``: int64 insertion points of
    ``v`` (any shape) into the sorted vector ``x``."""

    __props__ = ("side",)

    def __init__(self, side="left"):
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        self.side = side

    def make_node(self, x, v, sorter=None):
        x, v = as_tensor_variable(x), as_tensor_variable(v)
        if x.ndim != 1:
            raise TypeError(f"searchsorted: x must be a vector, got {x.type}")
        inputs = [x, v]
        if sorter is not None:
            sorter = as_tensor_variable(sorter)
            if sorter.ndim != 1 or sorter.dtype not in INT_DTYPES:
                raise TypeError(f"searchsorted: sorter must be an integer vector, got "
                                f"{sorter.type}")
            inputs.append(sorter)
        return Apply(self, inputs, [TensorType("int64", shape=v.type.shape)()])

    def perform(self, node, inputs, output_storage):
        x, v = inputs[:2]
        sorter = inputs[2] if len(inputs) > 2 else None
        output_storage[0][0] = np.asarray(np.searchsorted(x, v, self.side, sorter),
                                          dtype="int64")

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]

    def grad(self, inputs, output_grads):
        return [_disconnected(x) for x in inputs]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]


def searchsorted(x, v, side="left", sorter=None):
    """The indices where the elements of ``v`` would be inserted into the
    sorted vector ``x`` to keep it sorted (NumPy's ``searchsorted``)."""
    return SearchsortedOp(side)(x, v, sorter)


class Unique(Op):
    """``np.unique``: the sorted distinct values (flattened, or along ``axis``),
    and as asked, the first indices, the inverse indices and the counts.  No
    gradient."""

    __props__ = ("return_index", "return_inverse", "return_counts", "axis")

    def __init__(self, return_index=False, return_inverse=False, return_counts=False,
                 axis=None):
        self.return_index, self.return_inverse = bool(return_index), bool(return_inverse)
        self.return_counts = bool(return_counts)
        self.axis = None if axis is None else int(axis)

    def make_node(self, x):
        x = as_tensor_variable(x)
        if self.axis is None:
            values = TensorType(x.dtype, shape=(None,))()
        else:
            if not -x.ndim <= self.axis < x.ndim:
                raise ValueError(f"unique: axis {self.axis} is out of range for "
                                 f"{x.ndim} dimensions")
            shape = list(x.type.shape)
            shape[self.axis] = None
            values = TensorType(x.dtype, shape=tuple(shape))()
        outs = [values]
        for flag in (self.return_index, self.return_inverse, self.return_counts):
            if flag:
                outs.append(TensorType("int64", shape=(None,))())
        return Apply(self, [x], outs)

    def perform(self, node, inputs, output_storage):
        res = np.unique(inputs[0], self.return_index, self.return_inverse,
                        self.return_counts, self.axis)
        res = res if isinstance(res, tuple) else (res,)
        for store, out, val in zip(output_storage, node.outputs, res):
            store[0] = np.asarray(val).reshape(-1) if out.dtype == "int64" and \
                out is not node.outputs[0] else np.asarray(val)
            store[0] = store[0].astype(out.dtype, copy=False)

    def connection_pattern(self, node):
        return [[False] * len(node.outputs)]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import grad_undefined

        return [grad_undefined(self, 0, inputs[0], "unique is piecewise constant in "
                                                   "its selection")]


def unique(x, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """NumPy's ``unique`` (see :class:`Unique`)."""
    return Unique(return_index, return_inverse, return_counts, axis)(x)


def diff(x, n=1, axis=-1):
    """NumPy's ``diff``: the n-th discrete difference along ``axis``."""
    from symgraph.ops.shape import _normalize_axis

    x = as_tensor_variable(x)
    axis = _normalize_axis(axis, x.ndim, "diff")
    if int(n) != n or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    before = (slice(None),) * axis
    for _ in range(int(n)):
        x = x[before + (slice(1, None),)] - x[before + (slice(None, -1),)]
    return x


def bincount(x, weights=None, minlength=None, assert_nonneg=False):
    """The number of occurrences of each value of the non-negative integer
    vector ``x`` (weighted by ``weights`` if given), with at least
    ``minlength`` bins.  A negative value is an error when ``assert_nonneg``
    (otherwise it counts from the end, as Theano's did)."""
    from symgraph.ops.alloc import zeros
    from symgraph.ops.reduce import max as max_
    from symgraph.ops.subtensor import inc_subtensor

    x = as_tensor_variable(x)
    if x.ndim != 1:
        raise TypeError(f"bincount: x must be a vector, got {x.type}")
    if x.dtype not in INT_DTYPES:
        raise TypeError(f"bincount: x must hold integers, got {x.dtype}")
    m = _m()
    if assert_nonneg:
        from symgraph.ops.assert_op import assert_op

        x = assert_op(x, m.ge(x, 0).all(), msg="bincount: x has negative values")
    length = m.cast(max_(x) + 1, "int64")
    if minlength is not None:
        length = m.maximum(length, minlength)
    if weights is None:
        return inc_subtensor(zeros([length], dtype=x.dtype)[x], 1)
    weights = as_tensor_variable(weights)
    return inc_subtensor(zeros([length], dtype=weights.dtype)[x], weights)


def compress(condition, x, axis=None):
    """NumPy's ``compress``: the slices of ``x`` along ``axis`` (of the
    flattened ``x`` when None) where the vector ``condition`` is true."""
    from symgraph.ops.shape import _normalize_axis

    x = as_tensor_variable(x)
    condition = as_tensor_variable(condition)
    if axis is None:
        x, axis = x.flatten(), 0
    axis = _normalize_axis(axis, x.ndim, "compress")
    index = condition.nonzero()[0]
    return x[(slice(None),) * axis + (index,)]


def bartlett(M):
    """The Bartlett (triangular) window of ``M`` points, as NumPy's."""
    from symgraph.ops.alloc import arange
    from symgraph.config import config

    m = _m()
    M = as_tensor_variable(M)
    if M.ndim != 0 or M.dtype not in INT_DTYPES:
        raise TypeError(f"bartlett: M must be an integer scalar, got {M.type}")
    n = m.cast(arange(m.maximum(M, 0)), config.floatX)
    half = m.cast(M - 1, config.floatX) / 2.0
    window = 1.0 - m.abs(n - half) / m.switch(m.gt(half, 0), half, m.ones_like(half))
    return window


def _diag_positions(a, offset):
    """The row and column indices of diagonal ``offset`` of the matrix ``a``."""
    from symgraph.ops.alloc import arange

    m = _m()
    rows, cols = a.shape[0], a.shape[1]
    if isinstance(offset, int) and offset >= 0:
        n = m.maximum(m.minimum(rows, cols - offset), 0)
        i = arange(n)
        return i, i + offset
    if isinstance(offset, int):
        n = m.maximum(m.minimum(rows + offset, cols), 0)
        j = arange(n)
        return j - offset, j
    offset = as_tensor_variable(offset)
    row0 = m.maximum(-offset, 0)
    col0 = m.maximum(offset, 0)
    n = m.maximum(m.minimum(rows - row0, cols - col0), 0)
    i = arange(n)
    return i + row0, i + col0


def fill_diagonal(a, val):
    """``a`` with its main diagonal set to the scalar ``val`` (for any rank,
    the entries ``a[i, i, ..., i]``, as NumPy's ``fill_diagonal`` of equal
    sizes; a matrix may be rectangular)."""
    from symgraph.ops.alloc import arange
    from symgraph.ops.subtensor import set_subtensor

    a, val = as_tensor_variable(a), as_tensor_variable(val)
    if a.ndim < 2:
        raise TypeError(f"fill_diagonal: a must have at least 2 dimensions, got {a.type}")
    if val.ndim != 0:
        raise TypeError(f"fill_diagonal: val must be a scalar, got {val.type}")
    if a.ndim == 2:
        i, j = _diag_positions(a, 0)
        return set_subtensor(a[i, j], _m().cast(val, a.dtype))
    n = a.shape[0]
    for d in range(1, a.ndim):
        n = _m().minimum(n, a.shape[d])
    i = arange(n)
    return set_subtensor(a[(i,) * a.ndim], _m().cast(val, a.dtype))


def fill_diagonal_offset(a, val, offset):
    """The matrix ``a`` with its diagonal ``offset`` (above the main one when
    positive, below when negative; a Python or a symbolic int) set to ``val``."""
    from symgraph.ops.subtensor import set_subtensor

    a, val = as_tensor_variable(a), as_tensor_variable(val)
    if a.ndim != 2:
        raise TypeError(f"fill_diagonal_offset: a must be a matrix, got {a.type}")
    if val.ndim != 0:
        raise TypeError(f"fill_diagonal_offset: val must be a scalar, got {val.type}")
    i, j = _diag_positions(a, offset)
    return set_subtensor(a[i, j], _m().cast(val, a.dtype))


def to_one_hot(y, nb_class, dtype=None):
    """A matrix of one row per entry of the integer vector ``y``, with a one
    in column ``y[i]`` and zeros elsewhere (``dtype`` defaults to floatX)."""
    from symgraph.ops.alloc import arange
    from symgraph.config import config

    y = as_tensor_variable(y)
    if y.ndim != 1 or y.dtype not in INT_DTYPES:
        raise TypeError(f"to_one_hot: y must be an integer vector, got {y.type}")
    m = _m()
    hot = m.eq(y.dimshuffle(0, "x"), arange(nb_class).dimshuffle("x", 0))
    return m.cast(hot, dtype or config.floatX)


def _as_dims(dims, who):
    from symgraph.ops.join import make_vector

    if isinstance(dims, (list, tuple)):
        return [as_tensor_variable(d) for d in dims]
    dims = as_tensor_variable(dims)
    if dims.ndim != 1 or dims.type.shape[0] is None:
        raise TypeError(f"{who}: dims must be a tuple or a vector of known length, got "
                        f"{dims.type}")
    del make_vector
    return [dims[i] for i in range(dims.type.shape[0])]


def unravel_index(indices, dims, order="C", ndim=None):
    """NumPy's ``unravel_index``: a tuple of index arrays, one per dimension
    of ``dims``, that address the flat ``indices`` in an array of that shape.
    An index out of range is an error."""
    from symgraph.ops.assert_op import assert_op

    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    indices = as_tensor_variable(indices)
    if indices.dtype not in INT_DTYPES:
        raise TypeError(f"unravel_index: indices must be integers, got {indices.dtype}")
    dims = _as_dims(dims, "unravel_index")
    m = _m()
    size = 1
    for d in dims:
        size = size * d
    indices = assert_op(indices, m.and_(m.ge(indices, 0), m.lt(indices, size)).all(),
                        msg="unravel_index: an index is out of range for the shape")
    order_dims = list(reversed(dims)) if order == "C" else list(dims)
    out, rest = [], indices
    for d in order_dims:
        out.append(m.cast(m.mod(rest, d), "int64"))
        rest = m.int_div(rest, d)
    return tuple(reversed(out)) if order == "C" else tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """NumPy's ``ravel_multi_index``: the flat indices of the index arrays
    ``multi_index`` (one per dimension) in an array of shape ``dims``;
    ``mode`` 'raise', 'wrap' or 'clip' handles those out of range."""
    from symgraph.ops.assert_op import assert_op

    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got "
                         f"{mode!r}")
    dims = _as_dims(dims, "ravel_multi_index")
    multi_index = [as_tensor_variable(i) for i in multi_index]
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    m = _m()
    fixed = []
    for idx, d in zip(multi_index, dims):
        if idx.dtype not in INT_DTYPES:
            raise TypeError(f"ravel_multi_index: indices must be integers, got {idx.dtype}")
        if mode == "wrap":
            idx = m.mod(idx, d)
        elif mode == "clip":
            idx = m.clip(idx, 0, d - 1)
        else:
            idx = assert_op(idx, m.and_(m.ge(idx, 0), m.lt(idx, d)).all(),
                            msg="ravel_multi_index: an index is out of range")
        fixed.append(m.cast(idx, "int64"))
    pairs = list(zip(fixed, dims))
    if order == "F":
        pairs.reverse()
    flat = None
    for idx, d in pairs:
        flat = idx if flat is None else flat * d + idx
    return flat
