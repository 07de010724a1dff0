"""Dense linear algebra: Theano's ``tensor.nlinalg`` and ``tensor.slinalg``.

The ops wrap NumPy's and SciPy's LAPACK drivers (no native code of their
own): ``MatrixInverse``, ``MatrixPinv``, ``Det``, ``Eig``, ``Eigh``, ``QR``,
``SVD``, ``Cholesky``, ``Solve``, ``Eigvalsh`` and ``Expm``.  Gradients are
graphs of other ops: the inverse, determinant, pseudo-inverse, ``eigh``,
Cholesky factor, ``solve``, generalized ``eigvalsh`` and the matrix
exponential have one (the last as a block-triangular ``expm``, exact);
``eig``, ``qr`` and ``svd`` have none, as in Theano.

The triangle helpers (``tri``, ``tril``, ``triu``), ``diagonal``,
``alloc_diag`` and ``trace`` are compositions of indexing and comparisons,
so they need no op of their own and are differentiable.
"""

import numpy as np
from symgraph.ops.lazy_scipy import linalg as _linalg

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, TensorType

__all__ = ["MatrixInverse", "MatrixPinv", "Det", "Eig", "Eigh", "QR", "SVD", "Cholesky",
           "Solve", "Eigvalsh", "Expm",
           "matrix_inverse", "pinv", "det", "eig", "eigh", "qr", "svd", "cholesky", "solve",
           "solve_lower_triangular", "solve_upper_triangular", "solve_symmetric",
           "eigvalsh", "expm", "tri", "tril", "triu", "diagonal", "alloc_diag", "trace",
           "matrix_dot", "matrix_power", "kron"]


def _m():
    from symgraph.ops import math

    return math


def _float_matrix(x, who, ndim=2):
    x = as_tensor_variable(x)
    if x.ndim != ndim:
        raise TypeError(f"{who}: expected a {ndim}-d tensor, got {x} of type {x.type}")
    if x.dtype not in FLOAT_DTYPES:
        x = _m().cast(x, "float64")
    return x


def _disconnected(g):
    from symgraph.graph.gradient_markers import is_disconnected

    return g is None or is_disconnected(g)


def _not_implemented(op, i, x, why=""):
    from symgraph.graph.gradient_markers import grad_not_implemented

    return grad_not_implemented(op, i, x, why)


def _matrix_type(dtype, shape=(None, None)):
    return TensorType(dtype, shape=shape)


# -- ops ----------------------------------------------------------------------


