"""Linear algebra: dot, matmul, tensordot, batched_dot, outer.

Three ops carry the work:

* ``Dot``: the product of 1-d and 2-d tensors (matrix-matrix, matrix-vector,
  vector-matrix, vector-vector to a 0-d result), NumPy's ``np.dot``; native
  GEMM/GEMV rewrites will target this op.
* ``TensorDot``: NumPy's ``np.tensordot`` for every other rank combination.
  Its gradients are tensordots again (plus a transpose), so no reshape is
  needed and every rank differentiates the same way.
* ``BatchedDot``: a Dot per batch entry over ``nbatch`` leading dimensions
  (Theano's batched_dot, and NumPy's matmul for arrays of 3 or more dims);
  batch dimensions of static size 1 broadcast, as in Elemwise.

Result dtypes are NumPy's promotion of the two inputs (int32 . int32 stays
int32, float32 . float32 stays float32).
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.ops.elemwise import broadcast_static_shapes, dimshuffle, reduce_to_input_shape
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import TensorType, upcast

__all__ = ["dot", "matmul", "tensordot", "batched_dot", "outer"]


def _m():
    from symgraph.ops import math

    return math


class _Bilinear(Op):
    """A product of two inputs, linear in each (Dot, TensorDot, BatchedDot): its
    R_op is ``op(ea, b) + op(a, eb)``, over the inputs that have eval points."""

    def R_op(self, inputs, eval_points):
        a, b = inputs
        ea, eb = eval_points
        terms = []
        if ea is not None:
            terms.append(self(ea, b))
        if eb is not None:
            terms.append(self(a, eb))
        if not terms:
            return [None]
        return [terms[0] if len(terms) == 1 else _m().add(*terms)]


def _transpose(x):
    return dimshuffle(x, list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2])


def _static_match(a, b):
    return a is None or b is None or a == b


class Dot(_Bilinear):
    """The product of two 1-d or 2-d tensors, as ``np.dot``.

    (m, k) . (k, n) -> (m, n); (m, k) . (k,) -> (m,); (k,) . (k, n) -> (n,);
    (k,) . (k,) -> a 0-d tensor.
    """

    __props__ = ()

    def make_node(self, x, y):
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        if x.ndim not in (1, 2) or y.ndim not in (1, 2):
            raise TypeError(f"{self}: needs 1-d or 2-d inputs, got a {x.ndim}-d {x} and a "
                            f"{y.ndim}-d {y} (T.dot handles other ranks)")
        if not _static_match(x.type.shape[-1], y.type.shape[0]):
            raise ValueError(f"{self}: shapes {x.type.shape} of {x} and {y.type.shape} of {y} "
                             f"are not aligned")
        shape = x.type.shape[:-1] + y.type.shape[1:]
        return Apply(self, [x, y], [TensorType(upcast(x.dtype, y.dtype), shape=shape)()])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if x.shape[-1] != y.shape[0]:
            raise ValueError(f"{self}: shapes {x.shape} and {y.shape} are not aligned: "
                             f"dimension {x.ndim - 1} of the first ({x.shape[-1]}) != "
                             f"dimension 0 of the second ({y.shape[0]})")
        out = node.outputs[0]
        output_storage[0][0] = np.asarray(np.dot(x, y), dtype=out.type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ys = input_shapes
        return [tuple(xs[:-1]) + tuple(ys[1:])]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        if x.ndim == 2 and y.ndim == 2:
            gx, gy = dot(gz, _transpose(y)), dot(_transpose(x), gz)
        elif x.ndim == 1 and y.ndim == 2:
            gx, gy = dot(y, gz), outer(x, gz)
        elif x.ndim == 2 and y.ndim == 1:
            gx, gy = outer(gz, y), dot(_transpose(x), gz)
        else:
            gx, gy = gz * y, gz * x
        return [reduce_to_input_shape(gx, x), reduce_to_input_shape(gy, y)]


class TensorDot(_Bilinear):
    """``np.tensordot(a, b, axes)``: sum products over ``axes[0]`` of a paired
    with ``axes[1]`` of b; the result has a's other dimensions then b's."""

    __props__ = ("axes",)

    def __init__(self, axes):
        a_axes, b_axes = axes
        self.axes = (tuple(int(i) for i in a_axes), tuple(int(i) for i in b_axes))

    def free_axes(self, a_ndim, b_ndim):
        a_axes, b_axes = self.axes
        return ([d for d in range(a_ndim) if d not in a_axes],
                [d for d in range(b_ndim) if d not in b_axes])

    def make_node(self, a, b):
        a, b = as_tensor_variable(a), as_tensor_variable(b)
        a_axes, b_axes = self.axes
        if len(a_axes) != len(b_axes) or any(not 0 <= i < a.ndim for i in a_axes) or \
                any(not 0 <= i < b.ndim for i in b_axes):
            raise ValueError(f"{self}: axes do not fit a {a.ndim}-d and a {b.ndim}-d input")
        for i, j in zip(a_axes, b_axes):
            if not _static_match(a.type.shape[i], b.type.shape[j]):
                raise ValueError(f"{self}: dimension {i} of {a} (shape {a.type.shape}) and "
                                 f"dimension {j} of {b} (shape {b.type.shape}) differ")
        a_free, b_free = self.free_axes(a.ndim, b.ndim)
        shape = tuple(a.type.shape[d] for d in a_free) + tuple(b.type.shape[d] for d in b_free)
        return Apply(self, [a, b], [TensorType(upcast(a.dtype, b.dtype), shape=shape)()])

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        for i, j in zip(*self.axes):
            if a.shape[i] != b.shape[j]:
                raise ValueError(f"{self}: shapes {a.shape} and {b.shape} are not aligned: "
                                 f"dimension {i} of the first ({a.shape[i]}) != dimension "
                                 f"{j} of the second ({b.shape[j]})")
        result = np.tensordot(a, b, axes=[list(ax) for ax in self.axes])
        output_storage[0][0] = np.asarray(result, dtype=node.outputs[0].type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        a_shape, b_shape = input_shapes
        a_free, b_free = self.free_axes(len(a_shape), len(b_shape))
        return [tuple(a_shape[d] for d in a_free) + tuple(b_shape[d] for d in b_free)]

    def grad(self, inputs, output_grads):
        # gz has a's free dimensions then b's.  Contracting gz with the other
        # input over those gives each input's gradient, with its dimensions in
        # another order; a transpose puts them back.
        a, b = inputs
        (gz,) = output_grads
        a_axes, b_axes = self.axes
        a_free, b_free = self.free_axes(a.ndim, b.ndim)
        nfa = len(a_free)
        ga = tensordot(gz, b, [list(range(nfa, gz.ndim)), b_free])
        # ga: a's free dims, then b's contracted dims in increasing order.
        order_b = sorted(b_axes)
        ga = dimshuffle(ga, [a_free.index(d) if d in a_free else
                             nfa + order_b.index(b_axes[a_axes.index(d)])
                             for d in range(a.ndim)])
        gb = tensordot(a, gz, [a_free, list(range(nfa))])
        # gb: a's contracted dims in increasing order, then b's free dims.
        order_a = sorted(a_axes)
        gb = dimshuffle(gb, [len(a_axes) + b_free.index(d) if d in b_free else
                             order_a.index(a_axes[b_axes.index(d)])
                             for d in range(b.ndim)])
        return [reduce_to_input_shape(ga, a), reduce_to_input_shape(gb, b)]


class BatchedDot(_Bilinear):
    """A ``Dot`` for each entry of ``nbatch`` leading batch dimensions.

    Each input is ``nbatch`` batch dimensions followed by a vector (1 dim) or
    a matrix (2 dims); both have the same number of batch dimensions, which
    must agree in size unless declared broadcastable (static size 1).
    (B, m, k) x (B, k, n) -> (B, m, n); (B, m, k) x (B, k) -> (B, m);
    (B, k) x (B, k, n) -> (B, n); (B, k) x (B, k) -> (B,).
    """

    __props__ = ("nbatch",)

    def __init__(self, nbatch=1):
        self.nbatch = int(nbatch)

    def make_node(self, x, y):
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        nb = self.nbatch
        if x.ndim - nb not in (1, 2) or y.ndim - nb not in (1, 2):
            raise TypeError(f"{self}: each input needs {nb} batch dimensions then 1 or 2 "
                            f"more, got a {x.ndim}-d {x} and a {y.ndim}-d {y}")
        k_x = x.type.shape[-1]
        k_y = y.type.shape[nb]
        if not _static_match(k_x, k_y):
            raise ValueError(f"{self}: shapes {x.type.shape} of {x} and {y.type.shape} of "
                             f"{y} are not aligned")
        batch = broadcast_static_shapes([x.type.shape[:nb], y.type.shape[:nb]], str(self))
        core = x.type.shape[nb:-1] + y.type.shape[nb + 1:]
        dtype = upcast(x.dtype, y.dtype)
        return Apply(self, [x, y], [TensorType(dtype, shape=batch + core)()])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        nb = self.nbatch
        xv, yv = node.inputs
        for d in range(nb):
            sizes = (x.shape[d], y.shape[d])
            if sizes[0] != sizes[1] and not (xv.type.broadcastable[d] or
                                             yv.type.broadcastable[d]):
                raise ValueError(f"{self}: batch dimension {d} differs: shapes {x.shape} "
                                 f"and {y.shape}")
        if x.shape[-1] != y.shape[nb]:
            raise ValueError(f"{self}: shapes {x.shape} and {y.shape} are not aligned: "
                             f"dimension {x.ndim - 1} of the first ({x.shape[-1]}) != "
                             f"dimension {nb} of the second ({y.shape[nb]})")
        x_vec, y_vec = x.ndim == nb + 1, y.ndim == nb + 1
        z = np.matmul(x[..., None, :] if x_vec else x, y[..., None] if y_vec else y)
        if y_vec:
            z = z[..., 0]
        if x_vec:
            z = z[..., 0, :] if not y_vec else z[..., 0]
        output_storage[0][0] = np.asarray(z, dtype=node.outputs[0].type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        nb = self.nbatch
        x, y = node.inputs
        xs, ys = input_shapes
        batch = []
        for d in range(nb):
            if not x.type.broadcastable[d]:
                batch.append(xs[d])
            elif not y.type.broadcastable[d]:
                batch.append(ys[d])
            else:
                batch.append(constant(1, dtype="int64"))
        return [tuple(batch) + tuple(xs[nb:-1]) + tuple(ys[nb + 1:])]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        nb = self.nbatch
        batch = list(range(nb))

        def col(v):  # a batch of vectors as a batch of columns
            return dimshuffle(v, batch + [nb, "x"])

        def row(v):
            return dimshuffle(v, batch + ["x", nb])

        x_mat, y_mat = x.ndim == nb + 2, y.ndim == nb + 2
        if x_mat and y_mat:
            gx, gy = self(gz, _transpose(y)), self(_transpose(x), gz)
        elif x_mat:
            gx, gy = col(gz) * row(y), self(_transpose(x), gz)
        elif y_mat:
            gx, gy = self(y, gz), col(x) * row(gz)
        else:
            gz_b = dimshuffle(gz, batch + ["x"])
            gx, gy = gz_b * y, gz_b * x
        # Summing over broadcast batch dimensions happens here.
        return [reduce_to_input_shape(gx, x), reduce_to_input_shape(gy, y)]


# -- user functions --------------------------------------------------------------------

def _normalize_tensordot_axes(axes, a, b):
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > a.ndim or n > b.ndim:
            raise ValueError(f"tensordot: axes={n} needs inputs of at least {n} dimensions, "
                             f"got {a.ndim}-d and {b.ndim}-d")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    try:
        a_axes, b_axes = axes
    except (TypeError, ValueError):
        raise ValueError(f"tensordot: axes must be an int or a pair of axis lists, "
                         f"got {axes!r}") from None
    a_axes = [a_axes] if isinstance(a_axes, (int, np.integer)) else list(a_axes)
    b_axes = [b_axes] if isinstance(b_axes, (int, np.integer)) else list(b_axes)
    if len(a_axes) != len(b_axes):
        raise ValueError(f"tensordot: {len(a_axes)} axes of the first input paired with "
                         f"{len(b_axes)} of the second")
    out = []
    for which, ax, var in (("first", a_axes, a), ("second", b_axes, b)):
        norm = []
        for i in ax:
            if not -var.ndim <= int(i) < var.ndim:
                raise ValueError(f"tensordot: axis {i} out of range for the {which} input "
                                 f"({var.ndim}-d)")
            norm.append(int(i) % var.ndim)
        if len(set(norm)) != len(norm):
            raise ValueError(f"tensordot: repeated axis in {ax} of the {which} input")
        out.append(norm)
    return out[0], out[1]


def tensordot(a, b, axes=2):
    """Sum of products over the given axes, as ``np.tensordot``.

    ``axes`` is an int n (the last n axes of a with the first n of b) or a
    pair of axis lists ``[[a axes], [b axes]]``.  The result has a's other
    dimensions followed by b's.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    a_axes, b_axes = _normalize_tensordot_axes(axes, a, b)
    if a.ndim in (1, 2) and b.ndim in (1, 2) and a_axes == [a.ndim - 1] and b_axes == [0]:
        return Dot()(a, b)
    return TensorDot((a_axes, b_axes))(a, b)


