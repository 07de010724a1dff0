"""Theano tensor names that symgraph lacked: sgn, gamma, iround, allclose,
mgrid/ogrid, stacklists, Rop/Lop, the take/repeat/sort methods, verify_grad's
rng, conv2d_transpose."""

import numpy as np
import pytest
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph import function
from symgraph.gradient import verify_grad

RNG = np.random.default_rng(42)


def test_sgn_gamma_iround():
    x = T.dvector("x")
    values = np.array([-2.5, -0.5, 0.0, 0.5, 1.5, 2.5, 4.0])
    sgn, iround, away = function([x], [T.sgn(x), T.iround(x),
                                       T.iround(x, "half_away_from_zero")])(values)
    np.testing.assert_array_equal(sgn, np.sign(values))
    assert iround.dtype == np.int64
    np.testing.assert_array_equal(iround, np.round(values).astype("int64"))
    np.testing.assert_array_equal(away, [-3, -1, 0, 1, 2, 3, 4])
    positive = np.array([0.3, 1.0, 2.5, 7.2, 30.0])
    g = function([x], T.gamma(x))
    np.testing.assert_allclose(g(positive), scipy.special.gamma(positive), rtol=1e-13)
    np.testing.assert_array_equal(g(np.array([0.0, -0.0, -1.0, 200.0])),
                                  scipy.special.gamma([0.0, -0.0, -1.0, 200.0]))
    f32 = T.fvector("f")
    assert T.gamma(f32).dtype == "float32"
    out = function([f32], T.gamma(f32))(positive.astype("float32"))
    np.testing.assert_allclose(out, scipy.special.gamma(positive), rtol=1e-5)


def test_gamma_gradient():
    verify_grad(T.gamma, [np.array([0.7, 1.5, 3.2, 5.0])], rng=np.random)
    x = T.dscalar("x")
    dg = function([x], T.grad(T.gamma(x), x))(2.5)
    np.testing.assert_allclose(dg, scipy.special.gamma(2.5) * scipy.special.psi(2.5))


def test_allclose_is_a_symbolic_bool():
    a, b = T.dvectors("a", "b")
    f = function([a, b], T.allclose(a, b))
    x = np.array([1.0, 2.0, np.nan])
    assert f(x, x + 1e-9) == np.allclose(x, x + 1e-9)
    assert bool(f(x[:2], x[:2] + 1e-3)) is False
    g = function([a, b], T.allclose(a, b, equal_nan=True, rtol=0.0, atol=1e-6))
    assert bool(g(x, x + 1e-9)) is True


def test_mgrid_ogrid_match_numpy():
    a = T.mgrid[0:5, 0:3]
    assert len(a) == 2
    np.testing.assert_array_equal(a[0].eval(), np.mgrid[0:5, 0:3][0])
    np.testing.assert_array_equal(a[1].eval(), np.mgrid[0:5, 0:3][1])
    b = T.ogrid[0:5, 0:3]
    np.testing.assert_array_equal(b[0].eval(), np.ogrid[0:5, 0:3][0])
    np.testing.assert_array_equal(b[1].eval(), np.ogrid[0:5, 0:3][1])
    n = T.lscalar("n")
    rows, cols = T.mgrid[1:n:2, 0:3]
    r, c = function([n], [rows, cols])(8)
    np.testing.assert_array_equal(r, np.mgrid[1:8:2, 0:3][0])
    np.testing.assert_array_equal(c, np.mgrid[1:8:2, 0:3][1])
    np.testing.assert_allclose(T.mgrid[0:1:5j].eval(), np.mgrid[0:1:5j])
    with pytest.raises(TypeError, match="slices"):
        T.mgrid[3]


def test_stacklists_with_names_from_one_string():
    a, b, c, d = T.scalars("abcd")
    assert [v.name for v in (a, b, c, d)] == list("abcd")
    X = T.stacklists([[a, b], [c, d]])
    out = function([a, b, c, d], X)(1, 2, 3, 4)
    np.testing.assert_array_equal(out, [[1.0, 2.0], [3.0, 4.0]])
    a, b, c, d = T.matrices("abcd")
    x = np.ones((4, 4), dtype=symgraph.config.floatX)
    assert function([a, b, c, d], T.stacklists([[a, b], [c, d]]))(x, x, x, x).shape == \
        (2, 2, 4, 4)
    single = T.dscalars("x")
    assert single.name == "x"


