"""Element-wise fusion: one loop node for the W2 expression, values unchanged,
convexity, multi-output composites, literals, dtype exactness and scaling."""

import time

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.compile.mode import Mode
from symgraph.graph.fg import FunctionGraph
from symgraph.ops import scalar_basic as sb, scalar_math as sm
from symgraph.ops.composite import Composite, composite_from_nodes
from symgraph.ops.elemwise import Elemwise
from symgraph.opt.fusion import elemwise_fusion, find_regions
from symgraph.opt.pipeline import optimize

PY = Mode(linker="py")


def elemwise_nodes(f):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Elemwise)]


def fused_loop_count(f):
    """The number of Elemwise loops left in a compiled function."""
    return len(elemwise_nodes(f))


def unfused(inputs, outputs):
    return symgraph.function(inputs, outputs, mode=Mode(linker="py", optimizer=None))


def test_w2_is_one_loop(rng):
    x, y, z = T.fmatrices("x", "y", "z")
    out = T.exp(-x * x) * y + T.tanh(z) * 0.5
    f = symgraph.function([x, y, z], out)
    assert fused_loop_count(f) == 1
    (node,) = elemwise_nodes(f)
    assert isinstance(node.op.scalar_op, Composite)
    assert str(node.op) == "Elemwise{Composite{exp(-i0*i0)*i1 + tanh(i2)*0.5}}"
    assert len(node.inputs) == 3  # 0.5 is a literal in the code, not an input
    args = [rng.normal(size=(5, 7)).astype("float32") for _ in range(3)]
    np.testing.assert_allclose(f(*args), unfused([x, y, z], out)(*args), rtol=1e-6,
                               atol=1e-7)
    # non-contiguous and negative-stride inputs
    big = [rng.normal(size=(10, 14)).astype("float32") for _ in range(3)]
    views = [big[0][::2, ::2], big[1][::-2, 1::2], big[2].T[:5, :7]]
    np.testing.assert_allclose(f(*views), unfused([x, y, z], out)(*views), rtol=1e-6,
                               atol=1e-7)


def test_fusion_can_be_excluded():
    x, y = T.fvectors("x", "y")
    out = T.exp(x) * y + 1
    with symgraph.config.change_flags(optimizer_excluding="fusion"):
        f = symgraph.function([x, y], out, mode=PY)
    assert fused_loop_count(f) > 1


def test_broadcasting_regions(rng):
    x = T.dmatrix("x")
    r = T.drow("r")
    out = T.exp(x) * r + T.tanh(r) * 2.0
    f = symgraph.function([x, r], out)
    # tanh(r) has the row's shape: a separate loop, not recomputed per row
    assert fused_loop_count(f) == 2
    xv, rv = rng.normal(size=(4, 6)), rng.normal(size=(1, 6))
    np.testing.assert_allclose(f(xv, rv), np.exp(xv) * rv + np.tanh(rv) * 2, rtol=1e-12)
    np.testing.assert_allclose(f(xv[::-1, ::2], rv[:, ::2]),
                               np.exp(xv[::-1, ::2]) * rv[:, ::2] + np.tanh(rv[:, ::2]) * 2,
                               rtol=1e-12)


def test_non_convex_region_is_not_fused_into_a_cycle(rng):
    x = T.dvector("x")
    a = T.exp(x)
    s = a.sum()                     # leaves the element-wise world ...
    out = T.tanh(a * s + 1.0)       # ... and comes back
    f = symgraph.function([x], out, mode=PY)
    order = f.maker.fgraph.toposort()  # a cycle would make this fail
    assert len(order) == len(f.maker.fgraph.apply_nodes)
    loops = elemwise_nodes(f)
    assert len(loops) == 2
    xv = rng.normal(size=7)
    np.testing.assert_allclose(f(xv), np.tanh(np.exp(xv) * np.exp(xv).sum() + 1), rtol=1e-12)


