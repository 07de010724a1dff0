"""Random ops and RandomStream: distributions, shapes, state handling.

The methods take Theano's argument order (size first); tests/compat/test_random_streams.py
checks the Theano-specific forms."""

import copy

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import random as rv
from symgraph.tensor.random import RandomStream
from symgraph.tensor.shared_randomstreams import RandomStreams

N = 20000  # large enough for loose moment checks, small enough to be fast


def _draw(var, *args, **kwargs):
    return symgraph.function([], var, **kwargs)(*args)


# -- distributions -------------------------------------------------------------


def test_uniform_range_moments_and_dtype():
    srng = RandomStream(seed=1)
    v = _draw(srng.uniform((N,), 2.0, 5.0))
    assert v.dtype == symgraph.config.floatX and v.shape == (N,)
    assert v.min() >= 2.0 and v.max() < 5.0
    assert abs(v.mean() - 3.5) < 0.05
    assert abs(v.var() - 9 / 12) < 0.05


def test_uniform_float32_and_symbolic_params():
    srng = RandomStream(seed=2)
    low = T.fscalar("low")
    u = srng.uniform((100, 3), low, low + 1, dtype="float32")
    assert u.dtype == "float32" and u.type.shape == (100, 3)
    v = symgraph.function([low], u)(np.float32(-4))
    assert v.dtype == np.float32 and v.shape == (100, 3)
    assert v.min() >= -4 and v.max() < -3


def test_normal_moments():
    srng = RandomStream(seed=3)
    v = _draw(srng.normal((N,), 1.5, 2.0))
    assert abs(v.mean() - 1.5) < 0.1 and abs(v.std() - 2.0) < 0.1
    w = _draw(srng.normal(avg=-3.0, std=0.5, size=(N,), dtype="float32"))
    assert w.dtype == np.float32
    assert abs(w.mean() + 3.0) < 0.05 and abs(w.std() - 0.5) < 0.05


def test_binomial():
    srng = RandomStream(seed=4)
    v = _draw(srng.binomial(n=10, p=0.3, size=(N,)))
    assert v.dtype == np.int64
    assert v.min() >= 0 and v.max() <= 10
    assert abs(v.mean() - 3.0) < 0.1
    coin = _draw(srng.binomial(size=(N,), prob=0.25, dtype="int32"))
    assert coin.dtype == np.int32 and set(np.unique(coin)) <= {0, 1}
    assert abs(coin.mean() - 0.25) < 0.02


def test_random_integers():
    srng = RandomStream(seed=5)
    v = _draw(srng.random_integers((N,), 3, 6))
    assert v.dtype == np.int64 and set(np.unique(v)) == {3, 4, 5, 6}
    w = _draw(srng.random_integers(size=(N,), high=3, dtype="int16"))
    assert w.dtype == np.int16 and set(np.unique(w)) == {0, 1, 2, 3}
    r = _draw(srng.random_integers((N,), -1, 1))
    assert set(np.unique(r)) == {-1, 0, 1}  # both ends included (Theano's meaning)
    with pytest.raises(TypeError, match="integer"):
        srng.random_integers((2,), 0.5, 3.0)


def test_choice():
    srng = RandomStream(seed=6)
    a = np.array([10, 20, 30, 40, 50], dtype="int32")
    no_repeat = _draw(srng.choice(size=(5,), a=a, replace=False))
    assert no_repeat.dtype == np.int32 and sorted(no_repeat) == sorted(a)
    weighted = _draw(srng.choice((N,), 3, p=np.array([0.2, 0.0, 0.8])))
    assert weighted.dtype == np.int64 and 1 not in weighted
    assert abs((weighted == 2).mean() - 0.8) < 0.02
    single = _draw(srng.choice(a=a))
    assert single.shape == () and single in a


