"""The native loop (a step function with native code only runs in C) against
the Python loop: the same results, errors and gradients, for odd shapes,
taps, several outputs, until, go_backwards, shared updates and rings; and the
Python loop where a step needs Python."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.from_graph import as_op
from symgraph.scan import Scan
import symgraph.scan.native_loop as native_loop

#: The native runtime whatever the flags say (a test run in DebugMode runs
#: each node's perform too, which would count as calls and loop in Python).
NATIVE = symgraph.Mode(linker="c|py", optimizer="fast_run")


def _function(*args, **kwargs):
    return symgraph.function(*args, mode=NATIVE, **kwargs)


def _loops(fn):
    """The runtime Loop of each Scan node of ``fn`` (None: the Python loop)."""
    out = []
    for node in fn.maker.fgraph.toposort():
        if isinstance(node.op, Scan):
            out.append(node.op.native_loop(node, node.op.inner_function(node)))
    return out


def _both(fn, *args):
    """``fn(*args)`` through the native loop and through the Python loop."""
    native = fn(*args)
    native_loop.enabled = False
    try:
        python = fn(*args)
    finally:
        native_loop.enabled = True
    return native, python


def _same(native, python):
    if not isinstance(native, (list, tuple)):
        native, python = [native], [python]
    assert len(native) == len(python)
    for a, b in zip(native, python):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_taps_several_outputs_odd_shapes_against_numpy(rng):
    x = T.tensor3("x")
    h0 = T.tensor3("h0")
    W = T.matrix("W")

    def step(x_t, x_next, h_3, h_1, W):
        h = T.tanh(T.dot(x_t, W) + 0.5 * h_1 - 0.25 * h_3)
        return h, (h * x_next).sum(axis=1), T.dot(h, W.T)[:, :2]

    (h, s, y), _ = symgraph.scan(step, sequences=dict(input=x, taps=[0, 1]),
                                 outputs_info=[dict(initial=h0, taps=[-3, -1]), None, None],
                                 non_sequences=W)
    f = _function([x, h0, W], [h, s, y])
    assert all(loop is not None for loop in _loops(f))
    xv = rng.normal(size=(8, 3, 5))
    h0v = rng.normal(size=(3, 3, 5))
    Wv = rng.normal(size=(5, 5)) * 0.3
    native, python = _both(f, xv, h0v, Wv)
    _same(native, python)
    hist = list(h0v)
    for t in range(7):
        hist.append(np.tanh(xv[t] @ Wv + 0.5 * hist[-1] - 0.25 * hist[-3]))
    np.testing.assert_allclose(native[0], hist[3:], rtol=1e-10)
    np.testing.assert_allclose(native[1], [(hist[3 + t] * xv[t + 1]).sum(axis=1)
                                           for t in range(7)], rtol=1e-10)


def test_until_go_backwards_and_rings(rng):
    v = T.vector("v")
    limit = T.scalar("limit")

    def step(x, total, limit):
        new = total + x * x
        return [new, 2 * x], symgraph.scan_module.until(new > limit)

    (total, doubled), _ = symgraph.scan(step, sequences=v, outputs_info=[T.zeros(()), None],
                                        non_sequences=limit, go_backwards=True)
    last, _ = symgraph.scan(lambda x, p: p * 0.5 + x, sequences=v, outputs_info=T.ones(()))
    f = _function([v, limit], [total, doubled, last[-1], last[-3:]])
    assert all(loop is not None for loop in _loops(f))
    vv = rng.normal(size=11)
    for lim in (3.0, 1e9):
        native, python = _both(f, vv, lim)
        _same(native, python)
    assert len(_both(f, vv, 1e9)[0][0]) == 11
    ref = 1.0
    for x in vv:
        ref = ref * 0.5 + x
    np.testing.assert_allclose(f(vv, 1e9)[2], ref)


def test_shared_updates_and_float32(rng):
    W = symgraph.shared(rng.normal(size=(4, 4)).astype("float32"), name="W")
    acc = symgraph.shared(np.zeros(4, dtype="float32"), name="acc")
    x = T.matrix("x", dtype="float32")

    def step(x_t, h):
        h_new = T.tanh(T.dot(h, W) + x_t)
        return h_new, {acc: acc + h_new}

    h, updates = symgraph.scan(step, sequences=x, outputs_info=T.zeros((4,), dtype="float32"))
    f = _function([x], h, updates=updates)
    assert all(loop is not None for loop in _loops(f))
    xv = rng.normal(size=(6, 4)).astype("float32")
    got = f(xv)
    after_native = acc.get_value()
    acc.set_value(np.zeros(4, dtype="float32"))
    native_loop.enabled = False
    try:
        expected = f(xv)
    finally:
        native_loop.enabled = True
    _same(got, expected)
    _same(after_native, acc.get_value())
    assert got.dtype == np.float32


def test_gradients_match_and_run_natively(rng):
    x = T.matrix("x")
    W = T.matrix("W")
    h0 = T.vector("h0")
    h, _ = symgraph.scan(lambda x_t, h, W: T.tanh(T.dot(h, W) + x_t), sequences=x,
                         outputs_info=h0, non_sequences=W, truncate_gradient=4)
    cost = (h ** 2).sum() + h[-1].sum()
    grads = symgraph.grad(cost, [x, W, h0])
    f = _function([x, W, h0], grads)
    assert len(_loops(f)) >= 2 and all(loop is not None for loop in _loops(f))
    args = (rng.normal(size=(7, 3)), rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3))
    native, python = _both(f, *args)
    _same(native, python)


def test_zero_steps_and_map_of_unknown_shape(rng):
    v = T.matrix("v")
    n = T.iscalar("n")
    out, _ = symgraph.scan(lambda row: row[::2] * 3, sequences=v, n_steps=n)
    f = _function([v, n], out)
    assert _loops(f)[0] is not None
    vv = rng.normal(size=(5, 7))
    for steps in (0, 3, 5):
        native, python = _both(f, vv, steps)
        _same(native, python)


def test_a_step_with_a_python_op_loops_in_python(rng):
    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def twice(a):
        return a * 2

    v = T.matrix("v")
    out, _ = symgraph.scan(lambda row, acc: twice(row) + acc, sequences=v,
                           outputs_info=T.zeros((3,)))
    f = _function([v], out)
    assert _loops(f) == [None]
    vv = rng.normal(size=(4, 3))
    np.testing.assert_allclose(f(vv), np.cumsum(vv * 2, axis=0))


def test_errors_name_the_step_as_the_python_loop(rng):
    v = T.vector("v")
    h0 = T.vector("h0")
    grow, _ = symgraph.scan(lambda x, h: T.concatenate([h, h])[:T.cast(x, "int64")],
                            sequences=v, outputs_info=h0, name="grower")
    f = _function([v, h0], grow)
    assert _loops(f)[0] is not None
    messages = []
    for enabled in (True, False):
        native_loop.enabled = enabled
        try:
            with pytest.raises(ValueError) as info:
                f(np.array([2.0, 2.0, 3.0]), np.zeros(2))
            messages.append(str(info.value))
        finally:
            native_loop.enabled = True
    assert messages[0] == messages[1]
    assert "at step 2" in messages[0] and "grower" in messages[0]

    idx = T.iscalar("idx")
    m = T.matrix("m")
    pick, _ = symgraph.scan(lambda x, i: x[i] * 2, sequences=m, non_sequences=idx)
    g = _function([m, idx], pick)
    assert _loops(g)[0] is not None
    with pytest.raises(IndexError, match="failed at step 0"):
        g(np.ones((3, 2)), 5)


def test_profile_times_the_native_loop(rng):
    x = T.matrix("x")
    h, _ = symgraph.scan(lambda x_t, h: T.tanh(h * 0.5 + x_t), sequences=x,
                         outputs_info=T.zeros((3,)), profile=True)
    f = _function([x], h)
    assert _loops(f)[0] is not None
    f(rng.normal(size=(20, 3)))
    node = next(n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan))
    stats = node.tag.scan_profile
    assert stats.native and stats.steps == 20 and stats.calls == 1
    assert 0 < stats.step_time <= stats.loop_time
    text = stats.summary(file="str")
    assert "native loop" in text and "overhead per step" in text and "Composite" in text
    assert stats.inner.profile.node_calls and max(stats.inner.profile.node_calls.values()) == 20


def test_debug_mode_checks_each_step_in_python(rng):
    x = T.vector("x")
    out, _ = symgraph.scan(lambda a, p: p * 0.5 + a, sequences=x, outputs_info=T.zeros(()))
    f = symgraph.function([x], out, mode="DebugMode")
    assert _loops(f) == [None]
    xv = rng.normal(size=5)
    g = _function([x], out)
    np.testing.assert_allclose(f(xv), g(xv))


def test_scalar_steps_compile_into_one_loop(rng):
    a = T.dscalar("a")
    x0 = T.dscalar("x0")
    v = T.dvector("v")
    k = T.lvector("k")
    n = T.iscalar("n")
    # x = a*x + 1 (carried tap -1), a two-tap int recurrence, a mapped output
    # written backwards, constants that are not finite, a stop condition.
    x, _ = symgraph.scan(lambda x, a: a * x + 1, outputs_info=x0, non_sequences=a, n_steps=n)
    fib, _ = symgraph.scan(lambda f2, f1: f1 + f2, outputs_info=dict(initial=k, taps=[-2, -1]),
                           n_steps=n)
    back, _ = symgraph.scan(lambda e, acc: [acc + e, T.minimum(e, np.inf) * 2],
                            sequences=v, outputs_info=[T.constant(0.0), None],
                            go_backwards=True)

    def capped(e, total, limit):
        new = total + abs(e)
        return new, symgraph.scan_module.until(new > limit)

    stop, _ = symgraph.scan(capped, sequences=v, outputs_info=T.constant(0.0),
                            non_sequences=a)
    f = _function([a, x0, v, k, n], [x, x[-1], fib, back[0], back[1], stop])
    scans = [s for s in _loops(f)]
    assert all(s is not None and s.compiled for s in scans) and len(scans) >= 3
    vv = rng.normal(size=9)
    for steps in (1, 2, 7):
        args = (np.array(0.9), np.array(0.25), vv, np.array([1, 1]), np.array(steps, "int32"))
        native, python = _both(f, *args)
        _same(native, python)
    got = f(np.array(0.5), np.array(0.0), vv, np.array([1, 1]), np.array(7, "int32"))
    np.testing.assert_array_equal(got[2], [2, 3, 5, 8, 13, 21, 34])
    assert got[2].dtype == np.int64
    np.testing.assert_allclose(got[3], np.cumsum(vv[::-1]))
    np.testing.assert_allclose(got[4], vv[::-1] * 2)
    np.testing.assert_allclose(got[5][-1], np.cumsum(np.abs(vv))[len(got[5]) - 1])
    assert got[5][-1] > 0.5 and (len(got[5]) == 1 or got[5][-2] <= 0.5)


def test_profiling_a_scalar_loop_times_each_kernel(rng):
    a = T.dscalar("a")
    x, _ = symgraph.scan(lambda x, a: a * x + 1, outputs_info=T.constant(0.0),
                         non_sequences=a, n_steps=50, profile=True)
    f = _function([a], x[-1])
    assert _loops(f)[0].compiled
    np.testing.assert_allclose(f(np.array(0.5)), 2 - 0.5 ** 49)
    node = next(n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan))
    stats = node.tag.scan_profile
    assert "Composite" in stats.summary(file="str")
    assert stats.steps == 50 and max(stats.inner.profile.node_calls.values()) == 50


def test_lazy_ifelse_in_the_native_loop(rng):
    from symgraph.ifelse import ifelse

    x = T.dvector("x")
    idx = T.lvector("idx")

    def step(i, acc, x):
        # x[i] fails for an index out of range: only the taken branch reads it
        picked = ifelse(T.lt(i, x.shape[0]), x[i] * 2, T.constant(-1.0))
        return acc + picked, picked

    (total, picked), _ = symgraph.scan(step, sequences=idx,
                                       outputs_info=[T.constant(0.0), None], non_sequences=x)
    f = _function([idx, x], [total, picked])
    assert _loops(f)[0] is not None
    xv = rng.normal(size=4)
    iv = np.array([0, 9, 3, 100, 1])
    native, python = _both(f, iv, xv)
    _same(native, python)
    np.testing.assert_allclose(native[1], [xv[0] * 2, -1, xv[3] * 2, -1, xv[1] * 2])


def test_values_the_kernels_cannot_take_go_through_the_python_loop(rng):
    x = T.dvector("x")
    out, _ = symgraph.scan(lambda e, acc: acc * 0.5 + e, sequences=x,
                           outputs_info=T.constant(0.0))
    f = _function([x], out)
    node = next(n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan))
    scan = _loops(f)[0]
    assert scan is not None
    values = [np.array(3), rng.normal(size=3).astype(">f8"), np.zeros(1)]
    storage = [[None] for _ in node.outputs]
    assert scan.run(node, values, storage) is None     # byte-swapped: not run
    node.op.perform(node, values, storage)             # the Python loop's result
    expected, acc = [], 0.0
    for e in values[1]:
        acc = acc * 0.5 + e
        expected.append(acc)
    np.testing.assert_allclose(storage[0][0][-3:], expected)
