"""Theano's function interface: In(update=...) state inputs, the input
shortcuts, f[x] / f.value / f.container, and Function.copy(share_memory,
swap, delete_updates)."""

import pickle

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import In, function


def test_library_example_state_input():
    u, x, s = T.scalars("u", "x", "s")
    inc = function([u, In(x, value=3), In(s, update=(s + x * u), value=10.0)], [])
    assert inc(5) == []
    assert inc[s] == 25.0
    inc(3, 4)
    assert inc[s] == 37.0
    assert inc[x] == 3.0  # the override of x lasted one call
    inc(3, 4, 7)
    assert inc[s] == 19.0
    inc[s] = 10
    assert inc[s] == 10.0 and isinstance(inc[s], np.ndarray)
    assert inc["s"] == 10.0 and inc[2] == 10.0


def test_tuple_shortcuts_and_value_container_views():
    a, b, c = T.scalars("xys")
    fn = function([a, b, ((c, c + a + b), 10.0)], [])
    assert fn["s"] is fn.value[c]
    assert fn["s"] is fn.container[c].value
    assert fn["s"] == 10.0
    fn(1, 2)
    assert fn["s"] == 13.0
    fn["s"] = 99.0
    fn(1, 0)
    assert fn["s"] == 100.0
    fn.value[c] = 99.0
    fn(1, 0)
    assert fn["s"] == 100.0
    with pytest.raises(TypeError, match="read-only"):
        fn.container[c] = 3.0

    x = T.scalar()
    y, z, w = T.scalar("y"), T.scalar("z"), T.scalar("w")
    fn = function(inputs=[x, y, In(z, value=42), ((w, w + x), 0)], outputs=x + y + z)
    with pytest.raises(TypeError, match="missing"):
        fn(1)
    assert fn(1, 2) == 45.0 and fn["w"] == 1
    assert fn(1, y=2) == 45.0 and fn["w"] == 2
    assert fn(1, 2, 3) == 6.0 and fn["w"] == 3
    assert fn(1, z=3, y=2) == 6.0 and fn["w"] == 4
    assert fn(1, 2, w=400) == 45.0 and fn["w"] == 401
    assert fn(1, 2) == 45.0 and fn["w"] == 402
    named = function([("alpha", x), ("beta", y, 2.0), ("gamma", (w, w * 2), 1.0)], x * y * w)
    assert named(alpha=3) == 6.0 and named["gamma"] == 2.0
    with pytest.raises(TypeError, match="shortcuts|tuples"):
        function([(x, y, z, w)], x)


def test_state_input_vectors_and_update_type():
    acc = T.dvector("acc")
    step = T.dvector("step")
    f = function([step, In(acc, value=np.zeros(3), update=acc + step)], acc * 1)
    np.testing.assert_array_equal(f(np.ones(3)), np.zeros(3))
    np.testing.assert_array_equal(f(np.array([1.0, 2.0, 3.0])), np.ones(3))
    np.testing.assert_array_equal(f["acc"], [2.0, 3.0, 4.0])
    before = f["acc"]
    out = f(np.zeros(3))
    out[:] = -1  # the kept state is not the returned array
    np.testing.assert_array_equal(f["acc"], before)
    bad = T.dmatrix("bad")
    with pytest.raises(TypeError, match="update of input"):
        function([bad, In(acc, value=np.zeros(3), update=bad)], acc)


def test_state_input_without_value_needs_a_first_call():
    s = T.dscalar("s")
    f = function([In(s, update=s * 2)], s + 0)
    with pytest.raises(TypeError, match="missing"):
        f()
    assert f(3.0) == 3.0
    assert f() == 6.0 and f() == 12.0


def test_state_input_in_python_and_debug_modes():
    s, x = T.dscalars("s", "x")
    for mode in (symgraph.Mode(linker="py"), "DebugMode"):
        f = function([x, In(s, value=1.0, update=s * x)], s + x, mode=mode)
        assert f(2.0) == 3.0 and f(3.0) == 5.0 and f["s"] == 6.0


def test_copy_swap_delete_updates_share_memory():
    x = T.dscalar("x")
    w = symgraph.shared(np.float64(1.0), name="w")
    other = symgraph.shared(np.float64(100.0), name="other")
    f = function([x], w * x, updates=[(w, w + 1)])
    g = f.copy(swap={w: other})
    assert g(2.0) == 200.0 and other.get_value() == 101.0 and w.get_value() == 1.0
    assert f(2.0) == 2.0 and w.get_value() == 2.0
    frozen = f.copy(delete_updates=True, name="frozen")
    assert frozen.name == "frozen"
    assert frozen(3.0) == 6.0 and frozen(3.0) == 6.0 and w.get_value() == 2.0
    again = g.copy(swap={other: w})  # a copy of a copy swaps back
    assert again(1.0) == 2.0 and w.get_value() == 3.0
    with pytest.raises(ValueError, match="not a shared variable"):
        f.copy(swap={symgraph.shared(np.float64(0.0)): w})
    with pytest.raises(TypeError, match="same type"):
        f.copy(swap={w: symgraph.shared(np.zeros(2))})

    s = T.dscalar("s")
    counter = function([In(s, value=0.0, update=s + 1)], s + 0)
    counter()
    shared_copy = counter.copy(share_memory=True)
    own_copy = counter.copy()
    shared_copy()
    assert counter["s"] == 2.0 and own_copy["s"] == 1.0
    own_copy()
    assert counter["s"] == 2.0 and own_copy["s"] == 2.0
    still = counter.copy(delete_updates=True)
    still()
    assert still["s"] == 2.0


def test_copy_keeps_swap_through_pickling():
    x = T.dscalar("x")
    w = symgraph.shared(np.float64(2.0), name="w")
    other = symgraph.shared(np.float64(5.0), name="other")
    g = function([x], w * x).copy(swap={w: other})
    h = pickle.loads(pickle.dumps(g))
    assert h(1.0) == 5.0
