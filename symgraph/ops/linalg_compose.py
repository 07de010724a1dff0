"""Matrix functions of Theano's nlinalg that are compositions of existing ops
(``tri``, ``tril``, ``triu``, ``diagonal``, ``alloc_diag``, ``trace``,
``matrix_dot``, ``matrix_power``, ``kron``); re-exported by ``ops/linalg.py``."""


from symgraph.ops.linalg import _m
from symgraph.tensor.basic import as_tensor_variable

__all__ = ['tri', 'tril', 'triu', 'diagonal', 'alloc_diag', 'trace', 'matrix_dot', 'matrix_power', 'kron']


def tri(N, M=None, k=0, dtype=None):
    """NumPy's ``tri``: an (N, M) array with ones at and below the k-th diagonal."""
    from symgraph.ops.alloc import arange

    if M is None:
        M = N
    m = _m()
    mask = m.ge(arange(N).dimshuffle(0, "x") + k, arange(M).dimshuffle("x", 0))
    from symgraph.config import config

    return m.cast(mask, dtype or config.floatX)


def _triangle(x, k, lower):
    from symgraph.ops.alloc import arange

    x = as_tensor_variable(x)
    if x.ndim < 2:
        raise TypeError(f"{'tril' if lower else 'triu'}: expected at least 2 dimensions, "
                        f"got {x.type}")
    m = _m()
    rows = arange(x.shape[-2]).dimshuffle(0, "x")
    cols = arange(x.shape[-1]).dimshuffle("x", 0)
    keep = m.ge(rows + k, cols) if lower else m.le(rows + k, cols)
    return m.switch(keep, x, m.zeros_like(x))


def tril(m, k=0):
    """NumPy's ``tril``: ``m`` with the entries above the k-th diagonal zeroed
    (the last two dimensions).  Unlike ``m * tri(...)``, an inf or NaN above
    the diagonal does not leak into the result."""
    return _triangle(m, k, True)


def triu(m, k=0):
    """NumPy's ``triu``: ``m`` with the entries below the k-th diagonal zeroed."""
    return _triangle(m, k, False)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """NumPy's ``diagonal``: the diagonal ``offset`` of the 2-d sections of
    ``a`` in ``axis1`` and ``axis2``, as the last dimension of the result."""
    from symgraph.ops.alloc import arange
    from symgraph.ops.shape import _normalize_axis

    a = as_tensor_variable(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 dimensions, got {a.type}")
    axis1 = _normalize_axis(axis1, a.ndim, "diagonal")
    axis2 = _normalize_axis(axis2, a.ndim, "diagonal")
    if axis1 == axis2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    offset = int(offset)
    rest = [d for d in range(a.ndim) if d not in (axis1, axis2)]
    moved = a.dimshuffle(rest + [axis1, axis2])
    m = _m()
    rows, cols = moved.shape[-2], moved.shape[-1]
    if offset >= 0:
        n = m.maximum(m.minimum(rows, cols - offset), 0)
        i = arange(n)
        j = i + offset
    else:
        n = m.maximum(m.minimum(rows + offset, cols), 0)
        j = arange(n)
        i = j - offset
    return moved[(slice(None),) * len(rest) + (i, j)]


def alloc_diag(v, offset=0):
    """A square matrix with the vector ``v`` on its diagonal ``offset``
    (NumPy's ``diag`` of a vector)."""
    from symgraph.ops.alloc import arange, zeros
    from symgraph.ops.subtensor import set_subtensor

    v = as_tensor_variable(v)
    if v.ndim != 1:
        raise TypeError(f"alloc_diag: expected a vector, got {v.type}")
    offset = int(offset)
    n = v.shape[0] + abs(offset)
    i = arange(v.shape[0])
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    return set_subtensor(zeros((n, n), dtype=v.dtype)[rows, cols], v)


def trace(x):
    """The sum of the main diagonal of the matrix ``x``."""
    x = as_tensor_variable(x)
    if x.ndim != 2:
        raise TypeError(f"trace: expected a matrix, got {x.type}")
    return diagonal(x).sum()


def matrix_dot(*args):
    """The product of the matrices, left to right: ``dot(dot(a, b), c)``..."""
    from symgraph.ops.math import dot

    if not args:
        raise TypeError("matrix_dot: needs at least one matrix")
    result = args[0]
    for a in args[1:]:
        result = dot(result, a)
    return result


def matrix_power(M, n):
    """``M`` to the power of the non-negative Python int ``n``, by repeated
    squaring (NumPy's ``matrix_power``; ``n = 0`` gives the identity)."""
    from symgraph.ops.alloc import identity_like
    from symgraph.ops.math import dot

    if int(n) != n or n < 0:
        raise ValueError(f"matrix_power: n must be a non-negative int, got {n!r}; "
                         f"use matrix_inverse for negative powers")
    M = as_tensor_variable(M)
    result, base, n = None, M, int(n)
    while n:
        if n & 1:
            result = base if result is None else dot(result, base)
        n >>= 1
        if n:
            base = dot(base, base)
    return identity_like(M) if result is None else result


def kron(a, b):
    """The Kronecker product of ``a`` and ``b`` (scipy's ``kron`` for
    matrices; each needs at least one dimension, and the result has the rank
    of the larger)."""
    from symgraph.ops.shape import reshape

    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.ndim < 1 or b.ndim < 1:
        raise TypeError("kron: both arguments need at least one dimension")
    ndim = max(a.ndim, b.ndim)
    a = a.dimshuffle(["x"] * (ndim - a.ndim) + list(range(a.ndim)))
    b = b.dimshuffle(["x"] * (ndim - b.ndim) + list(range(b.ndim)))
    # a[i, j] * b[k, l] laid out as (i, k, j, l), then merged pairwise
    pa, pb = [], []
    for d in range(ndim):
        pa += [d, "x"]
        pb += ["x", d]
    prod = a.dimshuffle(pa) * b.dimshuffle(pb)
    return reshape(prod, [a.shape[d] * b.shape[d] for d in range(ndim)], ndim=ndim)
