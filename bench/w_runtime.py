"""Run-time workloads W1 (call overhead), W2 (fused element-wise), W3
(reduction, softmax) and W4 (MLP training step).

Each ``wN(ctx)`` builds every selected system's callable for the same inputs,
checks that they agree with NumPy, times them interleaved (``common.measure``)
and returns table rows.
"""

import numpy as np

from common import Row, import_optional, jax_setup, measure, pytensor_modes, torch_setup
from models import (NumpyMLP, TheanoLike, jax_mlp_step, mlp_batch, mlp_params,
                    torch_mlp_step)


def _theano_likes(ctx):
    """``{column: TheanoLike}`` for symgraph and the selected PyTensor backends."""
    out = {}
    if ctx.wants("symgraph"):
        out["symgraph"] = TheanoLike("symgraph")
    for column, mode in pytensor_modes().items():
        if ctx.wants(column):
            out[column] = TheanoLike("pytensor", mode)
    return out


def _check(ctx, label, name, got, want, rtol):
    """Record (not raise) a wrong result: a benchmark of a wrong answer is void."""
    got = np.asarray(got)
    if got.shape != np.shape(want):
        ctx.notes.append("%s: %s gives shape %s, NumPy %s" % (label, name, got.shape,
                                                              np.shape(want)))
    elif got.dtype != np.asarray(want).dtype:
        ctx.notes.append("%s: %s gives dtype %s, NumPy %s" % (label, name, got.dtype,
                                                              np.asarray(want).dtype))
    elif not np.allclose(got, want, rtol=rtol, atol=rtol):
        ctx.notes.append("%s: %s gives a wrong result (max abs error %.3g)"
                         % (label, name, float(np.max(np.abs(got - want)))))


def _elementwise(ctx, label, np_fn, theano_build, torch_fn, jax_fn, arrays, rtol=1e-4):
    """Time one element-wise/reduction expression on every system; returns times."""
    torch = torch_setup(ctx) if (ctx.wants("PyTorch") or ctx.wants("torch.compile")) else None
    jax = jax_setup() if ctx.wants("JAX") else None
    want = np_fn(*arrays)
    fns = {}
    for column, lib in _theano_likes(ctx).items():
        try:
            f = theano_build(lib)
        except Exception as exc:
            ctx.notes.append("%s: %s cannot build: %s" % (label, column, exc))
            continue
        _check(ctx, label, column, f(*arrays), want, rtol)
        fns[column] = (lambda f=f: f(*arrays))
    if ctx.wants("NumPy"):
        fns["NumPy"] = lambda: np_fn(*arrays)
    if torch is not None:
        targs = [torch.from_numpy(a) for a in arrays]
        with torch.no_grad():
            if ctx.wants("PyTorch"):
                _check(ctx, label, "PyTorch", torch_fn(torch, *targs).numpy(), want, rtol)
                fns["PyTorch"] = lambda: torch_fn(torch, *targs)
            if ctx.wants("torch.compile"):
                comp = torch.compile(lambda *a: torch_fn(torch, *a))
                _check(ctx, label, "torch.compile", comp(*targs).numpy(), want, rtol)
                fns["torch.compile"] = lambda: comp(*targs)
    if jax is not None:
        jfn = jax.jit(lambda *a: jax_fn(jax.numpy, *a))
        jargs = [jax.device_put(a) for a in arrays]
        _check(ctx, label, "JAX", np.asarray(jfn(*jargs)), want, rtol)
        fns["JAX"] = lambda: jfn(*jargs).block_until_ready()
    if torch is not None:
        with torch.no_grad():
            return measure(ctx, fns)
    return measure(ctx, fns)


def w1(ctx):
    """W1: ``x + 1`` on 10 elements; the default call and with ``trust_input``."""
    rows = []
    for dtype in ctx.dtypes:
        x = np.arange(10, dtype=dtype)
        times = _elementwise(ctx, "W1", lambda a: a + 1, lambda lib: lib.w1(dtype),
                             lambda t, a: a + 1, lambda jnp, a: a + 1, [x])
        rows.append(Row("W1 x+1, 10 el, %s" % dtype, times))
        # trust_input: symgraph's and PyTensor's checks skipped; the others as before
        trusted = dict(times)
        fns = {}
        for column, lib in _theano_likes(ctx).items():
            f = lib.w1(dtype, trust_input=True)
            fns[column] = (lambda f=f: f(x))
        trusted.update(measure(ctx, fns))
        rows.append(Row("W1 trust_input, %s" % dtype, trusted,
                        note="symgraph and PyTensor with trust_input=True; "
                             "the other columns repeat the default call"))
    return rows


def _w2_numpy(x, y, z):
    return np.exp(-x * x) * y + np.tanh(z) * x.dtype.type(0.5)


