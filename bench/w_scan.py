"""Loop workloads (issue 12): S1 an Elman RNN forward, S2 its forward and
gradient, S3 the scalar recurrence ``x = a * x + 1`` (the per-step overhead).

symgraph and PyTensor run ``scan``; JAX ``lax.scan`` (jitted); PyTorch a
Python loop (autograd for S2); NumPy a Python loop (S1 and S3 only).  Every
system's result is checked against NumPy's loop first.
"""

import numpy as np

from common import Row, jax_setup, measure, torch_setup
from w_runtime import _check, _theano_likes

#: The RNN: batch, input width, hidden width, steps.
BATCH, N_IN, N_HID, STEPS = 32, 64, 256, 100
#: Steps of the scalar recurrence.
SCALAR_STEPS = 10_000


def rnn_data(seed=0):
    """(x, h0, W_in, W_rec, b) in float32: x is (steps, batch, input)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((STEPS, BATCH, N_IN)).astype("float32")
    h0 = np.zeros((BATCH, N_HID), dtype="float32")
    w_in = (rng.standard_normal((N_IN, N_HID)) / np.sqrt(N_IN)).astype("float32")
    w_rec = (rng.standard_normal((N_HID, N_HID)) / np.sqrt(N_HID)).astype("float32")
    b = np.zeros(N_HID, dtype="float32")
    return x, h0, w_in, w_rec, b


def numpy_rnn(x, h0, w_in, w_rec, b):
    """Every hidden state, (steps, batch, hidden)."""
    hs, h = [], h0
    for x_t in x:
        h = np.tanh(x_t @ w_in + h @ w_rec + b)
        hs.append(h)
    return np.stack(hs)


def numpy_rnn_grads(x, h0, w_in, w_rec, b):
    """Gradients of ``mean(hs ** 2)`` with respect to w_in, w_rec and b."""
    hs = numpy_rnn(x, h0, w_in, w_rec, b)
    g_hs = 2 * hs / hs.size
    g_in, g_rec, g_b = np.zeros_like(w_in), np.zeros_like(w_rec), np.zeros_like(b)
    carry = np.zeros_like(h0)
    for t in range(len(x) - 1, -1, -1):
        g_pre = (g_hs[t] + carry) * (1 - hs[t] ** 2)
        prev = hs[t - 1] if t else h0
        g_in += x[t].T @ g_pre
        g_rec += prev.T @ g_pre
        g_b += g_pre.sum(axis=0)
        carry = g_pre @ w_rec.T
    return g_in, g_rec, g_b


def theano_rnn(lib, with_grad):
    """symgraph's or PyTensor's RNN (``lib`` a TheanoLike): forward, or the gradients."""
    T = lib.T
    x = T.tensor3("x", dtype="float32")
    h0 = T.matrix("h0", dtype="float32")
    w_in = T.matrix("w_in", dtype="float32")
    w_rec = T.matrix("w_rec", dtype="float32")
    b = T.vector("b", dtype="float32")
    hs, _ = lib.lib.scan(lambda x_t, h, w_in, w_rec, b:
                         T.tanh(T.dot(x_t, w_in) + T.dot(h, w_rec) + b),
                         sequences=x, outputs_info=h0, non_sequences=[w_in, w_rec, b])
    if not with_grad:
        return lib.function([x, h0, w_in, w_rec, b], hs)
    cost = T.mean(hs ** 2)
    return lib.function([x, h0, w_in, w_rec, b], lib.lib.grad(cost, [w_in, w_rec, b]))


def torch_rnn(torch, with_grad):
    """PyTorch's RNN, a Python loop over the steps."""
    def forward(x, h0, w_in, w_rec, b):
        hs, h = [], h0
        for x_t in x:
            h = torch.tanh(x_t @ w_in + h @ w_rec + b)
            hs.append(h)
        return torch.stack(hs)

    if not with_grad:
        def run(*args):
            with torch.no_grad():
                return forward(*args)
        return run

    def grads(x, h0, w_in, w_rec, b):
        params = [p.detach().requires_grad_(True) for p in (w_in, w_rec, b)]
        cost = (forward(x, h0, *params) ** 2).mean()
        return torch.autograd.grad(cost, params)

    return grads


def jax_rnn(jax, with_grad):
    """JAX's RNN, ``lax.scan``, jitted."""
    jnp = jax.numpy

    def forward(x, h0, w_in, w_rec, b):
        def step(h, x_t):
            h = jnp.tanh(x_t @ w_in + h @ w_rec + b)
            return h, h

        return jax.lax.scan(step, h0, x)[1]

    if not with_grad:
        return jax.jit(forward)

    def cost(w_in, w_rec, b, x, h0):
        return jnp.mean(forward(x, h0, w_in, w_rec, b) ** 2)

    g = jax.jit(jax.grad(cost, argnums=(0, 1, 2)))
    return jax.jit(lambda x, h0, w_in, w_rec, b: g(w_in, w_rec, b, x, h0))


