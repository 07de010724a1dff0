"""Softmax written out by hand (``opt/stabilize_softmax.py``): the Theano
tutorial's ``-log(softmax(x)[arange(n), y]).mean()`` becomes the fused, stable
softmax cross-entropy, and ``exp(x) / sum(exp(x), 1, keepdims=True)`` becomes
``softmax(x)``.  Each rewrite fires, keeps the unoptimized graph's values on
ordinary inputs, and is finite (and right) for logits of 1e4."""

import numpy as np
import pytest
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph.autodiff.verify import verify_grad
from symgraph.ops import nnet as nnet_ops
from symgraph.ops import nnet_loss as nl
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
from symgraph.ops import scalar_math as sm
from symgraph.tensor import nnet

from opt_helpers import check_rewrite, count_op, has_op

RNG = np.random.default_rng(13)
LOGITS = RNG.standard_normal((5, 4)) * 3
TARGETS = np.array([0, 3, 1, 1, 2], dtype="int32")
HUGE = RNG.standard_normal((5, 4)) * 1e4
INPUTS = RNG.standard_normal((5, 3))
WEIGHTS = RNG.standard_normal((3, 4))
BIAS = RNG.standard_normal(4)
HUGE_WEIGHTS = WEIGHTS * 1e4


def _lse_nll(logits, y):
    """The rows' nll by a stable log-sum-exp, in NumPy."""
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    return lse - logits[np.arange(len(y)), y]


def _dlogits(logits, y, scale):
    """d(scale * sum(nll)) / d logits."""
    return scale * (scipy.special.softmax(logits, axis=1) - np.eye(logits.shape[1])[y])


def _tutorial_cost(p, y, reduce):
    picked = -T.log(p[T.arange(y.shape[0]), y])
    return picked.mean() if reduce == "mean" else picked.sum()


REDUCES = ("mean", "sum")


@pytest.mark.parametrize("reduce", REDUCES)
def test_tutorial_cost_becomes_the_fused_op(reduce):
    x, y = T.dmatrix("x"), T.ivector("y")
    cost = _tutorial_cost(nnet.softmax(x), y, reduce)
    fg = check_rewrite([x, y], cost, [LOGITS, TARGETS], present=[nl.SoftmaxCrossEntropy1Hot],
                       absent=[nnet_ops.Softmax, nnet_ops.LogSoftmax, sm.Log], rtol=1e-12)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1
    got = symgraph.function([x, y], cost)(HUGE, TARGETS)
    ref = getattr(np, reduce)(_lse_nll(HUGE, TARGETS))
    assert np.isfinite(got)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_tutorial_cost_overflows_without_the_rewrite():
    x, y = T.dmatrix("x"), T.ivector("y")
    cost = _tutorial_cost(nnet.softmax(x), y, "mean")
    g = symgraph.grad(cost, x)
    with np.errstate(all="ignore"):
        plain = symgraph.function([x, y], [cost, g],
                                  mode=symgraph.Mode(optimizer=None))(HUGE, TARGETS)
    assert np.isinf(plain[0]) and np.isnan(plain[1]).any()  # the reason for the rewrites


@pytest.mark.parametrize("reduce", REDUCES)
def test_tutorial_gradient_is_fused_and_finite(reduce):
    x, y = T.dmatrix("x"), T.ivector("y")
    cost = _tutorial_cost(nnet.softmax(x), y, reduce)
    g = symgraph.grad(cost, x)
    fg = check_rewrite([x, y], [cost, g], [LOGITS, TARGETS],
                       present=[nl.SoftmaxCrossEntropy1Hot, nl.SoftmaxCrossEntropy1HotGrad],
                       absent=[nnet_ops.SoftmaxGrad, nnet_ops.Softmax, sm.Log],
                       rtol=1e-10, atol=1e-14)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1  # the softmax computed once
    cost_v, g_v = symgraph.function([x, y], [cost, g])(HUGE, TARGETS)
    scale = 1 / len(TARGETS) if reduce == "mean" else 1
    assert np.isfinite(cost_v) and np.all(np.isfinite(g_v))
    np.testing.assert_allclose(g_v, _dlogits(HUGE, TARGETS, scale), atol=1e-15)


