"""scan's API with Theano's semantics: taps, outputs_info forms, n_steps,
go_backwards, several outputs, updates, until, strict, return_list, the views
(map, reduce, foldl, foldr), Theano's import paths, and recurrences against
the same loop in NumPy."""

from collections import OrderedDict

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.scan import Scan


def _scan_nodes(fn):
    return [n for n in fn.maker.fgraph.toposort() if isinstance(n.op, Scan)]


def test_import_paths():
    from symgraph.scan_module import until as until_a
    from symgraph.scan import until as until_b
    import symgraph.scan_module

    assert until_a is until_b is symgraph.scan_module.until
    assert symgraph.scan_module.scan is symgraph.scan.scan
    for name in ("scan", "map", "reduce", "foldl", "foldr", "scan_checkpoints"):
        assert callable(getattr(symgraph, name))
    import inspect
    import symgraph.scan.op as op_module   # the package's modules import as usual

    assert op_module.Scan is Scan
    # symgraph.scan is the package, callable as Theano's function.
    assert "outputs_info" in inspect.signature(symgraph.scan).parameters
    out, _ = symgraph.scan(lambda x: x * 2, sequences=T.vector("v"))
    assert out.ndim == 1


def test_sequence_taps_of_any_sign_against_numpy(rng):
    x = T.matrix("x")
    out, updates = symgraph.scan(lambda a, b, c, d: a - 2 * b + c * d,
                                 sequences=dict(input=x, taps=[-3, -1, 0, 2]))
    assert isinstance(updates, OrderedDict) and not updates
    xv = rng.normal(size=(9, 2))
    got = symgraph.function([x], out)(xv)
    expected = [xv[t - 3] - 2 * xv[t - 1] + xv[t] * xv[t + 2] for t in range(3, 7)]
    np.testing.assert_allclose(got, expected)


def test_only_positive_or_only_negative_taps(rng):
    x = T.vector("x")
    ahead, _ = symgraph.scan(lambda a, b: a * b, sequences=dict(input=x, taps=[1, 3]))
    behind, _ = symgraph.scan(lambda a: a, sequences=dict(input=x, taps=-2))
    xv = rng.normal(size=6)
    f = symgraph.function([x], [ahead, behind])
    got_ahead, got_behind = f(xv)
    np.testing.assert_allclose(got_ahead, [xv[t + 1] * xv[t + 3] for t in range(3)])
    np.testing.assert_allclose(got_behind, xv[:4])


def test_output_taps_against_numpy(rng):
    x0 = T.matrix("x0")
    u = T.matrix("u")
    out, _ = symgraph.scan(lambda u_t, a, b, c: T.tanh(a * 0.3 + b * c + u_t),
                           sequences=u, outputs_info=dict(initial=x0, taps=[-5, -2, -1]))
    x0v, uv = rng.normal(size=(6, 3)), rng.normal(size=(7, 3))
    got = symgraph.function([x0, u], out)(x0v, uv)
    hist = list(x0v[:5])   # a longer initial value: its first 5 entries are used
    for t in range(7):
        hist.append(np.tanh(hist[-5] * 0.3 + hist[-2] * hist[-1] + uv[t]))
    np.testing.assert_allclose(got, hist[5:])


def test_several_outputs_mixed_feedback(rng):
    x = T.vector("x")
    s0 = T.scalar("s0")

    def step(x_t, s_tm1):
        return x_t * 2, s_tm1 + x_t, T.stack([x_t, s_tm1])

    (doubled, sums, pairs), _ = symgraph.scan(step, sequences=x,
                                              outputs_info=[None, s0, None])
    xv = rng.normal(size=5)
    d, s, p = symgraph.function([x, s0], [doubled, sums, pairs])(xv, 1.5)
    np.testing.assert_allclose(d, 2 * xv)
    np.testing.assert_allclose(s, 1.5 + np.cumsum(xv))
    np.testing.assert_allclose(p, np.stack([xv, np.concatenate([[1.5], s[:-1]])], axis=1))