def _rnn(ctx, label, with_grad):
    data = rnn_data()
    want = numpy_rnn_grads(*data) if with_grad else numpy_rnn(*data)
    fns = {}

    def check(name, got):
        got = got if with_grad else [got]
        for g, w in zip(got, want if with_grad else [want]):
            _check(ctx, label, name, np.asarray(g), w, 1e-3)

    for column, lib in _theano_likes(ctx).items():
        try:
            f = theano_rnn(lib, with_grad)
        except Exception as exc:
            ctx.notes.append("%s: %s cannot build: %s" % (label, column, exc))
            continue
        check(column, f(*data))
        fns[column] = lambda f=f: f(*data)
    if ctx.wants("NumPy"):
        fns["NumPy"] = (lambda: numpy_rnn_grads(*data)) if with_grad else \
            (lambda: numpy_rnn(*data))
    torch = torch_setup(ctx) if ctx.wants("PyTorch") else None
    if torch is not None:
        targs = [torch.from_numpy(a) for a in data]
        tf = torch_rnn(torch, with_grad)
        got = tf(*targs)
        check("PyTorch", [g.numpy() for g in got] if with_grad else got.numpy())
        fns["PyTorch"] = lambda: tf(*targs)
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jf = jax_rnn(jax, with_grad)
        jargs = [jax.device_put(a) for a in data]
        got = jf(*jargs)
        check("JAX", [np.asarray(g) for g in got] if with_grad else np.asarray(got))
        fns["JAX"] = lambda: jax.block_until_ready(jf(*jargs))
    return measure(ctx, fns)


def s1(ctx):
    """S1: the Elman RNN forward (every hidden state)."""
    times = _rnn(ctx, "S1", with_grad=False)
    return [Row("S1 RNN forward %dx%d->%d, %d steps, float32" % (BATCH, N_IN, N_HID, STEPS),
                times)]


def s2(ctx):
    """S2: the Elman RNN's forward and gradient (of the mean square of the states)."""
    times = _rnn(ctx, "S2", with_grad=True)
    return [Row("S2 RNN forward+gradient, float32", times,
                note="gradients of mean(h**2) with respect to W_in, W_rec, b")]


def s3(ctx):
    """S3: ``x = a * x + 1`` for 10,000 steps (float64), time per step."""
    a, x0 = 0.999, 0.0
    want = x0
    for _ in range(SCALAR_STEPS):
        want = a * want + 1
    fns = {}
    for column, lib in _theano_likes(ctx).items():
        T = lib.T
        av, xv = T.dscalar("a"), T.dscalar("x0")
        out, _ = lib.lib.scan(lambda x, a: a * x + 1, outputs_info=xv, non_sequences=av,
                              n_steps=SCALAR_STEPS)
        f = lib.function([av, xv], out[-1])
        # 0-d arrays, as JAX gets device arrays: Python floats would time
        # the conversion of the arguments
        na, nx = np.array(a), np.array(x0)
        _check(ctx, "S3", column, f(na, nx), want, 1e-9)
        fns[column] = lambda f=f: f(na, nx)
    if ctx.wants("NumPy"):
        def numpy_loop():
            x, av = np.float64(x0), np.float64(a)
            for _ in range(SCALAR_STEPS):
                x = av * x + 1
            return x
        fns["NumPy"] = numpy_loop
    torch = torch_setup(ctx) if ctx.wants("PyTorch") else None
    if torch is not None:
        ta, tx = torch.tensor(a, dtype=torch.float64), torch.tensor(x0, dtype=torch.float64)

        def torch_loop():
            with torch.no_grad():
                x = tx
                for _ in range(SCALAR_STEPS):
                    x = ta * x + 1
                return x
        _check(ctx, "S3", "PyTorch", torch_loop().numpy(), want, 1e-9)
        fns["PyTorch"] = torch_loop
    jax = jax_setup() if ctx.wants("JAX") else None
    if jax is not None:
        jf = jax.jit(lambda a, x0: jax.lax.scan(lambda x, _: (a * x + 1, None), x0, None,
                                                length=SCALAR_STEPS)[0])
        ja, jx = jax.device_put(np.float64(a)), jax.device_put(np.float64(x0))
        _check(ctx, "S3", "JAX", np.asarray(jf(ja, jx)), want, 1e-9)
        fns["JAX"] = lambda: jf(ja, jx).block_until_ready()
    times = measure(ctx, fns)
    per_step = {k: (None if v is None else v / SCALAR_STEPS) for k, v in times.items()}
    return [Row("S3 x = a*x + 1, %d steps, per step" % SCALAR_STEPS, per_step,
                note="a whole call (10,000 steps) divided by 10,000: call overhead included")]


__all__ = ["s1", "s2", "s3"]
