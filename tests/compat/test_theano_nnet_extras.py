"""Theano's ``nnet.neighbours``, ``nnet.h_softmax``, ``signal.conv.conv2d``,
``OpFromGraph``, ``as_op``, ``clone``, ``function_dump`` and the gradient
helpers ``subgraph_grad``, ``consider_constant`` and ``format_as``."""

import pickle

import numpy as np
import pytest
import scipy.signal

import symgraph as theano
import symgraph.tensor as T
from symgraph.gradient import consider_constant, format_as, subgraph_grad, verify_grad
from symgraph.tensor.nnet import h_softmax, images2neibs, neibs2images
from symgraph.tensor.signal import conv

RNG = np.random.RandomState(11)


def _patches(img, h, w, sh, sw):
    b, c, rows, cols = img.shape
    out = []
    for i in range(b):
        for j in range(c):
            for r in range(0, rows - h + 1, sh):
                for q in range(0, cols - w + 1, sw):
                    out.append(img[i, j, r:r + h, q:q + w].ravel())
    return np.array(out)


def test_images2neibs_modes():
    x = T.dtensor4()
    img = RNG.rand(2, 3, 4, 6)
    got = theano.function([x], images2neibs(x, (2, 3)))(img)
    np.testing.assert_array_equal(got, _patches(img, 2, 3, 2, 3))
    got = theano.function([x], images2neibs(x, (3, 3), (1, 2), mode="ignore_borders"))(img)
    np.testing.assert_array_equal(got, _patches(img, 3, 3, 1, 2))
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    got = theano.function([x], images2neibs(x, (3, 3), (1, 1), mode="half"))(img)
    np.testing.assert_array_equal(got, _patches(padded, 3, 3, 1, 1))
    wrapped = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="wrap")
    got = theano.function([x], images2neibs(x, (3, 3), (1, 1), mode="wrap_centered"))(img)
    np.testing.assert_array_equal(got, _patches(wrapped, 3, 3, 1, 1))
    with pytest.raises(AssertionError, match="tile"):
        theano.function([x], images2neibs(x, (3, 4)))(img)
    with pytest.raises(ValueError):
        images2neibs(x, (2, 2), mode="same")
    with pytest.raises(TypeError):
        images2neibs(T.dmatrix(), (2, 2))


def test_neibs_round_trip_and_gradient():
    x = T.dtensor4()
    img = RNG.rand(2, 2, 4, 6)
    neibs = images2neibs(x, (2, 3))
    back = theano.function([x], neibs2images(neibs, (2, 3), x.shape))(img)
    np.testing.assert_array_equal(back, img)
    verify_grad(lambda a: images2neibs(a, (2, 2), (1, 2), mode="ignore_borders"), [img],
                rng=np.random.RandomState(0))


def test_h_softmax_matches_the_full_probabilities():
    batch, hidden, n_classes, per_class, n_out = 3, 5, 3, 4, 10
    W1, b1 = RNG.randn(hidden, n_classes), RNG.randn(n_classes)
    W2, b2 = RNG.randn(n_classes, hidden, per_class), RNG.randn(n_classes, per_class)
    xv, target = RNG.randn(batch, hidden), np.array([0, 9, 5])
    x, y = T.dmatrix(), T.lvector()
    full = h_softmax(x, batch, n_out, n_classes, per_class, W1, b1, W2, b2)
    picked = h_softmax(x, batch, n_out, n_classes, per_class, W1, b1, W2, b2, target=y)
    got_full, got_picked = theano.function([x, y], [full, picked])(xv, target)

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    cls = softmax(xv @ W1 + b1)
    inner = softmax(np.einsum("bh,cho->bco", xv, W2) + b2)
    expect = (cls[:, :, None] * inner).reshape(batch, -1)[:, :n_out]
    np.testing.assert_allclose(got_full, expect, rtol=1e-10)
    np.testing.assert_allclose(got_picked, expect[np.arange(batch), target], rtol=1e-10)