def test_outputs_info_forms_and_return_list():
    x = T.vector("x")
    out, _ = symgraph.scan(lambda a: a + 1, sequences=x, outputs_info=[{}])
    listed, _ = symgraph.scan(lambda a: a + 1, sequences=x, return_list=True)
    taps_none, _ = symgraph.scan(lambda h: h + 1, outputs_info=dict(initial=x, taps=None),
                                 n_steps=2)
    assert isinstance(listed, list) and len(listed) == 1
    f = symgraph.function([x], [out, listed[0], taps_none])
    a, b, c = f(np.array([1.0, 2.0]))
    np.testing.assert_allclose(a, [2, 3])
    np.testing.assert_allclose(b, [2, 3])
    np.testing.assert_allclose(c, [[2, 3], [3, 4]])
    nothing, updates = symgraph.scan(lambda: OrderedDict(), n_steps=3)
    assert nothing is None and not updates


def test_n_steps_symbolic_constant_zero_and_shortest_sequence(rng):
    x = T.vector("x")
    y = T.vector("y")
    n = T.iscalar("n")
    by_n, _ = symgraph.scan(lambda a, b: a + b, sequences=[x, y], n_steps=n)
    shortest, _ = symgraph.scan(lambda a, b: a + b, sequences=[x, y])
    fixed, _ = symgraph.scan(lambda h: h * 3, outputs_info=x, n_steps=2)
    f = symgraph.function([x, y, n], [by_n, shortest, fixed])
    xv, yv = rng.normal(size=6), rng.normal(size=4)
    a, b, c = f(xv, yv, 3)
    np.testing.assert_allclose(a, xv[:3] + yv[:3])
    np.testing.assert_allclose(b, xv[:4] + yv)
    np.testing.assert_allclose(c, [3 * xv, 9 * xv])
    zero = f(xv, yv, 0)[0]
    assert zero.shape == (0,)
    h, _ = symgraph.scan(lambda h: h + 1, outputs_info=x, n_steps=n)
    empty = symgraph.function([x, n], h)(xv, 0)
    assert empty.shape == (0, 6)


def test_go_backwards_against_numpy(rng):
    x = T.matrix("x")
    h0 = T.vector("h0")
    out, _ = symgraph.scan(lambda x_t, x_next, h: T.tanh(h + x_t - x_next), go_backwards=True,
                           sequences=dict(input=x, taps=[0, 1]), outputs_info=h0)
    xv, h0v = rng.normal(size=(5, 2)), rng.normal(size=2)
    got = symgraph.function([x, h0], out)(xv, h0v)
    h, expected = h0v, []
    # Each tap's aligned slice is reversed: step 0 reads x[-2] (tap 0) and x[-1] (tap 1).
    for t in range(4):
        h = np.tanh(h + xv[3 - t] - xv[4 - t])
        expected.append(h)
    np.testing.assert_allclose(got, expected)
    n = T.iscalar("n")
    partial, _ = symgraph.scan(lambda x_t: x_t * 1.0, sequences=x, go_backwards=True, n_steps=n)
    np.testing.assert_allclose(symgraph.function([x, n], partial)(xv, 2), xv[::-1][:2])


def test_shared_variables_used_and_updated(rng):
    W = symgraph.shared(rng.normal(size=(3, 3)), name="W")
    count = symgraph.shared(np.int64(0), name="count")
    total = symgraph.shared(np.zeros(3), name="total")
    x = T.matrix("x")

    def step(x_t, h):
        h_t = T.tanh(T.dot(h, W) + x_t)
        return h_t, OrderedDict([(count, count + 1), (total, total + h_t)])

    out, updates = symgraph.scan(step, sequences=x, outputs_info=T.zeros_like(x[0]))
    assert list(updates) == [count, total]
    f = symgraph.function([x], out, updates=updates)
    xv = rng.normal(size=(4, 3))
    got = f(xv)
    h, expected = np.zeros(3), []
    for t in range(4):
        h = np.tanh(h @ W.get_value() + xv[t])
        expected.append(h)
    np.testing.assert_allclose(got, expected)
    assert count.get_value() == 4
    np.testing.assert_allclose(total.get_value(), np.sum(expected, axis=0))
    f(xv)
    assert count.get_value() == 8


def test_step_returns_updates_then_outputs():
    a = symgraph.shared(np.float64(1.0))
    out, updates = symgraph.scan(lambda: ({a: a * 2}, a + 0.5), n_steps=3)
    f = symgraph.function([], out, updates=updates)
    np.testing.assert_allclose(f(), [1.5, 2.5, 4.5])
    assert a.get_value() == 8.0


