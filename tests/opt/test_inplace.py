"""The inplace phase: in-place Elemwise / IncSubtensor guarded by the destroy handler.

Each test compiles through ``symgraph.function`` (FAST_RUN, with and without
fusion) and checks the optimized graph, the values against optimizer=None,
and what happened to the caller's arrays and the shared values.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import In, Mode, Out, function, shared
from symgraph.compile.mode import DebugMode
from symgraph.graph.basic import Constant
from symgraph.graph.destroy import DestroyHandler
from symgraph.graph.fg import FunctionGraph, History, InconsistencyError
from symgraph.ops import scalar_basic as sb
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.subtensor import IncSubtensor
from symgraph.opt import inplace as inplace_mod

NO_FUSION = Mode(optimizer="fast_run", excluding=["fusion"])
FAST_RUN = Mode(optimizer="fast_run")
REFERENCE = Mode(optimizer=None)
DEBUG = DebugMode(optimizer="fast_run")
DEBUG_NO_FUSION = DebugMode(optimizer="fast_run", excluding=["fusion"])


def destroyers(f):
    """The nodes of ``f``'s optimized graph that overwrite an input."""
    return [n for n in f.maker.fgraph.apply_nodes if n.op.destroy_map]


def destroyed_vars(f):
    """The variables the in-place nodes of ``f`` overwrite."""
    return [n.inputs[i] for n in destroyers(f) for ins in n.op.destroy_map.values()
            for i in ins]


def assert_same_values(inputs, outputs, args, modes=(FAST_RUN, NO_FUSION), **kw):
    """Each mode gives the unoptimized graph's values; returns the functions."""
    ref = function(inputs, outputs, mode=REFERENCE, **kw)
    expected = ref(*[np.copy(a) for a in args])
    fns = []
    for mode in modes:
        f = function(inputs, outputs, mode=mode, **kw)
        got = f(*[np.copy(a) for a in args])
        for g, e in zip(got if isinstance(outputs, list) else [got],
                        expected if isinstance(outputs, list) else [expected]):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        fns.append(f)
    return fns


@pytest.fixture
def vec():
    return np.linspace(-1.0, 1.0, 7)


# ---------------------------------------------------------------------------
# Intermediates are overwritten; the values do not change


def test_chain_on_intermediates_is_in_place(vec):
    x = T.dvector("x")
    out = (T.exp(x) + 1) * 2
    (f_fused, f_chain) = assert_same_values([x], out, [vec])
    # Without fusion: the add overwrites exp's result, the mul the add's.
    assert len(destroyers(f_chain)) >= 2
    for var in destroyed_vars(f_chain):
        assert var.owner is not None  # an intermediate, never the input x
    assert all(v.owner is not None for v in destroyed_vars(f_fused))


def test_fused_elemwise_overwrites_a_non_elemwise_intermediate(rng):
    a, b = T.dmatrices("a", "b")
    out = T.tanh(T.dot(a, b)) * 0.5 + 1
    args = [rng.normal(size=(3, 4)), rng.normal(size=(4, 5))]
    (f,) = assert_same_values([a, b], out, args, modes=(FAST_RUN,))
    (node,) = destroyers(f)
    assert isinstance(node.op, Elemwise)
    (var,) = destroyed_vars(f)
    assert var.owner is not None and var.owner is not node


def test_broadcast_input_is_not_overwritten(rng):
    m = T.dmatrix("m")
    v = T.dvector("v")
    e = T.exp(v)  # (n,), broadcast over the rows of m: it cannot hold the result
    out = T.exp(m) + e
    (f,) = assert_same_values([m, v], out, [rng.normal(size=(3, 4)), rng.normal(size=4)],
                              modes=(NO_FUSION,))
    assert destroyers(f)  # exp(m) is overwritten by the add...
    assert all(var.ndim == 2 for var in destroyed_vars(f))  # ...never exp(v)


def test_excluding_the_inplace_tag_turns_it_off(vec):
    x = T.dvector("x")
    f = function([x], (T.exp(x) + 1) * 2,
                 mode=Mode(optimizer="fast_run", excluding=["fusion", "inplace"]))
    assert destroyers(f) == []
    g = function([x], (T.exp(x) + 1) * 2,
                 mode=Mode(optimizer="fast_run", excluding=["fusion", "inplace_elemwise"]))
    assert destroyers(g) == []