def test_permutation():
    srng = RandomStream(seed=7)
    n = T.lscalar("n")
    perm = srng.permutation(n=n)
    assert perm.dtype == "int64" and perm.ndim == 1
    v = symgraph.function([n], perm)(10)
    assert sorted(v) == list(range(10))
    assert sorted(_draw(srng.permutation(n=5))) == list(range(5))


# -- sizes and shapes ---------------------------------------------------------------


def test_size_forms():
    srng = RandomStream(seed=8)
    assert _draw(srng.uniform()).shape == ()
    assert _draw(srng.uniform(size=4)).shape == (4,)
    assert _draw(srng.uniform(size=(2, 0, 3))).shape == (2, 0, 3)

    n, m = T.lscalar("n"), T.iscalar("m")
    u = srng.uniform(size=(n, 3, m))
    assert u.ndim == 3
    assert symgraph.function([n, m], u)(2, 5).shape == (2, 3, 5)

    assert symgraph.function([n], srng.uniform(size=n, dtype=None))(4).shape == (4,)

    shape = T.lvector("shape")
    v = srng.normal(size=shape, ndim=2)
    assert v.ndim == 2
    assert symgraph.function([shape], v)(np.array([4, 1])).shape == (4, 1)
    with pytest.raises(TypeError, match="ndim"):
        srng.normal(size=shape)
    with pytest.raises(TypeError, match="size"):
        srng.normal(size=T.dmatrix())


def test_shape_from_parameters():
    srng = RandomStream(seed=9)
    loc = T.dvector("loc")
    scale = T.dmatrix("scale")
    s = srng.normal(None, loc, scale)
    assert s.ndim == 2
    v = symgraph.function([loc, scale], s)(np.zeros(3), np.full((2, 3), 1e-12))
    assert v.shape == (2, 3) and np.allclose(v, 0)
    fixed = srng.normal(None, np.zeros((2, 1)), np.ones(4))
    assert fixed.type.shape == (2, 4)
    with pytest.raises(ValueError, match="broadcast"):
        srng.normal(None, np.zeros(3), np.ones(4))


def test_infer_shape():
    from tests.helpers import check_infer_shape

    # An explicit generator input: the checker builds a graph from its inputs only.
    r = rv.RandomGeneratorType()("r")
    gen = np.random.default_rng(0)
    n = T.lscalar("n")
    loc, scale = T.dvector("loc"), T.dmatrix("scale")
    check_infer_shape(rv.UniformRV()(r, (n, 2), 0.0, 1.0), [r, n], [gen, 3])
    check_infer_shape(rv.NormalRV()(r, None, loc, scale), [r, loc, scale],
                      [gen, np.zeros(5), np.ones((2, 1))])
    check_infer_shape(rv.NormalRV()(r, T.stack([n, n]), 0.0, 1.0), [r, n], [gen, 2])
    check_infer_shape(rv.ChoiceRV("int64")(r, (n,), 5), [r, n], [gen, 4])
    check_infer_shape(rv.PermutationRV()(r, n), [r, n], [gen, 6])
    check_infer_shape(rv.PermutationRV("float64")(r, scale), [r, scale], [gen, np.ones((3, 2))])


# -- state: updates, seeding, purity ---------------------------------------------


def test_successive_calls_differ_and_seed_repeats():
    srng = RandomStream(seed=11)
    u = srng.uniform(size=(5,))
    z = srng.normal(size=(3,))
    f = symgraph.function([], [u, z])
    first, second = f(), f()
    assert not np.allclose(first[0], second[0])
    assert not np.allclose(first[1], second[1])
    srng.seed(11)
    again = [f(), f()]
    for got, want in zip(again, [first, second]):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    srng.seed(12)
    assert not np.allclose(f()[0], first[0])