def w2(ctx):
    """W2: ``exp(-x*x) * y + tanh(z) * 0.5`` on 1e6 and 1e7 elements, with GB/s."""
    rows = []
    sizes = [(10 ** 6, d) for d in ctx.dtypes] + [(10 ** 7, "float32")]
    for n, dtype in sizes:
        rng = np.random.default_rng(0)
        x, y, z = (rng.standard_normal(n).astype(dtype) for _ in range(3))
        times = _elementwise(
            ctx, "W2", _w2_numpy, lambda lib: lib.w2(dtype),
            lambda t, a, b, c: t.exp(-a * a) * b + t.tanh(c) * 0.5,
            lambda jnp, a, b, c: jnp.exp(-a * a) * b + jnp.tanh(c) * 0.5, [x, y, z])
        tag = "1e%d" % round(np.log10(n))
        rows.append(Row("W2 %s, %s" % (tag, dtype), times))
        # bandwidth: W2 reads 3 arrays and writes 1; np.copyto reads 1 and writes 1
        moved = 4 * n * x.itemsize
        dst = np.empty_like(x)
        copy = measure(ctx, {"reused": lambda: np.copyto(dst, x),
                             "fresh": lambda: np.copyto(np.empty_like(x), x)})
        copy_bw = 2 * n * x.itemsize / copy["reused"]
        gbs = {c: ("%.1f GB/s" % (moved / t / 1e9) if t else "n/a") for c, t in times.items()}
        rows.append(Row("W2 %s GB/s" % tag, gbs, unit="text",
                        note="copy bandwidth (np.copyto, reused output) %.1f GB/s; floor for "
                             "W2 (4 arrays at copy bandwidth) %s; with a fresh output each "
                             "call %s" % (copy_bw / 1e9, _ms(moved / copy_bw),
                                          _ms(2 * copy["fresh"]))))
    return rows


def _ms(seconds):
    return "%.3g ms" % (seconds * 1e3)


def _softmax_np(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def w3(ctx):
    """W3: ``sum(exp(x))`` on 1e7 elements; the norms of 1e6 3-vectors (a
    reduction over a short inner axis); softmax over rows of 4096x1024."""
    rows = []
    rng = np.random.default_rng(0)
    for dtype in ctx.dtypes:
        x = (rng.standard_normal(10 ** 7) * 0.1).astype(dtype)
        # float32 sums of 1e7 terms differ by summation order: a loose tolerance
        times = _elementwise(ctx, "W3 sum", lambda a: np.sum(np.exp(a)),
                             lambda lib: lib.w3_sum(dtype), lambda t, a: t.sum(t.exp(a)),
                             lambda jnp, a: jnp.sum(jnp.exp(a)), [x], rtol=1e-3)
        rows.append(Row("W3 sum(exp(x)) 1e7, %s" % dtype, times))
    # a reduction over a short inner axis: every output's group is 3 elements
    v = rng.standard_normal((10 ** 6, 3)).astype("float32")
    times = _elementwise(ctx, "W3 row norms", lambda a: np.sqrt(np.sum(a * a, axis=1)),
                         lambda lib: lib.w3_rownorm("float32"),
                         lambda t, a: t.sqrt(t.sum(a * a, dim=1)),
                         lambda jnp, a: jnp.sqrt(jnp.sum(a * a, axis=1)), [v])
    rows.append(Row("W3 row norms 1e6x3, float32", times))
    m = rng.standard_normal((4096, 1024)).astype("float32")
    times = _elementwise(ctx, "W3 softmax", _softmax_np, lambda lib: lib.w3_softmax("float32"),
                         lambda t, a: t.softmax(a, dim=-1),
                         lambda jnp, a: _jax_softmax(jnp, a), [m])
    rows.append(Row("W3 softmax 4096x1024, float32", times))
    return rows


def _jax_softmax(jnp, a):
    e = jnp.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def w4(ctx):
    """W4: one MLP training step (784-512-512-10, batch 128, SGD on shared weights)."""
    return [Row("W4 MLP step, float32", measure(ctx, w4_callables(ctx)))]


def w4_callables(ctx, label="W4"):
    """``{column: step}`` of W4 for every selected system, checked: the first
    costs agree with NumPy's (a disagreement goes to the notes)."""
    params = mlp_params()
    x, y = mlp_batch()
    fns = {}
    for column, lib in _theano_likes(ctx).items():
        try:
            f = lib.w4(params)
        except Exception as exc:
            ctx.notes.append("%s: %s cannot build: %s" % (label, column, exc))
            continue
        fns[column] = (lambda f=f: f(x, y))
    if ctx.wants("NumPy"):
        model = NumpyMLP(params)
        fns["NumPy"] = lambda: model.step(x, y)
    torch = torch_setup(ctx) if (ctx.wants("PyTorch") or ctx.wants("torch.compile")) else None
    if torch is not None:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        for column, compiled in (("PyTorch", False), ("torch.compile", True)):
            if ctx.wants(column):
                step = torch_mlp_step(torch, params, compiled)
                fns[column] = (lambda step=step: step(tx, ty))
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jstep = jax_mlp_step(jax)
        state = {"ps": [jax.device_put(p) for p in params]}
        jx, jy = jax.device_put(x), jax.device_put(y.astype(np.int32))

        def jax_call():
            state["ps"], cost = jstep(state["ps"], jx, jy)
            return cost.block_until_ready()

        fns["JAX"] = jax_call
    # the first costs of every system must agree (same weights, same batch)
    first = {}
    for column, fn in fns.items():
        try:
            first[column] = float(np.asarray(fn()))
        except Exception as exc:
            ctx.notes.append("%s: %s failed: %s" % (label, column, exc))
    ref = first.get("NumPy")
    for column, cost in first.items():
        if ref is not None and abs(cost - ref) > 1e-3 * max(1.0, abs(ref)):
            ctx.notes.append("%s: %s first cost %.6f differs from NumPy's %.6f"
                             % (label, column, cost, ref))
    return {c: f for c, f in fns.items() if c in first}
