"""Convnet workloads: C1 (conv2d forward), C2 (its backward) and W5 (a convnet
training step), float32.

C1 and C2 time symgraph once per value of ``dnn.conv.algo_fwd`` (C1) or
``dnn.conv.algo_bwd`` (C2) and with ``time_once`` (the row's label says
which implementation each conv node chose, the note how each graph prints);
every symgraph variant and every peer run in one interleaved measurement, so
each algorithm's row shows its ratios to the same peer times.  Results are
checked once against NumPy; a wrong one is noted.
"""

import numpy as np

from common import Row, jax_setup, measure, torch_setup
from models_conv import (BWD_ALGOS, CONV_W, CONV_X, FWD_ALGOS, NumpyConv, NumpyConvnet,
                         SymgraphConv, chosen_impls, conv_data, conv_ops, convnet_batch,
                         convnet_params, jax_conv_backward, jax_conv_forward,
                         jax_convnet_params, jax_convnet_step, torch_conv_autograd,
                         torch_conv_backward, torch_conv_forward, torch_convnet_step)
from w_runtime import _check

LAYER = "64x3x32x32 * 32x3x3x3 valid"


def clear_tuning_cache(ctx):
    """Remove the records of symgraph's convolution tuning cache (a cache: safe
    to empty), so that ``time_once`` times in this process instead of reusing
    a choice timed earlier, perhaps under another load or with older kernels."""
    try:
        from symgraph.backends.cpu.conv import tuning as conv_tuning
    except ImportError:
        return
    removed = 0
    for path in conv_tuning.tuning_dir().glob("*.json"):
        path.unlink(missing_ok=True)
        removed += 1
    ctx.notes.append("--retune: %d tuning records removed from %s"
                     % (removed, conv_tuning.tuning_dir()))


def _symgraph(ctx, label):
    """The symgraph model builder, or None (the reason goes to the notes)."""
    if not ctx.wants("symgraph"):
        return None
    try:
        return SymgraphConv()
    except Exception as exc:
        ctx.notes.append("%s: symgraph has no convnet API yet: %s: %s"
                         % (label, type(exc).__name__, exc))
        return None


def _build(ctx, label, build):
    """``build()``, or None with the error noted (a missing algorithm or op)."""
    try:
        return build()
    except Exception as exc:
        ctx.notes.append("%s: symgraph cannot build: %s: %s"
                         % (label, type(exc).__name__, str(exc)[:300]))
        return None


def _choice(f):
    """What a compiled function's conv nodes print, after its first call."""
    names = conv_ops(f)
    return "; ".join(names) if names else "no concrete conv op in the graph"


class _Call:
    """``f(*args)`` as a zero-argument callable that keeps ``f`` at hand."""

    def __init__(self, f, *args):
        self.f, self.args = f, args

    def __call__(self):
        return self.f(*self.args)


def _graphs_note(notes):
    """``{variant: what its graph prints}`` as one note, identical texts merged."""
    by_text = {}
    for variant, text in notes.items():
        by_text.setdefault(text, []).append(variant)
    return "symgraph's graphs: " + " | ".join(
        "%s: %s" % (", ".join(v), text) for text, v in by_text.items()) if notes else ""


def _rows(ctx, label, variants, peer_fns, flag):
    """Measure symgraph ``variants`` ({algo: fn}) and peers together; one row each."""
    fns = {"symgraph " + algo: fn for algo, fn in variants.items()}
    fns.update(peer_fns)
    times = measure(ctx, fns)
    peers = {c: times[c] for c in peer_fns}
    rows = []
    for algo, fn in variants.items():
        row_times = dict(peers, symgraph=times["symgraph " + algo])
        chose = ", ".join(chosen_impls(fn.f)) if algo.startswith("time") else ""
        rows.append(Row("%s, %s=%s%s" % (label, flag, algo, " -> " + chose if chose else ""),
                        row_times))
    if not variants:
        rows.append(Row(label, peers))
    return rows


