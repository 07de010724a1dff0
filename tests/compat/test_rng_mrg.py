"""symgraph.sandbox.rng_mrg.MRG_RandomStreams: Theano's MRG31k3p streams."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import function
from symgraph.ops import mrg
from symgraph.sandbox.rng_mrg import MRG_RandomStreams, guess_n_streams

# Known answers of L'Ecuyer's reference (Java, SSJ) implementation of MRG31k3p with
# seed [12345] * 6: five samples of substream j of stream i (streams 2**134 steps
# apart, substreams 2**72), as listed in Theano's samples_MRG31k3p_12_7_5.txt.
REFERENCE = {
    (0, 0): [0.7353244530968368, 0.6142074400559068, 0.11007806099951267,
             0.6487741703167558, 0.36619443260133266],
    (0, 6): [0.5435514179989696, 0.330895590595901, 0.49919482320547104,
             0.9409166998229921, 0.8276205519214272],
    (1, 0): [0.5180770065635443, 0.2319392478093505, 0.36197659047320485,
             0.11120751267299056, 0.5018561617471278],
    (11, 6): [0.8762755445204675, 0.8020628895610571, 0.1663151141256094,
              0.31246642768383026, 0.18852565623819828],
}


def _draw(var):
    return function([], var)()


def test_matches_reference_implementation():
    srng = MRG_RandomStreams(seed=12345)
    got = {}
    for stream in range(12):
        u = srng.uniform(size=(7,), nstreams=7, dtype="float64")
        f = function([], u)
        values = np.array([f() for _ in range(5)])  # (sample, substream)
        for sub in range(7):
            got[stream, sub] = values[:, sub]
    for key, want in REFERENCE.items():
        np.testing.assert_array_equal(got[key], want)


def test_jump_matrices_are_powers_of_one_step():
    state = np.array([[12345, 23456, 34567, 45678, 56789, 67890]], dtype=np.int64)
    stepped = state.copy()
    for _ in range(8):
        mrg.mrg_next(stepped)
    eight = (mrg._power_of_two_steps(mrg._A1, 3, mrg.M1),
             mrg._power_of_two_steps(mrg._A2, 3, mrg.M2))
    assert mrg.jump(state[0], eight) == tuple(stepped[0])


def test_uniform_moments_bounds_and_dtypes():
    srng = MRG_RandomStreams(seed=234)
    for dtype, tol in (("float64", 0.01), ("float32", 0.01), ("float16", 0.02)):
        v = _draw(srng.uniform((200, 100), dtype=dtype))
        assert v.dtype == dtype and v.shape == (200, 100)
        assert v.min() > 0 and v.max() < 1
        assert abs(v.mean() - 0.5) < tol and abs(v.var() - 1 / 12) < tol
    w = _draw(srng.uniform((20000,), low=-3.0, high=5.0))
    assert w.dtype == symgraph.config.floatX
    assert w.min() > -3 and w.max() < 5 and abs(w.mean() - 1.0) < 0.1


def test_state_is_a_shared_int32_matrix_advanced_by_updates():
    srng = MRG_RandomStreams(seed=7)
    u = srng.uniform((60,))
    assert u.rstate is srng.state_updates[0][0]
    state = u.rstate.get_value()
    assert state.dtype == np.int32 and state.shape == (guess_n_streams((60,)), 6) == (10, 6)
    f = function([], u)
    a, b = f(), f()
    assert not np.allclose(a, b)
    assert not np.array_equal(u.rstate.get_value(), state)
    frozen = function([], u, no_default_updates=True)
    np.testing.assert_array_equal(frozen(), frozen())


def test_reproducible_from_seed():
    def run(seed):
        srng = MRG_RandomStreams(seed=seed)
        f = function([], [srng.uniform((5, 3)), srng.normal((4,))])
        return [f(), f()]

    first, again, other = run(99), run(99), run(100)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    assert not np.allclose(first[0][0], other[0][0])


def test_seed_method_resets_every_state():
    srng = MRG_RandomStreams(seed=5)
    f = function([], [srng.uniform((4,)), srng.binomial((4,), p=0.5)])
    start = f()
    f()
    srng.seed()
    np.testing.assert_array_equal(f()[0], start[0])
    srng.seed(77)
    fresh = MRG_RandomStreams(seed=77)
    g = function([], [fresh.uniform((4,)), fresh.binomial((4,), p=0.5)])
    np.testing.assert_array_equal(f()[0], g()[0])


def test_seed_validation():
    with pytest.raises(ValueError, match="not be 0"):
        MRG_RandomStreams(0)
    with pytest.raises(ValueError, match="2147462579"):
        MRG_RandomStreams(2 ** 31)
    with pytest.raises(ValueError, match="all be 0"):
        MRG_RandomStreams([0, 0, 0, 1, 2, 3])
    with pytest.raises(TypeError, match="six ints"):
        MRG_RandomStreams([1, 2])
    MRG_RandomStreams([1, 2, 3, 4, 5, 6])


def test_normal_moments_odd_and_symbolic_sizes():
    srng = MRG_RandomStreams(seed=11)
    v = _draw(srng.normal((101, 99), avg=2.0, std=3.0))
    assert v.shape == (101, 99)
    assert abs(v.mean() - 2.0) < 0.1 and abs(v.std() - 3.0) < 0.1
    x = T.dmatrix("x")
    z = srng.normal(x.shape, dtype="float32")
    assert z.ndim == 2 and z.dtype == "float32"
    out = function([x], z)(np.zeros((3, 5)))
    assert out.shape == (3, 5) and out.dtype == np.float32
    n = T.lscalar("n")
    assert function([n], srng.normal((n,)))(7).shape == (7,)


def test_truncated_normal():
    srng = MRG_RandomStreams(seed=12)
    v = _draw(srng.truncated_normal((20000,), avg=1.0, std=2.0))
    bound = 2 * 2.0 / 0.87962566103423978
    assert v.shape == (20000,) and np.abs(v - 1.0).max() < bound
    assert abs(v.mean() - 1.0) < 0.05 and abs(v.std() - 2.0) < 0.05
    w = _draw(srng.normal((20000,), truncate=True))
    assert np.abs(w).max() <= 2.0


def test_binomial_tutorial_uses():
    srng = MRG_RandomStreams(seed=13)
    coin = _draw(srng.binomial((20000,), p=0.3, dtype="float32"))
    assert coin.dtype == np.float32 and set(np.unique(coin)) == {0.0, 1.0}
    assert abs(coin.mean() - 0.3) < 0.015
    # the denoising autoencoder's corruption: size=input.shape
    x = T.matrix("x")
    corrupted = srng.binomial(size=x.shape, n=1, p=1 - 0.25,
                              dtype=symgraph.config.floatX) * x
    out = function([x], corrupted)(np.ones((100, 200)))
    assert out.shape == (100, 200) and abs(out.mean() - 0.75) < 0.02
    # the RBM's sampling: p a matrix of probabilities
    mean = T.matrix("mean")
    sample = srng.binomial(size=mean.shape, n=1, p=mean, dtype=symgraph.config.floatX)
    probs = np.tile(np.array([0.0, 0.2, 1.0]), (5000, 1))
    drawn = function([mean], sample)(probs)
    np.testing.assert_allclose(drawn.mean(axis=0), [0.0, 0.2, 1.0], atol=0.02)


def test_binomial_of_several_trials():
    # n uniforms per sample, compared with p and counted: the same numbers as
    # drawing those uniforms from a stream of the same seed.
    counts = _draw(MRG_RandomStreams(seed=21).binomial((4, 3), n=5, p=0.4))
    u = _draw(MRG_RandomStreams(seed=21).uniform((4, 3, 5)))
    np.testing.assert_array_equal(counts, (u < 0.4).sum(axis=-1))
    assert counts.dtype == np.int64
    # The distribution: mean n p, variance n p (1 - p); p broadcasting per column.
    srng = MRG_RandomStreams(seed=22)
    p = T.dvector("p")
    many = function([p], srng.binomial((20000, 2), n=10, p=p, dtype="float64"))(
        np.array([0.2, 0.9]))
    np.testing.assert_allclose(many.mean(axis=0), [2.0, 9.0], atol=0.05)
    np.testing.assert_allclose(many.var(axis=0), [1.6, 0.9], rtol=0.06)
    assert many.min() >= 0 and many.max() <= 10
    # A symbolic size and a symbolic n.
    x, n = T.dmatrix("x"), T.iscalar("n")
    f = function([x, n], srng.binomial(size=x.shape, n=n, p=0.5))
    out = f(np.zeros((3, 2)), 4)
    assert out.shape == (3, 2) and out.min() >= 0 and out.max() <= 4
    assert (f(np.zeros((3, 2)), 0) == 0).all()
    with pytest.raises(TypeError, match="n must be an int"):
        srng.binomial((3,), n=2.5)


def test_multinomial_counts():
    srng = MRG_RandomStreams(seed=14)
    p = T.dmatrix("p")
    draw = srng.multinomial(pvals=p, n=4)
    probs = np.tile([0.1, 0.6, 0.3], (5000, 1))
    counts = function([p], draw)(probs)
    assert counts.shape == (5000, 3) and counts.dtype == np.int64
    assert (counts.sum(axis=1) == 4).all()
    np.testing.assert_allclose(counts.mean(axis=0), 4 * np.array([0.1, 0.6, 0.3]), atol=0.05)
    one_hot = function([p], srng.multinomial(pvals=p, dtype="float32"))(probs[:10])
    assert one_hot.dtype == np.float32 and (one_hot.sum(axis=1) == 1).all()
    with pytest.raises(ValueError, match="size and ndim"):
        srng.multinomial(size=(3,), pvals=p)
    with pytest.raises(NotImplementedError, match="matrix"):
        srng.multinomial(pvals=T.dvector())


def test_choice_with_and_without_replacement():
    srng = MRG_RandomStreams(seed=15)
    p = T.dmatrix("p")
    probs = np.tile([0.05, 0.15, 0.3, 0.5], (2000, 1))
    distinct = function([p], srng.choice(size=3, p=p, replace=False))(probs)
    assert distinct.shape == (2000, 3)
    assert all(len(set(row)) == 3 for row in distinct)
    assert distinct.min() >= 0 and distinct.max() <= 3
    first = np.bincount(distinct[:, 0], minlength=4) / 2000
    np.testing.assert_allclose(first, [0.05, 0.15, 0.3, 0.5], atol=0.03)
    repeated = function([p], srng.choice(size=5, p=p))(probs)
    assert repeated.shape == (2000, 5)
    np.testing.assert_allclose(np.bincount(repeated.ravel(), minlength=4) / 10000,
                               [0.05, 0.15, 0.3, 0.5], atol=0.02)
    with pytest.raises(TypeError, match="a must be None"):
        srng.choice(size=2, a=4, p=p)
    with pytest.raises(ValueError, match="without replacement"):
        function([p], srng.choice(size=5, p=p, replace=False))(probs[:2])


def test_copy_random_state_between_graphs():
    class Graph:
        def __init__(self, seed):
            self.rng = MRG_RandomStreams(seed)
            self.y = self.rng.uniform(size=(1,))

    g1, g2 = Graph(123), Graph(987)
    f1, f2 = function([], g1.y), function([], g2.y)
    assert f1() != f2()
    g2.rng.rstate = g1.rng.rstate
    for su1, su2 in zip(g1.rng.state_updates, g2.rng.state_updates):
        su2[0].set_value(su1[0].get_value())
    np.testing.assert_array_equal(f1(), f2())


def test_size_checks_and_no_gradient():
    srng = MRG_RandomStreams(seed=16)
    with pytest.raises(ValueError, match="not positive"):
        srng.uniform((3, 0))
    with pytest.raises(TypeError, match="size"):
        srng.uniform("3")
    with pytest.raises(TypeError, match="unexpected"):
        srng.uniform((2,), color="red")
    from symgraph.gradient import DisconnectedInputError

    w = T.dscalar("w")
    u = srng.uniform((3,))
    with pytest.raises(DisconnectedInputError):
        symgraph.grad((u * w).sum(), u.rstate)
    g, sample = function([w], [symgraph.grad((u * w).sum(), w), u])(1.0)
    np.testing.assert_allclose(g, sample.sum())


def test_dropout_accepts_mrg_streams():
    x = T.dmatrix("x")
    out = function([x], T.nnet.dropout(x, 0.5, rng=MRG_RandomStreams(3)))(np.ones((200, 100)))
    assert set(np.unique(out)) == {0.0, 2.0}
    assert abs((out == 0).mean() - 0.5) < 0.02


def test_mult_mat_vect_and_dot_modulo_jump_a_stream():
    from symgraph.sandbox.rng_mrg import DotModulo, multMatVect

    state = np.array([12345] * 6, dtype=np.int32)
    (a1, a2) = (np.array(m, dtype=np.int64) for m in mrg.JUMP_STREAM)
    jumped = multMatVect(state, a1, mrg.M1, a2, mrg.M2)
    assert jumped.dtype == np.int32
    np.testing.assert_array_equal(jumped, mrg.jump(state, mrg.JUMP_STREAM))
    A, s, m = T.lmatrix("A"), T.ivector("s"), T.iscalar("m")
    A2, s2, m2 = T.lmatrix("A2"), T.ivector("s2"), T.iscalar("m2")
    f = function([A, s, m, A2, s2, m2], DotModulo()(A, s, m, A2, s2, m2))
    np.testing.assert_array_equal(f(a1, state[:3], mrg.M1, a2, state[3:], mrg.M2), jumped)
    with pytest.raises(TypeError, match="DotModulo: s must be a 1-d integer tensor"):
        DotModulo()(A, T.dvector(), m, A2, s2, m2)
    with pytest.raises(ValueError, match="state of 6 ints"):
        multMatVect(state[:3], a1, mrg.M1, a2, mrg.M2)