def test_reader_that_needs_the_old_value_blocks_the_rewrite(vec):
    x = T.dvector("x")
    e = T.exp(x)
    out = e * (e + 1)  # the mul reads e after the add: the add must not overwrite e
    (f,) = assert_same_values([x], out, [vec], modes=(NO_FUSION,))
    assert not any("exp" in str(v.owner.op) for v in destroyed_vars(f))
    np.testing.assert_allclose(f(vec), np.exp(vec) * (np.exp(vec) + 1))


def test_readers_run_before_the_destroyer(vec):
    x = T.dvector("x")
    e = T.exp(x)
    outs = [T.sin(e), e + 1]  # sin reads e; the add may overwrite e after it
    fns = assert_same_values([x], outs, [vec], modes=(NO_FUSION,))
    f = fns[0]
    (node,) = destroyers(f)
    order = f.maker.fgraph.toposort()
    destroyed = destroyed_vars(f)[0]
    readers = [c for c, _ in f.maker.fgraph.clients[destroyed] if c is not node]
    assert all(order.index(r) < order.index(node) for r in readers)


def test_no_overwrite_of_a_value_the_node_also_reads_elsewhere(vec):
    x = T.dvector("x")
    e = T.exp(x)
    out = e * e[::-1]  # overwriting e while reading its reversed view: wrong values
    (f,) = assert_same_values([x], out, [vec], modes=(NO_FUSION,))
    assert destroyers(f) == []


# ---------------------------------------------------------------------------
# What is never overwritten


def test_plain_input_is_never_modified(vec):
    x = T.dvector("x")
    for out in [x + 1, T.exp(x), x * 2 + x, T.set_subtensor(x[1:3], 0.0),
                T.inc_subtensor(x[[0, 2]], 1.0)]:
        for mode in (FAST_RUN, NO_FUSION):
            f = function([x], out, mode=mode)
            arg = vec.copy()
            f(arg)
            np.testing.assert_array_equal(arg, vec)
            assert x.name not in [v.name for v in destroyed_vars(f) if v.owner is None]


def test_constant_is_never_overwritten(vec):
    x = T.dvector("x")
    c = T.constant(np.arange(7.0))
    f = function([x], T.exp(x + c) + c, mode=NO_FUSION)
    assert not any(isinstance(v, Constant) for v in destroyed_vars(f))
    np.testing.assert_allclose(f(vec), np.exp(vec + np.arange(7.0)) + np.arange(7.0))
    np.testing.assert_allclose(f(vec), np.exp(vec + np.arange(7.0)) + np.arange(7.0))


def test_function_output_is_never_overwritten(vec):
    x = T.dvector("x")
    e = T.exp(x)
    for mode in (FAST_RUN, NO_FUSION):
        f = function([x], [e, e + 1, T.sin(e)], mode=mode)
        outputs = set(f.maker.fgraph.outputs)
        assert not any(v in outputs for v in destroyed_vars(f))
        got = f(vec)
        np.testing.assert_allclose(got[0], np.exp(vec))
        np.testing.assert_allclose(got[1], np.exp(vec) + 1)


def test_shared_variable_that_is_not_updated_is_never_overwritten(vec):
    w = shared(np.ones(7), name="w")
    v = shared(np.zeros(7), name="v")
    x = T.dvector("x")
    f = function([x], w + x, updates=[(v, v + x)], mode=FAST_RUN)
    names = [var.name for var in destroyed_vars(f)]
    assert "w" not in names and "v" in names
    buf = w.get_value(borrow=True)
    f(vec)
    f(vec)
    np.testing.assert_array_equal(buf, np.ones(7))
    np.testing.assert_allclose(v.get_value(), 2 * vec)


@pytest.mark.parametrize("case", ["input", "constant", "output", "shared", "reader",
                                  "aliased"])
