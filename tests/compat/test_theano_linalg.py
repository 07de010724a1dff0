"""Theano's ``tensor.nlinalg`` and ``tensor.slinalg``: values against NumPy
and SciPy, gradients by finite differences, and the errors."""

import numpy as np
import pytest
import scipy.linalg

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor import nlinalg, slinalg

RNG = np.random.RandomState(42)
A = RNG.rand(4, 4)
SPD = A @ A.T + 4 * np.eye(4)
B = RNG.rand(4, 3)
VEC = RNG.rand(4)


def run(outputs, *values, inputs=None):
    return symgraph.function(inputs, outputs, on_unused_input="ignore")(*values)


def test_nlinalg_values():
    x, v = T.dmatrix(), T.dvector()
    names = [nlinalg.matrix_inverse(x), nlinalg.det(x), nlinalg.pinv(x), nlinalg.trace(x),
             nlinalg.diag(x), nlinalg.diag(v), nlinalg.extract_diag(x),
             nlinalg.alloc_diag(v), nlinalg.matrix_power(x, 3), nlinalg.matrix_power(x, 0),
             nlinalg.matrix_dot(x, x, x), nlinalg.norm(x, "fro"), nlinalg.norm(v, 3),
             nlinalg.norm(x, np.inf), nlinalg.tensorinv(x.reshape((2, 2, 4)), ind=2)]
    got = run(names, SPD, VEC, inputs=[x, v])
    expect = [np.linalg.inv(SPD), np.linalg.det(SPD), np.linalg.pinv(SPD), np.trace(SPD),
              np.diag(SPD), np.diag(VEC), np.diag(SPD), np.diag(VEC),
              np.linalg.matrix_power(SPD, 3), np.eye(4), SPD @ SPD @ SPD,
              np.linalg.norm(SPD, "fro"), np.linalg.norm(VEC, 3), np.linalg.norm(SPD, np.inf),
              np.linalg.tensorinv(SPD.reshape(2, 2, 4), ind=2)]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_decompositions():
    x = T.dmatrix()
    w, v = run(nlinalg.eigh(x), SPD, inputs=[x])
    np.testing.assert_allclose(w, np.linalg.eigh(SPD)[0])
    np.testing.assert_allclose(SPD @ v, v * w, atol=1e-10)
    ew, ev = run(nlinalg.eig(x), SPD, inputs=[x])
    np.testing.assert_allclose(np.sort(ew), np.sort(np.linalg.eigvals(SPD).real))
    tall = RNG.rand(5, 3)
    for mode in ("reduced", "complete"):
        q, r = run(nlinalg.qr(x, mode), tall, inputs=[x])
        np.testing.assert_allclose(q @ r, tall, atol=1e-12)
        assert q.shape == np.linalg.qr(tall, mode)[0].shape
    r_only = run(nlinalg.qr(x, "r"), tall, inputs=[x])
    np.testing.assert_allclose(np.abs(r_only), np.abs(np.linalg.qr(tall, "r")))
    u, s, vt = run(nlinalg.svd(x, full_matrices=0), tall, inputs=[x])
    np.testing.assert_allclose((u * s) @ vt, tall, atol=1e-12)
    np.testing.assert_allclose(run(nlinalg.svd(x, compute_uv=0), tall, inputs=[x]),
                               np.linalg.svd(tall, compute_uv=False))


