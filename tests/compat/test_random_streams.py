"""RandomStreams with Theano's argument order, as its tutorial and library
reference (``tensor/raw_random``, ``tensor/shared_randomstreams``) use it."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import function
from symgraph.tensor.shared_randomstreams import RandomStreams

N = 20000


def _draw(var):
    return function([], var)()


def test_tutorial_brief_example_and_seeding():
    srng = RandomStreams(seed=234)
    rv_u = srng.uniform((2, 2))
    rv_n = srng.normal((2, 2))
    f = function([], rv_u)
    g = function([], rv_n, no_default_updates=True)
    nearly_zeros = function([], rv_u + rv_u - 2 * rv_u)
    f_val0, f_val1 = f(), f()
    assert f_val0.shape == (2, 2) and not np.allclose(f_val0, f_val1)
    assert ((0 <= f_val0) & (f_val0 < 1)).all()
    np.testing.assert_array_equal(g(), g())
    np.testing.assert_allclose(nearly_zeros(), np.zeros((2, 2)), atol=1e-12)

    rng_val = rv_u.rng.get_value(borrow=True)
    rng_val.seed(89234)
    rv_u.rng.set_value(rng_val, borrow=True)
    first = f()
    rng_val = rv_u.rng.get_value(borrow=True)
    rng_val.seed(89234)
    rv_u.rng.set_value(rng_val, borrow=True)
    np.testing.assert_array_equal(f(), first)

    srng.seed(902340)
    state_after_v0 = rv_u.rng.get_value().get_state()
    nearly_zeros()
    v1 = f()
    rng = rv_u.rng.get_value(borrow=True)
    rng.set_state(state_after_v0)
    rv_u.rng.set_value(rng, borrow=True)
    v2, v3 = f(), f()
    assert not np.allclose(v1, v2)
    np.testing.assert_array_equal(v3, v1)


def test_tutorial_copy_random_state_between_graphs():
    class Graph:
        def __init__(self, seed=123):
            self.rng = RandomStreams(seed)
            self.y = self.rng.uniform(size=(1,))

    g1, g2 = Graph(seed=123), Graph(seed=987)
    f1, f2 = function([], g1.y), function([], g2.y)
    assert f1() != f2()
    for su1, su2 in zip(g1.rng.state_updates, g2.rng.state_updates):
        su2[0].set_value(su1[0].get_value())
    np.testing.assert_array_equal(f1(), f2())


def test_getitem_setitem():
    srng = RandomStreams(seed=1)
    u = srng.uniform((3,))
    gen = srng[u.rng]
    assert isinstance(gen, np.random.Generator)
    state = gen.get_state()
    f = function([], u)
    a = f()
    fresh = srng[u.rng]
    fresh.set_state(state)
    srng[u.rng] = fresh
    np.testing.assert_array_equal(f(), a)
    with pytest.raises(KeyError, match="not a generator state"):
        srng[symgraph.shared(np.zeros(2))]


def test_uniform_positional_order_and_moments():
    srng = RandomStreams(seed=2)
    v = _draw(srng.uniform((N,), -2.0, 6.0))
    assert v.dtype == symgraph.config.floatX and v.shape == (N,)
    assert v.min() >= -2.0 and v.max() < 6.0
    assert abs(v.mean() - 2.0) < 0.1 and abs(v.var() - 64 / 12) < 0.15


def test_uniform_dtype_follows_theano_upcast():
    srng = RandomStreams(seed=3)
    with symgraph.config.change_flags(floatX="float32"):
        assert srng.uniform((2,)).dtype == "float32"  # Python bounds promote weakly
        assert srng.uniform((2,), T.dscalar(), 1.0).dtype == "float64"
        assert srng.normal((2,), dtype="float64").dtype == "float64"


def test_normal_avg_std_moments():
    srng = RandomStreams(seed=4)
    v = _draw(srng.normal((N,), 1.5, 2.0))
    assert abs(v.mean() - 1.5) < 0.1 and abs(v.std() - 2.0) < 0.1
    w = _draw(srng.normal(size=(N,), avg=-3.0, std=0.5, dtype="float32"))
    assert w.dtype == np.float32
    assert abs(w.mean() + 3.0) < 0.02 and abs(w.std() - 0.5) < 0.02


def test_binomial_positional_n_p():
    srng = RandomStreams(seed=5)
    v = _draw(srng.binomial((N,), 10, 0.3))
    assert v.dtype == np.int64 and 0 <= v.min() and v.max() <= 10
    assert abs(v.mean() - 3.0) < 0.1 and abs(v.var() - 2.1) < 0.15
    coin = _draw(srng.binomial((N,), p=0.25, dtype="int8"))
    assert coin.dtype == np.int8 and set(np.unique(coin)) == {0, 1}
    assert abs(coin.mean() - 0.25) < 0.02


def test_random_integers_inclusive():
    srng = RandomStreams(seed=6)
    v = _draw(srng.random_integers((N,), -2, 2))
    assert set(np.unique(v)) == {-2, -1, 0, 1, 2}
    assert abs(v.mean()) < 0.05
    default = _draw(srng.random_integers((N,)))  # low=0, high=1
    assert set(np.unique(default)) == {0, 1}


def test_choice_theano_signature():
    srng = RandomStreams(seed=7)
    coin = _draw(srng.choice((N,)))  # a=2
    assert coin.dtype == np.int64 and set(np.unique(coin)) == {0, 1}
    weighted = _draw(srng.choice((N,), 3, True, [0.1, 0.0, 0.9]))
    assert 1 not in weighted and abs((weighted == 2).mean() - 0.9) < 0.01
    values = np.array([1.5, 2.5, 3.5])
    drawn = _draw(srng.choice((3,), values, False))
    assert drawn.dtype == np.float64 and sorted(drawn) == sorted(values)
    as_int = _draw(srng.choice((4,), 5, dtype="int32"))
    assert as_int.dtype == np.int32 and as_int.max() < 5


def test_poisson():
    srng = RandomStreams(seed=8)
    v = _draw(srng.poisson((N,), lam=4.0))
    assert v.dtype == np.int64
    assert abs(v.mean() - 4.0) < 0.1 and abs(v.var() - 4.0) < 0.25


def test_permutation_batch_shape():
    srng = RandomStreams(seed=9)
    one = _draw(srng.permutation(n=6))
    assert one.shape == (6,) and sorted(one) == list(range(6))
    many = srng.permutation((2, 3), 5)
    assert many.ndim == 3 and many.type.shape == (2, 3, 5)
    value = _draw(many)
    assert value.shape == (2, 3, 5)
    np.testing.assert_array_equal(np.sort(value, axis=-1),
                                  np.broadcast_to(np.arange(5), (2, 3, 5)))
    assert len({tuple(r) for r in value.reshape(6, 5)}) > 1  # independent draws
    n = T.lscalar("n")
    assert function([n], srng.permutation((2,), n))(4).shape == (2, 4)
    with pytest.raises(TypeError, match="one permutation"):
        srng.permutation(None, 3, ndim=2)


def test_multinomial_shapes_and_means():
    srng = RandomStreams(seed=10)
    pvals = np.array([0.2, 0.3, 0.5])
    counts = _draw(srng.multinomial((N,), 10, pvals))
    assert counts.shape == (N, 3) and counts.dtype == np.int64
    assert (counts.sum(axis=1) == 10).all()
    np.testing.assert_allclose(counts.mean(axis=0), 10 * pvals, atol=0.05)
    default = _draw(srng.multinomial((4,)))  # n=1, pvals=[0.5, 0.5]
    assert default.shape == (4, 2) and (default.sum(axis=1) == 1).all()
    # batch from pvals, and Theano's -1 in size borrowing the batch dimension
    p = T.dmatrix("p")
    rows = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype="float64")
    by_params = function([p], srng.multinomial(None, 4, p))(rows)
    np.testing.assert_array_equal(by_params[:2], [[4, 0], [0, 4]])
    broadcast = function([p], srng.multinomial((7, -1), 2, p))(rows)
    assert broadcast.shape == (7, 3, 2)
    np.testing.assert_array_equal(broadcast[:, 0], np.tile([2, 0], (7, 1)))


def test_multinomial_float32_softmax_rows():
    srng = RandomStreams(seed=11)
    x = T.fmatrix("x")
    draw = srng.multinomial(n=1, pvals=T.nnet.softmax(x))
    rows = np.random.default_rng(0).normal(size=(50, 7)).astype("float32") * 3
    out = function([x], draw)(rows)
    assert out.shape == (50, 7) and (out.sum(axis=1) == 1).all()


def test_shuffle_row_elements():
    srng = RandomStreams(seed=12)
    x = T.dmatrix("x")
    shuffled = srng.shuffle_row_elements(x)
    f = function([x], [shuffled, shuffled.permutation])
    data = np.arange(20.0).reshape(4, 5)
    out, perm = f(data)
    np.testing.assert_array_equal(np.sort(out, axis=1), data)
    np.testing.assert_array_equal(out, np.take_along_axis(data, perm, axis=1))
    v = T.dvector("v")
    out = function([v], srng.shuffle_row_elements(v))(np.arange(6.0))
    assert sorted(out) == list(range(6))


def test_size_and_ndim_checks():
    srng = RandomStreams(seed=13)
    with pytest.raises(ValueError, match="len"):
        srng.uniform((2, 3), ndim=3)
    with pytest.raises(ValueError, match="parameters need"):
        srng.normal((3,), avg=np.zeros((2, 3)))
    shape = T.lvector("shape")
    v = srng.uniform(shape, ndim=2)
    assert v.ndim == 2
    assert function([shape], v)(np.array([3, 2])).shape == (3, 2)
    x = T.dmatrix("x")
    like = srng.normal(x.shape)
    assert like.ndim == 2
    assert function([x], like)(np.zeros((4, 1))).shape == (4, 1)


def test_same_seed_same_numbers():
    a, b = RandomStreams(seed=42), RandomStreams(seed=42)
    fa = function([], [a.uniform((3,)), a.permutation((2,), 4)])
    fb = function([], [b.uniform((3,)), b.permutation((2,), 4)])
    for _ in range(2):
        for x, y in zip(fa(), fb()):
            np.testing.assert_array_equal(x, y)