def test_destroy_handler_refuses_even_when_the_cheap_checks_are_skipped(monkeypatch, case):
    # The cheap checks only save validations: the destroy handler decides.
    monkeypatch.setattr(inplace_mod._PassState, "root_to_overwrite",
                        lambda self, node, i: node.inputs[i])
    x = T.dvector("x")
    w = shared(np.ones(3), name="w")
    c = T.constant(np.arange(3.0))
    e = T.exp(x)
    graphs = {"input": ([x], x + 1), "constant": ([x], T.exp(x + c) + c),
              "output": ([x], [e, e + 1]), "shared": ([x], w * x),
              "reader": ([x], e * (e + 1)), "aliased": ([x], e * e[::-1])}
    inputs, outputs = graphs[case]
    f = function(inputs, outputs, mode=NO_FUSION)
    fg = f.maker.fgraph
    assert inplace_mod._REJECTED[fg]  # proposed, refused by validate(), reverted
    for node in destroyers(f):
        for ins in node.op.destroy_map.values():
            for i in ins:
                var = node.inputs[i]
                root = fg.destroy_handler.alias_root(var)
                assert not isinstance(root, Constant)
                assert root not in fg.inputs
                assert not any(cl == "output" for cl, _ in fg.clients[root])
    ref = function(inputs, outputs, mode=REFERENCE)
    arg = np.array([0.5, -1.0, 2.0])
    for got, want in zip(np.atleast_2d(f(arg.copy())), np.atleast_2d(ref(arg.copy()))):
        np.testing.assert_allclose(got, want)


def test_in_place_rewrites_are_validated(monkeypatch, vec):
    calls = []
    original = DestroyHandler.validate

    def counting(self, fgraph):
        calls.append(1)
        return original(self, fgraph)

    monkeypatch.setattr(DestroyHandler, "validate", counting)
    x = T.dvector("x")
    f = function([x], (T.exp(x) + 1) * 2, mode=NO_FUSION)
    assert destroyers(f) and calls


# ---------------------------------------------------------------------------
# Destroyable inputs: updated shared variables and In(mutable=True)


def test_update_writes_into_the_shared_buffer():
    w = shared(np.array([1.0, 2.0, 3.0]), name="w")
    g = T.dvector("g")
    lr = T.dscalar("lr")
    f = function([g, lr], [], updates=[(w, w - lr * g)])
    assert "w" in [v.name for v in destroyed_vars(f)]
    buf = w.get_value(borrow=True)
    expected = np.array([1.0, 2.0, 3.0])
    for k in range(4):
        grad = np.array([1.0, -1.0, 0.5]) * (k + 1)
        f(grad, 0.1)
        expected = expected - 0.1 * grad
        np.testing.assert_allclose(w.get_value(), expected)
    assert w.get_value(borrow=True) is buf  # no new array: the buffer was overwritten


def test_sgd_training_step_matches_the_reference(rng):
    x = T.dmatrix("x")
    y = T.dvector("y")
    data = rng.normal(size=(8, 3)), rng.normal(size=8)

    def build(mode):
        w = shared(np.linspace(-1, 1, 3), name="w")
        b = shared(np.array(0.5), name="b")
        pred = T.tanh(T.dot(x, w) + b)
        cost = ((pred - y) ** 2).mean()
        gw, gb = symgraph.grad(cost, [w, b])
        f = function([x, y], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)],
                     mode=mode)
        return f, w, b

    f, w, b = build(FAST_RUN)
    ref, rw, rb = build(REFERENCE)
    # b's update is element-wise, written into b; w's is a Gemv (no in-place
    # variant yet).
    assert "b" in {v.name for v in destroyed_vars(f)}
    for _ in range(5):
        np.testing.assert_allclose(f(*data), ref(*data))
        np.testing.assert_allclose(w.get_value(), rw.get_value())
        np.testing.assert_allclose(b.get_value(), rb.get_value())


def test_update_read_by_an_output_keeps_the_old_value():
    w = shared(np.array([1.0, 2.0]), name="w")
    x = T.dvector("x")
    f = function([x], w * x, updates=[(w, w + x)])
    np.testing.assert_allclose(f([1.0, 1.0]), [1.0, 2.0])
    np.testing.assert_allclose(w.get_value(), [2.0, 3.0])
    np.testing.assert_allclose(f([1.0, 1.0]), [2.0, 3.0])


