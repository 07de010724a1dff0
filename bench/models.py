"""The benchmark computations, written once per kind of system.

Theano-like libraries (symgraph and PyTensor share an API) go through
``TheanoLike``; PyTorch, JAX and NumPy get the equivalent code by hand.  Only
public APIs are used, so symgraph is measured with whatever backend is current.
"""

import numpy as np

MLP_SIZES = (784, 512, 512, 10)
MLP_BATCH = 128
LR = 0.01
CHAIN_WIDTH = 64
CHAIN_BATCH = 32


# ----------------------------------------------------------------- data

def mlp_params(seed=0):
    """Float32 weights and biases of the 784-512-512-10 MLP (same for every peer)."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        scale = np.float32(1.0 / np.sqrt(n_in))
        params.append((rng.standard_normal((n_in, n_out), dtype=np.float32) * scale))
        params.append(np.zeros(n_out, dtype=np.float32))
    return params


def mlp_batch(seed=1):
    """One batch: float32 images (128x784) and int64 labels in [0, 10)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0]), dtype=np.float32)
    y = rng.integers(0, MLP_SIZES[-1], size=MLP_BATCH).astype(np.int64)
    return x, y


def chain_params(n_layers, seed=0):
    """Weights and biases of the W7 chain (width 64)."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1.0 / np.sqrt(CHAIN_WIDTH))
    out = []
    for _ in range(n_layers):
        out.append(rng.standard_normal((CHAIN_WIDTH, CHAIN_WIDTH), dtype=np.float32) * scale)
        out.append(np.zeros(CHAIN_WIDTH, dtype=np.float32))
    return out


def chain_input(seed=1):
    """The W7 chain's input batch."""
    return np.random.default_rng(seed).standard_normal((CHAIN_BATCH, CHAIN_WIDTH),
                                                        dtype=np.float32)


# Each W7 layer applies a different element-wise expression: a pair of atoms,
# a combinator and a layer-specific constant (8 * 8 * 4 = 256 distinct shapes).
_ATOMS = ("tanh", "sigmoid", "sin", "cos", "abs", "sqr", "expneg", "ident")
_COMBS = ("add", "mul", "sub", "max")


