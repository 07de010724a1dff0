"""Theano's ``tensor.nlinalg`` import path: inverse, pseudo-inverse,
determinant, eigen-decompositions, QR, SVD, diagonals, trace, norms, matrix
powers, ``tensorinv`` and ``tensorsolve`` (the ops live in
``symgraph.ops.linalg``)."""

import numpy as np

from symgraph.ops.linalg import (QR, SVD, Det, Eig, Eigh, MatrixInverse,  # noqa: F401
                                 MatrixPinv, alloc_diag, det, diagonal, eig, eigh,
                                 matrix_dot, matrix_inverse, matrix_power, pinv, qr, svd,
                                 trace)
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["QR", "SVD", "Det", "Eig", "Eigh", "MatrixInverse", "MatrixPinv", "alloc_diag",
           "extract_diag", "det", "diag", "eig", "eigh", "matrix_dot", "matrix_inverse",
           "matrix_power", "pinv", "qr", "svd", "trace", "norm", "tensorinv", "tensorsolve",
           "lstsq"]


def extract_diag(x):
    """The main diagonal of the matrix ``x``."""
    return diagonal(x)


def diag(x):
    """NumPy's ``diag``: the diagonal of a matrix, or the square matrix with
    the vector ``x`` on its diagonal."""
    x = as_tensor_variable(x)
    if x.ndim == 1:
        return alloc_diag(x)
    if x.ndim == 2:
        return diagonal(x)
    raise TypeError(f"diag: expected a vector or a matrix, got {x.type}")


def norm(x, ord):
    """NumPy's ``linalg.norm`` of a vector (``ord`` None, a number, inf or
    -inf) or a matrix (None or 'fro', 'inf', '-inf', 1, -1; as Theano, the
    nuclear and 2-norms are not implemented)."""
    from symgraph.ops import math as m

    x = as_tensor_variable(x)
    if x.ndim == 1:
        if ord is None:
            return m.sqrt(m.sqr(x).sum())
        if ord == "inf" or ord == np.inf:
            return m.abs_(x).max()
        if ord == "-inf" or ord == -np.inf:
            return m.abs_(x).min()
        if ord == 0:
            return m.neq(x, 0).sum()
        return m.pow(m.pow(m.abs_(x), ord).sum(), 1.0 / ord)
    if x.ndim == 2:
        if ord is None or ord == "fro":
            return m.sqrt(m.sqr(m.abs_(x)).sum())
        if ord == "inf" or ord == np.inf:
            return m.abs_(x).sum(axis=1).max()
        if ord == "-inf" or ord == -np.inf:
            return m.abs_(x).sum(axis=1).min()
        if ord == 1:
            return m.abs_(x).sum(axis=0).max()
        if ord == -1:
            return m.abs_(x).sum(axis=0).min()
        raise ValueError(f"norm: ord {ord!r} is not implemented for matrices")
    raise ValueError(f"norm: expected a vector or a matrix, got {x.type}")


def _prod(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


def tensorinv(a, ind=2):
    """NumPy's ``tensorinv``: the inverse of ``a`` seen as a matrix whose rows
    are its first ``ind`` dimensions; the result has shape
    ``a.shape[ind:] + a.shape[:ind]``.  Differentiable."""
    a = as_tensor_variable(a)
    if not 0 < ind < a.ndim:
        raise ValueError(f"tensorinv: ind must be in 1..{a.ndim - 1}, got {ind}")
    rows = [a.shape[d] for d in range(ind)]
    cols = [a.shape[d] for d in range(ind, a.ndim)]
    inv = matrix_inverse(a.reshape((_prod(rows), _prod(cols)), ndim=2))
    return inv.reshape(cols + rows, ndim=a.ndim)


def tensorsolve(a, b, axes=None):
    """NumPy's ``tensorsolve``: x with ``tensordot(a, x, x.ndim) = b``;
    ``axes`` are moved to the end of ``a`` first.  Differentiable."""
    from symgraph.ops.linalg import solve

    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if axes is not None:
        axes = [ax % a.ndim for ax in axes]
        a = a.dimshuffle([d for d in range(a.ndim) if d not in axes] + axes)
    x_dims = [a.shape[d] for d in range(b.ndim, a.ndim)]
    rows = _prod([b.shape[d] for d in range(b.ndim)])
    x = solve(a.reshape((rows, _prod(x_dims)), ndim=2), b.flatten())
    return x.reshape(x_dims, ndim=a.ndim - b.ndim)


def lstsq(a, b, rcond=-1):
    """The least-squares solution of ``a x = b``: ``pinv(a) @ b``
    (``rcond`` is accepted for Theano's signature; the pseudo-inverse uses
    NumPy's default cutoff)."""
    from symgraph.ops.math import dot

    return dot(pinv(a), b)