def test_updates_that_read_each_other_stay_simultaneous():
    a = shared(np.array([1.0, 2.0]), name="a")
    b = shared(np.array([10.0, 20.0]), name="b")
    f = function([], [], updates=[(a, a + b), (b, b * a)])
    f()
    np.testing.assert_allclose(a.get_value(), [11.0, 22.0])
    np.testing.assert_allclose(b.get_value(), [10.0, 40.0])
    f()
    np.testing.assert_allclose(a.get_value(), [21.0, 62.0])
    np.testing.assert_allclose(b.get_value(), [110.0, 880.0])


def test_two_updates_with_one_value_do_not_share_a_buffer(vec):
    a = shared(np.zeros(7), name="a")
    b = shared(np.zeros(7), name="b")
    x = T.dvector("x")
    f = function([x], [], updates=[(a, T.exp(x)), (b, T.exp(x))])
    triple = function([], [], updates=[(a, a * 3)])
    assert [v.name for v in destroyed_vars(triple)] == ["a"]
    f(vec)
    assert not np.shares_memory(a.get_value(borrow=True), b.get_value(borrow=True))
    triple()
    np.testing.assert_allclose(a.get_value(), 3 * np.exp(vec))
    np.testing.assert_allclose(b.get_value(), np.exp(vec))


def test_failing_call_leaves_in_place_updated_shared_values_alone():
    w = shared(np.array([1.0, 2.0]), name="w")
    c = shared(np.array(0.0), name="counter")
    x = T.dvector("x")
    f = function([x], (w + x).sum(), updates={c: c + 1, w: w * 2})
    assert {"w", "counter"} <= {v.name for v in destroyed_vars(f)}
    with pytest.raises(ValueError):
        f(np.ones(5))
    np.testing.assert_allclose(w.get_value(), [1.0, 2.0])
    assert c.get_value() == 0.0
    assert f(np.ones(2)) == 5.0
    np.testing.assert_allclose(w.get_value(), [2.0, 4.0])


def test_mutable_input_may_be_overwritten(vec):
    x = T.dvector("x")
    f = function([In(x, mutable=True)], T.exp(x) + 1)
    assert [v.name for v in destroyed_vars(f)] == ["x"]
    arg = vec.copy()
    out = f(arg)
    np.testing.assert_allclose(out, np.exp(vec) + 1)
    np.testing.assert_allclose(arg, np.exp(vec) + 1)  # the caller allowed it
    assert not np.shares_memory(out, arg)  # the result is still the caller's own
    plain = function([x], T.exp(x) + 1)
    arg = vec.copy()
    plain(arg)
    np.testing.assert_array_equal(arg, vec)


@pytest.mark.parametrize("linker", ["c|py", "py"])
def test_mutable_input_is_copied_when_overwriting_it_would_be_wrong(vec, linker):
    x, y = T.dvectors("x", "y")
    mode = Mode(optimizer="fast_run", linker=linker)
    f = function([In(x, mutable=True), y], [T.exp(x) + 1, y * 2], mode=mode)
    assert [v.name for v in destroyed_vars(f)] == ["x"]
    arg = vec.copy()
    got = f(arg, arg)  # the same array for x and for y, which is never modified
    np.testing.assert_allclose(got[0], np.exp(vec) + 1)
    np.testing.assert_allclose(got[1], vec * 2)
    np.testing.assert_array_equal(arg, vec)
    frozen = vec.copy()
    frozen.flags.writeable = False
    np.testing.assert_allclose(f(frozen, vec)[0], np.exp(vec) + 1)
    np.testing.assert_array_equal(frozen, vec)
    w = shared(vec.copy(), name="w")
    g = function([In(x, mutable=True)], T.exp(x) * w, mode=mode)
    np.testing.assert_allclose(g(w.get_value(borrow=True)), np.exp(vec) * vec)
    np.testing.assert_array_equal(w.get_value(), vec)


def test_mutable_input_that_is_also_an_output_is_not_overwritten(vec):
    x = T.dvector("x")
    f = function([In(x, mutable=True)], [x, T.exp(x)])
    assert destroyers(f) == []
    got = f(vec.copy())
    np.testing.assert_allclose(got[0], vec)


def test_mutable_input_read_by_others_is_overwritten_last(vec):
    x = T.dvector("x")
    f = function([In(x, mutable=True)], [T.sin(x).sum(), x * 2], mode=NO_FUSION)
    assert [v.name for v in destroyed_vars(f)] == ["x"]
    got = f(vec.copy())
    assert got[0] == pytest.approx(np.sin(vec).sum())
    np.testing.assert_allclose(got[1], vec * 2)


