"""Graph quality (issue 13): symgraph's optimized graphs beside PyTensor's.

    .benchenv/bin/python bench/w_graph.py            # the table (PyTensor if installed)
    .benchenv/bin/python bench/w_graph.py --check    # exit 1 where symgraph is worse

About thirty standard programs, each written once against a Theano-style API
(``Lib`` adapts symgraph and PyTensor), compiled in each system's default
fast mode.  For each: the nodes of the optimized graph, the element-wise
loops among them (``Elemwise`` nodes of at least one dimension), the passes over the weights (nodes that
read a weight, shape reads and views excluded; training programs only) and whether the
outputs and updated weights are finite on large inputs (x 1e4) where the
math is.  Not a test: the test suite checks each rewrite itself
(``tests/opt/test_leftovers.py``); nothing here times anything.
"""

import argparse
import sys

import numpy as np

from common import Row

LARGE = 1e4


class Lib:
    """One system behind the Theano-style names the programs use."""

    def __init__(self, name):
        self.name = name
        if name == "symgraph":
            import symgraph
            import symgraph.tensor as T
            from symgraph.ops.elemwise import Elemwise
            from symgraph.ops.shape import Shape, Shape_i

            self.T, self.sys = T, symgraph
            self.softmax, self.log_softmax = T.nnet.softmax, T.nnet.logsoftmax
            self.sigmoid = T.nnet.sigmoid
            self.elemwise, self.shape_ops = Elemwise, (Shape, Shape_i)
            self.conv2d = T.nnet.conv2d
        else:
            import pytensor
            import pytensor.tensor as T
            from pytensor.tensor.elemwise import Elemwise
            from pytensor.tensor.shape import Shape, Shape_i
            from pytensor.tensor.special import log_softmax, softmax

            self.T, self.sys = T, pytensor
            self.softmax = lambda x, axis=-1: softmax(x, axis=axis)
            self.log_softmax = lambda x, axis=-1: log_softmax(x, axis=axis)
            self.sigmoid = T.sigmoid
            self.elemwise, self.shape_ops = Elemwise, (Shape, Shape_i)
            self.conv2d = None  # PyTensor 3 has no 2-d neural-network convolution

    def shared(self, value, name):
        return self.sys.shared(value, name=name)

    def function(self, inputs, outputs, updates=()):
        return self.sys.function(inputs, outputs, updates=list(updates),
                                 on_unused_input="ignore")

    def grad(self, cost, wrt):
        return self.sys.grad(cost, wrt)


def _w(shape, seed, name, lib):
    return lib.shared(np.random.default_rng(seed).normal(scale=0.1, size=shape), name)


def _sgd(lib, cost, params, lr=0.1):
    return [(p, p - lr * g) for p, g in zip(params, lib.grad(cost, params))]


def _nll(lib, p, y):
    T = lib.T
    return -T.mean(T.log(p)[T.arange(y.shape[0]), y])


# Each program: lib -> (inputs, outputs, updates, finite_math).