def test_streams_with_same_seed_agree():
    a, b = RandomStream(seed=42), RandomStreams(seed=42)
    fa = symgraph.function([], [a.uniform(size=(4,)), a.random_integers((4,), 0, 99)])
    fb = symgraph.function([], [b.uniform(size=(4,)), b.random_integers((4,), 0, 99)])
    for _ in range(3):
        for x, y in zip(fa(), fb()):
            np.testing.assert_array_equal(x, y)
    c = RandomStream(seed=43)
    assert not np.allclose(symgraph.function([], c.uniform(size=(4,)))(),
                           symgraph.function([], RandomStream(seed=42).uniform(size=(4,)))())


def test_no_default_updates_repeats():
    srng = RandomStream(seed=13)
    u = srng.uniform(size=(4,))
    frozen = symgraph.function([], u, no_default_updates=True)
    np.testing.assert_array_equal(frozen(), frozen())
    moving = symgraph.function([], u)
    assert not np.allclose(moving(), moving())


def test_default_update_and_updates_list():
    srng = RandomStream(seed=14)
    u = srng.uniform(size=(2,))
    state, next_state = srng.updates()[0]
    assert state.default_update is next_state
    assert u.rng is state and u.update == (state, next_state)
    assert isinstance(state.type, rv.RandomGeneratorType)
    before = state.get_value()
    symgraph.function([], u)()
    assert not state.type.values_eq(before, state.get_value())


def test_perform_never_mutates_the_input_state():
    gen = np.random.default_rng(0)
    before = copy.deepcopy(gen.bit_generator.state)
    node = rv.NormalRV("float64").make_node(gen, (3,), 0.0, 1.0)
    assert isinstance(node.inputs[0], rv.RandomGeneratorConstant)
    inputs = [gen, np.array([3]), np.array(0.0), np.array(1.0)]
    outs1, outs2 = [[None], [None]], [[None], [None]]
    node.op.perform(node, inputs, outs1)
    node.op.perform(node, inputs, outs2)
    assert gen.bit_generator.state == before
    np.testing.assert_array_equal(outs1[1][0], outs2[1][0])
    assert outs1[0][0] is not gen
    assert outs1[0][0].bit_generator.state != before
    np.testing.assert_array_equal(outs1[1][0], np.random.default_rng(0).normal(0, 1, 3))


def test_constant_generator_gives_fixed_draws():
    sample = rv.UniformRV("float64")(np.random.default_rng(5), (3,), 0.0, 1.0)
    f = symgraph.function([], sample)
    np.testing.assert_array_equal(f(), f())
    assert not rv.UniformRV("float64").do_constant_folding(None, sample.owner)


def test_generator_type_and_errors():
    t = rv.RandomGeneratorType()
    assert t == rv.RandomGeneratorType()
    with pytest.raises(TypeError, match="Generator"):
        t.filter(np.random.RandomState(0))
    assert t.values_eq(np.random.default_rng(3), np.random.default_rng(3))
    with pytest.raises(TypeError, match="rng"):
        rv.NormalRV()(T.dscalar(), None, 0.0, 1.0)
    with pytest.raises(TypeError, match="float"):
        rv.UniformRV("int32")
    with pytest.raises(TypeError, match="non-negative"):
        RandomStream(0).uniform(size=(2, -2))


def test_ops_are_values():
    assert rv.NormalRV("float32") == rv.NormalRV("float32")
    assert rv.NormalRV("float32") != rv.NormalRV("float64")
    assert rv.NormalRV("float64") != rv.UniformRV("float64")
    assert rv.ChoiceRV("int64", replace=False) != rv.ChoiceRV("int64")
    assert hash(rv.BinomialRV()) == hash(rv.BinomialRV())


def test_no_gradient_through_samples():
    from symgraph.gradient import is_disconnected

    srng = RandomStream(seed=15)
    mu = T.dscalar("mu")
    s = srng.normal(None, mu, 1.0)
    node = s.owner
    grads = node.op.L_op(node.inputs, node.outputs, [None, T.dscalar()])
    assert getattr(grads[0].type, "is_null", False)
    assert all(is_disconnected(g) for g in grads[1:])
    assert node.op.connection_pattern(node)[2] == [False, False]