def test_multi_output_fused_node_is_in_place_on_all_outputs_or_none(rng):
    m = T.dmatrix("m")
    s1, s2 = m.sum(axis=0), m.max(axis=0)
    args = [rng.normal(size=(4, 3))]
    a = T.exp(s1) + s2  # needed outside the fused region too: a second output
    f, _ = assert_same_values([m], [a * s1, T.dot(m, a)], args, modes=(FAST_RUN, DEBUG))
    (node,) = [n for n in destroyers(f) if len(n.outputs) == 2]
    assert sorted(dict(node.op.inplace_pattern)) == [0, 1]
    # One intermediate for two outputs: the node stays out of place.
    b = T.exp(s1) + 1
    (g,) = assert_same_values([m], [b * s1, T.dot(m, b)], args, modes=(FAST_RUN,))
    assert any(len(n.outputs) == 2 for n in g.maker.fgraph.apply_nodes)
    assert not any(len(n.outputs) == 2 for n in destroyers(g))


# ---------------------------------------------------------------------------
# Outputs handed to the caller


def test_returned_outputs_survive_later_calls(vec, rng):
    x = T.dvector("x")
    m = T.dmatrix("m")
    w = shared(np.ones(7), name="w")
    args = [vec, rng.normal(size=(7, 7))]
    for mode in (FAST_RUN, NO_FUSION, Mode(optimizer="fast_run", linker="py")):
        # Results written in place into intermediates (dot, sum) and into w.
        outs = [(T.exp(x) + 1) * 2, T.tanh(T.dot(m, x)) + 1, T.exp(m.sum(axis=0)) * 3,
                w * x, w + 1]
        f = function([x, m], outs, updates=[(w, w + 1)], mode=mode)
        assert len(destroyers(f)) >= 3
        first = f(*args)
        kept = [np.copy(a) for a in first]
        f(args[0] + 1, args[1] * 2)
        f(args[0] * 3, args[1] - 1)
        for a, b in zip(first, kept):
            np.testing.assert_array_equal(a, b)


def test_borrowed_output_is_still_right(vec):
    x = T.dvector("x")
    f = function([x], Out((T.exp(x) + 1) * 2, borrow=True))
    np.testing.assert_allclose(f(vec), (np.exp(vec) + 1) * 2)
    np.testing.assert_allclose(f(vec * 2), (np.exp(vec * 2) + 1) * 2)


# ---------------------------------------------------------------------------
# IncSubtensor and AdvancedIncSubtensor


def test_inc_subtensor_on_an_intermediate_is_in_place(rng):
    x = T.dmatrix("x")
    idx = T.lvector("idx")
    y = T.dvector("y")
    e = T.exp(x)
    outs = [T.inc_subtensor(e[1:, 0], y[:2]), T.set_subtensor(T.sin(x)[idx], 0.0),
            T.inc_subtensor(T.cos(x)[idx, 1], y[:3])]
    args = [rng.normal(size=(3, 4)), np.array([0, 2, 0]), rng.normal(size=3)]
    for mode in (FAST_RUN, NO_FUSION):
        (f,) = assert_same_values([x, idx, y], outs, args, modes=(mode,))
        kinds = [type(n.op) for n in destroyers(f)]
        assert IncSubtensor in kinds and kinds.count(AdvancedIncSubtensor) == 2
        assert all(n.op.inplace for n in destroyers(f)
                   if isinstance(n.op, (IncSubtensor, AdvancedIncSubtensor)))


def test_inc_subtensor_of_its_own_view_is_not_in_place(vec):
    x = T.dvector("x")
    e = T.exp(x)
    out = T.set_subtensor(e[1:], e[:-1])  # y reads the memory that x's update writes
    (f,) = assert_same_values([x], out, [vec], modes=(NO_FUSION,))
    assert not any(isinstance(n.op, IncSubtensor) for n in destroyers(f))