def test_rop_lop_in_tensor_namespace():
    W, V = T.dmatrices("W", "V")
    x = T.dvector("x")
    y = T.tanh(T.dot(x, W))
    JV = function([W, V, x], T.Rop(y, W, V))
    w, v, xv = RNG.normal(size=(3, 2)), RNG.normal(size=(3, 2)), RNG.normal(size=3)
    slope = 1 - np.tanh(xv @ w) ** 2
    np.testing.assert_allclose(JV(w, v, xv), slope * (xv @ v))
    u = T.dvector("u")
    VJ = function([u, x, W], T.Lop(y, W, u))
    uv = RNG.normal(size=2)
    np.testing.assert_allclose(VJ(uv, xv, w), np.outer(xv, uv * slope))


def test_take_method():
    x = T.dmatrix("x")
    data = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 2], [3, 3]])
    f = function([x], [x.take(idx, axis=1), x.take([5, 0, 11]), x.take([-1, 4], axis=0,
                                                                      mode="wrap"),
                       x.take([7], axis=1, mode="clip")])
    for got, want in zip(f(data), [np.take(data, idx, axis=1), np.take(data, [5, 0, 11]),
                                   np.take(data, [-1, 4], axis=0, mode="wrap"),
                                   np.take(data, [7], axis=1, mode="clip")]):
        np.testing.assert_array_equal(got, want)
    g = function([x], T.grad(x.take([0, 0, 2], axis=0).sum(), x))(data)
    np.testing.assert_array_equal(g, [[2.0] * 4, [0.0] * 4, [1.0] * 4])


def test_repeat_method_scalar_and_vector_counts():
    x = T.dmatrix("x")
    data = np.arange(6.0).reshape(2, 3)
    counts = np.array([2, 0, 1])
    f = function([x], [x.repeat(2), x.repeat(3, axis=0), x.repeat(counts, axis=1)])
    for got, want in zip(f(data), [np.repeat(data, 2), np.repeat(data, 3, axis=0),
                                   np.repeat(data, counts, axis=1)]):
        np.testing.assert_array_equal(got, want)
    g = function([x], T.grad((x.repeat(counts, axis=1) ** 2).sum(), x))(data)
    np.testing.assert_array_equal(g, 2 * data * counts)


def test_sort_and_argsort_methods():
    x = T.dmatrix("x")
    data = RNG.normal(size=(4, 5))
    f = function([x], [x.sort(), x.sort(axis=0), x.sort(axis=None), x.argsort(),
                       x.argsort(axis=0, kind="stable")])
    wants = [np.sort(data), np.sort(data, axis=0), np.sort(data, axis=None),
             np.argsort(data), np.argsort(data, axis=0, kind="stable")]
    for got, want in zip(f(data), wants):
        np.testing.assert_array_equal(got, want)
    verify_grad(lambda v: v.sort(axis=1) * np.arange(5.0), [data])
    verify_grad(lambda v: v.sort(axis=None) ** 2, [data])
    with pytest.raises(NotImplementedError, match="order"):
        x.sort(order="f")


def test_verify_grad_accepts_numpy_random_module():
    verify_grad(lambda a: (a ** 2).sum(), [np.array([1.0, -2.0, 3.0])], rng=np.random)
    verify_grad(lambda a: T.tanh(a), [np.array([0.1, 0.2])], rng=np.random.RandomState(3))
    with pytest.raises(TypeError, match="numpy.random module"):
        verify_grad(lambda a: a, [np.ones(2)], rng="seed")


def test_conv2d_transpose_is_the_gradient_of_conv2d():
    from symgraph.tensor.nnet import abstract_conv

    x = T.dtensor4("x")
    w = T.dtensor4("w")
    y = abstract_conv.conv2d_transpose(x, w, output_shape=(2, 3, 7, 7),
                                       input_dilation=(2, 2), border_mode=(1, 1))
    img = T.dtensor4("img")
    forward = abstract_conv.conv2d(img, w, border_mode=(1, 1), subsample=(2, 2))
    reference = T.grad((forward * x).sum(), img)
    xv, wv = RNG.normal(size=(2, 4, 4, 4)), RNG.normal(size=(4, 3, 3, 3))
    got = function([x, w], y)(xv, wv)
    want = function([x, w, img], reference)(xv, wv, np.zeros((2, 3, 7, 7)))
    assert got.shape == (2, 3, 7, 7)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert T.nnet.conv2d_transpose is abstract_conv.conv2d_transpose
