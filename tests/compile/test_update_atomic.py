"""A call that raises changes no shared variable, even with in-place updates.

In-place updates write into the shared variables' buffers while the call
runs; when a second one fails on bad input after a first one wrote, the
update guard must have raised before any write.  Every case is tried with
both orders of the updates (so that the failing one runs first or last) and
with every linker.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.compile.update_guard import update_guard

LINKERS = ["py", "c|py", "c"]


def compile_(inputs, updates, linker, outputs=()):
    return symgraph.function(inputs, list(outputs), updates=updates,
                             mode=symgraph.Mode(linker=linker))


def shared_pair(shape=(3,)):
    a = symgraph.shared(np.zeros(shape), name="a")
    b = symgraph.shared(np.zeros(shape), name="b")
    return a, b


def orders(pairs):
    return [pairs, pairs[::-1]]


def assert_unchanged(f, bad_args, error, *shared):
    before = [s.get_value() for s in shared]
    with pytest.raises(error) as info:
        f(*bad_args)
    for s, value in zip(shared, before):
        np.testing.assert_array_equal(s.get_value(), value, err_msg=s.name)
    return info.value


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_elemwise_update_with_a_bad_shape(linker, flip):
    a, b = shared_pair()
    x = T.dvector("x")
    pairs = [(a, a + x), (b, b + 1.0)]
    f = compile_([x], pairs[::-1] if flip else pairs, linker)
    assert sum(bool(n.op.destroy_map) for n in f.maker.fgraph.apply_nodes) == 2
    err = assert_unchanged(f, [np.ones(4)], ValueError, a, b)
    assert "input 1 has size 4 in dimension 0, but input 0 has size 3" in str(err)
    assert "pairs = [(a, a + x)" in str(err)     # the failing node's line
    f(np.arange(3.0))
    np.testing.assert_array_equal(a.get_value(), np.arange(3.0))
    np.testing.assert_array_equal(b.get_value(), np.ones(3))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_inc_subtensor_update_out_of_bounds(linker, flip):
    a, b = shared_pair()
    i = T.lscalar("i")
    pairs = [(a, T.inc_subtensor(a[i], 1.0)), (b, b + 1.0)]
    f = compile_([i], pairs[::-1] if flip else pairs, linker)
    err = assert_unchanged(f, [7], IndexError, a, b)
    assert "out of bounds" in str(err)
    f(-1)
    np.testing.assert_array_equal(a.get_value(), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(b.get_value(), np.ones(3))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_inc_subtensor_update_with_a_bad_value_shape(linker, flip):
    a, b = shared_pair((3, 4))
    y = T.dvector("y")
    pairs = [(a, T.set_subtensor(a[1], y)), (b, b * 2.0 + 1.0)]
    f = compile_([y], pairs[::-1] if flip else pairs, linker)
    assert_unchanged(f, [np.ones(5)], ValueError, a, b)
    f(np.arange(4.0))
    np.testing.assert_array_equal(a.get_value()[1], np.arange(4.0))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_advanced_inc_subtensor_update_out_of_bounds(linker, flip):
    a, b = shared_pair((4,))
    idx = T.lvector("idx")
    pairs = [(a, T.inc_subtensor(a[idx], 1.0)), (b, b + 1.0)]
    f = compile_([idx], pairs[::-1] if flip else pairs, linker)
    assert_unchanged(f, [np.array([0, 9])], IndexError, a, b)
    f(np.array([0, 0, 3]))
    np.testing.assert_array_equal(a.get_value(), [2.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_chained_in_place_updates_of_one_variable(linker, flip):
    a, b = shared_pair((3,))
    i, j = T.lscalar("i"), T.lscalar("j")
    twice = T.set_subtensor(T.set_subtensor(a[i], 5.0)[j], 7.0)
    pairs = [(a, twice), (b, b + 1.0)]
    f = compile_([i, j], pairs[::-1] if flip else pairs, linker)
    assert_unchanged(f, [0, 3], IndexError, a, b)
    assert_unchanged(f, [3, 0], IndexError, a, b)
    f(0, 2)
    np.testing.assert_array_equal(a.get_value(), [5.0, 0.0, 7.0])


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("flip", [False, True])
def test_gemm_update_with_operands_that_do_not_fit(linker, flip):
    w = symgraph.shared(np.ones((3, 4)), name="w")
    b = symgraph.shared(np.zeros(4), name="b")
    x, y = T.dmatrix("x"), T.dmatrix("y")
    pairs = [(w, w - 0.5 * T.dot(x, y)), (b, b + 1.0)]
    f = compile_([x, y], pairs[::-1] if flip else pairs, linker)
    assert_unchanged(f, [np.ones((3, 2)), np.ones((5, 4))], ValueError, w, b)
    assert_unchanged(f, [np.ones((2, 2)), np.ones((2, 4))], ValueError, w, b)
    f(np.ones((3, 2)), np.ones((2, 4)))
    np.testing.assert_array_equal(w.get_value(), np.zeros((3, 4)))


@pytest.mark.parametrize("linker", LINKERS)
def test_outputs_and_updates_stay_right_over_many_calls(linker):
    a, b = shared_pair((2, 3))
    x = T.dmatrix("x")
    out = (a + x).sum()
    f = compile_([x], [(a, a + x), (b, b - x * 2.0)], linker, outputs=[out])
    want_a, want_b = np.zeros((2, 3)), np.zeros((2, 3))
    rng = np.random.default_rng(0)
    for _ in range(5):
        arr = rng.random((2, 3))
        (got,) = f(arr)
        np.testing.assert_allclose(got, (want_a + arr).sum())
        want_a, want_b = want_a + arr, want_b - 2 * arr
        np.testing.assert_allclose(a.get_value(), want_a)
        np.testing.assert_allclose(b.get_value(), want_b)
        assert_unchanged(f, [rng.random((3, 3))], ValueError, a, b)


def test_no_guard_without_a_later_node_to_check():
    a = symgraph.shared(np.zeros(3), name="a")
    x = T.dvector("x")
    f = compile_([x], [(a, a + x)], "py")
    fg = f.maker.fgraph
    assert update_guard(fg, fg.toposort(), fg.inputs[1:]) is None
    b = symgraph.shared(np.zeros(3), name="b")
    g = compile_([x], [(a, a + x), (b, b + x)], "py")
    fg = g.maker.fgraph
    guard = update_guard(fg, fg.toposort(), fg.inputs[1:])
    assert guard is not None and len(guard.checks) == 1


def test_debug_mode_with_a_guard():
    a, b = shared_pair()
    x = T.dvector("x")
    f = symgraph.function([x], [], updates=[(b, b + 1.0), (a, a + x)], mode="DebugMode")
    assert_unchanged(f, [np.ones(4)], ValueError, a, b)
    f(np.ones(3))
    np.testing.assert_array_equal(a.get_value(), np.ones(3))