def test_signal_conv2d_shapes_and_values():
    img, ker = T.dtensor3(), T.dtensor3()
    iv, kv = RNG.rand(2, 5, 6), RNG.rand(3, 2, 3)
    got = theano.function([img, ker], conv.conv2d(img, ker))(iv, kv)
    expect = np.array([[scipy.signal.convolve2d(i, k, "valid") for k in kv] for i in iv])
    np.testing.assert_allclose(got, expect)
    m, k2 = T.dmatrix(), T.dmatrix()
    got = theano.function([m, k2], conv.conv2d(m, k2, border_mode="full"))(iv[0], kv[0])
    np.testing.assert_allclose(got, scipy.signal.convolve2d(iv[0], kv[0], "full"))
    got = theano.function([img, k2], conv.conv2d(img, k2))(iv, kv[0])
    assert got.shape == (2, 4, 4)
    with pytest.raises(TypeError):
        conv.conv2d(T.dtensor4(), k2)


def test_op_from_graph_values_gradient_and_shared():
    x, y = T.dmatrices("x", "y")
    s = theano.shared(np.full((2, 3), 2.0), name="s")
    op = theano.OpFromGraph([x, y], [x * y + T.exp(x) * s])
    a, b = T.dmatrices("a", "b")
    A, B = RNG.rand(2, 3), RNG.rand(2, 3)
    out = op(a, b)
    f = theano.function([a, b], [out, theano.grad(out.sum(), a), theano.grad(out.sum(), s)])
    val, ga, gs = f(A, B)
    np.testing.assert_allclose(val, A * B + 2 * np.exp(A))
    np.testing.assert_allclose(ga, B + 2 * np.exp(A))
    np.testing.assert_allclose(gs, np.exp(A))
    verify_grad(lambda p, q: op(p, q), [A, B], rng=np.random.RandomState(0))
    custom = theano.OpFromGraph([x], [x * 3], grad_overrides=lambda inp, g: [g[0] * 0])
    np.testing.assert_array_equal(theano.function([a], theano.grad(custom(a).sum(), a))(A), 0)
    with pytest.raises(ValueError, match="not among the inputs"):
        theano.OpFromGraph([x], [x + y])
    with pytest.raises(TypeError):
        op(a, T.dvector())


def test_as_op():
    @theano.as_op(itypes=[T.dmatrix], otypes=[T.dvector])
    def row_sums(m):
        return m.sum(axis=1)

    x = T.dmatrix()
    A = RNG.rand(3, 2)
    np.testing.assert_allclose(theano.function([x], row_sums(x))(A), A.sum(1))
    with pytest.raises(TypeError):
        row_sums(T.dvector())
    with pytest.raises(Exception, match="not implemented"):
        theano.grad(row_sums(x).sum(), x)


def test_clone_and_function_dump(tmp_path):
    x, y = T.dvectors("x", "y")
    z = theano.clone(x * 2 + 1, replace={x: y})
    np.testing.assert_array_equal(theano.function([y], z)(np.array([1.0, 2.0])), [3.0, 5.0])
    with pytest.raises(TypeError):
        theano.clone(x * 2, replace={x: T.lvector()})
    path = tmp_path / "fn.pkl"
    theano.function_dump(str(path), [x], x * 3)
    with open(path, "rb") as fh:
        args = pickle.load(fh)
    g = theano.function(**args)
    np.testing.assert_array_equal(g(np.array([1.0])), [3.0])
    assert theano.dot is T.dot
    assert "x" in theano.pprint(x * 2)


def test_gradient_helpers():
    x, w1, w2 = T.dvector("x"), T.dvector("w1"), T.dvector("w2")
    h = T.tanh(x * w1)
    cost = (h * w2).sum()
    # backpropagate the second half, then the first half from h's gradient
    (g_w2,), (g_h,) = subgraph_grad(wrt=[w2], end=[h], cost=cost)
    (g_w1,), _ = subgraph_grad(wrt=[w1], end=[x], start={h: g_h})
    f = theano.function([x, w1, w2], [g_w1, g_w2] + theano.grad(cost, [w1, w2]))
    a, b, c, d = f(np.array([0.5, -1.0]), np.array([0.3, 0.7]), np.array([2.0, 1.0]))
    np.testing.assert_allclose(a, c)
    np.testing.assert_allclose(b, d)
    with pytest.raises(ValueError):
        subgraph_grad([w1], [x])
    g = theano.function([x], theano.grad((consider_constant(x) * x).sum(), x))
    np.testing.assert_array_equal(g(np.array([3.0, 4.0])), [3.0, 4.0])
    assert format_as(True, False, 1) == [1]
    assert format_as(False, True, [1]) == (1,)
    assert format_as(False, False, [1]) == 1
    with pytest.raises(ValueError):
        format_as(True, True, 1)
