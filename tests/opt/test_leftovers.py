"""The optimizer's leftovers of issue 13: each rewrite fires, and keeps values
(compared with the unoptimized graph), extreme inputs included."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.alloc import Alloc
from symgraph.ops.blas import Dot
from symgraph.ops.elemwise import DimShuffle
from symgraph.ops.gemm import Gemm
from symgraph.ops.nnet_loss import SoftmaxCrossEntropy1Hot
from symgraph.ops.reduce import Max, Sum
from symgraph.ops.subtensor import Subtensor
from tests.opt.opt_helpers import check_rewrite, count_op

EXTREME = np.array([[0.0, -0.0, 1e308, -1e308], [np.inf, -np.inf, np.nan, 1e-310],
                    [2.5, -3.0, 7.0, 1e-5]])


def _mat(seed=0, shape=(3, 4)):
    return np.random.default_rng(seed).normal(size=shape)


def _nodes(fgraph):
    return len(fgraph.apply_nodes)


# -- neutral operands, equal branches -------------------------------------------------

@pytest.mark.parametrize("build", [lambda x: x - 0, lambda x: x / 1, lambda x: x ** 1,
                                   lambda x: T.switch(T.gt(x, 0), x, x)])
def test_neutral_operands_removed(build):
    x = T.dmatrix("x")
    fgraph = check_rewrite([x], build(x), [EXTREME])
    assert _nodes(fgraph) == 0, fgraph.toposort()


def test_switch_same_branches_broadcast_by_condition():
    c, v = T.bmatrix("c"), T.dvector("v")
    out = T.switch(c, v.dimshuffle("x", 0), v.dimshuffle("x", 0))
    check_rewrite([c, v], out, [np.ones((2, 3), "int8"), np.array([1.0, np.nan, -np.inf])],
                  absent=[sb.Switch])


def test_integer_floor_division_by_one_only_for_integers():
    i, x = T.lvector("i"), T.dvector("x")
    check_rewrite([i], i // 1, [np.array([-3, 0, 5])], absent=[sb.IntDiv])
    check_rewrite([x], x // 1, [np.array([-2.5, 0.5, np.inf])], present=[sb.IntDiv])


# -- shape arithmetic ------------------------------------------------------------------

def test_integer_arithmetic_and_sizes():
    i = T.lscalar("i")
    fgraph = check_rewrite([i], i - 1 + 1, [np.int64(2 ** 62)])
    assert _nodes(fgraph) == 0
    x = T.dmatrix("x")
    fgraph = check_rewrite([x], T.maximum(x.shape[0], 0), [_mat()], absent=[sb.Maximum])
    fgraph = check_rewrite([x], T.maximum(x.shape[0] * x.shape[1] + 2, 0), [_mat()],
                           absent=[sb.Maximum])
    # A value that can be negative keeps its maximum.
    check_rewrite([i], T.maximum(i, 0), [np.int64(-4)], present=[sb.Maximum])


@pytest.mark.parametrize("start,stop,step", [(0, 7, 1), (0, 7, 2), (2, 9, 3), (5, -4, -2),
                                             (3, 3, 1), (9, 2, 1), (-8, 0, 5)])
def test_arange_length_in_integers(start, stop, step):
    a, b, c = T.lscalars("a", "b", "c")
    length = T.arange(a, b, c).shape[0]
    fgraph = check_rewrite([a, b, c], length, [start, stop, step], absent=[sm.Ceil])
    assert len(np.arange(start, stop, step)) == symgraph.function(
        [a, b, c], length)(start, stop, step)
    # Far above 2**53 a float ceil would round; integer arithmetic does not.
    big = 2 ** 60 + 1
    assert symgraph.function([a, b, c], length)(0, big, 1) == big
    del fgraph


def test_tutorial_mean_divides_by_the_number_of_rows():
    x, y = T.dmatrix("x"), T.lvector("y")
    p = T.nnet.softmax(x)
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean()
    fgraph = check_rewrite([x, y], cost, [_mat(), np.array([0, 3, 1])],
                           present=[SoftmaxCrossEntropy1Hot], absent=[sm.Ceil, sb.Maximum])
    assert _nodes(fgraph) <= 4
    # With logits of 1e4 the written form is inf; the fused one is finite.
    f = symgraph.function([x, y], [cost] + symgraph.grad(cost, [x]))
    assert all(np.all(np.isfinite(v)) for v in f(_mat() * 1e4, np.array([0, 3, 1])))


# -- like terms --------------------------------------------------------------------------

def test_like_terms_collected_values():
    x, g = T.dmatrices("x", "g")
    out = x - 0.1 * (g + 0.01 * x)
    fgraph = check_rewrite([x, g], out, [_mat(1), _mat(2)], rtol=1e-13)
    assert count_op(fgraph, sb.Mul) == 2 and count_op(fgraph, sb.Sub) == 1
    check_rewrite([x], x + x + x, [EXTREME], absent=[sb.Add])


def test_like_terms_keep_non_finite_results_non_finite():
    x, g = T.dmatrices("x", "g")
    out = x - 0.1 * (g + 0.01 * x)
    f = symgraph.function([x, g], out)
    got = f(EXTREME, np.zeros_like(EXTREME))
    ref = symgraph.function([x, g], out, mode=symgraph.Mode(optimizer=None))(
        EXTREME, np.zeros_like(EXTREME))
    assert np.array_equal(np.isfinite(got), np.isfinite(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-13)


def test_sgd_with_l2_penalty_is_one_inplace_gemm():
    rng = np.random.default_rng(0)
    x, d = T.dmatrices("x", "d")
    lr = symgraph.shared(0.1, name="lr")
    W = symgraph.shared(rng.normal(size=(3, 4)), name="W")
    g = T.dot(x.T, d)
    upd = W - lr * (g + 0.01 * W)
    f = symgraph.function([x, d], [], updates=[(W, upd)])
    nodes = f.maker.fgraph.toposort()
    gemms = [n for n in nodes if isinstance(n.op, Gemm)]
    assert len(gemms) == 1 and gemms[0].op.destroy_map, nodes
    assert not any(isinstance(n.op, Dot) for n in nodes)
    xv, dv = rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    w0 = W.get_value()
    f(xv, dv)
    np.testing.assert_allclose(W.get_value(), w0 - 0.1 * (xv.T @ dv + 0.01 * w0), rtol=1e-12)


def test_integer_constants_gathered_with_wraparound():
    i = T.bvector("i")
    check_rewrite([i], i + np.int8(100) - np.int8(-100), [np.array([1, -128, 127], "int8")])


# -- cancelled factors -------------------------------------------------------------------

def test_constant_divisor_cancelled():
    g = T.dmatrix("g")
    check_rewrite([g], g / 4.0 * 4.0, [EXTREME], absent=[sb.TrueDiv, sb.Mul])


def test_symbolic_divisor_cancelled_only_when_unsafe():
    g, s = T.dmatrix("g"), T.dscalar("s")
    out = g / s * s
    check_rewrite([g, s], out, [_mat(), 0.0], present=[sb.TrueDiv])
    fgraph = check_rewrite([g, s], out, [_mat(), 3.0],
                           mode=symgraph.Mode(optimizer="fast_run").including("unsafe"),
                           absent=[sb.TrueDiv], rtol=1e-15)
    assert _nodes(fgraph) == 0


# -- stabilize ------------------------------------------------------------------------------

def test_log1p_exp_is_softplus():
    x = T.dvector("x")
    f = symgraph.function([x], T.log1p(T.exp(x)))
    assert count_op(f.maker.fgraph, sm.Softplus) == 1
    np.testing.assert_allclose(f(np.array([-50.0, 0.0, 3.0, 800.0])),
                               [np.log1p(np.exp(-50.0)), np.log(2.0), np.log1p(np.exp(3.0)),
                                800.0])


def test_sqrt_of_sqr_and_sqr_of_sqrt():
    x = T.dvector("x")
    vals = np.array([-3.0, 0.0, 2.0, np.inf, -np.inf, np.nan, 1e200, -1e-200])
    f = symgraph.function([x], T.sqrt(T.sqr(x)))
    assert count_op(f.maker.fgraph, sm.Sqrt) == 0
    np.testing.assert_array_equal(f(vals), np.abs(vals))  # 1e200**2 would overflow
    f = symgraph.function([x], T.sqr(T.sqrt(x)))
    assert count_op(f.maker.fgraph, sm.Sqrt) == 0
    with np.errstate(invalid="ignore"):
        expected = np.where(vals >= 0, vals, np.nan)
    np.testing.assert_array_equal(f(vals), expected)


def test_demo_log_softmax_from_primitives_is_the_fused_nll():
    x, y = T.dmatrix("x"), T.lvector("y")
    shifted = x - x.max(axis=1, keepdims=True)
    log_probs = shifted - T.log(T.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[T.arange(y.shape[0]), y].mean()
    xv = _mat(3) * 1e4
    fgraph = check_rewrite([x, y], loss, [xv, np.array([1, 0, 3])],
                           present=[SoftmaxCrossEntropy1Hot], absent=[Max, sm.Log])
    assert _nodes(fgraph) <= 4
    f = symgraph.function([x, y], [loss] + symgraph.grad(loss, [x]))
    assert all(np.all(np.isfinite(v)) for v in f(xv, np.array([1, 0, 3])))


def test_softmax_of_shifted_logits():
    x = T.dmatrix("x")
    out = T.nnet.softmax(x - x.max(axis=1, keepdims=True))
    check_rewrite([x], out, [_mat() * 1e3], absent=[Max])
    # Another axis's maximum is not the softmax's shift: kept.
    out = T.nnet.softmax(x - x.max(axis=0, keepdims=True))
    check_rewrite([x], out, [_mat()], present=[Max])


# -- fills -----------------------------------------------------------------------------------

def test_gradient_fill_chains_removed():
    x = T.dmatrix("x")
    fgraph = check_rewrite([x], symgraph.grad(T.sum(x ** 2), x), [EXTREME],
                           absent=[sb.Second])
    assert _nodes(fgraph) == 1
    fgraph = check_rewrite([x], symgraph.grad(T.mean(T.tanh(x)), x), [EXTREME],
                           absent=[sb.Second])


def test_fill_read_only_for_its_shape_becomes_alloc():
    x, v = T.dmatrix("x"), T.dvector("v")
    fgraph = check_rewrite([x], T.ones_like(x), [EXTREME], present=[Alloc],
                           absent=[sb.Second])
    assert all(n.inputs[0] is not fgraph.inputs[0] or not isinstance(n.op, Alloc)
               for n in fgraph.apply_nodes)
    # The gradient of sum(dot(x, v)) wrt v no longer computes dot(x, v).
    fgraph = check_rewrite([x, v], symgraph.grad(T.dot(x, v).sum(), v),
                           [_mat(), np.ones(4)], absent=[sb.Second])
    assert count_op(fgraph, Dot) == 1
    check_rewrite([x, v], T.zeros_like(x) + v, [_mat(), np.array([1.0, np.nan, 2, 3])],
                  absent=[sb.Second])


# -- sums --------------------------------------------------------------------------------------

def test_sum_of_sum():
    x = T.dtensor3("x")
    fgraph = check_rewrite([x], T.sum(T.sum(x, axis=1), axis=1),
                           [np.arange(24.0).reshape(2, 3, 4)])
    (node,) = fgraph.apply_nodes
    assert node.op.axis == (1, 2)


def test_sum_of_alloc_has_no_loop_over_the_array():
    s, n = T.dscalar("s"), T.lscalar("n")
    for value in (2.5, np.inf, np.nan):
        for size in (0, 3):
            check_rewrite([s, n], T.sum(T.alloc(s, n, 3)), [value, size], absent=[Alloc, Sum])
    out = T.sum(T.alloc(s, n, 3), axis=1)
    check_rewrite([s, n], out, [1.5, 4], absent=[Sum])


def test_constants_moved_out_of_repeated_sums():
    x = T.dmatrix("x")
    fgraph = check_rewrite([x], [T.sum(2 * x), T.sum(x) * 3], [_mat()])
    assert count_op(fgraph, Sum) == 1


def _reductions(fgraph):
    from symgraph.opt.fuse_reduce import ReduceOfElemwise

    return [n for n in fgraph.apply_nodes if isinstance(n.op, (Sum, ReduceOfElemwise))]


def test_sibling_sums_of_one_array_are_one_pass():
    W = T.dmatrix("W")
    cost = 1e-4 * abs(W).sum() + 2e-4 * (W ** 2).sum()
    fgraph = check_rewrite([W], cost, [_mat(2, (5, 7))], rtol=1e-13)
    (node,) = _reductions(fgraph)
    assert node.inputs == [fgraph.inputs[0]]
    # Nested scales and subtraction: 1e-3 * (sum|W| - sum W**2) + sum(exp(W)).
    cost = 1e-3 * (abs(W).sum() - (W ** 2).sum()) + T.exp(W).sum()
    fgraph = check_rewrite([W], cost, [_mat(3, (4, 3))], rtol=1e-13)
    assert len(_reductions(fgraph)) == 1


def test_sibling_sums_over_the_same_axes_with_a_symbolic_scale():
    W, l1 = T.dmatrix("W"), T.dscalar("l1")
    out = l1 * abs(W).sum(axis=0) + (W ** 2).sum(axis=0) - T.tanh(W).sum(axis=0)
    fgraph = check_rewrite([W, l1], out, [_mat(4, (6, 5)), 0.3], rtol=1e-13)
    assert len(_reductions(fgraph)) == 1
    # float32: one dtype throughout, the float64 scale would upcast: left alone.
    V, c = T.fmatrix("V"), T.dscalar("c")
    out = c * abs(V).sum() + (V ** 2).sum()
    fgraph = check_rewrite([V, c], out, [_mat(5).astype("float32"), 0.5], rtol=1e-6)
    assert len(_reductions(fgraph)) == 2


def test_sibling_sums_extreme_inputs():
    W = T.dmatrix("W")
    for value in (EXTREME, np.full((2, 3), 1e200), np.full((2, 3), -np.inf),
                  np.zeros((0, 3))):
        cost = 1e-4 * abs(W).sum() + 1e-4 * (W ** 2).sum()
        fgraph = check_rewrite([W], cost, [value], rtol=1e-13)
        assert len(_reductions(fgraph)) == 1
    # inf - inf across the two sums: NaN either way.
    cost = T.exp(W).sum() - (W ** 2).sum()
    check_rewrite([W], cost, [np.array([[np.inf, 1.0]])])


def test_sibling_sums_left_alone():
    W, V = T.dmatrix("W"), T.dmatrix("V")
    # different shapes, different axes, a sum used elsewhere, integers
    for out in (abs(W).sum() + (V ** 2).sum(),
                abs(W).sum(axis=0) + (W ** 2).sum(axis=1).sum(),
                abs(W).sum(axis=0) + (W.T ** 2).sum(axis=1)):
        fgraph = check_rewrite([W, V], out, [_mat(6, (3, 3)), _mat(7, (3, 4))], rtol=1e-13)
        assert len(_reductions(fgraph)) == 2, fgraph.toposort()
    a = abs(W).sum()
    fgraph = check_rewrite([W], [a + (W ** 2).sum(), a], [_mat(8)], rtol=1e-13)
    assert len(_reductions(fgraph)) == 2
    i = T.lmatrix("i")
    fgraph = check_rewrite([i], abs(i).sum() + (i * i).sum(),
                           [np.array([[2 ** 40, -3], [7, 2 ** 31]])])
    assert len(_reductions(fgraph)) == 2


def test_mlp_l1_l2_penalty_reads_each_weight_once_for_the_cost():
    rng = np.random.default_rng(9)
    x = T.dmatrix("x")
    W1 = symgraph.shared(rng.normal(size=(4, 5)), name="W1")
    W2 = symgraph.shared(rng.normal(size=(5, 3)), name="W2")
    h = T.tanh(T.dot(x, W1))
    cost = T.sum(T.dot(h, W2) ** 2) + 1e-4 * (abs(W1).sum() + abs(W2).sum()) + \
        1e-4 * ((W1 ** 2).sum() + (W2 ** 2).sum())
    f = symgraph.function([x], cost)
    for w in ("W1", "W2"):
        (w_in,) = [v for v in f.maker.fgraph.inputs if v.name == w]
        reducers = [n for n in _reductions(f.maker.fgraph) if w_in in n.inputs]
        assert len(reducers) == 1, f.maker.fgraph.toposort()
    xv, w1, w2 = rng.normal(size=(6, 4)), W1.get_value(), W2.get_value()
    expected = np.sum((np.tanh(xv @ w1) @ w2) ** 2) + 1e-4 * (
        np.abs(w1).sum() + np.abs(w2).sum()) + 1e-4 * ((w1 ** 2).sum() + (w2 ** 2).sum())
    np.testing.assert_allclose(f(xv), expected, rtol=1e-12)


# -- transposes around dot ---------------------------------------------------------------------

def test_transposes_around_dot():
    a, b = T.dmatrices("a", "b")
    fgraph = check_rewrite([a, b], T.dot(a.T, b.T).T, [_mat(0, (3, 2)), _mat(1, (4, 3))])
    assert count_op(fgraph, DimShuffle) == 0
    fgraph = check_rewrite([a, b], T.dot(a.T, b).T, [_mat(0, (3, 2)), _mat(1, (3, 4))])
    assert count_op(fgraph, DimShuffle) == 1


@pytest.mark.parametrize("build,merged", [
    (lambda x: x[1:][:, 2:][0], 1), (lambda x: x[1:3][1:], 1), (lambda x: x[2:][1], 1),
    (lambda x: x[1:5][2:9, 1:][:, 0], 1),
    # Left: the chain fails where one index would not (x[1:2][3]), negative steps.
    (lambda x: x[1:2][0], 2), (lambda x: x[::-1][1:], 2), (lambda x: x[-3:][1:], 2)])
def test_subtensor_chain(build, merged):
    x = T.dmatrix("x")
    fgraph = check_rewrite([x], build(x), [_mat(0, (6, 5))])
    assert count_op(fgraph, Subtensor) == merged


def test_subtensor_chain_keeps_index_errors():
    x = T.dmatrix("x")
    f = symgraph.function([x], x[2:][3])
    with pytest.raises(IndexError):
        f(_mat(0, (4, 2)))


def test_gradient_of_log_one_plus_exp_is_a_sigmoid():
    x = T.dvector("x")
    g = symgraph.grad(T.sum(T.log(1 + T.exp(x))), x)
    f = symgraph.function([x], g)
    assert count_op(f.maker.fgraph, sm.Sigmoid) == 1
    vals = np.array([-800.0, -3.0, 0.0, 2.0, 800.0])
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(f(vals), 1 / (1 + np.exp(-vals)), rtol=1e-14)


def test_l1_and_l2_penalties_are_one_pass_and_a_gemm():
    rng = np.random.default_rng(1)
    x, d = T.dmatrices("x", "d")
    W = symgraph.shared(rng.normal(size=(3, 4)), name="W")
    upd = W - 0.1 * (T.dot(x.T, d) + 1e-4 * T.sgn(W) + 2e-4 * W)
    f = symgraph.function([x, d], [], updates=[(W, upd)])
    nodes = f.maker.fgraph.toposort()
    (w_in,) = [v for v in f.maker.fgraph.inputs if v.name == "W"]
    readers = [n for n in nodes if w_in in n.inputs]
    assert len(readers) == 1 and any(isinstance(n.op, Gemm) for n in nodes), nodes
    xv, dv, w0 = rng.normal(size=(5, 3)), rng.normal(size=(5, 4)), W.get_value()
    f(xv, dv)
    np.testing.assert_allclose(W.get_value(),
                               w0 - 0.1 * (xv.T @ dv + 1e-4 * np.sign(w0) + 2e-4 * w0),
                               rtol=1e-12)


def test_zero_scaled_terms_are_not_collected():
    x = T.dvector("x")
    f = symgraph.function([x], x + 0 * x)
    with np.errstate(invalid="ignore"):
        got = f(np.array([np.inf, 1.0]))
    assert np.isnan(got[0]) and got[1] == 1.0


def test_l2_update_of_a_weight_read_elsewhere_is_one_inplace_gemm():
    # examples/demo.py's output layer: W2 is also read by the forward dot, and
    # the Gemm takes it as z with beta = 1 - lr * l2 (no scaled copy first).
    rng = np.random.default_rng(2)
    x, y = T.dmatrix("x"), T.lvector("y")
    W1 = symgraph.shared(rng.normal(size=(3, 5)), name="W1")
    W2 = symgraph.shared(rng.normal(size=(5, 4)), name="W2")
    h = T.tanh(T.dot(x, W1))
    loss = -T.nnet.logsoftmax(T.dot(h, W2))[T.arange(y.shape[0]), y].mean() + \
        1e-4 * (W2 ** 2).sum()
    g = symgraph.grad(loss, W2)
    f = symgraph.function([x, y], [], updates=[(W2, W2 - 0.1 * g)])
    (w_in,) = [v for v in f.maker.fgraph.inputs if v.name == "W2"]
    gemms = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Gemm)]
    assert len(gemms) == 1 and gemms[0].inputs[0] is w_in and gemms[0].op.inplace
    ref = symgraph.function([x, y], W2 - 0.1 * g, mode=symgraph.Mode(optimizer=None))
    xv, yv = rng.normal(size=(6, 3)), np.array([0, 1, 3, 2, 0, 1])
    expected = ref(xv, yv)
    f(xv, yv)
    np.testing.assert_allclose(W2.get_value(), expected, rtol=1e-12)


def test_sigmoid_factor_rewrites_take_one_factor_of_each():
    # d/dx 1/(1 + exp(x)) = -exp(x) / (1 + exp(x))**2: one exp and one (1 + exp)
    # become one sigmoid; the other (1 + exp) stays.
    x = T.dvector("x")
    vals = [np.array([-3.0, -0.5, 0.0, 2.0, 4.0])]
    check_rewrite([x], symgraph.grad(T.sum(1 / (1 + T.exp(x))), x), vals, rtol=1e-12)
    e = T.exp(x)
    check_rewrite([x], e * e / ((1 + e) * (1 + e)), vals, rtol=1e-12)
    check_rewrite([x], T.nnet.sigmoid(-x) * e * e, vals, rtol=1e-12)
