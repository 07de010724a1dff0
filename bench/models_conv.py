"""The convnet benchmark computations, written once per kind of system.

One convolution layer (64x3x32x32 input, 32 filters 3x3, valid) forward and
backward, and W5, a convnet training step (conv, relu, max pool 2x2, dense 10,
softmax cross-entropy with integer labels, SGD), in symgraph, PyTorch, JAX and
NumPy (im2col + GEMM by hand).  Every system computes a cross-correlation:
symgraph's ``conv2d`` flips its filters by default (a true convolution), so
the layer benchmarks pass ``filter_flip=False`` and W5, which keeps symgraph's
default, gives the peers the flipped filters.  Only public APIs are used.
"""

import numpy as np

CONV_X = (64, 3, 32, 32)          # input (N, C, H, W)
CONV_W = (32, 3, 3, 3)            # filters (K, C, kH, kW)
CONV_Y = (64, 32, 30, 30)         # valid output
POOLED = (64, 32, 15, 15)
N_CLASSES = 10
LR = 0.01

FWD_ALGOS = ("none", "small", "large", "fft", "fft_tiling", "winograd")
BWD_ALGOS = ("none", "deterministic", "fft", "small")


# ----------------------------------------------------------------- data

def conv_data(seed=0):
    """Float32 input, filters and output gradient ``G`` of the conv layer."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(CONV_X, dtype=np.float32)
    w = rng.standard_normal(CONV_W, dtype=np.float32) * np.float32(1 / np.sqrt(27))
    g = rng.standard_normal(CONV_Y, dtype=np.float32)
    return x, w, g


def convnet_params(seed=0):
    """W5's parameters ``[w_conv, b_conv, w_dense, b_dense]``, float32.

    ``w_conv`` is symgraph's filter (true convolution); the peers use it flipped.
    """
    rng = np.random.default_rng(seed)
    n_flat = int(np.prod(POOLED[1:]))
    return [rng.standard_normal(CONV_W, dtype=np.float32) * np.float32(1 / np.sqrt(27)),
            np.zeros(CONV_W[0], dtype=np.float32),
            rng.standard_normal((n_flat, N_CLASSES), dtype=np.float32)
            * np.float32(1 / np.sqrt(n_flat)),
            np.zeros(N_CLASSES, dtype=np.float32)]


def convnet_batch(seed=1):
    """W5's batch: float32 images 64x3x32x32 and int64 labels in [0, 10)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(CONV_X, dtype=np.float32)
    y = rng.integers(0, N_CLASSES, size=CONV_X[0]).astype(np.int64)
    return x, y


def flipped(w):
    """Filters flipped along both spatial axes (true convolution <-> correlation)."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1])


# ----------------------------------------------------------- symgraph

class SymgraphConv:
    """symgraph's conv layer and W5 through its public API.

    The algorithm flags are read when ``function()`` compiles, so each builder
    compiles under ``change_flags(flags)``.  A missing API raises (the caller
    notes it); nothing here falls back silently.
    """

    def __init__(self):
        import symgraph
        import symgraph.tensor as T
        from symgraph.tensor import nnet

        self.lib, self.T, self.nnet = symgraph, T, nnet
        try:
            self.conv2d = nnet.conv2d
        except AttributeError:             # its other documented home; else fail once, here
            from symgraph.tensor.nnet.abstract_conv import conv2d

            self.conv2d = conv2d

    def _compile(self, flags, inputs, outputs, **kwargs):
        with self.lib.config.change_flags(flags):
            return self.lib.function(inputs, outputs, **kwargs)

    def conv_forward(self, flags):
        """``f(x, w) -> conv2d(x, w)``, a cross-correlation, under ``flags``."""
        x, w = self.T.tensor4("x", dtype="float32"), self.T.tensor4("w", dtype="float32")
        y = self.conv2d(x, w, input_shape=CONV_X, filter_shape=CONV_W,
                             filter_flip=False)
        return self._compile(flags, [x, w], y)

    def conv_backward(self, flags):
        """``f(x, w, g) -> [d/dx, d/dw] of sum(conv2d(x, w) * g)`` under ``flags``."""
        T = self.T
        x, w, g = (T.tensor4(n, dtype="float32") for n in "xwg")
        y = self.conv2d(x, w, input_shape=CONV_X, filter_shape=CONV_W,
                             filter_flip=False)
        gx, gw = self.lib.grad(T.sum(y * g), [x, w])
        return self._compile(flags, [x, w, g], [gx, gw])

    def convnet_graph(self, params):
        """W5's inputs ``[x, y]``, cost and SGD updates of fresh shared weights."""
        from symgraph.tensor.signal.pool import pool_2d

        T, nnet = self.T, self.nnet
        shared = [self.lib.shared(p.copy(), name="p%d" % i) for i, p in enumerate(params)]
        wc, bc, wd, bd = shared
        x, y = T.tensor4("x", dtype="float32"), T.lvector("y")
        conv = self.conv2d(x, wc, input_shape=CONV_X, filter_shape=CONV_W)
        h = nnet.relu(conv + bc.dimshuffle("x", 0, "x", "x"))
        h = pool_2d(h, ws=(2, 2), ignore_border=True, mode="max")
        logits = T.dot(h.flatten(2), wd) + bd
        cost = T.mean(nnet.categorical_crossentropy(nnet.softmax(logits), y))
        grads = self.lib.grad(cost, shared)
        lr = np.float32(LR)
        return [x, y], cost, [(p, p - lr * gp) for p, gp in zip(shared, grads)]

    def convnet_step(self, params, flags):
        """W5's compiled step ``f(x, y) -> cost`` with SGD updates of shared weights."""
        with self.lib.config.change_flags(flags):
            inputs, cost, updates = self.convnet_graph(params)
            return self.lib.function(inputs, cost, updates=updates)