def chain_expr(i):
    """(atom a, atom b, combinator, constant) of layer ``i``."""
    a = _ATOMS[i % 8]
    b = _ATOMS[(i // 8) % 8]
    comb = _COMBS[(i // 64) % 4]
    return a, b, comb, 0.5 + i / 1000.0


def apply_chain_expr(ops, i, z):
    """Layer ``i``'s expression on ``z`` with the library functions in ``ops``."""
    a, b, comb, c = chain_expr(i)
    atom = {
        "tanh": ops["tanh"], "sigmoid": ops["sigmoid"], "sin": ops["sin"],
        "cos": ops["cos"], "abs": ops["abs"], "sqr": lambda v: v * v,
        "expneg": lambda v: ops["exp"](-ops["abs"](v)), "ident": lambda v: v,
    }
    left, right = atom[a](z), atom[b](z) * ops["const"](c)
    if comb == "add":
        return left + right
    if comb == "mul":
        return left * right
    if comb == "sub":
        return left - right
    return ops["maximum"](left, right)


# ----------------------------------------------------------- Theano-like

class TheanoLike:
    """symgraph or PyTensor behind one small API.

    ``which`` is "symgraph" or "pytensor"; ``mode`` is passed to ``function``
    (PyTensor's C or Numba backend; None for symgraph's default).
    """

    def __init__(self, which, mode=None):
        self.which, self.mode = which, mode
        if which == "symgraph":
            import symgraph
            import symgraph.tensor as T

            self.lib, self.T = symgraph, T
            nnet = getattr(T, "nnet", None)
            self.softmax = getattr(nnet, "softmax", None)
            self.log_softmax = getattr(nnet, "logsoftmax", None)
            self.sigmoid = T.sigmoid
        else:
            import pytensor
            import pytensor.tensor as T
            from pytensor.tensor import special

            self.lib, self.T = pytensor, T
            self.softmax, self.log_softmax = special.softmax, special.log_softmax
            self.sigmoid = T.sigmoid

    def function(self, inputs, outputs, **kwargs):
        """Compile; PyTensor gets its mode, symgraph its default (the current backend)."""
        if self.mode is not None:
            kwargs["mode"] = self.mode
        return self.lib.function(inputs, outputs, **kwargs)

    # --- the graphs -------------------------------------------------------

    def w1(self, dtype, trust_input=False):
        """``x + 1``."""
        x = self.T.vector("x", dtype=dtype)
        f = self.function([x], x + 1, trust_input=trust_input) if self.which == "symgraph" \
            else self.function([x], x + 1)
        if trust_input and self.which != "symgraph":
            f.trust_input = True          # PyTensor's attribute
        return f

    def w2(self, dtype):
        """``exp(-x*x) * y + tanh(z) * 0.5``."""
        T = self.T
        x, y, z = (T.vector(n, dtype=dtype) for n in "xyz")
        return self.function([x, y, z], T.exp(-x * x) * y + T.tanh(z) * 0.5)

    def w3_sum(self, dtype):
        """``sum(exp(x))``."""
        x = self.T.vector("x", dtype=dtype)
        return self.function([x], self.T.sum(self.T.exp(x)))

    def w3_rownorm(self, dtype):
        """``sqrt(sum(x * x, axis=1))``: the lengths of many short vectors."""
        x = self.T.matrix("x", dtype=dtype)
        return self.function([x], self.T.sqrt(self.T.sum(x * x, axis=1)))

    def w3_softmax(self, dtype):
        """Softmax over the rows of a matrix (the exp/sum form when there is no op)."""
        T = self.T
        x = T.matrix("x", dtype=dtype)
        if self.softmax is not None:
            out = self.softmax(x, axis=-1)
        else:
            e = T.exp(x - T.max(x, axis=1, keepdims=True))
            out = e / T.sum(e, axis=1, keepdims=True)
        return self.function([x], out)

    def mlp_graph(self, params):
        """Inputs, cost and SGD updates of the W4 training step."""
        T = self.T
        shared = [self.lib.shared(p.copy(), name="p%d" % i) for i, p in enumerate(params)]
        x, y = T.matrix("x", dtype="float32"), T.lvector("y")
        h = x
        for k in range(0, len(shared) - 2, 2):
            h = T.tanh(T.dot(h, shared[k]) + shared[k + 1])
        logits = T.dot(h, shared[-2]) + shared[-1]
        if self.log_softmax is not None:
            logp = self.log_softmax(logits, axis=-1)
        else:
            shifted = logits - T.max(logits, axis=1, keepdims=True)
            logp = shifted - T.log(T.sum(T.exp(shifted), axis=1, keepdims=True))
        cost = -T.mean(logp[T.arange(y.shape[0]), y])
        grads = self.lib.grad(cost, shared)
        lr = np.float32(LR)
        updates = [(p, p - lr * g) for p, g in zip(shared, grads)]
        return [x, y], cost, updates

    def w4(self, params):
        """The compiled MLP training step ``f(x, y) -> cost``."""
        inputs, cost, updates = self.mlp_graph(params)
        return self.function(inputs, cost, updates=updates)

    def chain_graph(self, n_layers):
        """Input and output of the W7 chain of ``n_layers`` dense + element-wise layers."""
        T = self.T
        ops = {"tanh": T.tanh, "sigmoid": self.sigmoid, "sin": T.sin, "cos": T.cos,
               "abs": T.abs, "exp": T.exp, "maximum": T.maximum, "const": np.float32}
        params = chain_params(n_layers)
        shared = [self.lib.shared(p, name="c%d" % i) for i, p in enumerate(params)]
        x = T.matrix("x", dtype="float32")
        h = x
        for i in range(n_layers):
            h = apply_chain_expr(ops, i, T.dot(h, shared[2 * i]) + shared[2 * i + 1])
        return x, h


# ------------------------------------------------------------------ PyTorch

def torch_mlp_step(torch, params, compiled=False, device=None):
    """A PyTorch MLP step ``step(x, y) -> cost`` updating its parameters in place.

    With ``compiled`` the forward and loss go through ``torch.compile`` (its
    backward is then compiled by AOTAutograd); the SGD update is a foreach op.
    ``device`` places the parameters (the CPU by default).
    """
    ps = [torch.tensor(p, requires_grad=True, device=device) for p in params]

    def loss_fn(x, y):
        h = x
        for k in range(0, len(ps) - 2, 2):
            h = torch.tanh(h @ ps[k] + ps[k + 1])
        logits = h @ ps[-2] + ps[-1]
        return torch.nn.functional.cross_entropy(logits, y)

    fwd = torch.compile(loss_fn) if compiled else loss_fn

    def step(x, y):
        loss = fwd(x, y)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            torch._foreach_add_(ps, grads, alpha=-LR)
        return loss.detach()

    return step


def torch_chain(torch, n_layers, compiled=True):
    """The W7 chain in PyTorch (compiled by default)."""
    ps = [torch.tensor(p) for p in chain_params(n_layers)]
    ops = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin,
           "cos": torch.cos, "abs": torch.abs, "exp": torch.exp,
           "maximum": torch.maximum, "const": float}

    def fn(x):
        h = x
        for i in range(n_layers):
            h = apply_chain_expr(ops, i, h @ ps[2 * i] + ps[2 * i + 1])
        return h

    return torch.compile(fn) if compiled else fn


# --------------------------------------------------------------------- JAX

def jax_mlp_step(jax):
    """A jitted JAX step ``(params, x, y) -> (params, cost)``; params are donated."""
    jnp = jax.numpy

    def loss_fn(ps, x, y):
        h = x
        for k in range(0, len(ps) - 2, 2):
            h = jnp.tanh(h @ ps[k] + ps[k + 1])
        logits = h @ ps[-2] + ps[-1]
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(ps, x, y):
        cost, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return [p - LR * g for p, g in zip(ps, grads)], cost

    return jax.jit(step, donate_argnums=0)


def jax_chain(jax, n_layers):
    """The W7 chain in JAX: ``(params, x) -> h``, jitted."""
    jnp = jax.numpy
    ops = {"tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "sin": jnp.sin, "cos": jnp.cos,
           "abs": jnp.abs, "exp": jnp.exp, "maximum": jnp.maximum, "const": np.float32}

    def fn(ps, x):
        h = x
        for i in range(n_layers):
            h = apply_chain_expr(ops, i, h @ ps[2 * i] + ps[2 * i + 1])
        return h

    return jax.jit(fn)


# -------------------------------------------------------------------- NumPy

class NumpyMLP:
    """The MLP step by hand in NumPy (forward, backward, in-place SGD)."""

    def __init__(self, params):
        self.ps = [p.copy() for p in params]

    def step(self, x, y):
        """One training step; returns the cost."""
        ps = self.ps
        acts = [x]
        for k in range(0, len(ps) - 2, 2):
            acts.append(np.tanh(acts[-1] @ ps[k] + ps[k + 1]))
        logits = acts[-1] @ ps[-2] + ps[-1]
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        n = x.shape[0]
        rows = np.arange(n)
        cost = -np.mean(logits[rows, y] - np.log(s[:, 0]))
        d = e / s                                   # softmax
        d[rows, y] -= 1.0
        d /= np.float32(n)
        for k in range(len(ps) - 2, -1, -2):
            a = acts[k // 2]
            gw, gb = a.T @ d, d.sum(axis=0)
            if k:
                d = (d @ ps[k].T) * (1 - a * a)     # through tanh
            ps[k] -= np.float32(LR) * gw
            ps[k + 1] -= np.float32(LR) * gb
        return cost
