"""Property-based: random expression graphs give the same values optimized and not.

Graphs mix element-wise, reduction and shape ops over inputs of random
shapes (broadcastable rows and columns included); the fully optimized
function must agree with the unoptimized one.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symgraph
import symgraph.tensor as T

UNARY = [
    ("neg", lambda a: -a),
    ("exp", lambda a: T.exp(T.clip(a, -5.0, 5.0))),
    ("log1p_sq", lambda a: T.log(1 + a * a)),
    ("tanh", T.tanh),
    ("sigmoid", T.sigmoid),
    ("abs", abs),
    ("sqr", lambda a: a ** 2),
    ("cube", lambda a: a ** 3),
    ("sqrt_abs", lambda a: T.sqrt(abs(a))),
    ("double_neg", lambda a: -(-a)),
    ("times_one", lambda a: a * 1),
    ("plus_zero", lambda a: a + 0),
    ("self_sub", lambda a: a - a + a),
    ("self_div", lambda a: a * (a / (abs(a) + 1)) / (a / (abs(a) + 1) + 2)),
    ("log_exp", lambda a: T.log(T.exp(T.clip(a, -5, 5)))),
    ("softplus", T.softplus),
]

BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (abs(b) + 1)),
    ("max", T.maximum),
    ("min", T.minimum),
    # A constant threshold: comparing two expressions that differ by rounding
    # (log(exp(x)) against x) would flip with rewrites that are exact.
    ("switch", lambda a, b: T.switch(a > 0.25, a, b * 2)),
    ("chain", lambda a, b: 2 * a * 3 + b * 0.5 + 1),
]

REDUCE = [
    ("sum", lambda a, ax, kd: a.sum(axis=ax, keepdims=kd)),
    ("mean", lambda a, ax, kd: a.mean(axis=ax, keepdims=kd)),
    ("max", lambda a, ax, kd: a.max(axis=ax, keepdims=kd)),
    ("prod", lambda a, ax, kd: T.tanh(a).prod(axis=ax, keepdims=kd)),
]


@st.composite
def graphs(draw):
    """(inputs, output, values): a random expression over 1 to 3 matrices."""
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(1, 4))
    n_inputs = draw(st.integers(1, 3))
    inputs, values, shapes = [], [], {}
    for k in range(n_inputs):
        kind = draw(st.sampled_from(["matrix", "row", "col", "vector"]))
        if kind == "matrix":
            var, shape = T.dmatrix(f"m{k}"), (rows, cols)
        elif kind == "row":
            var, shape = T.drow(f"r{k}"), (1, cols)
        elif kind == "col":
            var, shape = T.dcol(f"c{k}"), (rows, 1)
        else:
            var, shape = T.dvector(f"v{k}"), (cols,)
        inputs.append(var)
        shapes[var] = shape
        seed = draw(st.integers(0, 2 ** 16))
        values.append(np.random.default_rng(seed).uniform(-2, 2, size=shape))
    pool = list(inputs)
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.sampled_from(["unary", "binary", "binary", "shape"]))
        if choice == "unary":
            _, fn = draw(st.sampled_from(UNARY))
            a = draw(st.sampled_from(pool))
            pool.append(fn(a))
            shapes[pool[-1]] = shapes[a]
        elif choice == "binary":
            _, fn = draw(st.sampled_from(BINARY))
            a = draw(st.sampled_from(pool))
            partners = [b for b in pool if _broadcastable_with(a, b, shapes)]
            b = draw(st.sampled_from(partners))
            pool.append(fn(a, b))
            shapes[pool[-1]] = _broadcast_shape(a, b, shapes)
        else:
            a = draw(st.sampled_from(pool))
            shape = shapes[a]
            if a.ndim == 2 and draw(st.booleans()):
                pool.append(draw(st.sampled_from([a.T, a.dimshuffle(1, 0)])))
                shapes[pool[-1]] = shape[::-1]
            elif a.ndim == 2:
                pool.append(a.flatten())
                shapes[pool[-1]] = (int(np.prod(shape)),)
            else:
                pool.append(a.dimshuffle("x", 0))
                shapes[pool[-1]] = (1,) + shape
    out = pool[-1]
    if draw(st.booleans()) and out.ndim:
        _, fn = draw(st.sampled_from(REDUCE))
        axis = draw(st.sampled_from([None] + list(range(out.ndim))))
        out = fn(out, axis, draw(st.booleans()))
    used = set(symgraph.graph.basic.graph_inputs([out]))
    keep = [(i, v) for i, v in zip(inputs, values) if i in used]
    return [i for i, _ in keep], out, [v for _, v in keep]


def _aligned(var, shapes):
    shape = shapes[var]
    static = var.type.shape
    pad = 2 - len(shape)
    return (1,) * pad + tuple(shape), (1,) * pad + tuple(static)


def _broadcastable_with(a, b, shapes):
    """Theano's rule: sizes agree, or one side is declared (statically) size 1."""
    (sa, ta), (sb, tb) = _aligned(a, shapes), _aligned(b, shapes)
    return all(x == y or tx == 1 or ty == 1 for x, y, tx, ty in zip(sa, sb, ta, tb))


def _broadcast_shape(a, b, shapes):
    (sa, _), (sb, _) = _aligned(a, shapes), _aligned(b, shapes)
    out = tuple(max(x, y) for x, y in zip(sa, sb))
    return out[2 - max(a.ndim, b.ndim):]


def assert_same_as_unoptimized(case, optimizer, linker):
    """The graph compiled with ``optimizer``/``linker`` gives the unoptimized
    Python result: same shape, same dtype, same values."""
    inputs, out, values = case
    plain = symgraph.function(inputs, out, mode=symgraph.Mode(optimizer=None, linker="py"))
    other = symgraph.function(inputs, out, mode=symgraph.Mode(optimizer=optimizer, linker=linker))
    expected = plain(*values)
    got = other(*values)
    assert np.shape(got) == np.shape(expected)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, equal_nan=True)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_optimized_equals_unoptimized(case):
    # The Python linker: this checks the rewrites, on many graphs, quickly.
    assert_same_as_unoptimized(case, "fast_run", "py")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_native_optimized_equals_python_unoptimized(case):
    # Native code (fused loops, reductions) on random graphs: each example compiles.
    assert_same_as_unoptimized(case, "fast_run", "c|py")


@pytest.mark.parametrize("optimizer", ["fast_compile", "merge"])
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=graphs())
def test_other_optimizers_keep_values(optimizer, case):
    assert_same_as_unoptimized(case, optimizer, "py")