def c1(ctx):
    """C1: conv2d forward of the 64x3x32x32 layer, per algorithm and time_once."""
    label = "C1 conv2d fwd"
    x, w, _ = conv_data()
    np_conv = NumpyConv(CONV_X, CONV_W)
    want = np_conv.forward(x, w).copy()
    variants, notes = {}, {}
    sg = _symgraph(ctx, label)
    for algo in (FWD_ALGOS + ("time_once",)) if sg else ():
        f = _build(ctx, "%s %s" % (label, algo),
                   lambda algo=algo: sg.conv_forward({"dnn.conv.algo_fwd": algo}))
        if f is None:
            continue
        _check(ctx, "%s %s" % (label, algo), "symgraph", f(x, w), want, 1e-3)
        notes[algo] = _choice(f)
        variants[algo] = _Call(f, x, w)
    peer_fns = {}
    if ctx.wants("NumPy"):
        peer_fns["NumPy"] = lambda: np_conv.forward(x, w)
    torch = torch_setup(ctx) if ctx.wants("PyTorch") else None
    if torch is not None:
        fn = torch_conv_forward(torch, x, w)
        _check(ctx, label, "PyTorch", fn().numpy(), want, 1e-3)
        peer_fns["PyTorch"] = fn
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jfn = jax_conv_forward(jax)
        jx, jw = jax.device_put(x), jax.device_put(w)
        _check(ctx, label, "JAX", np.asarray(jfn(jx, jw)), want, 1e-3)
        peer_fns["JAX"] = lambda: jfn(jx, jw).block_until_ready()
    rows = _rows(ctx, "%s %s" % (label, LAYER), variants, peer_fns, "algo_fwd")
    rows[-1].note = _graphs_note(notes)
    return rows


def c2(ctx):
    """C2: both gradients of sum(conv2d(x, w) * G), per algo_bwd value and time_once."""
    label = "C2 conv2d bwd"
    x, w, g = conv_data()
    np_conv = NumpyConv(CONV_X, CONV_W)
    want_dx, want_dw = np_conv.backward(x, w, g)
    variants, notes = {}, {}
    sg = _symgraph(ctx, label)
    for algo in (BWD_ALGOS + ("time_once",)) if sg else ():
        f = _build(ctx, "%s %s" % (label, algo),
                   lambda algo=algo: sg.conv_backward({"dnn.conv.algo_bwd": algo}))
        if f is None:
            continue
        dx, dw = f(x, w, g)
        _check(ctx, "%s %s dx" % (label, algo), "symgraph", dx, want_dx, 1e-3)
        _check(ctx, "%s %s dw" % (label, algo), "symgraph", dw, want_dw, 1e-2)
        notes[algo] = _choice(f)
        variants[algo] = _Call(f, x, w, g)
    peer_fns = {}
    if ctx.wants("NumPy"):
        peer_fns["NumPy"] = lambda: np_conv.backward(x, w, g)
    torch = torch_setup(ctx) if ctx.wants("PyTorch") else None
    extra = ""
    if torch is not None:
        fn = torch_conv_backward(torch, x, w, g)
        dx, dw = fn()
        _check(ctx, label + " dx", "PyTorch", dx.numpy(), want_dx, 1e-3)
        _check(ctx, label + " dw", "PyTorch", dw.numpy(), want_dw, 1e-2)
        peer_fns["PyTorch"] = fn
        autograd = measure(ctx, {"autograd": torch_conv_autograd(torch, x, w, g)})["autograd"]
        if autograd:
            extra = ("PyTorch is aten.convolution_backward (no forward); its autograd "
                     "(forward + backward) takes %.3g ms" % (autograd * 1e3))
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jfn = jax_conv_backward(jax)
        jx, jw, jg = (jax.device_put(a) for a in (x, w, g))
        dx, dw = jfn(jx, jw, jg)
        _check(ctx, label + " dx", "JAX", np.asarray(dx), want_dx, 1e-3)
        _check(ctx, label + " dw", "JAX", np.asarray(dw), want_dw, 1e-2)
        peer_fns["JAX"] = lambda: jax.block_until_ready(jfn(jx, jw, jg))
    rows = _rows(ctx, "%s %s" % (label, LAYER), variants, peer_fns, "algo_bwd")
    rows[-1].note = "; ".join(t for t in (_graphs_note(notes), extra) if t)
    return rows