class MatrixInverse(Op):
    """The inverse of a square matrix (``numpy.linalg.inv``); its gradient is
    ``-inv(x).T @ gz @ inv(x).T``."""

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(x, "matrix_inverse")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.linalg.inv(inputs[0]).astype(node.outputs[0].dtype,
                                                                copy=False)

    def L_op(self, inputs, outputs, output_grads):
        (z,), (gz,) = outputs, output_grads
        m = _m()
        return [-m.dot(m.dot(z.T, gz), z.T)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        m = _m()
        z = self(inputs[0])
        return [-m.dot(m.dot(z, eval_points[0]), z)]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class MatrixPinv(Op):
    """The Moore-Penrose pseudo-inverse (``numpy.linalg.pinv``), with the
    gradient of a constant-rank matrix."""

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(x, "pinv")
        return Apply(self, [x], [x.type.clone(shape=(x.type.shape[1], x.type.shape[0]))()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.linalg.pinv(inputs[0]).astype(node.outputs[0].dtype,
                                                                 copy=False)

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.ops.alloc import identity_like

        (x,), (z,), (gz,) = inputs, outputs, output_grads
        xz, zx = _m().dot(x, z), _m().dot(z, x)
        g = (-matrix_dot(z, gz.T, z)
             + matrix_dot(z, z.T, gz, identity_like(xz) - xz)
             + matrix_dot(identity_like(zx) - zx, gz, z.T, z))
        return [g.T]

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = input_shapes[0]
        return [(cols, rows)]


class Det(Op):
    """The determinant of a square matrix (a scalar); its gradient is
    ``gz * det(x) * inv(x).T``."""

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(x, "det")
        return Apply(self, [x], [TensorType(x.dtype, shape=())()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(np.linalg.det(inputs[0]), dtype=node.outputs[0].dtype)

    def L_op(self, inputs, outputs, output_grads):
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        return [gz * z * matrix_inverse(x).T]

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]


class Eig(Op):
    """Eigenvalues and right eigenvectors of a square matrix
    (``numpy.linalg.eig``).  The results are cast to the input's dtype, as in
    Theano, so a matrix with complex eigenvalues loses their imaginary parts;
    no gradient."""

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(x, "eig")
        return Apply(self, [x], [TensorType(x.dtype, shape=(None,))(), x.type()])

    def perform(self, node, inputs, output_storage):
        w, v = np.linalg.eig(inputs[0])
        output_storage[0][0] = np.real(w).astype(node.outputs[0].dtype)
        output_storage[1][0] = np.real(v).astype(node.outputs[1].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        return [(n,), (n, n)]


def _sym_from_triangle(g, lower):
    """The gradient with respect to a matrix of which only one triangle is
    read: ``g + g.T`` off the diagonal in that triangle, ``g`` on it."""
    s = g + g.T
    kept = tril(s) if lower else triu(s)
    return kept - alloc_diag(diagonal(g))


class Eigh(Op):
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric
    matrix, of which only the ``UPLO`` triangle is read (``numpy.linalg.eigh``).
    The gradient (distinct eigenvalues) goes to that triangle."""

    __props__ = ("UPLO",)

    def __init__(self, UPLO="L"):
        if UPLO not in ("L", "U"):
            raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
        self.UPLO = UPLO

    def make_node(self, x):
        x = _float_matrix(x, "eigh")
        return Apply(self, [x], [TensorType(x.dtype, shape=(None,))(), x.type()])

    def perform(self, node, inputs, output_storage):
        w, v = np.linalg.eigh(inputs[0], self.UPLO)
        output_storage[0][0] = w.astype(node.outputs[0].dtype, copy=False)
        output_storage[1][0] = v.astype(node.outputs[1].dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        m = _m()
        (x,), (w, v), (gw, gv) = inputs, outputs, output_grads
        inner = m.zeros_like(x)
        if not _disconnected(gw):
            inner = inner + alloc_diag(gw)
        if not _disconnected(gv):
            gap = w.dimshuffle("x", 0) - w.dimshuffle(0, "x")      # w_j - w_i
            off = m.neq(gap, 0)
            f = m.switch(off, 1.0 / m.switch(off, gap, m.ones_like(gap)), m.zeros_like(gap))
            inner = inner + f * m.dot(v.T, gv)
        g = matrix_dot(v, inner, v.T)
        return [_sym_from_triangle(g, self.UPLO == "L")]

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        return [(n,), (n, n)]


class QR(Op):
    """The QR factorization (``numpy.linalg.qr``) in one of its modes:
    'reduced' and 'complete' give (q, r), 'r' gives r, 'raw' gives (h, tau).
    No gradient, as in Theano."""

    __props__ = ("mode",)

    def __init__(self, mode="reduced"):
        if mode not in ("reduced", "complete", "r", "raw"):
            raise ValueError(f"qr: mode must be 'reduced', 'complete', 'r' or 'raw', got "
                             f"{mode!r}")
        self.mode = mode

    def make_node(self, x):
        x = _float_matrix(x, "qr")
        if self.mode == "r":
            outs = [x.type()]
        elif self.mode == "raw":
            outs = [x.type(), TensorType(x.dtype, shape=(None,))()]
        else:
            outs = [x.type(), x.type()]
        return Apply(self, [x], outs)

    def perform(self, node, inputs, output_storage):
        res = np.linalg.qr(inputs[0], self.mode)
        res = (res,) if self.mode == "r" else tuple(res)
        for store, out, val in zip(output_storage, node.outputs, res):
            store[0] = np.asarray(val).astype(out.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = input_shapes[0]
        k = _m().minimum(rows, cols)
        return {"reduced": [(rows, k), (k, cols)], "complete": [(rows, rows), (rows, cols)],
                "r": [(k, cols)], "raw": [(cols, rows), (k,)]}[self.mode]


class SVD(Op):
    """The singular value decomposition (``numpy.linalg.svd``): (u, s, vt), or
    s alone when ``compute_uv`` is false.  No gradient, as in Theano."""

    __props__ = ("full_matrices", "compute_uv")

    def __init__(self, full_matrices=True, compute_uv=True):
        self.full_matrices, self.compute_uv = bool(full_matrices), bool(compute_uv)

    def make_node(self, x):
        x = _float_matrix(x, "svd")
        s = TensorType(x.dtype, shape=(None,))()
        return Apply(self, [x], [x.type(), s, x.type()] if self.compute_uv else [s])

    def perform(self, node, inputs, output_storage):
        res = np.linalg.svd(inputs[0], self.full_matrices, self.compute_uv)
        res = tuple(res) if self.compute_uv else (res,)
        for store, out, val in zip(output_storage, node.outputs, res):
            store[0] = np.asarray(val).astype(out.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = input_shapes[0]
        k = _m().minimum(rows, cols)
        if not self.compute_uv:
            return [(k,)]
        if self.full_matrices:
            return [(rows, rows), (k,), (cols, cols)]
        return [(rows, k), (k,), (k, cols)]


class Cholesky(Op):
    """The Cholesky factor of a symmetric positive-definite matrix
    (``scipy.linalg.cholesky``), lower or upper.  ``on_error='raise'`` fails
    on a matrix that is not positive definite; ``'nan'`` returns NaNs."""

    __props__ = ("lower", "on_error")

    def __init__(self, lower=True, on_error="raise"):
        if on_error not in ("raise", "nan"):
            raise ValueError(f"cholesky: on_error must be 'raise' or 'nan', got {on_error!r}")
        self.lower, self.on_error = bool(lower), on_error

    def make_node(self, x):
        x = _float_matrix(x, "cholesky")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        try:
            z = _linalg().cholesky(inputs[0], lower=self.lower)
        except np.linalg.LinAlgError:
            if self.on_error == "raise":
                raise
            z = np.full_like(inputs[0], np.nan)
        output_storage[0][0] = z.astype(node.outputs[0].dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        # Murray (2016): with L the lower factor and Phi the lower triangle with
        # its diagonal halved, the gradient is L^-T Phi(L^T gL) L^-1, given to
        # the triangle that the factorization reads.
        (z,), (gz,) = outputs, output_grads
        m = _m()
        low, glow = (z, gz) if self.lower else (z.T, gz.T)
        phi = tril(m.dot(low.T, glow))
        phi = phi - alloc_diag(diagonal(phi) / 2.0)
        upper = Solve("upper_triangular", lower=False)
        s = upper(low.T, upper(low.T, phi.T).T)
        g = tril(s + s.T) - alloc_diag(diagonal(s))
        return [g if self.lower else g.T]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class Solve(Op):
    """The solution x of ``a @ x = b`` (``b`` a vector or a matrix).
    ``A_structure``: 'general' (LU), 'symmetric', 'lower_triangular' or
    'upper_triangular' (only that triangle of ``a`` is read)."""

    __props__ = ("A_structure", "lower")

    _STRUCTURES = ("general", "symmetric", "lower_triangular", "upper_triangular")

    def __init__(self, A_structure="general", lower=False):
        if A_structure not in self._STRUCTURES:
            raise ValueError(f"solve: A_structure must be one of {self._STRUCTURES}, got "
                             f"{A_structure!r}")
        self.A_structure, self.lower = A_structure, bool(lower)

    def make_node(self, a, b):
        from symgraph.tensor.type import upcast

        a = _float_matrix(a, "solve")
        b = as_tensor_variable(b)
        if b.ndim not in (1, 2):
            raise TypeError(f"solve: b must be a vector or a matrix, got {b.type}")
        dtype = upcast(a.dtype, b.dtype)
        if dtype not in FLOAT_DTYPES:
            dtype = "float64"
        return Apply(self, [a, b], [TensorType(dtype, shape=(None,) * b.ndim)()])

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        if self.A_structure == "lower_triangular":
            x = _linalg().solve_triangular(a, b, lower=True)
        elif self.A_structure == "upper_triangular":
            x = _linalg().solve_triangular(a, b, lower=False)
        elif self.A_structure == "symmetric":
            x = _linalg().solve(a, b, assume_a="sym", lower=self.lower)
        else:
            x = _linalg().solve(a, b)
        output_storage[0][0] = np.asarray(x).astype(node.outputs[0].dtype, copy=False)

    def _transposed(self):
        flip = {"lower_triangular": "upper_triangular", "upper_triangular": "lower_triangular"}
        structure = flip.get(self.A_structure, self.A_structure)
        return Solve(structure, lower=not self.lower)

    def L_op(self, inputs, outputs, output_grads):
        (a, b), (x,), (gx,) = inputs, outputs, output_grads
        m = _m()
        gb = self._transposed()(a.T, gx)
        ga = -(gb.dimshuffle(0, "x") * x.dimshuffle("x", 0) if b.ndim == 1 else m.dot(gb, x.T))
        if self.A_structure == "lower_triangular":
            ga = tril(ga)
        elif self.A_structure == "upper_triangular":
            ga = triu(ga)
        return [ga, gb]

    def infer_shape(self, fgraph, node, input_shapes):
        a_shape, b_shape = input_shapes
        return [(a_shape[1],) + tuple(b_shape[1:])]


class Eigvalsh(Op):
    """The eigenvalues (ascending) of the symmetric matrix ``a``, or of the
    generalized problem ``a v = w b v`` with ``b`` positive definite
    (``scipy.linalg.eigvalsh``)."""

    __props__ = ("lower",)

    def __init__(self, lower=True):
        self.lower = bool(lower)

    def make_node(self, a, b=None):
        a = _float_matrix(a, "eigvalsh")
        inputs = [a] if b is None else [a, _float_matrix(b, "eigvalsh")]
        return Apply(self, inputs, [TensorType(a.dtype, shape=(None,))()])

    def perform(self, node, inputs, output_storage):
        a = inputs[0]
        b = inputs[1] if len(inputs) > 1 else None
        w = _linalg().eigvalsh(a, b, lower=self.lower)
        output_storage[0][0] = w.astype(node.outputs[0].dtype, copy=False)

    def L_op(self, inputs, outputs, output_grads):
        # with eigenvectors v normalized so that v.T b v = I:
        # dw_i = v_i.T (da - w_i db) v_i
        (w,), (gw,) = outputs, output_grads
        a = inputs[0]
        b = inputs[1] if len(inputs) > 1 else None
        v = _GeneralizedEigenvectors(self.lower)(*inputs)
        ga = matrix_dot(v, alloc_diag(gw), v.T)
        grads = [_sym_from_triangle(ga, self.lower)]
        if b is not None:
            gb = -matrix_dot(v, alloc_diag(gw * w), v.T)
            grads.append(_sym_from_triangle(gb, self.lower))
        del a
        return grads

    def infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0],)]


class _GeneralizedEigenvectors(Op):
    """The eigenvectors that go with ``Eigvalsh`` (b-orthonormal); used by its
    gradient only."""

    __props__ = ("lower",)

    def __init__(self, lower=True):
        self.lower = bool(lower)

    def make_node(self, *inputs):
        return Apply(self, list(inputs), [inputs[0].type()])

    def perform(self, node, inputs, output_storage):
        b = inputs[1] if len(inputs) > 1 else None
        _, v = _linalg().eigh(inputs[0], b, lower=self.lower)
        output_storage[0][0] = v.astype(node.outputs[0].dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


class Expm(Op):
    """The matrix exponential (``scipy.linalg.expm``).  Its gradient is the
    Frechet derivative at ``x.T`` in the direction ``gz``: the upper-right
    block of ``expm([[x.T, gz], [0, x.T]])``."""

    __props__ = ()

    def make_node(self, x):
        x = _float_matrix(x, "expm")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _linalg().expm(inputs[0]).astype(node.outputs[0].dtype,
                                                                   copy=False)

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.ops.join import concatenate

        (x,), (gz,) = inputs, output_grads
        m = _m()
        n = x.shape[0]
        gz = m.cast(gz, x.dtype)
        top = concatenate([x.T, gz], axis=1)
        bottom = concatenate([m.zeros_like(x), x.T], axis=1)
        block = self(concatenate([top, bottom], axis=0))
        return [block[:n, n:]]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]


matrix_inverse = MatrixInverse()
pinv = MatrixPinv()
det = Det()
eig = Eig()
expm = Expm()
solve = Solve()
solve_lower_triangular = Solve("lower_triangular", lower=True)
solve_upper_triangular = Solve("upper_triangular", lower=False)
solve_symmetric = Solve("symmetric")
cholesky = Cholesky()


def eigh(a, UPLO="L"):
    """(w, v): the ascending eigenvalues and orthonormal eigenvectors of the
    symmetric matrix ``a``, reading its ``UPLO`` triangle."""
    return Eigh(UPLO)(a)


def qr(a, mode="reduced"):
    """NumPy's ``qr``: (q, r) for 'reduced' or 'complete', r for 'r', (h, tau)
    for 'raw'."""
    return QR(mode)(a)


def svd(a, full_matrices=1, compute_uv=1):
    """NumPy's ``svd``: (u, s, vt), or s when ``compute_uv`` is false."""
    return SVD(full_matrices, compute_uv)(a)


def eigvalsh(a, b=None, lower=True):
    """The ascending eigenvalues of the symmetric ``a`` (with ``b``: of the
    generalized problem ``a v = w b v``)."""
    return Eigvalsh(lower)(a) if b is None else Eigvalsh(lower)(a, b)


# The compositions (tri, tril, ..., kron) live in ops/linalg_compose.py;
# re-exported here, where users of Theano's nlinalg look for them.
from symgraph.ops.linalg_compose import (alloc_diag, diagonal, kron, matrix_dot,  # noqa: E402
                                         matrix_power, trace, tri, tril, triu)