def test_inc_subtensor_update_of_a_shared_variable(rng):
    w = shared(np.zeros((3, 2)), name="w")
    idx = T.lvector("idx")
    y = T.dmatrix("y")
    f = function([idx, y], [], updates=[(w, T.inc_subtensor(w[idx], y))])
    assert any(n.op.inplace for n in destroyers(f) if isinstance(n.op, AdvancedIncSubtensor))
    buf = w.get_value(borrow=True)
    f(np.array([0, 2, 0]), np.ones((3, 2)))
    np.testing.assert_allclose(w.get_value(), [[2, 2], [0, 0], [1, 1]])
    assert w.get_value(borrow=True) is buf


# ---------------------------------------------------------------------------
# DebugMode checks destroy maps against what perform did


def test_debug_mode_passes_on_in_place_graphs(rng, vec):
    x = T.dvector("x")
    m = T.dmatrix("m")
    idx = T.lvector("idx")
    for mode in (DEBUG, DEBUG_NO_FUSION):
        f = function([m], [(T.exp(m.sum(axis=0)) + 1) * 2, T.sin(T.exp(m.sum(axis=1)))],
                     mode=mode)
        assert destroyers(f)
        f(rng.normal(size=(3, 2)))
        f = function([x], [(T.exp(x) + 1) * 2, T.sin(T.exp(x))], mode=mode)
        f(vec)
        g = function([In(x, mutable=True)], T.exp(x) * 2 + 1, mode=mode)
        g(vec.copy())
        h = function([m, idx], T.inc_subtensor(T.exp(m)[idx], 1.0) * 3, mode=mode)
        h(rng.normal(size=(3, 2)), np.array([0, 0, 2]))
        w = shared(np.ones(7), name="w")
        u = function([x], (w * x).sum(), updates=[(w, w - 0.1 * x)], mode=mode)
        for _ in range(3):
            u(vec)
        np.testing.assert_allclose(w.get_value(), 1 - 0.3 * vec)


# ---------------------------------------------------------------------------
# The destroy handler's rules, on bare graphs


def _add_inplace(a, b):
    return Elemwise(sb.Add(2), inplace_pattern={0: 0})(a, b)


def test_handler_refuses_a_reader_that_needs_the_destroyers_result():
    x = T.dvector("x")
    e = T.exp(x)
    d = _add_inplace(e, T.constant(np.array([1.0])))
    fg = FunctionGraph([x], [e * d], clone=False)
    fg.attach_feature(DestroyHandler())
    with pytest.raises(InconsistencyError):
        fg.validate()


def test_handler_allows_chains_of_destroyers():
    x = T.dvector("x")
    one = T.constant(np.array([1.0]))
    d1 = _add_inplace(T.exp(x), one)
    d2 = _add_inplace(d1, one)
    fg = FunctionGraph([x], [d2], clone=False)
    fg.attach_feature(DestroyHandler())
    fg.validate()


def test_handler_refuses_a_destroyer_reading_its_target_twice():
    x = T.dvector("x")
    e = T.exp(x)
    for other in (e, e[::-1]):
        fg = FunctionGraph([x], [_add_inplace(e, other)], clone=False)
        fg.attach_feature(DestroyHandler())
        with pytest.raises(InconsistencyError, match="share"):
            fg.validate()


def test_rewrite_without_a_destroy_handler_does_nothing():
    x = T.dvector("x")
    fg = FunctionGraph([x], [(T.exp(x) + 1) * 2])
    fg.attach_feature(History())
    assert inplace_mod.inplace_elemwise(fg) == 0
    assert not any(n.op.destroy_map for n in fg.apply_nodes)


def test_consumer_of_an_intermediate_refined_by_fusion_goes_in_place():
    # Fusion exposes sigmoid(a) as an output of the fused node, whose static
    # shape (4,) says more than sigmoid's own (?,); the consumer that still
    # declares (?,) must not make the in-place rewrite fail (a GRU step does this).
    a, W = T.dvector("a"), T.dmatrix("W")
    h = T.TensorType("float64", shape=(4,))("h")
    s = T.nnet.sigmoid(a)
    f = function([a, W, h], [T.dot(W, s) * s, s * h])
    got = f(np.ones(4), np.ones((4, 4)), np.ones(4))
    sig = 1 / (1 + np.exp(-1.0))
    np.testing.assert_allclose(got[0], 4 * sig * sig)
    np.testing.assert_allclose(got[1], sig)
