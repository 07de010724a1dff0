"""Theano's ``tensor.extra_ops``, its special functions and ``Assert``:
values against NumPy/SciPy, gradients, and the errors."""

import numpy as np
import pytest
import scipy.special as ss

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor import extra_ops
from symgraph.tensor.opt import Assert, assert_op

RNG = np.random.RandomState(3)
M = RNG.rand(3, 4)
SORTED = np.sort(RNG.rand(5))
IDX = np.array([0, 3, 1, 3, 3])


def _fill_offset(a, val, k):
    a = a.copy()
    for i in range(a.shape[0]):
        if 0 <= i + k < a.shape[1]:
            a[i, i + k] = val
    return a


def test_extra_ops_values():
    x, v, iv = T.dmatrix(), T.dvector(), T.lvector()
    k = T.lscalar()
    outs = [extra_ops.cumsum(x), extra_ops.cumsum(x, 1), extra_ops.cumprod(x, 0),
            T.cumprod(x), extra_ops.searchsorted(v, x), extra_ops.searchsorted(v, x, "right"),
            extra_ops.diff(x, 2, 1), extra_ops.diff(v),
            extra_ops.bincount(iv), extra_ops.bincount(iv, weights=v, minlength=7),
            extra_ops.compress(v > 0.5, v), extra_ops.fill_diagonal(x, 5.0),
            extra_ops.fill_diagonal_offset(x, 7.0, -1), extra_ops.fill_diagonal_offset(x, 7.0, k),
            extra_ops.to_one_hot(iv, 5), extra_ops.squeeze(x.dimshuffle("x", 0, 1)),
            extra_ops.repeat(v, 2), T.bartlett(k)]
    got = symgraph.function([x, v, iv, k], outs)(M, SORTED, IDX, 2)
    filled = M.copy()
    np.fill_diagonal(filled, 5)
    expect = [np.cumsum(M), np.cumsum(M, 1), np.cumprod(M, 0), np.cumprod(M),
              np.searchsorted(SORTED, M), np.searchsorted(SORTED, M, "right"),
              np.diff(M, 2, 1), np.diff(SORTED), np.bincount(IDX),
              np.bincount(IDX, SORTED, minlength=7), np.compress(SORTED > 0.5, SORTED), filled,
              _fill_offset(M, 7, -1), _fill_offset(M, 7, 2), np.eye(5)[IDX], M,
              np.repeat(SORTED, 2), np.bartlett(2)]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e)
        assert g.shape == e.shape


def test_unique_and_index_conversions():
    v, iv = T.dvector(), T.lvector()
    data = np.array([3.0, 1, 3, 2, 1])
    got = symgraph.function([v], extra_ops.Unique(True, True, True)(v))(data)
    for g, e in zip(got, np.unique(data, True, True, True)):
        np.testing.assert_array_equal(g, e)
    flat = np.array([0, 5, 11])
    got = symgraph.function([iv], extra_ops.unravel_index(iv, (3, 4)))(flat)
    np.testing.assert_array_equal(got, np.unravel_index(flat, (3, 4)))
    got = symgraph.function([iv], extra_ops.unravel_index(iv, (3, 4), order="F"))(flat)
    np.testing.assert_array_equal(got, np.unravel_index(flat, (3, 4), order="F"))
    idx = np.array([0, 2, 3])
    for mode, order in (("raise", "C"), ("raise", "F")):
        got = symgraph.function([iv], extra_ops.ravel_multi_index((iv, iv), (4, 5), mode,
                                                                  order))(idx)
        np.testing.assert_array_equal(got, np.ravel_multi_index((idx, idx), (4, 5), mode=mode,
                                                                order=order))
    big = np.array([1, 7])
    for mode in ("wrap", "clip"):
        got = symgraph.function([iv], extra_ops.ravel_multi_index((iv, iv), (4, 5), mode))(big)
        np.testing.assert_array_equal(got, np.ravel_multi_index((big, big), (4, 5), mode=mode))