def conv_ops(f):
    """The concrete convolution ops of compiled function ``f`` as printed, in order.

    A ``time_*`` or ``guess_*`` flag chooses on the first call: after it, each
    op's choices from the tuning registry (``conv_tuning.describe``) follow
    its name, e.g. ``DnnConv{...} -> gemm (timing: gemm 1.2 ms, ...)``.
    """
    try:
        from symgraph.backends.cpu.conv import tuning as conv_tuning
    except ImportError:
        conv_tuning = None
    names = []
    for node in f.maker.fgraph.toposort():
        if "conv" not in type(node.op).__name__.lower():
            continue
        if not type(node.op).__name__.startswith("Dnn"):
            names.append(type(node.op).__name__ + " (abstract: not replaced)")
            continue
        chosen = conv_tuning.describe(node.op) if conv_tuning is not None else ""
        names.append(str(node.op) + (" -> " + chosen if chosen else ""))
    return names


def chosen_impls(f):
    """The implementations that the conv nodes of ``f`` ran (after a call), by
    the tuning registry: e.g. ``['gemm']``; empty when it has no record."""
    try:
        from symgraph.backends.cpu.conv import tuning as conv_tuning
    except ImportError:
        return []
    impls = []
    for node in f.maker.fgraph.toposort():
        if type(node.op).__name__.startswith("DnnConv"):
            impls.extend(c.impl for c in conv_tuning.choices_for(node.op).values())
    return impls


# ------------------------------------------------------------------ PyTorch

def torch_conv_forward(torch, x, w):
    """``f() -> conv2d(x, w)`` (cross-correlation) on tensors made from x and w."""
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    conv2d = torch.nn.functional.conv2d

    def fn():
        with torch.no_grad():
            return conv2d(tx, tw)

    return fn


def torch_conv_backward(torch, x, w, g):
    """``f() -> (dx, dw)`` through ``aten.convolution_backward``, the kernel
    that autograd calls for a conv2d, without the forward that autograd would
    also run (symgraph and JAX compute only the two gradients)."""
    tx, tw, tg = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)
    backward = torch.ops.aten.convolution_backward

    def fn():
        with torch.no_grad():
            dx, dw, _ = backward(tg, tx, tw, None, [1, 1], [0, 0], [1, 1], False,
                                    [0, 0], 1, [True, True, False])
        return dx, dw

    return fn


def torch_conv_autograd(torch, x, w, g):
    """``f() -> (dx, dw)`` by autograd: forward then backward of sum(conv * g)."""
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = torch.from_numpy(w).requires_grad_(True)
    tg = torch.from_numpy(g)

    def fn():
        y = torch.nn.functional.conv2d(tx, tw)
        return torch.autograd.grad(y, (tx, tw), grad_outputs=tg)

    return fn


def torch_convnet_step(torch, params):
    """PyTorch's W5 step ``step(x, y) -> cost``, updating its parameters in place."""
    F = torch.nn.functional
    wc, bc, wd, bd = params
    ps = [torch.tensor(p, requires_grad=True) for p in (flipped(wc), bc, wd, bd)]

    def step(x, y):
        h = F.max_pool2d(F.relu(F.conv2d(x, ps[0], ps[1])), 2)
        loss = F.cross_entropy(h.flatten(1) @ ps[2] + ps[3], y)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            torch._foreach_add_(ps, grads, alpha=-LR)
        return loss.detach()

    return step


# --------------------------------------------------------------------- JAX

def _jax_conv(jax, x, w):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def jax_conv_forward(jax):
    """A jitted ``(x, w) -> conv(x, w)`` (cross-correlation)."""
    return jax.jit(lambda x, w: _jax_conv(jax, x, w))