def test_tutorial_gradient_alone():
    x, y = T.dmatrix("x"), T.ivector("y")
    g = symgraph.grad(_tutorial_cost(nnet.softmax(x), y, "mean"), x)
    check_rewrite([x, y], g, [LOGITS, TARGETS], present=[nl.SoftmaxCrossEntropy1HotGrad],
                  absent=[nnet_ops.SoftmaxGrad, AdvancedIncSubtensor], rtol=1e-10, atol=1e-14)
    got = symgraph.function([x, y], g)(HUGE, TARGETS)
    np.testing.assert_allclose(got, _dlogits(HUGE, TARGETS, 1 / 5), atol=1e-15)


@pytest.mark.parametrize("reduce", REDUCES)
def test_tutorial_logistic_regression(reduce):
    """``p = softmax(dot(x, W) + b)``: the cost and its gradients w.r.t. x, W
    and b are fused, agree with the unoptimized graph, and are finite for
    logits of order 1e4."""
    x, y, W, b = T.dmatrix("x"), T.ivector("y"), T.dmatrix("W"), T.dvector("b")
    logits = T.dot(x, W) + b
    cost = _tutorial_cost(nnet.softmax(logits), y, reduce)
    grads = symgraph.grad(cost, [x, W, b])
    fg = check_rewrite([x, y, W, b], [cost] + grads, [INPUTS, TARGETS, WEIGHTS, BIAS],
                       present=[nl.SoftmaxCrossEntropy1Hot, nl.SoftmaxCrossEntropy1HotGrad],
                       absent=[nnet_ops.SoftmaxGrad, nnet_ops.Softmax, sm.Log],
                       rtol=1e-10, atol=1e-14)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1
    got = symgraph.function([x, y, W, b], [cost] + grads)(INPUTS, TARGETS, HUGE_WEIGHTS, BIAS)
    z = INPUTS @ HUGE_WEIGHTS + BIAS
    scale = 1 / len(TARGETS) if reduce == "mean" else 1
    dz = _dlogits(z, TARGETS, scale)
    assert np.all([np.all(np.isfinite(v)) for v in got])
    np.testing.assert_allclose(got[0], getattr(np, reduce)(_lse_nll(z, TARGETS)), rtol=1e-12)
    np.testing.assert_allclose(got[1], dz @ HUGE_WEIGHTS.T, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[2], INPUTS.T @ dz, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[3], dz.sum(axis=0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduce", REDUCES)
def test_tutorial_cost_verify_grad(reduce):
    y = T.constant(TARGETS)
    verify_grad(lambda x: _tutorial_cost(nnet.softmax(x), y, reduce), [LOGITS], rng=1)
    verify_grad(lambda x, W, b: _tutorial_cost(nnet.softmax(T.dot(x, W) + b), y, reduce),
                [INPUTS, WEIGHTS, BIAS], rng=2)


def test_log_of_picked_probabilities_unnegated():
    """``log(p[arange(n), y])`` (maximized, not negated) is ``-nll``."""
    x, y = T.dmatrix("x"), T.ivector("y")
    out = T.log(nnet.softmax(x)[T.arange(x.shape[0]), y])
    check_rewrite([x, y], out, [LOGITS, TARGETS], present=[nl.SoftmaxCrossEntropy1Hot],
                  absent=[sm.Log], rtol=1e-12)
    np.testing.assert_allclose(symgraph.function([x, y], out)(HUGE, TARGETS),
                               -_lse_nll(HUGE, TARGETS), rtol=1e-12)


def test_other_rows_are_left_alone():
    """Rows picked by something other than ``arange(n)``: not a cross-entropy."""
    x, y, r = T.dmatrix("x"), T.ivector("y"), T.ivector("r")
    cost = -T.log(nnet.softmax(x)[r, y]).mean()
    rows = np.array([4, 0, 0, 2, 1], dtype="int32")
    fg = check_rewrite([x, y, r], cost, [LOGITS, TARGETS, rows],
                       absent=[nl.SoftmaxCrossEntropy1Hot])
    assert has_op(fg, nnet_ops.Softmax)


# -- exp(x) / sum(exp(x)) ----------------------------------------------------------

SPELLINGS = {
    "keepdims": lambda x: T.exp(x) / T.exp(x).sum(axis=1, keepdims=True),
    "keepdims_last": lambda x: T.exp(x) / T.exp(x).sum(axis=-1, keepdims=True),
    "dimshuffle": lambda x: T.exp(x) / T.exp(x).sum(axis=1).dimshuffle(0, "x"),
    "shared_exp": lambda x: (lambda e: e / e.sum(axis=1, keepdims=True))(T.exp(x)),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_exp_over_sum_exp_is_softmax(spelling):
    x = T.dmatrix("x")
    out = SPELLINGS[spelling](x)
    fg = check_rewrite([x], out, [LOGITS], present=[nnet_ops.Softmax], absent=[sm.Exp],
                       rtol=1e-13, atol=1e-15)
    assert [n.op.axis for n in fg.apply_nodes if isinstance(n.op, nnet_ops.Softmax)] == [1]
    got = symgraph.function([x], out)(HUGE)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, scipy.special.softmax(HUGE, axis=1), rtol=1e-12, atol=1e-300)


def test_exp_over_sum_exp_overflows_without_the_rewrite():
    x = T.dmatrix("x")
    with np.errstate(all="ignore"):
        plain = symgraph.function([x], SPELLINGS["keepdims"](x),
                                  mode=symgraph.Mode(optimizer=None))(HUGE)
    assert np.isnan(plain).any()


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_exp_over_sum_exp_other_axes_and_ranks(axis):
    x = T.tensor3("x", dtype="float32")
    out = T.exp(x) / T.exp(x).sum(axis=axis, keepdims=True)
    value = (RNG.standard_normal((2, 3, 4)) * 3).astype("float32")
    fg = check_rewrite([x], out, [value], present=[nnet_ops.Softmax], absent=[sm.Exp],
                       rtol=1e-5, atol=1e-7)
    assert [n.op.axis for n in fg.apply_nodes if isinstance(n.op, nnet_ops.Softmax)] == [axis]
    huge = (value * 1e4).astype("float32")
    got = symgraph.function([x], out)(huge)
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, scipy.special.softmax(huge.astype(float), axis=axis),
                               rtol=1e-5, atol=1e-6)


def test_exp_over_sum_exp_vector():
    v = T.dvector("v")
    out = T.exp(v) / T.exp(v).sum(keepdims=True)
    check_rewrite([v], out, [LOGITS[0]], present=[nnet_ops.Softmax], absent=[sm.Exp], rtol=1e-13)
    np.testing.assert_allclose(symgraph.function([v], out)(HUGE[0]),
                               scipy.special.softmax(HUGE[0]), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("build", [
    lambda x, z: T.exp(x) / T.exp(z).sum(axis=1, keepdims=True),   # another tensor
    lambda x, z: T.exp(x) / T.exp(x).sum(axis=1).dimshuffle("x", 0),  # wrong axis back
    lambda x, z: T.exp(x) / (T.exp(x) * 2).sum(axis=1, keepdims=True),
    lambda x, z: T.exp(x) / T.exp(x).sum(axis=0).sum(keepdims=True),
])
def test_exp_over_other_sums_is_left_alone(build):
    x, z = T.dmatrix("x"), T.dmatrix("z")
    square = RNG.standard_normal((4, 4))
    check_rewrite([x, z], build(x, z), [square, square[::-1].copy()],
                  absent=[nnet_ops.Softmax], rtol=1e-13)