def test_until_with_updates_and_outputs():
    a = symgraph.shared(np.float64(0.0))
    out, updates = symgraph.scan(
        lambda h: (h * 2, {a: a + 1}, symgraph.scan_module.until(h * 2 >= 16)),
        outputs_info=T.constant(1.0), n_steps=100)
    f = symgraph.function([], out, updates=updates)
    np.testing.assert_allclose(f(), [2, 4, 8, 16])
    assert a.get_value() == 4


def test_strict_refuses_implicit_variables():
    W = symgraph.shared(np.ones(2), name="W")
    x = T.matrix("x")
    with pytest.raises(ValueError, match="strict=True.*shared variable 'W'"):
        symgraph.scan(lambda x_t: x_t * W, sequences=x, strict=True)
    out, _ = symgraph.scan(lambda x_t, w: x_t * w, sequences=x, non_sequences=W, strict=True)
    np.testing.assert_allclose(symgraph.function([x], out)(np.ones((2, 2))), np.ones((2, 2)))


def test_implicit_non_sequences_and_free_variables(rng):
    W = T.matrix("W")
    W_2 = W ** 2
    x = T.matrix("x")
    out, _ = symgraph.scan(lambda x_t: T.dot(x_t, W_2), sequences=x)
    xv, wv = rng.normal(size=(3, 2)), rng.normal(size=(2, 2))
    np.testing.assert_allclose(symgraph.function([x, W], out)(xv, wv), xv @ wv ** 2)


def test_loop_invariant_work_runs_once_outside():
    W = T.vector("W")
    x = T.matrix("x")
    out, _ = symgraph.scan(lambda x_t, h: h * T.exp(W).sum() + x_t, sequences=x,
                           outputs_info=T.zeros_like(W))
    node = out.owner.inputs[0].owner      # out is the loop's buffer without its initial entry
    inner_ops = {str(n.op) for n in symgraph.graph.basic.io_toposort(
        node.op.inner_inputs, node.op.inner_outputs)}
    assert not any("exp" in o or "Sum" in o for o in inner_ops)
    xv, wv = np.ones((3, 2)), np.array([0.0, -1.0])
    got = symgraph.function([x, W], out)(xv, wv)
    h, k = np.zeros(2), np.exp(wv).sum()
    for t in range(3):
        h = h * k + xv[t]
        np.testing.assert_allclose(got[t], h)


def test_map_of_sequence_work_runs_without_a_loop(rng):
    X = T.matrix("X")
    W = T.matrix("W")
    b = T.vector("b")
    out, _ = symgraph.scan(lambda v: T.tanh(T.dot(v, T.exp(W)) + b), sequences=X)
    f = symgraph.function([X, W, b], [out, symgraph.grad(out.sum(), W)])
    assert not _scan_nodes(f)     # computed for all steps at once: no loop left
    xv, wv, bv = rng.normal(size=(7, 3)), rng.normal(size=(3, 2)), rng.normal(size=2)
    got, g = f(xv, wv, bv)
    np.testing.assert_allclose(got, np.tanh(xv @ np.exp(wv) + bv))
    d = (1 - got ** 2)
    np.testing.assert_allclose(g, (xv.T @ d) * np.exp(wv))
    n = T.iscalar("n")
    short, _ = symgraph.scan(lambda v: v * 2, sequences=X, n_steps=n)
    with pytest.raises(ValueError, match=r"sequences\[0\] 'X' has 7 entries, but the loop "
                                         r"runs 9 steps"):
        symgraph.function([X, n], short)(xv, 9)


def test_views_map_reduce_foldl_foldr(rng):
    x = T.vector("x")
    mapped, _ = symgraph.map(lambda a: a ** 2, sequences=x)
    total, _ = symgraph.reduce(lambda a, acc: acc + a, sequences=x,
                               outputs_info=T.as_tensor_variable(np.float64(0)))
    left, _ = symgraph.foldl(lambda a, acc: acc * 2 + a, sequences=x,
                             outputs_info=T.as_tensor_variable(np.float64(0)))
    right, _ = symgraph.foldr(lambda a, acc: acc * 2 + a, sequences=x,
                              outputs_info=T.as_tensor_variable(np.float64(0)))
    xv = rng.normal(size=5)
    m, t, lf, rf = symgraph.function([x], [mapped, total, left, right])(xv)
    np.testing.assert_allclose(m, xv ** 2)
    assert t == pytest.approx(xv.sum())
    acc = 0.0
    for v in xv:
        acc = acc * 2 + v
    assert lf == pytest.approx(acc)
    acc = 0.0
    for v in xv[::-1]:
        acc = acc * 2 + v
    assert rf == pytest.approx(acc)