def w5(ctx):
    """W5: a convnet training step (conv 3x3, relu, max pool 2x2, dense 10, softmax
    cross-entropy with int labels, SGD on shared weights), batch 64."""
    fns, f = w5_callables(ctx)
    note, chose = "", ""
    if "symgraph" in fns:
        note = "symgraph time_once graph: " + _choice(f)
        chose = " (time_once -> %s)" % ", ".join(chosen_impls(f))
    rows = [Row("W5 convnet step, batch 64, float32%s" % chose, measure(ctx, fns), note=note)]
    # What users get: the algorithm flags left at their defaults (small).
    sg = _symgraph(ctx, "W5 default flags")
    if sg is not None:
        params = convnet_params()
        x, y = convnet_batch()
        g = _build(ctx, "W5 default flags", lambda: sg.convnet_step(params, {}))
        if g is not None:
            g(x, y)
            peers = {c: fn for c, fn in fns.items() if c in ("PyTorch", "JAX")}
            label = "W5 convnet step, default flags (%s)" % ", ".join(chosen_impls(g))
            rows.append(Row(label, measure(ctx, dict(peers, symgraph=_Call(g, x, y)))))
    return rows


def w5_callables(ctx, label="W5 convnet step"):
    """(``{column: step}`` of W5 for every selected system, symgraph's compiled
    function or None), checked: the first two costs agree with NumPy's."""
    params = convnet_params()
    x, y = convnet_batch()
    fns, f = {}, None
    sg = _symgraph(ctx, label)
    if sg is not None:
        flags = {"dnn.conv.algo_fwd": "time_once", "dnn.conv.algo_bwd": "time_once"}
        f = _build(ctx, label, lambda: sg.convnet_step(params, flags))
        if f is not None:
            fns["symgraph"] = lambda: f(x, y)
    if ctx.wants("NumPy"):
        model = NumpyConvnet(params)
        fns["NumPy"] = lambda: model.step(x, y)
    torch = torch_setup(ctx) if ctx.wants("PyTorch") else None
    if torch is not None:
        step = torch_convnet_step(torch, params)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        fns["PyTorch"] = lambda: step(tx, ty)
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jstep = jax_convnet_step(jax)
        state = {"ps": [jax.device_put(p) for p in jax_convnet_params(params)]}
        jx, jy = jax.device_put(x), jax.device_put(y.astype(np.int32))

        def jax_call():
            state["ps"], cost = jstep(state["ps"], jx, jy)
            return cost.block_until_ready()

        fns["JAX"] = jax_call
    # the first costs must agree (same weights, same batch), and so must the second
    # (after one identical SGD step), which checks the gradients too
    costs = {}
    for column, fn in list(fns.items()):
        try:
            costs[column] = [float(np.asarray(fn())) for _ in range(2)]
        except Exception as exc:
            ctx.notes.append("%s: %s failed: %s: %s" % (label, column, type(exc).__name__,
                                                        str(exc)[:300]))
            del fns[column]
    ref = costs.get("NumPy")
    for column, pair in costs.items():
        if ref is not None and any(abs(c - r) > 1e-3 * max(1.0, abs(r))
                                   for c, r in zip(pair, ref)):
            ctx.notes.append("%s: %s costs %s differ from NumPy's %s" % (label, column,
                                                                          pair, ref))
    return fns, f