def test_slinalg_values():
    x, y, v = T.dmatrix(), T.dmatrix(), T.dvector()
    outs = [slinalg.cholesky(x), slinalg.solve(x, v), slinalg.solve(x, y),
            slinalg.solve_lower_triangular(x, y), slinalg.solve_upper_triangular(x, v),
            slinalg.Solve("symmetric")(x, y), slinalg.expm(x * 0.1),
            slinalg.kron(x, y), slinalg.eigvalsh(x, None), slinalg.eigvalsh(x, x + 2 * T.eye(4))]
    got = run(outs, SPD, B, VEC, inputs=[x, y, v])
    expect = [np.linalg.cholesky(SPD), np.linalg.solve(SPD, VEC), np.linalg.solve(SPD, B),
              scipy.linalg.solve_triangular(SPD, B, lower=True),
              scipy.linalg.solve_triangular(SPD, VEC, lower=False),
              np.linalg.solve(SPD, B), scipy.linalg.expm(SPD * 0.1), np.kron(SPD, B),
              np.linalg.eigvalsh(SPD), scipy.linalg.eigvalsh(SPD, SPD + 2 * np.eye(4))]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("fn, args", [
    (nlinalg.matrix_inverse, [SPD]),
    (nlinalg.det, [SPD]),
    (nlinalg.pinv, [RNG.rand(4, 3)]),
    (nlinalg.trace, [A]),
    (lambda a: nlinalg.tensorinv(a.reshape((2, 2, 4))), [SPD]),
    (lambda a, b: nlinalg.tensorsolve(a, b), [SPD, VEC]),
    (lambda a: nlinalg.eigh(a)[0], [SPD]),
    (lambda a: nlinalg.eigh(a)[1], [SPD]),
    (lambda a: nlinalg.Eigh("U")(a)[0], [SPD]),
    (slinalg.cholesky, [SPD]),
    (lambda a: slinalg.Cholesky(lower=False)(a), [SPD]),
    (slinalg.solve, [SPD, B]),
    (slinalg.solve, [SPD, VEC]),
    (slinalg.solve_lower_triangular, [np.tril(SPD), B]),
    (slinalg.solve_upper_triangular, [np.triu(SPD), VEC]),
    (lambda a: slinalg.expm(a), [A * 0.5]),
    (slinalg.kron, [A[:2, :3], A[:3, :2]]),
    (lambda a: slinalg.eigvalsh(a, None), [SPD]),
    (lambda a, b: slinalg.eigvalsh(a, b), [SPD, SPD + np.eye(4)]),
])
def test_gradients(fn, args):
    verify_grad(fn, [np.array(a) for a in args], rng=np.random.RandomState(0))


def test_no_gradient_where_theano_had_none():
    x = T.dmatrix()
    for out in (nlinalg.svd(x)[1].sum(), nlinalg.qr(x)[1].sum(), nlinalg.eig(x)[0].sum()):
        with pytest.raises(Exception, match="not implemented"):
            symgraph.grad(out, x)


def test_errors():
    with pytest.raises(TypeError):
        nlinalg.matrix_inverse(T.dvector())
    with pytest.raises(TypeError):
        nlinalg.diag(T.dtensor3())
    with pytest.raises(ValueError):
        nlinalg.matrix_power(T.dmatrix(), -1)
    with pytest.raises(ValueError):
        slinalg.Solve("banded")
    x = T.dmatrix()
    with pytest.raises(np.linalg.LinAlgError):
        symgraph.function([x], slinalg.cholesky(x))(-np.eye(2))
    nan = symgraph.function([x], slinalg.Cholesky(on_error="nan")(x))(-np.eye(2))
    assert np.isnan(nan).all()


def test_triangles_and_diagonal():
    x = T.dtensor3()
    val = RNG.rand(2, 3, 4)
    got = run([T.tril(x), T.triu(x, 1), T.diagonal(x, 1, 1, 2), T.diagonal(x, -1, 0, 2),
               T.tri(3, 5, -1)], val, inputs=[x])
    expect = [np.tril(val), np.triu(val, 1), np.diagonal(val, 1, 1, 2),
              np.diagonal(val, -1, 0, 2), np.tri(3, 5, -1)]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e)
    # an inf above the diagonal does not leak into tril
    m = T.dmatrix()
    np.testing.assert_array_equal(run(T.tril(m), np.array([[1, np.inf], [2, 3]]), inputs=[m]),
                                  [[1, 0], [2, 3]])
