"""symgraph.gradient.jacobian and hessian for expressions whose size is not
known when the graph is built: computed by a scan, as Theano does."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import DisconnectedInputError, hessian, jacobian
from symgraph.scan import Scan


def _uses_scan(outputs, inputs):
    f = symgraph.function(inputs, outputs)
    return f, any(isinstance(n.op, Scan) for n in f.maker.fgraph.toposort())


def test_jacobian_of_a_vector_of_unknown_length(rng):
    v = T.vector("v")
    A = T.matrix("A")
    y = T.tanh(T.dot(v, A))
    f, scanned = _uses_scan(jacobian(y, v), [A, v])
    assert scanned
    av, vv = rng.normal(size=(5, 3)), rng.normal(size=5)
    np.testing.assert_allclose(f(av, vv), ((1 - np.tanh(vv @ av) ** 2) * av).T)


def test_jacobian_of_a_matrix_with_respect_to_several_inputs(rng):
    x = T.matrix("x")
    w = T.vector("w")
    y = T.exp(x * w)                 # (m, n): flattened to m * n rows
    jx, jw = jacobian(y, [x, w])
    f = symgraph.function([x, w], [jx, jw])
    xv, wv = rng.normal(size=(2, 3)), rng.normal(size=3)
    got_x, got_w = f(xv, wv)
    assert got_x.shape == (6, 2, 3) and got_w.shape == (6, 3)
    e = np.exp(xv * wv)
    expected_x = np.zeros((6, 2, 3))
    expected_w = np.zeros((6, 3))
    for r in range(2):
        for c in range(3):
            expected_x[r * 3 + c, r, c] = e[r, c] * wv[c]
            expected_w[r * 3 + c, c] = e[r, c] * xv[r, c]
    np.testing.assert_allclose(got_x, expected_x)
    np.testing.assert_allclose(got_w, expected_w)


def test_jacobian_through_a_scan(rng):
    x = T.vector("x")
    out, _ = symgraph.scan(lambda h, x: T.tanh(h * x), outputs_info=T.ones_like(x),
                           non_sequences=x, n_steps=3)
    j = jacobian(out[-1], x)
    f = symgraph.function([x], j)
    fo = symgraph.function([x], out[-1])
    xv = rng.normal(size=4)
    num = np.stack([(fo(xv + d) - fo(xv - d)) / 2e-6 for d in np.eye(4) * 1e-6], axis=1)
    np.testing.assert_allclose(f(xv), num, atol=1e-7)


def test_large_static_size_is_not_unrolled(rng):
    x = T.TensorType("float64", shape=(40,))("x")
    f, scanned = _uses_scan(jacobian(x ** 2, x), [x])
    assert scanned
    xv = rng.normal(size=40)
    np.testing.assert_allclose(f(xv), np.diag(2 * xv))


def test_hessian_of_a_vector_of_unknown_length(rng):
    x = T.vector("x")
    a = T.matrix("a")
    cost = T.dot(x, T.dot(a, x)) + T.sum(T.sin(x))
    f = symgraph.function([x, a], hessian(cost, x))
    xv, av = rng.normal(size=4), rng.normal(size=(4, 4))
    np.testing.assert_allclose(f(xv, av), av + av.T - np.diag(np.sin(xv)))
    y = T.vector("y")
    hx, hy = hessian(T.sum(x ** 2 * y), [x, y])
    g = symgraph.function([x, y], [hx, hy])
    yv = rng.normal(size=4)
    got_x, got_y = g(xv, yv)
    np.testing.assert_allclose(got_x, np.diag(2 * yv))
    np.testing.assert_allclose(got_y, np.zeros((4, 4)))


def test_jacobian_reports_disconnected_inputs_once():
    x = T.vector("x")
    z = T.vector("z")
    with pytest.raises(DisconnectedInputError):
        jacobian(x * 2, [x, z])
    jx, jz = jacobian(x * 2, [x, z], disconnected_inputs="ignore")
    got_x, got_z = symgraph.function([x, z], [jx, jz])(np.ones(2), np.ones(3))
    np.testing.assert_allclose(got_x, 2 * np.eye(2))
    np.testing.assert_allclose(got_z, np.zeros((2, 3)))


def test_hessian_through_a_scan_with_respect_to_its_initial_state(rng):
    x0 = T.vector("x0")
    w = T.vector("w")
    out, _ = symgraph.scan(lambda a, b, w: T.sin(a) * b + w * 0.1,
                           outputs_info=[dict(initial=T.stack([x0, x0 * 2]), taps=[-2, -1])],
                           non_sequences=w, n_steps=4)
    cost = (out[-1] ** 2).sum() + (out[1] * x0).sum()
    h = symgraph.function([x0, w], hessian(cost, x0))
    g = symgraph.function([x0, w], symgraph.grad(cost, x0))
    x0v, wv = rng.normal(size=3), rng.normal(size=3)
    numeric = np.stack([(g(x0v + d, wv) - g(x0v - d, wv)) / 2e-6
                        for d in np.eye(3) * 1e-6], axis=1)
    np.testing.assert_allclose(h(x0v, wv), numeric, atol=1e-6)