def p_logreg_cost(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W, b = _w((8, 4), 0, "W", lib), _w((4,), 1, "b", lib)
    p = lib.softmax(T.dot(x, W) + b)
    return [x, y], [-T.log(p[T.arange(y.shape[0]), y]).mean()], [], True


def p_logreg_sgd(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W, b = _w((8, 4), 0, "W", lib), _w((4,), 1, "b", lib)
    p = lib.softmax(T.dot(x, W) + b)
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean()
    return [x, y], [cost], _sgd(lib, cost, [W, b]), True


def p_logreg_l2(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W, b = _w((8, 4), 0, "W", lib), _w((4,), 1, "b", lib)
    p = lib.softmax(T.dot(x, W) + b)
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean() + 1e-3 * (W ** 2).sum()
    return [x, y], [cost], _sgd(lib, cost, [W, b]), True


def p_logreg_logsoftmax(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W = _w((8, 4), 0, "W", lib)
    lp = lib.log_softmax(T.dot(x, W))
    cost = -lp[T.arange(y.shape[0]), y].mean()
    return [x, y], [cost], _sgd(lib, cost, [W]), True


def p_mlp_sgd(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W1, b1 = _w((8, 16), 0, "W1", lib), _w((16,), 1, "b1", lib)
    W2, b2 = _w((16, 4), 2, "W2", lib), _w((4,), 3, "b2", lib)
    h = T.tanh(T.dot(x, W1) + b1)
    p = lib.softmax(T.dot(h, W2) + b2)
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean() + \
        1e-4 * (abs(W1).sum() + abs(W2).sum()) + 1e-4 * ((W1 ** 2).sum() + (W2 ** 2).sum())
    return [x, y], [cost], _sgd(lib, cost, [W1, b1, W2, b2]), True


def p_mlp_predict(lib):
    T = lib.T
    x = T.dmatrix("x")
    W1, W2 = _w((8, 16), 0, "W1", lib), _w((16, 4), 2, "W2", lib)
    return [x], [T.argmax(lib.softmax(T.dot(T.tanh(T.dot(x, W1)), W2)), axis=1)], [], True


def p_demo_logsoftmax(lib):
    T = lib.T
    x, y = T.dmatrix("x"), T.lvector("y")
    W = _w((8, 4), 0, "W", lib)
    logits = T.dot(x, W)
    shifted = logits - logits.max(axis=1, keepdims=True)
    lp = shifted - T.log(T.exp(shifted).sum(axis=1, keepdims=True))
    cost = -lp[T.arange(y.shape[0]), y].mean()
    return [x, y], [cost], [], True


def p_readme_softmax(lib):
    T = lib.T
    x = T.dmatrix("x")
    return [x], [T.exp(x) / T.exp(x).sum(axis=1, keepdims=True)], [], False


def p_sgd_l2_update(lib):
    T = lib.T
    x, d = T.dmatrix("x"), T.dmatrix("d")
    W = _w((8, 4), 0, "W", lib)
    return [x, d], [], [(W, W - 0.1 * (T.dot(x.T, d) + 0.01 * W))], True


def p_sgd_momentum(lib):
    T = lib.T
    x, d = T.dmatrix("x"), T.dmatrix("d")
    W, V = _w((8, 4), 0, "W", lib), _w((8, 4), 1, "V", lib)
    v_new = 0.9 * V - 0.1 * T.dot(x.T, d)
    return [x, d], [], [(V, v_new), (W, W + v_new)], True


def p_grad_sum_sqr(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.grad((x ** 2).sum(), x)], [], False


def p_grad_mean_tanh(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.grad(lib.T.tanh(x).mean(), x)], [], True


def p_grad_max(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.grad(x.max(), x)], [], True


def p_binary_xent(lib):
    T = lib.T
    x, t = T.dmatrix("x"), T.dmatrix("t")
    W = _w((8, 4), 0, "W", lib)
    z = T.dot(x, W)
    p = lib.sigmoid(z)
    cost = -(t * T.log(p) + (1 - t) * T.log(1 - p)).mean()
    return [x, t], [cost], _sgd(lib, cost, [W]), False


def p_grad_dot_sum(lib):
    T = lib.T
    x, v = T.dmatrix("x"), T.dvector("v")
    return [x, v], [lib.grad(T.dot(x, v).sum(), v)], [], True


def p_ones_like_shape(lib):
    T = lib.T
    x, g = T.dmatrices("x", "g")
    return [x, g], [T.ones_like(x) + g.shape[0]], [], True


def p_zeros_like_plus(lib):
    T = lib.T
    x, v = T.dmatrix("x"), T.dvector("v")
    return [x, v], [T.zeros_like(x) + v], [], True


def p_int_arith(lib):
    i = lib.T.lscalar("i")
    return [i], [i - 1 + 1], [], True


def p_arange_len(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.T.arange(x.shape[0]).shape[0]], [], True


def p_maximum_shape(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.T.maximum(x.shape[0], 0) * 2], [], True


def p_neutral(lib):
    x = lib.T.dmatrix("x")
    return [x], [(x - 0) / 1 + 1], [], True


def p_switch_same(lib):
    T = lib.T
    x = T.dmatrix("x")
    return [x], [T.switch(T.gt(x, 0), x, x) * 2], [], True


def p_sqrt_sqr(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.T.sqrt(lib.T.sqr(x))], [], True


def p_sum_sum(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.T.sum(lib.T.sum(x, axis=1))], [], True


def p_sum_const(lib):
    T = lib.T
    x = T.dmatrix("x")
    return [x], [T.sum(2 * x) + T.sum(x) * 3], [], True


def p_sum_alloc(lib):
    T = lib.T
    s, n = T.dscalar("s"), T.lscalar("n")
    return [s, n], [T.sum(T.alloc(s, n, 3))], [], True


def p_subtensor_chain(lib):
    x = lib.T.dmatrix("x")
    return [x], [x[1:][:, 2:][0] * 2], [], True


def p_transposed_dot(lib):
    T = lib.T
    a, b = T.dmatrices("a", "b")
    return [a, b], [T.dot(a.T, b.T).T], [], True


def p_div_mul(lib):
    g = lib.T.dmatrix("g")
    return [g], [g / 4.0 * 4.0], [], True


def p_softplus(lib):
    x = lib.T.dmatrix("x")
    return [x], [lib.T.log1p(lib.T.exp(x))], [], True


def p_autoencoder(lib):
    T = lib.T
    x = T.dmatrix("x")
    W, b, bp = _w((8, 5), 0, "W", lib), _w((5,), 1, "b", lib), _w((8,), 2, "bp", lib)
    h = lib.sigmoid(T.dot(x, W) + b)
    z = lib.sigmoid(T.dot(h, W.T) + bp)
    cost = -(x * T.log(z) + (1 - x) * T.log(1 - z)).sum(axis=1).mean()
    return [x], [cost], _sgd(lib, cost, [W, b, bp]), False


def p_rbm_free_energy(lib):
    T = lib.T
    v = T.dmatrix("v")
    W, hb, vb = _w((8, 5), 0, "W", lib), _w((5,), 1, "hb", lib), _w((8,), 2, "vb", lib)
    fe = -T.dot(v, vb) - T.sum(T.log(1 + T.exp(T.dot(v, W) + hb)), axis=1)
    return [v], [fe.mean()], _sgd(lib, fe.mean(), [W]), True


def p_convnet(lib):
    T = lib.T
    if lib.conv2d is None:
        return None
    x, y = T.dtensor4("x"), T.lvector("y")
    Wc = _w((4, 1, 3, 3), 0, "Wc", lib)
    W = _w((4 * 6 * 6, 3), 1, "W", lib)
    h = T.tanh(lib.conv2d(x, Wc)).flatten(2)
    p = lib.softmax(T.dot(h, W))
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean()
    return [x, y], [cost], _sgd(lib, cost, [Wc, W]), True


PROGRAMS = [(name[2:], fn) for name, fn in sorted(globals().items()) if name.startswith("p_")]


def _value(var, seed, large):
    rng = np.random.default_rng(seed)
    dtype, shape = var.type.dtype, {0: (), 1: (6,), 2: (6, 8), 4: (6, 1, 8, 8)}[var.ndim]
    name = var.name or ""
    if dtype.startswith("int"):
        return np.asarray(rng.integers(0, 3, size=shape), dtype=dtype) if shape else \
            np.asarray(4, dtype=dtype)
    if var.ndim == 2 and name in ("d", "t"):
        shape = (6, 4)
    if var.ndim == 2 and name == "b":
        shape = (8, 6)
    if name == "v" and var.ndim == 1:
        shape = (8,)
    value = rng.normal(size=shape) * (LARGE if large else 1.0)
    if name in ("t",):
        value = (value > 0).astype(dtype)
    if name in ("x", "v") and var.ndim == 2 and not large:
        value = rng.uniform(size=shape)
    return np.asarray(value, dtype=dtype)


def measure(lib, build):
    """(nodes, loops, weight passes or None, finite or None) for one program."""
    made = build(lib)
    if made is None:
        return None
    inputs, outputs, updates, finite_math = made
    f = lib.function(inputs, outputs, updates)
    fgraph = f.maker.fgraph
    nodes = fgraph.apply_nodes
    # A 0-d Elemwise (scalar arithmetic on sizes) is no loop.
    loops = sum(isinstance(n.op, lib.elemwise) and n.outputs[0].ndim > 0 for n in nodes)
    passes = None
    if updates:
        weights = [v for v in fgraph.inputs if (v.name or "").startswith("W")]
        # Shape reads and views (a transpose) are no pass over the data.
        passes = sum(any(i in weights for i in n.inputs) and
                     not isinstance(n.op, lib.shape_ops) and not getattr(n.op, "view_map", None)
                     for n in nodes)
    finite = None
    if finite_math:
        values = [_value(v, k, large=True) for k, v in enumerate(inputs)]
        got = f(*values)
        finite = all(np.all(np.isfinite(np.asarray(g))) for g in (got or [])) and \
            all(np.all(np.isfinite(p.get_value())) for p, _ in updates)
    return len(nodes), loops, passes, finite


def _peers():
    peers = ["symgraph"]
    try:
        import pytensor  # noqa: F401
        peers.append("PyTensor")
    except ImportError:
        pass
    return peers


def table():
    """(markdown lines, list of programs where symgraph is worse)."""
    peers = _peers()
    libs = {p: Lib(p) for p in peers}
    head = ["program"] + [f"nodes {p}" for p in peers] + [f"loops {p}" for p in peers] + \
        [f"W passes {p}" for p in peers] + [f"finite {p}" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    worse, rows = [], []
    for name, build in PROGRAMS:
        res = {}
        for p in peers:
            try:
                res[p] = measure(libs[p], build)
            except Exception as exc:  # a peer failing is a cell, not the end of the table
                res[p] = exc
        cells = []
        for k in range(4):
            for p in peers:
                r = res[p]
                cells.append("n/a" if r is None else "error" if isinstance(r, Exception)
                             else "-" if r[k] is None else str(r[k]))
        lines.append("| " + " | ".join([name] + cells) + " |")
        rows.append((name, res))
        mine, theirs = res["symgraph"], res.get("PyTensor")
        if isinstance(mine, Exception) or (mine and mine[3] is False):
            worse.append(name)
        elif isinstance(theirs, tuple) and mine and (mine[0] > theirs[0] or mine[1] > theirs[1]):
            worse.append(name)
    return lines, worse, rows


def run(ctx):
    """Rows for ``run_all.py``: each program's node counts as text cells."""
    _, _, rows = table()
    out = []
    for name, res in rows:
        cells = {}
        for p, r in res.items():
            column = "symgraph" if p == "symgraph" else "PyTensor C"
            cells[column] = "n/a" if r is None else "error" if isinstance(r, Exception) \
                else f"{r[0]} nodes, {r[1]} loops"
        out.append(Row(f"G {name}", cells, unit="text"))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when symgraph has more nodes or loops than PyTensor, "
                             "or a non-finite result, in any program")
    args = parser.parse_args(argv)
    lines, worse, _ = table()
    print("\n".join(lines))
    if worse:
        print("\nsymgraph worse (more nodes or loops than PyTensor, or not finite): "
              + ", ".join(worse))
    return 1 if args.check and worse else 0


if __name__ == "__main__":
    sys.exit(main())