def dot(a, b):
    """The product of a and b, as ``np.dot``.

    For 1-d and 2-d inputs: matrix and vector products (vector . vector is a
    0-d tensor).  A 0-d input multiplies element-wise.  Otherwise the sum
    over the last axis of a and the second-to-last of b (b's only axis when
    b is 1-d).
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim == 0 or b.ndim == 0:
        return _m().mul(a, b)
    if a.ndim <= 2 and b.ndim <= 2:
        return Dot()(a, b)
    return tensordot(a, b, [[a.ndim - 1], [b.ndim - 2 if b.ndim >= 2 else 0]])


def matmul(a, b):
    """The matrix product with NumPy's ``matmul`` (``@``) semantics.

    For 1-d and 2-d inputs this is ``dot``.  Higher ranks are stacks of
    matrices: the last two dimensions multiply, the leading ones are batch
    dimensions that broadcast where declared broadcastable (a 1-d input is a
    vector for every batch entry).  0-d inputs are an error, as in NumPy.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: 0-d inputs are not allowed (got {a.ndim}-d {a} and "
                         f"{b.ndim}-d {b}); use * to multiply by a scalar")
    if a.ndim <= 2 and b.ndim <= 2:
        return Dot()(a, b)
    nbatch = max(a.ndim, b.ndim) - 2

    def with_batch(v):
        core = 1 if v.ndim == 1 else 2
        lead = nbatch - (v.ndim - core)
        return dimshuffle(v, ["x"] * lead + list(range(v.ndim)))

    return BatchedDot(nbatch)(with_batch(a), with_batch(b))


def batched_dot(a, b):
    """``dot(a[i], b[i])`` for every i of the first dimension (Theano's name).

    Each input is 2-d (a batch of vectors) or 3-d (a batch of matrices):
    (B, m, k) x (B, k, n) -> (B, m, n), (B, m, k) x (B, k) -> (B, m),
    (B, k) x (B, k, n) -> (B, n), (B, k) x (B, k) -> (B,).
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim not in (2, 3) or b.ndim not in (2, 3):
        raise TypeError(f"batched_dot: needs 2-d or 3-d inputs, got a {a.ndim}-d {a} and a "
                        f"{b.ndim}-d {b}")
    return BatchedDot(1)(a, b)


def outer(x, y):
    """The outer product of two vectors: ``out[i, j] = x[i] * y[j]``.

    Inputs of other ranks are flattened first, as ``np.outer``.
    """
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if x.ndim != 1:
        x = x.flatten()
    if y.ndim != 1:
        y = y.flatten()
    return _m().mul(dimshuffle(x, [0, "x"]), dimshuffle(y, ["x", 0]))
