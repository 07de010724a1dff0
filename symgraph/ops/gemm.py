"""BLAS-shaped updates: Gemm, Gemv and Ger.

The BLAS rewrites (``opt.blas_rewrites``) build these from ``dot``, scaling
and addition, so that one BLAS call does the whole expression:

* ``Gemm(z, a, x, y, b) = b * z + a * dot(x, y)``: x, y, z matrices;
* ``Gemv(z, a, A, x, b) = b * z + a * dot(A, x)``: A a matrix, x and z vectors;
* ``Ger(z, a, x, y) = z + a * outer(x, y)``: x, y vectors, z a matrix.

a and b are 0-d; every input has the output's dtype.  z must have the full
result shape (no broadcasting).  By default the result is a new array; with
``inplace=True`` (set by the ``inplace`` phase, ``opt/inplace.py``) the op
destroys z and writes the result into its buffer, so that an SGD update
``w <- w - lr * dot(x.T, g)`` costs one BLAS call and no copy of w.  They
appear after gradients are taken, so they have no gradient.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import TensorType

__all__ = ["Gemm", "Gemv", "Ger", "gemm", "gemv", "ger"]


def _merge_static(*sizes):
    """The first known static size among ``sizes`` (None when all are unknown)."""
    for s in sizes:
        if s is not None:
            return s
    return None


def _check_aligned(op, left, right, names):
    """The same ValueError as the native kernel when the inner dimensions differ."""
    if left.shape[1] != right.shape[0]:
        raise ValueError(f"{op}: shapes {left.shape} and {right.shape} of {names} are not "
                         f"aligned ({left.shape[1]} != {right.shape[0]})")


def _check_z(op, z, expected, what):
    """The same ValueError as the native kernel when z does not have the result's shape."""
    for d, size in enumerate(expected):
        if z.shape[d] != size:
            raise ValueError(f"{op}: z has shape {z.shape}, but {what} has {size} in "
                             f"dimension {d}")


def _scale_add(target, b, term):
    """``target = target * b + term`` in target's buffer (b None: no scaling),
    with NumPy's rounding of ``z * b + term`` cast to target's dtype."""
    if b is not None:
        np.multiply(target, b, out=target, casting="unsafe")
    np.add(target, term, out=target, casting="unsafe")


class _BlasUpdate(Op):
    """Shared parts of Gemm, Gemv and Ger: ranks and one dtype for every input,
    and the ``inplace`` flag (destroy_map {0: [0]}: the result is z's buffer)."""

    __props__ = ("inplace",)
    #: ndim of each input, in order.
    ranks = ()

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self):
        # "Gemm" as before the flag existed; "Gemm{inplace}" when it destroys z.
        return type(self).__name__ + ("{inplace}" if self.inplace else "")

    __repr__ = __str__

    def _result(self, node, z, update, output_storage):
        """Store ``update(target)``'s result: into z itself when in place,
        else into a new array.  ``update`` gets the array to write (z or a
        copy of it) and returns nothing."""
        dtype = node.outputs[0].dtype
        target = z if self.inplace and z.dtype == dtype else np.array(z, dtype=dtype)
        with np.errstate(all="ignore"):   # NaN and Inf propagate quietly
            update(target)
        output_storage[0][0] = target

    def _check_inputs(self, inputs):
        inputs = [as_tensor_variable(i) for i in inputs]
        names = self.input_names
        for var, rank, name in zip(inputs, self.ranks, names):
            if var.ndim != rank:
                raise TypeError(f"{self}: {name} must be {rank}-d, got a {var.ndim}-d {var}")
        dtypes = {v.dtype for v in inputs}
        if len(dtypes) != 1:
            raise TypeError(f"{self}: every input needs the same dtype, got "
                            f"{', '.join(f'{n}: {v.dtype}' for n, v in zip(names, inputs))}")
        if inputs[0].dtype == "bool":
            raise TypeError(f"{self}: bool inputs are not supported")
        return inputs

    def grad(self, inputs, output_grads):
        raise NotImplementedError(
            f"{self} has no gradient: it is made by the BLAS rewrites after gradients "
            f"are taken; differentiate the original dot expression instead")


class Gemm(_BlasUpdate):
    """``b * z + a * dot(x, y)`` for matrices x (m, k), y (k, n), z (m, n)."""

    ranks = (2, 0, 2, 2, 0)
    input_names = ("z", "a", "x", "y", "b")

    def make_node(self, z, a, x, y, b):
        z, a, x, y, b = self._check_inputs([z, a, x, y, b])
        shape = (_merge_static(z.type.shape[0], x.type.shape[0]),
                 _merge_static(z.type.shape[1], y.type.shape[1]))
        return Apply(self, [z, a, x, y, b], [TensorType(z.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        z, a, x, y, b = inputs
        _check_aligned(self, x, y, "x and y")
        _check_z(self, z, (x.shape[0], y.shape[1]), "dot(x, y)")
        self._result(node, z, lambda t: _scale_add(t, b, a * np.dot(x, y)), output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]


class Gemv(_BlasUpdate):
    """``b * z + a * dot(A, x)`` for a matrix A (m, n), vectors x (n,) and z (m,)."""

    ranks = (1, 0, 2, 1, 0)
    input_names = ("z", "a", "A", "x", "b")

    def make_node(self, z, a, A, x, b):
        z, a, A, x, b = self._check_inputs([z, a, A, x, b])
        shape = (_merge_static(z.type.shape[0], A.type.shape[0]),)
        return Apply(self, [z, a, A, x, b], [TensorType(z.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        z, a, A, x, b = inputs
        _check_aligned(self, A, x, "A and x")
        _check_z(self, z, (A.shape[0],), "dot(A, x)")
        self._result(node, z, lambda t: _scale_add(t, b, a * np.dot(A, x)), output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]


class Ger(_BlasUpdate):
    """``z + a * outer(x, y)`` for vectors x (m,), y (n,) and a matrix z (m, n)."""

    ranks = (2, 0, 1, 1)
    input_names = ("z", "a", "x", "y")

    def make_node(self, z, a, x, y):
        z, a, x, y = self._check_inputs([z, a, x, y])
        shape = (_merge_static(z.type.shape[0], x.type.shape[0]),
                 _merge_static(z.type.shape[1], y.type.shape[0]))
        return Apply(self, [z, a, x, y], [TensorType(z.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        z, a, x, y = inputs
        _check_z(self, z, (x.shape[0], y.shape[0]), "outer(x, y)")
        self._result(node, z, lambda t: _scale_add(t, None, a * np.outer(x, y)), output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]


def gemm(z, a, x, y, b, inplace=False):
    """``b * z + a * dot(x, y)`` as one Gemm node (``inplace``: written into z)."""
    return Gemm(inplace)(z, a, x, y, b)


def gemv(z, a, A, x, b, inplace=False):
    """``b * z + a * dot(A, x)`` as one Gemv node (``inplace``: written into z)."""
    return Gemv(inplace)(z, a, A, x, b)


def ger(z, a, x, y, inplace=False):
    """``z + a * outer(x, y)`` as one Ger node (``inplace``: written into z)."""
    return Ger(inplace)(z, a, x, y)