def test_reduce_keeps_a_ring_of_the_needed_length(rng):
    x0 = T.matrix("x0")
    out, _ = symgraph.scan(lambda a, b: a + b, outputs_info=dict(initial=x0, taps=[-3, -1]),
                           n_steps=1000)
    f = symgraph.function([x0], out[-1])
    (node,) = _scan_nodes(f)
    assert node.op.info.rec_keep == (1,)
    x0v = rng.normal(size=(3, 2))
    hist = list(x0v)
    for _ in range(1000):
        hist.append(hist[-3] + hist[-1])
    np.testing.assert_allclose(f(x0v), hist[-1])
    full = symgraph.function([x0], [out[-1], out[2]])
    assert _scan_nodes(full)[0].op.info.rec_keep == (0,)


def test_mode_and_name():
    x = T.vector("x")
    out, _ = symgraph.scan(lambda a, h: h + a, sequences=x, name="plus_one",
                           outputs_info=T.constant(1.0), mode=symgraph.Mode(linker="py"))
    f = symgraph.function([x], out, mode=symgraph.Mode(linker="py", optimizer=None))
    (node,) = _scan_nodes(f)
    assert "plus_one" in str(node.op)
    assert node.tag.scan_inner.maker.mode.linker == "py"
    np.testing.assert_allclose(f(np.arange(3.0)), [1, 2, 4])
    default, _ = symgraph.scan(lambda a, h: h + a, sequences=x, outputs_info=T.constant(1.0))
    g = symgraph.function([x], default, mode=symgraph.Mode(linker="py"))
    assert _scan_nodes(g)[0].tag.scan_inner.maker.mode.linker == "py"


def test_inner_function_compiled_once():
    x = T.vector("x")
    out, _ = symgraph.scan(lambda a, h: h + a, sequences=x, outputs_info=T.constant(0.0))
    f = symgraph.function([x], out)
    (node,) = _scan_nodes(f)
    inner = node.tag.scan_inner
    for _ in range(3):
        f(np.arange(5.0))
    assert node.tag.scan_inner is inner


def test_outputs_info_count_must_match():
    x = T.vector("x")
    with pytest.raises(ValueError, match="outputs_info has 1 entries but the step function "
                                         "returns 2 outputs"):
        symgraph.scan(lambda a, h: [a, a], sequences=x, outputs_info=[x[0]])


def test_no_steps_information():
    with pytest.raises(ValueError, match="no sequences and no n_steps"):
        symgraph.scan(lambda: T.constant(1.0), outputs_info=None)


def test_profile_gives_step_time_per_op_and_overhead():
    x = T.vector("x")
    out, _ = symgraph.scan(lambda a, h: T.tanh(h + a), sequences=x,
                           outputs_info=T.constant(0.0), profile=True, name="prof")
    f = symgraph.function([x], out)
    f(np.arange(20.0))
    (node,) = _scan_nodes(f)
    stats = node.tag.scan_profile
    assert stats.calls == 1 and stats.steps == 20
    assert 0 <= stats.overhead_per_step() < stats.loop_time
    text = stats.summary(file="str")
    assert "Scan profile: scan 'prof'" in text and "overhead per step" in text
    assert "time per op" in text and "tanh" in text


@pytest.mark.parametrize("mode", ["DebugMode", "NanGuardMode", "FAST_COMPILE", "FAST_RUN"])
def test_modes_pickling_givens_and_eval(rng, mode):
    import pickle

    W = symgraph.shared(rng.normal(size=(3, 3)) * .5, name="W")
    x = T.matrix("x")
    h0 = T.vector("h0")
    out, _ = symgraph.scan(lambda x_t, h: T.tanh(T.dot(h, W) + x_t), sequences=x,
                           outputs_info=h0)
    g = symgraph.grad(out.sum(), W)
    f = symgraph.function([x], [out, g], givens={h0: T.zeros_like(x[0])}, mode=mode)
    xv = rng.normal(size=(4, 3))
    got_out, got_g = f(xv)
    h, expected = np.zeros(3), []
    for t in range(4):
        h = np.tanh(h @ W.get_value() + xv[t])
        expected.append(h)
    np.testing.assert_allclose(got_out, expected)
    again = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(again(xv)[1], got_g)
    np.testing.assert_allclose(out.eval({x: xv, h0: np.zeros(3)}), expected)


