"""Theano's ``tensor.raw_random`` functional form: a state in, a new state
and a sample out; the numbers against NumPy's generator on the same state."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.tensor import raw_random as rr


def _stateful(draw):
    """A function whose state input advances through its update, as Theano
    programs built them."""
    rng = rr.random_state_type()
    new_state, sample = draw(rng)
    f = symgraph.function([symgraph.In(rng, value=np.random.default_rng(7), update=new_state)],
                          sample)
    return f


def test_state_type():
    rng = rr.random_state_type()
    assert isinstance(rng.type, rr.RandomStateType)
    assert rr.RandomStateType() == rr.random_state_type


@pytest.mark.parametrize("name, draw, reference", [
    ("uniform", lambda r: rr.uniform(r, (3, 2), -2.0, 2.0, dtype="float64"),
     lambda g: g.uniform(-2.0, 2.0, size=(3, 2))),
    ("normal", lambda r: rr.normal(r, (4,), 1.0, 3.0, dtype="float64"),
     lambda g: g.normal(1.0, 3.0, size=(4,))),
    ("binomial", lambda r: rr.binomial(r, (5,), 10, 0.3),
     lambda g: g.binomial(10, 0.3, size=(5,))),
    ("random_integers", lambda r: rr.random_integers(r, (6,), 2, 4),
     lambda g: g.integers(2, 5, size=(6,))),
    ("poisson", lambda r: rr.poisson(r, (3,), 2.5), lambda g: g.poisson(2.5, size=(3,))),
])
def test_draws_match_numpy_and_the_state_advances(name, draw, reference):
    f = _stateful(draw)
    gen = np.random.default_rng(7)
    first, second = f(), f()
    np.testing.assert_allclose(first, reference(gen))
    np.testing.assert_allclose(second, reference(gen))
    assert not np.array_equal(first, second)


def test_the_input_state_is_not_modified():
    gen = np.random.default_rng(3)
    before = gen.bit_generator.state
    new_state, sample = rr.uniform(gen, (2,))
    f = symgraph.function([], [new_state, sample])
    after_gen, value = f()
    assert gen.bit_generator.state == before
    np.testing.assert_allclose(value, np.random.default_rng(3).uniform(size=(2,)))
    # The new state continues where the draw stopped.
    np.testing.assert_allclose(after_gen.uniform(size=2),
                               np.random.default_rng(3).uniform(size=4)[2:])


def test_permutation_and_multinomial_shapes():
    rng = rr.random_state_type()
    _, perm = rr.permutation(rng, (3,), 5)
    _, counts = rr.multinomial(rng, (2,), 10, [0.2, 0.3, 0.5])
    f = symgraph.function([rng], [perm, counts])
    p, c = f(np.random.default_rng(0))
    assert p.shape == (3, 5) and all(sorted(row) == list(range(5)) for row in p)
    assert c.shape == (2, 3) and np.all(c.sum(axis=1) == 10)


def test_random_function_op():
    rng = rr.random_state_type()
    op = rr.RandomFunction("uniform", T.dmatrix().type)
    new_state, sample = op(rng, (2, 3), 0.0, 5.0)
    f = symgraph.function([rng], [new_state, sample])
    _, value = f(np.random.default_rng(1))
    np.testing.assert_allclose(value, np.random.default_rng(1).uniform(0.0, 5.0, size=(2, 3)))
    # RandomState's name and a user function.
    ints = rr.RandomFunction("random_integers", T.lvector().type)(rng, (20,), 1, 3)[1]
    assert set(symgraph.function([rng], ints)(np.random.default_rng(2))) <= {1, 2, 3}

    def shifted(gen, shift, size):
        return gen.standard_normal(size) + shift

    g = rr.RandomFunction(shifted, T.dvector().type)(rng, (4,), 10.0)[1]
    np.testing.assert_allclose(symgraph.function([rng], g)(np.random.default_rng(5)),
                               np.random.default_rng(5).standard_normal(4) + 10.0)


def test_random_function_errors():
    with pytest.raises(ValueError, match="has no method 'unifrom'"):
        rr.RandomFunction("unifrom", T.dvector().type)
    with pytest.raises(ValueError, match="outtype .* has 1 dimensions but shape gives 2"):
        rr.RandomFunction("uniform", T.dvector().type)(rr.random_state_type(), (2, 3))
    with pytest.raises(TypeError, match="raw_random.uniform: the rng input"):
        rr.uniform(T.dvector(), (2,))