def test_two_regions_never_depend_on_each_other(rng):
    # a1 -> b_in and b_out -> a2: each region is convex alone, but fusing
    # both would make them wait for each other (find_regions must not).
    x, y = T.dvectors("x", "y")
    a1 = T.exp(x)
    b_out = T.sin(y)
    b_in = a1.sum() + b_out           # leaves through the sum
    a2 = T.cos(b_out.sum() + a1)      # a2 needs b_out, b needs a1
    outs = [T.sqrt(a2) * 2, T.tanh(b_in) + 1]
    fg = FunctionGraph([x, y], outs)
    optimize(fg, optimizer=None, including="fusion")
    assert len(fg.toposort()) == len(fg.apply_nodes)
    f = symgraph.function([x, y], outs)
    xv, yv = rng.normal(size=4), rng.normal(size=4)
    for got, want in zip(f(xv, yv), unfused([x, y], outs)(xv, yv)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_multi_output_composite(rng):
    x, y = T.dvectors("x", "y")
    a = T.exp(x) + y
    out = a * 2 - T.sin(a)
    f = symgraph.function([x, y], [out, a])
    (node,) = elemwise_nodes(f)
    assert len(node.outputs) == 2
    xv, yv = rng.normal(size=9), rng.normal(size=9)
    got_out, got_a = f(xv, yv)
    np.testing.assert_allclose(got_a, np.exp(xv) + yv, rtol=1e-12)
    np.testing.assert_allclose(got_out, (np.exp(xv) + yv) * 2 - np.sin(np.exp(xv) + yv),
                               rtol=1e-12)


def test_int8_overflow_and_float32_rounding_are_kept(rng):
    x = T.bvector("x")
    y = T.bvector("y")
    out = (x * 100 + y) // 3 - x * x          # wraps in int8 at every step
    f = symgraph.function([x, y], out)
    assert fused_loop_count(f) == 1
    xv = np.arange(-128, 128, dtype="int8")
    yv = np.arange(127, -129, -1, dtype="int8")
    np.testing.assert_array_equal(f(xv, yv), unfused([x, y], out)(xv, yv))
    # float32 products rounded before the subtraction (no FMA contraction),
    # then float64: bit for bit the unfused values
    u, v, w = T.fvectors("u", "v", "w")
    out32 = T.cast(u * v - w, "float64") * 3.0
    g = symgraph.function([u, v, w], out32)
    assert fused_loop_count(g) == 1
    uv, vv = rng.normal(size=(2, 500)).astype("float32")
    wv = (uv * vv + rng.normal(size=500).astype("float32") * 1e-3).astype("float32")
    np.testing.assert_array_equal(g(uv, vv, wv), unfused([u, v, w], out32)(uv, vv, wv))


def test_composite_is_a_value():
    x, y = T.dvectors("x", "y")
    e1 = T.exp(x) * y
    e2 = T.exp(y) * x
    n1 = [e1.owner.inputs[0].owner, e1.owner]
    n2 = [e2.owner.inputs[0].owner, e2.owner]
    c1 = composite_from_nodes(n1, [x, y], [e1])
    c2 = composite_from_nodes(n2, [y, x], [e2])
    assert c1 == c2 and hash(c1) == hash(c2)
    assert str(c1) == "Composite{exp(i0)*i1}"
    assert c1.output_dtypes("float32", "float32") == ["float32"]
    assert c1.output_dtypes("int8", "int8") == ["float32"]
    with pytest.raises(TypeError, match="fusion"):
        c1.grad([x, y], [e1], [e1])


def test_nested_composites_are_inlined():
    inner = Composite(1, [(sm.Exp(), (("i", 0),))], [("n", 0, 0)])
    outer = Composite(2, [(inner, (("i", 0),)), (sb.Add(), (("n", 0, 0), ("i", 1)))],
                      [("n", 1, 0)])
    assert not any(isinstance(op, Composite) for op, _ in outer.nodes)
    assert str(outer) == "Composite{exp(i0) + i1}"
    np.testing.assert_allclose(outer.impl(np.array([0.0, 1.0]), np.array([1.0, 1.0])),
                               [2.0, np.e + 1])


def test_nan_literal_composites_merge():
    x = T.dvector("x")
    c1 = Composite(1, [(sb.Maximum(), (("i", 0), ("c", "float64", "nan")))], [("n", 0, 0)])
    c2 = Composite(1, [(sb.Maximum(), (("i", 0), ("c", "float64", "nan")))], [("n", 0, 0)])
    assert c1 == c2
    node = Elemwise(c1)(x).owner
    assert np.isnan(node.op.scalar_op.impl(np.array([1.0]))).all()


def _chain(x, steps):
    y = x
    for i in range(steps):
        y = T.tanh(y * 1.5 + 0.1 * (i % 7))
    return y


def test_long_chain_fuses_fast(rng):
    x = T.dvector("x")
    out = _chain(x, 700)            # 2100 element-wise nodes
    fg = FunctionGraph([x], [out])
    assert len(fg.apply_nodes) >= 2000
    start = time.perf_counter()
    optimize(fg, optimizer=None, including="fusion")
    took = time.perf_counter() - start
    assert took < 3.0, took
    (node,) = fg.apply_nodes
    assert isinstance(node.op.scalar_op, Composite) and len(node.inputs) == 1
    assert "nodes:" in str(node.op)  # a summary instead of a 2000-term formula
    xv = rng.normal(size=5)
    expected = xv.copy()
    for i in range(700):
        expected = np.tanh(expected * 1.5 + 0.1 * (i % 7))
    np.testing.assert_allclose(node.op.scalar_op.impl(xv), expected, rtol=1e-12)


def test_wide_graph_regions_are_linear_ish():
    # many independent short regions separated by reductions
    x = T.dvector("x")
    y = x
    for _ in range(300):
        y = T.exp(y * 0.5 + 1.0).sum() * x + 0.25
    fg = FunctionGraph([x], [y])
    start = time.perf_counter()
    regions = find_regions(fg)
    assert time.perf_counter() - start < 3.0
    assert len(regions) >= 299
    elemwise_fusion.apply(fg)
    assert len(fg.toposort()) == len(fg.apply_nodes)


def test_constants_become_literals():
    x = T.fvector("x")
    f = symgraph.function([x], T.exp(x * 2.0 + 3.0) - 1.0, mode=PY)
    (node,) = elemwise_nodes(f)
    assert len(node.inputs) == 1
    assert "2.0" in str(node.op) or "2" in str(node.op)
    np.testing.assert_allclose(f(np.array([0.0, 1.0], "float32")),
                               np.exp(np.array([0.0, 1.0]) * 2 + 3) - 1, rtol=1e-6)
