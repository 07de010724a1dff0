"""Property-based: random graphs that mix BLAS products with element-wise work.

The BLAS rewrites (``z * b + a * dot(x, y)`` -> Gemm, Gemv, Ger) look through
scalings and negations of the addends, and then make the update in place.  A
wrong step there is silent: ``x * 2 + dot(z, x)`` once became
``Gemm(x * 2, 1, z, x, 2)``, scaling twice, because ``x`` is used by the dot
too.  These graphs are built to reach those paths: operands reused across
products and element-wise terms, scaled and negated addends, several outputs
that keep intermediates alive, and shared variables updated by the very sums
the rewrites turn into in-place updates.  Every graph is compared with the
unoptimized Python run: outputs, and the shared variables after the call.

The CI run checks a few hundred graphs; ``-m slow`` runs thousands.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symgraph
import symgraph.tensor as T

#: Sizes that rows and columns draw from: odd, and 1 (a degenerate BLAS call).
SIZES = (1, 2, 3, 5)

SCALES = (2.0, -1.0, 0.5, 6.0, -3.0)


def _make_input(draw, shape, dtype, k, inputs, values):
    name = f"i{k}"
    var = T.tensor(dtype=dtype, shape=tuple(None for _ in shape), name=name)
    seed = draw(st.integers(0, 2 ** 16))
    value = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(dtype)
    # Some inputs are exact: identity, zeros.  The first report came from x = I, z = 0.
    special = draw(st.sampled_from(["random", "random", "random", "zeros", "eye"]))
    if special == "zeros":
        value = np.zeros(shape, dtype)
    elif special == "eye" and len(shape) == 2:
        value = np.eye(*shape, dtype=dtype)
    inputs.append(var)
    values.append(value)
    return var


class _Pool:
    """Variables built so far, with their concrete shapes."""

    def __init__(self):
        self.vars, self.shapes = [], {}

    def add(self, var, shape):
        self.vars.append(var)
        self.shapes[var] = tuple(shape)
        return var

    def of_shape(self, shape):
        return [v for v in self.vars if self.shapes[v] == tuple(shape)]


def _scaled(draw, var, scalars):
    """``var`` scaled, negated or divided, in one of the spellings users write."""
    form = draw(st.sampled_from(["plain", "left", "right", "neg", "div", "sym", "two"]))
    c = draw(st.sampled_from(SCALES))
    if form == "left":
        return c * var
    if form == "right":
        return var * c
    if form == "neg":
        return -var
    if form == "div":
        return var / c
    if form == "sym" and scalars:
        return var * draw(st.sampled_from(scalars))
    if form == "two":
        return -(var * c) * draw(st.sampled_from(SCALES))
    return var


def _product(draw, pool, n, m):
    """A dot (or outer product) of pool members whose result is (n, m) or (n,)."""
    ks = [s for s in SIZES if pool.of_shape((n, s)) and pool.of_shape((s, m))]
    if m is None:
        ks = [s for s in SIZES if pool.of_shape((n, s)) and pool.of_shape((s,))]
        if not ks:
            return None
        k = draw(st.sampled_from(ks))
        a, v = draw(st.sampled_from(pool.of_shape((n, k)))), draw(st.sampled_from(pool.of_shape((k,))))
        if draw(st.booleans()):
            return T.dot(a, v)
        # vector . matrix through a transpose: Gemv with the transposed matrix
        return T.dot(v, a.T)
    kind = draw(st.sampled_from(["dot", "dot", "outer", "dot_t"]))
    if kind == "outer" and pool.of_shape((n,)) and pool.of_shape((m,)):
        x, y = draw(st.sampled_from(pool.of_shape((n,)))), draw(st.sampled_from(pool.of_shape((m,))))
        return x.dimshuffle(0, "x") * y.dimshuffle("x", 0) if draw(st.booleans()) else T.outer(x, y)
    if kind == "dot_t":
        ks = [s for s in SIZES if pool.of_shape((s, n)) and pool.of_shape((s, m))]
        if ks:
            k = draw(st.sampled_from(ks))
            x = draw(st.sampled_from(pool.of_shape((k, n))))
            y = draw(st.sampled_from(pool.of_shape((k, m))))
            return T.dot(x.T, y)
    if not ks:
        return None
    k = draw(st.sampled_from(ks))
    return T.dot(draw(st.sampled_from(pool.of_shape((n, k)))),
                 draw(st.sampled_from(pool.of_shape((k, m)))))


UNARY = [
    lambda a: T.exp(T.clip(a, -3.0, 3.0)),
    T.tanh,
    lambda a: -a,
    lambda a: a * a,
    abs,
]


@st.composite
def blas_graphs(draw, dtype="float64", with_updates=False):
    """(inputs, outputs, values, shared_updates): a random graph of products and sums."""
    n, m = draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES))
    k = draw(st.sampled_from(SIZES))
    inputs, values = [], []
    pool = _Pool()
    # Enough operands of each shape that products always find partners.
    for shape in [(n, m), (n, m), (n, k), (k, m), (n, n), (m, m), (k, n), (k,), (n,), (m,)]:
        if draw(st.integers(0, 3)) or shape in ((n, m), (n, k), (k, m)):
            pool.add(_make_input(draw, shape, dtype, len(inputs), inputs, values), shape)
    scalars = []
    if draw(st.booleans()):
        s = T.scalar(name="s", dtype=dtype)
        inputs.append(s)
        values.append(np.asarray(draw(st.sampled_from(SCALES)), dtype=dtype))
        scalars.append(s)

    for _ in range(draw(st.integers(1, 5))):
        step = draw(st.sampled_from(["update", "update", "update", "unary", "mul", "rowsum"]))
        out_shape = draw(st.sampled_from([(n, m), (n, m), (n,), (n, n)]))
        if step == "update":
            # sum of scaled terms, one or two products among them, operands reused
            prod = _product(draw, pool, out_shape[0], out_shape[1] if len(out_shape) == 2 else None)
            zs = pool.of_shape(out_shape)
            if prod is None or not zs:
                continue
            terms = [_scaled(draw, prod, scalars), _scaled(draw, draw(st.sampled_from(zs)), scalars)]
            if draw(st.booleans()):
                terms.append(_scaled(draw, draw(st.sampled_from(zs)), scalars))
            if draw(st.integers(0, 3)) == 0:
                terms.append(draw(st.sampled_from(zs)).sum())   # a broadcast scalar addend
            if draw(st.integers(0, 3)) == 0:
                other = _product(draw, pool, out_shape[0],
                                 out_shape[1] if len(out_shape) == 2 else None)
                if other is not None:
                    terms.append(_scaled(draw, other, scalars))
            terms = draw(st.permutations(terms))
            total = terms[0]
            for t in terms[1:]:
                total = total - t if draw(st.integers(0, 3)) == 0 else total + t
            pool.add(total, out_shape)
        elif step == "unary":
            a = draw(st.sampled_from(pool.vars))
            pool.add(draw(st.sampled_from(UNARY))(a), pool.shapes[a])
        elif step == "mul":
            a = draw(st.sampled_from(pool.vars))
            b = draw(st.sampled_from(pool.of_shape(pool.shapes[a])))
            pool.add(a * b, pool.shapes[a])
        else:
            mats = [v for v in pool.vars if len(pool.shapes[v]) == 2]
            a = draw(st.sampled_from(mats))
            pool.add(a.sum(axis=1), (pool.shapes[a][0],))

    built = [v for v in pool.vars if v.owner is not None]
    if not built:
        built = [pool.vars[0] * 2]
    outputs = [built[-1]]
    # Keep some intermediates alive as outputs: they gain a client each.
    for v in built[:-1]:
        if draw(st.integers(0, 2)) == 0:
            outputs.append(v)

    updates = []
    if with_updates:
        for shape in {(n, m), (n,)}:
            init = np.random.default_rng(draw(st.integers(0, 2 ** 16))).uniform(
                -1, 1, size=shape).astype(dtype)
            w = symgraph.shared(init, name=f"w{len(shape)}")
            prod = _product(draw, pool, shape[0], shape[1] if len(shape) == 2 else None)
            if prod is None:
                continue
            new = _scaled(draw, w, scalars) + _scaled(draw, prod, scalars)
            if draw(st.booleans()):
                # the shared variable also read elsewhere in the same call
                outputs.append(w * 2 + T.dot(w.T, w).sum() if len(shape) == 2 else w * 2)
            updates.append((w, new))
    used = set(symgraph.graph.basic.graph_inputs(outputs + [u for _, u in updates]))
    keep = [(i, v) for i, v in zip(inputs, values) if i in used]
    return [i for i, _ in keep], outputs, [v for _, v in keep], updates


def _run(inputs, outputs, values, updates, mode):
    """Outputs and the updated shared values, starting from the same state."""
    start = [w.get_value() for w, _ in updates]
    f = symgraph.function(inputs, outputs, updates=updates, mode=mode)
    got = [np.asarray(o).copy() for o in f(*values)]
    after = [w.get_value() for w, _ in updates]
    for (w, _), v in zip(updates, start):
        w.set_value(v)
    return got, after


def assert_blas_graph_same(case, linker, dtype="float64"):
    """Fully optimized with ``linker`` equals unoptimized Python, outputs and updates."""
    inputs, outputs, values, updates = case
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == "float64" else dict(rtol=2e-4, atol=2e-4)
    expected, exp_after = _run(inputs, outputs, values, updates,
                               symgraph.Mode(optimizer=None, linker="py"))
    got, got_after = _run(inputs, outputs, values, updates,
                          symgraph.Mode(optimizer="fast_run", linker=linker))
    for k, (g, e) in enumerate(zip(got + got_after, expected + exp_after)):
        assert g.shape == e.shape, k
        assert g.dtype == e.dtype, k
        np.testing.assert_allclose(g, e, err_msg=f"result {k}", **tol)


SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


@settings(max_examples=250, **SETTINGS)
@given(blas_graphs())
def test_blas_graphs_python(case):
    assert_blas_graph_same(case, "py")


@settings(max_examples=60, **SETTINGS)
@given(blas_graphs(dtype="float32", with_updates=True))
def test_blas_graphs_updates_float32_native(case):
    assert_blas_graph_same(case, "c|py", dtype="float32")


@settings(max_examples=60, **SETTINGS)
@given(blas_graphs(with_updates=True))
def test_blas_graphs_updates_native(case):
    assert_blas_graph_same(case, "c|py")


@pytest.mark.slow
@settings(max_examples=3000, **SETTINGS)
@given(blas_graphs(with_updates=True))
def test_blas_graphs_long_python(case):
    assert_blas_graph_same(case, "py")


@pytest.mark.slow
@settings(max_examples=600, **SETTINGS)
@given(blas_graphs(dtype="float32", with_updates=True))
def test_blas_graphs_long_native(case):
    assert_blas_graph_same(case, "c|py", dtype="float32")


@pytest.mark.parametrize("build", [
    lambda x, z, w: x * 2 + T.dot(z, x),
    lambda x, z, w: x * 6 + T.dot(x, z),
    lambda x, z, w: T.exp(x) * 6 + T.dot(z, T.exp(x)),
    lambda x, z, w: x * 6 + T.dot(z, w) + x.sum(),
    lambda x, z, w: -x + T.dot(z, x),
    lambda x, z, w: -(x * 3) + T.dot(x, w),
])
@pytest.mark.parametrize("linker", ["py", "c|py"])
def test_scaled_operand_used_elsewhere_is_scaled_once(build, linker):
    """The reported forms: the scaled addend's operand feeds the dot too."""
    x, z, w = T.dmatrix("x"), T.dmatrix("z"), T.dmatrix("w")
    out = build(x, z, w)
    ins = [v for v in (x, z, w) if v in set(symgraph.graph.basic.graph_inputs([out]))]
    vals = {x: np.eye(3), z: np.zeros((3, 3)), w: np.arange(9.0).reshape(3, 3)}
    f = symgraph.function(ins, out, mode=symgraph.Mode(optimizer="fast_run", linker=linker))
    ref = symgraph.function(ins, out, mode=symgraph.Mode(optimizer=None, linker="py"))
    np.testing.assert_allclose(f(*[vals[v] for v in ins]), ref(*[vals[v] for v in ins]))
