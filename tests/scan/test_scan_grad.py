"""Gradients through scan against finite differences (verify_grad) on small odd
shapes: taps of both kinds, truncation (against NumPy's truncated BPTT),
go_backwards, until, non-sequences and shared variables, random draws in the
step, nested loops, second order, the R-operator; and an Elman RNN trained a
few SGD steps, matching NumPy step by step."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.scan import Scan
from symgraph.tensor.shared_randomstreams import RandomStreams


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_elman_recurrence(rng):
    def cost(x, h0, W, U):
        out, _ = symgraph.scan(lambda x_t, h, W, U: T.tanh(T.dot(x_t, W) + T.dot(h, U)),
                               sequences=x, outputs_info=h0, non_sequences=[W, U])
        return out.sum() + (out[-1] ** 2).sum()

    verify_grad(cost, [rng.normal(size=(5, 3)), rng.normal(size=4),
                       rng.normal(size=(3, 4)) * .5, rng.normal(size=(4, 4)) * .5])


def test_output_taps(rng):
    def cost(x0, w):
        out, _ = symgraph.scan(lambda a, b, c, w: T.sin(a) * w + b * c * 0.3,
                               outputs_info=[dict(initial=x0, taps=[-3, -2, -1])],
                               non_sequences=w, n_steps=5)
        return (out ** 2).sum()

    verify_grad(cost, [rng.normal(size=(4, 3)), rng.normal(size=3)])


def test_sequence_taps_of_both_signs(rng):
    def cost(x, w):
        out, _ = symgraph.scan(lambda a, b, c, w: a * b + T.tanh(c * w),
                               sequences=dict(input=x, taps=[-1, 0, 2]), non_sequences=w)
        return out.sum()

    verify_grad(cost, [rng.normal(size=(7, 3)), rng.normal(size=3)])


def test_several_outputs_mapped_and_fed_back(rng):
    def cost(x, s0):
        (ys, ss), _ = symgraph.scan(lambda x_t, s: (T.exp(x_t * s), s * 0.5 + x_t),
                                    sequences=x, outputs_info=[None, s0])
        return ys.sum() + ss[-2]

    verify_grad(cost, [rng.normal(size=(5, 3)) * .5, rng.normal(size=3)])


def test_go_backwards(rng):
    def cost(x, w):
        (a, b), _ = symgraph.scan(lambda x_t, y_t, w: (x_t * w + y_t, T.sin(x_t)),
                                  sequences=[x, x[::-1]], outputs_info=[None, None],
                                  non_sequences=w, go_backwards=True)
        return (a ** 2).sum() + b[1:].sum()

    verify_grad(cost, [rng.normal(size=(5, 3)), rng.normal(size=3)])


def test_go_backwards_recurrence_with_fewer_steps(rng):
    def cost(x, h0):
        out, _ = symgraph.scan(lambda x_t, h: T.tanh(h * x_t), sequences=x, outputs_info=h0,
                               go_backwards=True, n_steps=3)
        return (out ** 2).sum()

    verify_grad(cost, [rng.normal(size=(5, 2)), rng.normal(size=2)])


def test_until(rng):
    def cost(x0, w):
        out, _ = symgraph.scan(
            lambda h, w: (T.tanh(h * w + 0.3), symgraph.scan_module.until(T.sum(h) > 1.0)),
            outputs_info=x0, non_sequences=w, n_steps=7)
        return (out ** 2).sum()

    x0, w = np.array([0.1, 0.2, 0.3]), np.array([1.5, 1.2, 1.1])
    steps = symgraph.function([], symgraph.scan(
        lambda h: (T.tanh(h * w + 0.3), symgraph.scan_module.until(T.sum(h) > 1.0)),
        outputs_info=T.constant(x0), n_steps=7)[0].shape[0])()
    assert 1 < steps < 7    # the gradient goes through a loop that stopped early
    verify_grad(cost, [x0, w])


def test_shared_weights_and_implicit_non_sequences(rng):
    W = symgraph.shared(rng.normal(size=(3, 3)) * .5, name="W")
    b = symgraph.shared(rng.normal(size=3), name="b")
    x = T.matrix("x")
    out, _ = symgraph.scan(lambda x_t, h: T.tanh(T.dot(h, W) + x_t + b), sequences=x,
                           outputs_info=T.zeros_like(b))
    cost = (out ** 2).sum()
    gW, gb, gx = symgraph.grad(cost, [W, b, x])
    f = symgraph.function([x], [cost, gW, gb, gx])
    xv = rng.normal(size=(4, 3))
    c, gW_v, gb_v, gx_v = f(xv)

    def np_cost(Wv, bv, xv):
        h, tot = np.zeros(3), 0.0
        for t in range(len(xv)):
            h = np.tanh(h @ Wv + xv[t] + bv)
            tot += (h ** 2).sum()
        return tot

    def numeric(fn, value):
        g = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            d = np.zeros_like(value)
            d[i] = 1e-6
            g[i] = (fn(value + d) - fn(value - d)) / 2e-6
        return g

    Wv, bv = W.get_value(), b.get_value()
    assert c == pytest.approx(np_cost(Wv, bv, xv))
    np.testing.assert_allclose(gW_v, numeric(lambda v: np_cost(v, bv, xv), Wv), atol=1e-6)
    np.testing.assert_allclose(gb_v, numeric(lambda v: np_cost(Wv, v, xv), bv), atol=1e-6)
    np.testing.assert_allclose(gx_v, numeric(lambda v: np_cost(Wv, bv, v), xv), atol=1e-6)


def test_gradient_of_a_shared_variable_updated_in_the_loop(rng):
    acc = symgraph.shared(np.zeros(2), name="acc")
    w = T.vector("w")
    _, updates = symgraph.scan(lambda w: {acc: acc * 0.5 + T.sin(w)}, non_sequences=w,
                               n_steps=4)
    cost = (updates[acc] ** 2).sum()
    g = symgraph.grad(cost, w)
    f = symgraph.function([w], [cost, g])
    wv = rng.normal(size=2)

    def np_cost(wv):
        a = np.zeros(2)
        for _ in range(4):
            a = a * 0.5 + np.sin(wv)
        return (a ** 2).sum()

    c, gv = f(wv)
    assert c == pytest.approx(np_cost(wv))
    num = [(np_cost(wv + d) - np_cost(wv - d)) / 2e-6 for d in np.eye(2) * 1e-6]
    np.testing.assert_allclose(gv, num, atol=1e-6)


def test_truncated_gradient_matches_numpy_truncated_bptt(rng):
    x = T.matrix("x")
    U = T.matrix("U")
    h0 = T.vector("h0")
    out, _ = symgraph.scan(lambda x_t, h, U: T.tanh(T.dot(h, U) + x_t), sequences=x,
                           outputs_info=h0, non_sequences=U, truncate_gradient=2)
    cost = out[-1].sum() + out[1].sum()
    gU, gx, gh0 = symgraph.grad(cost, [U, x, h0])
    f = symgraph.function([x, U, h0], [gU, gx, gh0])
    xv, Uv, h0v = rng.normal(size=(5, 3)), rng.normal(size=(3, 3)) * .5, rng.normal(size=3)
    hs = [h0v]
    for t in range(5):
        hs.append(np.tanh(hs[-1] @ Uv + xv[t]))
    seed = np.zeros((5, 3))
    seed[4] += 1
    seed[1] += 1
    dh, gU_np, gx_np = np.zeros(3), np.zeros((3, 3)), np.zeros((5, 3))
    for t in (4, 3):     # only the last two steps are visited
        da = (dh + seed[t]) * (1 - hs[t + 1] ** 2)
        gU_np += np.outer(hs[t], da)
        gx_np[t] = da
        dh = da @ Uv.T
    got_U, got_x, got_h0 = f(xv, Uv, h0v)
    np.testing.assert_allclose(got_U, gU_np)
    np.testing.assert_allclose(got_x, gx_np)
    np.testing.assert_allclose(got_h0, 0)   # five steps back: beyond the truncation
    # Truncation longer than the loop: the full gradient.
    verify_grad(lambda x, U, h0: symgraph.scan(
        lambda x_t, h, U: T.tanh(T.dot(h, U) + x_t), sequences=x, outputs_info=h0,
        non_sequences=U, truncate_gradient=50)[0].sum(), [xv, Uv, h0v])


def test_truncation_reaching_into_the_initial_taps(rng):
    x0 = T.matrix("x0")
    out, _ = symgraph.scan(lambda a, b: a * 0.5 + T.tanh(b), n_steps=3,
                           outputs_info=dict(initial=x0, taps=[-3, -1]), truncate_gradient=2)
    g = symgraph.grad(out.sum(), x0)
    x0v = rng.normal(size=(3, 2))
    got = symgraph.function([x0], g)(x0v)
    # Visited steps 1 and 2 read entries 1, 2 (tap -3) and 3, 4 (tap -1) of the buffer:
    # of the initial entries only 1 and 2 get a gradient, through tap -3 (0.5 each)
    # and entry 2 through step 1's ... nothing else: entry 0 is read by step 0 only.
    assert np.all(got[0] == 0)
    assert np.all(got[1:] != 0)


def test_random_draws_in_the_step_replayed_by_the_gradient(rng):
    srng = RandomStreams(12)
    x = T.matrix("x")
    w = T.vector("w")

    def step(x_t, h, w):
        mask = srng.binomial(size=x_t.shape, p=0.5, dtype=x_t.dtype)
        return T.tanh(h * w + x_t * mask), mask

    (hs, masks), updates = symgraph.scan(step, sequences=x,
                                         outputs_info=[T.zeros_like(w), None], non_sequences=w)
    cost = (hs ** 2).sum()
    f = symgraph.function([x, w], [cost, symgraph.grad(cost, w), masks], updates=updates)
    xv, wv = rng.normal(size=(4, 3)), rng.normal(size=3)
    for _ in range(2):
        c, g, m = f(xv, wv)

        def np_cost(wv):
            h, tot = np.zeros(3), 0.0
            for t in range(4):
                h = np.tanh(h * wv + xv[t] * m[t])
                tot += (h ** 2).sum()
            return tot

        assert c == pytest.approx(np_cost(wv))
        num = [(np_cost(wv + d) - np_cost(wv - d)) / 2e-6 for d in np.eye(3) * 1e-6]
        np.testing.assert_allclose(g, num, atol=1e-6)


def test_nested_scans(rng):
    def cost(x, w):
        def step(x_t, h, w):
            inner, _ = symgraph.scan(lambda a, acc, w: acc + T.tanh(a * w), sequences=x_t,
                                     outputs_info=h, non_sequences=w)
            return inner[-1]

        out, _ = symgraph.scan(step, sequences=x, outputs_info=T.zeros_like(w),
                               non_sequences=w)
        return (out ** 2).sum()

    verify_grad(cost, [rng.normal(size=(3, 4, 2)), rng.normal(size=2)])


def test_second_order(rng):
    def grad_norm(x):
        out, _ = symgraph.scan(lambda h, x: T.tanh(h * x), outputs_info=T.ones_like(x),
                               non_sequences=x, n_steps=3)
        g = symgraph.grad((out[-1] ** 2).sum(), x)
        return (g ** 2).sum()

    verify_grad(grad_norm, [rng.normal(size=3)])


def test_gradient_of_the_last_step_only_keeps_a_ring(rng):
    x = T.vector("x")
    out, _ = symgraph.scan(lambda h, x: T.tanh(h * x + 0.1), outputs_info=T.ones_like(x),
                           non_sequences=x, n_steps=6)
    cost = (out[-1] ** 2).sum()
    f = symgraph.function([x], [cost, symgraph.grad(cost, x)])
    scans = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan)]
    assert len(scans) == 2 and all(n.op.info.rec_keep[0] != 0 for n in scans
                                   if (n.op.name or "").startswith("grad_of"))
    verify_grad(lambda x: (symgraph.scan(lambda h, x: T.tanh(h * x + 0.1),
                                         outputs_info=T.ones_like(x), non_sequences=x,
                                         n_steps=6)[0][-1] ** 2).sum(), [rng.normal(size=3)])


def test_integer_sequences_get_no_gradient(rng):
    x = T.vector("x")
    comps, _ = symgraph.scan(lambda c, p, x: c * x ** p, outputs_info=None,
                             sequences=[x, T.arange(10)], non_sequences=x[0])
    g = symgraph.grad(comps.sum(), x)
    xv = np.array([0.5, 1.5, 2.0])
    # d/dx_k of sum_k x_k x_0**k: x_0**k for k > 0; for x_0 also sum_k k x_k x_0**(k-1).
    expected = np.array([1 + sum(k * xv[k] * xv[0] ** (k - 1) for k in range(1, 3)),
                         xv[0], xv[0] ** 2])
    np.testing.assert_allclose(symgraph.function([x], g)(xv), expected)


def test_rop_against_finite_differences(rng):
    x = T.vector("x")
    v = T.vector("v")
    seq = T.matrix("seq")
    e = T.matrix("e")
    out, _ = symgraph.scan(lambda s, h, x: T.tanh(h * x + s), sequences=seq,
                           outputs_info=T.ones_like(x), non_sequences=x)
    r = symgraph.Rop(out, [x, seq], [v, e])
    f = symgraph.function([x, seq, v, e], r)
    fo = symgraph.function([x, seq], out)
    xv, sv, vv, ev = rng.normal(size=3), rng.normal(size=(4, 3)), rng.normal(size=3), \
        rng.normal(size=(4, 3))
    eps = 1e-6
    num = (fo(xv + eps * vv, sv + eps * ev) - fo(xv - eps * vv, sv - eps * ev)) / (2 * eps)
    np.testing.assert_allclose(f(xv, sv, vv, ev), num, atol=1e-7)
    scans = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan)]
    assert [n.op.name for n in scans] == ["rop_of_scan_fn"]   # one tangent loop, no grad


def _elman_numpy(params, xs, ys, lr, steps):
    W_x, W_h, b, W_y = [p.copy() for p in params]
    history = []
    for _ in range(steps):
        hs = [np.zeros(W_h.shape[0])]
        for t in range(len(xs)):
            hs.append(np.tanh(xs[t] @ W_x + hs[-1] @ W_h + b))
        preds = np.stack(hs[1:]) @ W_y
        err = preds - ys
        cost = 0.5 * (err ** 2).sum()
        g_Wy = np.stack(hs[1:]).T @ err
        gW_x, gW_h, gb = np.zeros_like(W_x), np.zeros_like(W_h), np.zeros_like(b)
        dh = np.zeros_like(b)
        for t in reversed(range(len(xs))):
            dh = dh + err[t] @ W_y.T
            da = dh * (1 - hs[t + 1] ** 2)
            gW_x += np.outer(xs[t], da)
            gW_h += np.outer(hs[t], da)
            gb += da
            dh = da @ W_h.T
        history.append(cost)
        W_x, W_h, b, W_y = W_x - lr * gW_x, W_h - lr * gW_h, b - lr * gb, W_y - lr * g_Wy
    return history, [W_x, W_h, b, W_y]


def test_elman_rnn_trains_like_numpy(rng):
    n_in, n_hid, n_out, steps = 3, 5, 2, 7
    init = [rng.normal(size=(n_in, n_hid)) * .4, rng.normal(size=(n_hid, n_hid)) * .4,
            rng.normal(size=n_hid) * .1, rng.normal(size=(n_hid, n_out)) * .4]
    W_x, W_h, b, W_y = [symgraph.shared(p.copy(), name=n)
                        for p, n in zip(init, ["W_x", "W_h", "b", "W_y"])]
    x = T.matrix("x")
    y = T.matrix("y")
    h, _ = symgraph.scan(lambda x_t, h_tm1: T.tanh(T.dot(x_t, W_x) + T.dot(h_tm1, W_h) + b),
                         sequences=x, outputs_info=T.zeros_like(b))
    cost = 0.5 * ((T.dot(h, W_y) - y) ** 2).sum()
    params = [W_x, W_h, b, W_y]
    grads = symgraph.grad(cost, params)
    lr = 0.05
    train = symgraph.function([x, y], cost,
                              updates=[(p, p - lr * g) for p, g in zip(params, grads)])
    xs, ys = rng.normal(size=(steps, n_in)), rng.normal(size=(steps, n_out))
    expected_costs, expected_params = _elman_numpy(init, xs, ys, lr, 5)
    costs = [float(train(xs, ys)) for _ in range(5)]
    np.testing.assert_allclose(costs, expected_costs, rtol=1e-10)
    for p, e in zip(params, expected_params):
        np.testing.assert_allclose(p.get_value(), e, rtol=1e-9, atol=1e-12)
    assert costs[-1] < costs[0]


def test_backward_step_does_only_the_needed_work():
    x = T.tensor3("x")
    Wx, Wh = T.matrix("Wx"), T.matrix("Wh")
    h, _ = symgraph.scan(lambda x_t, h: T.tanh(T.dot(x_t, Wx) + T.dot(h, Wh)), sequences=x,
                         outputs_info=T.zeros((x.shape[1], Wh.shape[0])), name="rnn")
    f = symgraph.function([x, Wx, Wh], symgraph.grad(h[-1].sum(), Wh))
    (backward,) = [n for n in f.maker.fgraph.toposort()
                   if isinstance(n.op, Scan) and n.op.name == "grad_of_rnn"]
    inner = symgraph.printing.debugprint(backward.op.inner_outputs, file="str")
    # tanh's derivative reads the stored forward output: no replay of the step ...
    assert "tanh" not in inner
    # ... and no gradient for dot(x_t, Wx) (computed for all steps before the
    # loop), which only the gradients of x and Wx need.
    assert backward.op.info.n_nitsot == 0
    g = symgraph.function([x, Wx, Wh], symgraph.grad(h[-1].sum(), Wx))
    (backward,) = [n for n in g.maker.fgraph.toposort()
                   if isinstance(n.op, Scan) and n.op.name == "grad_of_rnn"]
    assert backward.op.info.n_nitsot == 1   # the adjoint of dot(x_t, Wx); one product after


def test_gru_trains_like_the_unrolled_graph(rng):
    """A GRU trained by SGD through scan matches the same network written as
    an unrolled Python loop (no scan), step by step."""
    n_in, n_hid, steps = 3, 4, 5
    init = {name: rng.normal(size=shape) * 0.4 for name, shape in
            [("Wz", (n_in, n_hid)), ("Uz", (n_hid, n_hid)), ("Wr", (n_in, n_hid)),
             ("Ur", (n_hid, n_hid)), ("Wh", (n_in, n_hid)), ("Uh", (n_hid, n_hid)),
             ("V", (n_hid, 1))]}

    def gru_step(x_t, h, Wz, Uz, Wr, Ur, Wh, Uh):
        z = T.nnet.sigmoid(T.dot(x_t, Wz) + T.dot(h, Uz))
        r = T.nnet.sigmoid(T.dot(x_t, Wr) + T.dot(h, Ur))
        cand = T.tanh(T.dot(x_t, Wh) + T.dot(r * h, Uh))
        return (1 - z) * h + z * cand

    def trainer(use_scan):
        params = {k: symgraph.shared(v.copy(), name=k) for k, v in init.items()}
        gates = [params[k] for k in ("Wz", "Uz", "Wr", "Ur", "Wh", "Uh")]
        x, y = T.matrix("x"), T.vector("y")
        h0 = T.zeros((n_hid,))
        if use_scan:
            hs, _ = symgraph.scan(gru_step, sequences=x, outputs_info=h0, non_sequences=gates)
        else:
            h, rows = h0, []
            for t in range(steps):
                h = gru_step(x[t], h, *gates)
                rows.append(h)
            hs = T.stack(rows)
        cost = ((T.dot(hs, params["V"])[:, 0] - y) ** 2).sum()
        plist = list(params.values())
        grads = symgraph.grad(cost, plist)
        f = symgraph.function([x, y], cost,
                              updates=[(p, p - 0.1 * g) for p, g in zip(plist, grads)])
        return f, params

    xs, ys = rng.normal(size=(steps, n_in)), rng.normal(size=steps)
    (f_scan, p_scan), (f_ref, p_ref) = trainer(True), trainer(False)
    for _ in range(4):
        np.testing.assert_allclose(f_scan(xs, ys), f_ref(xs, ys), rtol=1e-10)
    for k in init:
        np.testing.assert_allclose(p_scan[k].get_value(), p_ref[k].get_value(), rtol=1e-9,
                                   atol=1e-12)


def test_rop_with_taps_mapped_outputs_and_until(rng):
    x0, w = T.matrix("x0"), T.vector("w")
    e0, ew = T.matrix("e0"), T.vector("ew")

    def step(a, b, w):
        return T.tanh(a * w + b), T.sin(b) * w, symgraph.scan_module.until(T.sum(b) > 50)

    (rec, mapped), _ = symgraph.scan(step, outputs_info=[dict(initial=x0, taps=[-2, -1]), None],
                                     non_sequences=w, n_steps=5)
    r_rec, r_map = symgraph.Rop([rec, mapped], [x0, w], [e0, ew])
    f = symgraph.function([x0, w, e0, ew], [r_rec, r_map])
    fo = symgraph.function([x0, w], [rec, mapped])
    x0v, wv, e0v, ewv = (rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=(2, 3)),
                         rng.normal(size=3))
    eps = 1e-6
    plus, minus = fo(x0v + eps * e0v, wv + eps * ewv), fo(x0v - eps * e0v, wv - eps * ewv)
    for got, p, m in zip(f(x0v, wv, e0v, ewv), plus, minus):
        np.testing.assert_allclose(got, (p - m) / (2 * eps), atol=1e-7)