def test_extra_ops_errors():
    iv = T.lvector()
    with pytest.raises(AssertionError, match="out of range"):
        symgraph.function([iv], extra_ops.unravel_index(iv, (3, 4)))(np.array([12]))
    with pytest.raises(AssertionError, match="negative"):
        symgraph.function([iv], extra_ops.bincount(iv, assert_nonneg=True))(np.array([-1]))
    with pytest.raises(TypeError):
        extra_ops.bincount(T.dvector())
    with pytest.raises(ValueError):
        extra_ops.CumOp(axis=2)(T.dmatrix())
    with pytest.raises(TypeError):
        extra_ops.searchsorted(T.dmatrix(), T.dvector())


@pytest.mark.parametrize("fn", [
    extra_ops.cumsum, lambda a: extra_ops.cumsum(a, 0), lambda a: extra_ops.cumprod(a, 1),
    extra_ops.cumprod, lambda a: extra_ops.diff(a, 1, 0), lambda a: extra_ops.fill_diagonal(a, 3.0),
    lambda a: extra_ops.compress(T.as_tensor([True, False, True, True]), a, 1),
])
def test_extra_ops_gradients(fn):
    verify_grad(fn, [M + 0.5], rng=np.random.RandomState(0))


SPECIAL = [
    (T.erfcx, ss.erfcx, lambda: RNG.rand(4) * 3),
    (T.erfcinv, ss.erfcinv, lambda: RNG.rand(4) * 1.8 + 0.1),
    (lambda x: T.chi2sf(x, 3.0), lambda x: ss.chdtrc(3.0, x), lambda: RNG.rand(4) + 0.5),
    (lambda x: T.gammainc(2.5, x), lambda x: ss.gammainc(2.5, x), lambda: RNG.rand(4) + 0.5),
    (lambda x: T.gammaincc(2.5, x), lambda x: ss.gammaincc(2.5, x), lambda: RNG.rand(4) + 0.5),
    (lambda x: T.gammau(2.5, x), lambda x: ss.gammaincc(2.5, x) * ss.gamma(2.5),
     lambda: RNG.rand(4) + 0.5),
    (lambda x: T.gammal(2.5, x), lambda x: ss.gammainc(2.5, x) * ss.gamma(2.5),
     lambda: RNG.rand(4) + 0.5),
    (T.j0, ss.j0, lambda: RNG.rand(4) * 5), (T.j1, ss.j1, lambda: RNG.rand(4) * 5),
    (lambda x: T.jv(2.5, x), lambda x: ss.jv(2.5, x), lambda: RNG.rand(4) * 5 + 0.1),
    (T.i0, ss.i0, lambda: RNG.rand(4) * 3), (T.i1, ss.i1, lambda: RNG.rand(4) * 3),
    (lambda x: T.iv(1.5, x), lambda x: ss.iv(1.5, x), lambda: RNG.rand(4) * 3 + 0.1),
]


@pytest.mark.parametrize("sym, ref, make", SPECIAL)
def test_special_functions(sym, ref, make):
    x = T.dvector()
    val = make()
    np.testing.assert_allclose(symgraph.function([x], sym(x))(val), ref(val), rtol=1e-10)
    verify_grad(sym, [val], rng=np.random.RandomState(1))


def test_special_order_gradient_not_implemented():
    x, v = T.dvector(), T.dvector()
    with pytest.raises(Exception, match="not implemented"):
        symgraph.grad(T.jv(v, x).sum(), v)


def test_assert_op():
    x = T.dvector()
    f = symgraph.function([x], assert_op(x, T.all(x > 0), msg="positive please") * 2)
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(AssertionError, match="positive please"):
        f(np.array([1.0, -2.0]))
    g = symgraph.function([x], symgraph.grad(Assert()(x, x.sum() > 0).sum(), x))
    np.testing.assert_array_equal(g(np.array([1.0, 2.0])), [1.0, 1.0])