def test_nan_guard_names_the_inner_node():
    x = T.matrix("x")
    out, _ = symgraph.scan(lambda x_t, h: T.log(h + x_t), sequences=x,
                           outputs_info=T.zeros_like(x[0]))
    f = symgraph.function([x], out, mode="NanGuardMode")
    with pytest.raises(FloatingPointError, match="(?s)failed at step 1.*log"):
        f(np.array([[1.0, 1.0], [-5.0, 1.0]]))


def test_infer_shape(rng):
    from helpers import check_infer_shape   # tests/helpers.py (tests/ is on sys.path)

    x0 = T.matrix("x0")
    W = T.matrix("W")
    seq = T.matrix("seq")
    (rec, mapped), _ = symgraph.scan(
        lambda s, a, b, W: (a + b, T.dot(s, W).sum() * T.ones_like(W[0])),
        sequences=seq, outputs_info=[dict(initial=x0, taps=[-2, -1]), None],
        non_sequences=W)
    node = rec.owner.inputs[0].owner
    full = node.outputs
    values = [rng.normal(size=(4, 3)), rng.normal(size=(3, 3)), rng.normal(size=(2, 3))]
    check_infer_shape([full[0], full[1]], [seq, W, x0], values)
    rings = node.op.with_info(rec_keep=(1,), nitsot_keep=(3,)).make_node(*node.inputs).outputs
    check_infer_shape(rings[:2], [seq, W, x0], values)


def test_independent_loops_of_the_same_length_run_as_one(rng):
    x = T.matrix("x")
    W = T.matrix("W")
    a, _ = symgraph.scan(lambda x_t, h, W: T.tanh(T.dot(h, W) + x_t), sequences=x,
                         outputs_info=T.zeros_like(x[0]), non_sequences=W, name="a")
    b, _ = symgraph.scan(lambda x_t, h: h * 0.5 + T.sin(x_t), sequences=x,
                         outputs_info=T.zeros_like(x[0]), name="b")
    c, _ = symgraph.scan(lambda a_t, h: h + a_t, sequences=a, outputs_info=T.zeros_like(x[0]),
                         name="c")       # reads a's output: cannot join a's loop
    f = symgraph.function([x, W], [a, b, c])
    assert sorted(str(n.op) for n in _scan_nodes(f)) == ["Scan{a&b}", "Scan{c}"]
    xv, wv = rng.normal(size=(5, 3)), rng.normal(size=(3, 3))
    got_a, got_b, got_c = f(xv, wv)
    ha, hb, exp_a, exp_b = np.zeros(3), np.zeros(3), [], []
    for t in range(5):
        ha = np.tanh(ha @ wv + xv[t])
        hb = hb * 0.5 + np.sin(xv[t])
        exp_a.append(ha)
        exp_b.append(hb)
    np.testing.assert_allclose(got_a, exp_a)
    np.testing.assert_allclose(got_b, exp_b)
    np.testing.assert_allclose(got_c, np.cumsum(exp_a, axis=0))


def test_mapped_output_read_at_its_end_keeps_a_ring(rng):
    x = T.vector("x")
    s0 = T.scalar("s0")
    (sums, squares), _ = symgraph.scan(lambda a, s: (s + a, T.sqr(s + a) + T.sin(s)),
                                       sequences=x, outputs_info=[s0, None])
    f = symgraph.function([x, s0], [sums[-1], squares[-2]])
    (node,) = _scan_nodes(f)
    assert node.op.info.rec_keep == (1,) and node.op.info.nitsot_keep == (2,)
    xv = rng.normal(size=6)
    s, sq = 0.5, []
    for v in xv:
        sq.append((s + v) ** 2 + np.sin(s))
        s = s + v
    got_sum, got_sq = f(xv, 0.5)
    assert got_sum == pytest.approx(s) and got_sq == pytest.approx(sq[-2])
    g = symgraph.function([x, s0], symgraph.grad(squares[-1], x))
    eps = 1e-6
    h = symgraph.function([x, s0], squares[-1])
    num = [(h(xv + d, 0.5) - h(xv - d, 0.5)) / (2 * eps) for d in np.eye(6) * eps]
    np.testing.assert_allclose(g(xv, 0.5), num, atol=1e-6)