def jax_conv_backward(jax):
    """A jitted ``(x, w, g) -> (dx, dw)`` of ``sum(conv(x, w) * g)``."""
    def loss(x, w, g):
        return (_jax_conv(jax, x, w) * g).sum()

    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def jax_convnet_step(jax):
    """A jitted W5 step ``(params, x, y) -> (params, cost)``; params are donated."""
    jnp = jax.numpy

    def loss_fn(ps, x, y):
        wc, bc, wd, bd = ps
        h = jax.nn.relu(_jax_conv(jax, x, wc) + bc[None, :, None, None])
        n, k, hh, ww = h.shape
        h = h.reshape(n, k, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
        logp = jax.nn.log_softmax(h.reshape(n, -1) @ wd + bd, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(ps, x, y):
        cost, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return [p - LR * gp for p, gp in zip(ps, grads)], cost

    return jax.jit(step, donate_argnums=0)


def jax_convnet_params(params):
    """W5's parameters as the JAX step takes them (the filters flipped)."""
    wc, bc, wd, bd = params
    return [flipped(wc), bc, wd, bd]


# -------------------------------------------------------------------- NumPy

class NumpyConv:
    """Valid, stride 1 cross-correlation by im2col + batched GEMM, buffers reused.

    ``cols`` holds, per image, the (C*kH*kW, oH*oW) patch matrix, so one GEMM
    per image writes the (K, oH*oW) output in NCHW order without a transpose.
    """

    def __init__(self, x_shape, w_shape):
        n, c, h, w = x_shape
        self.k, _, self.kh, self.kw = w_shape
        self.oh, self.ow = h - self.kh + 1, w - self.kw + 1
        self.x_shape = x_shape
        self.cols = np.empty((n, c, self.kh, self.kw, self.oh, self.ow), np.float32)

    def im2col(self, x):
        """Fill ``cols`` from ``x``; returns it as (N, C*kH*kW, oH*oW)."""
        for i in range(self.kh):
            for j in range(self.kw):
                self.cols[:, :, i, j] = x[:, :, i:i + self.oh, j:j + self.ow]
        n = x.shape[0]
        return self.cols.reshape(n, -1, self.oh * self.ow)

    def forward(self, x, w):
        """The output (N, K, oH, oW)."""
        cols = self.im2col(x)
        y = np.matmul(w.reshape(self.k, -1), cols)
        return y.reshape(x.shape[0], self.k, self.oh, self.ow)

    def backward_filter(self, cols, g):
        """dW from the patch matrix of the forward pass and the output gradient."""
        n = g.shape[0]
        g3 = g.reshape(n, self.k, -1)
        return np.matmul(g3, cols.transpose(0, 2, 1)).sum(axis=0).reshape(
            (self.k,) + self.x_shape[1:2] + (self.kh, self.kw))

    def backward_data(self, w, g):
        """dX: the patch gradients (W^T G per image) added back by col2im."""
        n, c = g.shape[0], self.x_shape[1]
        dcols = np.matmul(w.reshape(self.k, -1).T, g.reshape(n, self.k, -1))
        dcols = dcols.reshape(n, c, self.kh, self.kw, self.oh, self.ow)
        dx = np.zeros(self.x_shape, np.float32)
        for i in range(self.kh):
            for j in range(self.kw):
                dx[:, :, i:i + self.oh, j:j + self.ow] += dcols[:, :, i, j]
        return dx

    def backward(self, x, w, g):
        """(dx, dw) of ``sum(conv(x, w) * g)``."""
        return self.backward_data(w, g), self.backward_filter(self.im2col(x), g)


class NumpyConvnet:
    """W5 by hand in NumPy: forward, backward and in-place SGD."""

    def __init__(self, params):
        wc, bc, wd, bd = params
        self.ps = [flipped(wc), bc.copy(), wd.copy(), bd.copy()]
        self.conv = NumpyConv(CONV_X, CONV_W)

    def step(self, x, y):
        """One training step; returns the cost."""
        wc, bc, wd, bd = self.ps
        n, k, oh, ow = CONV_Y
        cols = self.conv.im2col(x)
        a = np.matmul(wc.reshape(k, -1), cols).reshape(CONV_Y)
        a += bc[None, :, None, None]
        np.maximum(a, 0, out=a)
        blocks = a.reshape(n, k, oh // 2, 2, ow // 2, 2)
        pooled = blocks.max(axis=(3, 5))
        flat = pooled.reshape(n, -1)
        logits = flat @ wd + bd
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        rows = np.arange(n)
        cost = -np.mean(logits[rows, y] - np.log(s[:, 0]))
        d = e / s
        d[rows, y] -= 1.0
        d /= np.float32(n)
        gwd, gbd = flat.T @ d, d.sum(axis=0)
        dpool = (d @ wd.T).reshape(POOLED)
        # the gradient goes to the maximum of each 2x2 block (where the relu is
        # positive: a zero maximum has a zero gradient through the relu anyway)
        mask = (blocks == pooled[:, :, :, None, :, None]) & (blocks > 0)
        da = (mask * dpool[:, :, :, None, :, None]).reshape(CONV_Y)
        gbc = da.sum(axis=(0, 2, 3))
        gwc = self.conv.backward_filter(cols, da)
        lr = np.float32(LR)
        for p, gp in zip(self.ps, (gwc, gbc, gwd, gbd)):
            p -= lr * gp
        return cost
