"""The fused and stable forms of the losses (``opt/stabilize_nnet.py``): each
rewrite fires, keeps the values of the unoptimized graph where those are
finite, and gives finite values (and gradients) for huge logits."""

import numpy as np
import pytest
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph.ops import nnet as nnet_ops
from symgraph.ops import nnet_loss as nl
from symgraph.ops import scalar_math as sm
from symgraph.tensor import nnet

from opt_helpers import check_rewrite, count_op, has_op

RNG = np.random.default_rng(8)
LOGITS = RNG.standard_normal((5, 4)) * 3
TARGETS = np.array([0, 3, 1, 1, 2], dtype="int32")
HUGE = RNG.standard_normal((5, 4)) * 1000


def _xy():
    return T.dmatrix("x"), T.ivector("y")


def _ref_nll(x, y):
    return scipy.special.logsumexp(x, axis=1) - x[np.arange(len(y)), y]


def _ref_grad_of_mean(x, y):
    onehot = np.eye(x.shape[1])[y]
    return (scipy.special.softmax(x, axis=1) - onehot) / len(y)


FORWARD = {
    "categorical_crossentropy": lambda x, y: nnet.categorical_crossentropy(nnet.softmax(x), y),
    "neg_log_picked_y_rows": lambda x, y: -T.log(nnet.softmax(x))[T.arange(y.shape[0]), y],
    "neg_log_picked_x_rows": lambda x, y: (-T.log(nnet.softmax(x)))[T.arange(x.shape[0]), y],
    "logsoftmax_picked": lambda x, y: -nnet.logsoftmax(x)[T.arange(y.shape[0]), y],
}


@pytest.mark.parametrize("form", sorted(FORWARD))
def test_forward_forms_become_the_fused_op(form):
    x, y = _xy()
    out = T.mean(FORWARD[form](x, y))
    fg = check_rewrite([x, y], out, [LOGITS, TARGETS], present=[nl.SoftmaxCrossEntropy1Hot],
                       absent=[nl.CrossentropyCategorical1Hot, nnet_ops.Softmax,
                               nnet_ops.LogSoftmax], rtol=1e-12)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1
    got = symgraph.function([x, y], out)(HUGE, TARGETS)
    assert np.isfinite(got)
    np.testing.assert_allclose(got, np.mean(_ref_nll(HUGE, TARGETS)), rtol=1e-12)


@pytest.mark.parametrize("form", sorted(FORWARD))
def test_gradient_of_the_fused_forms(form):
    x, y = _xy()
    cost = T.mean(FORWARD[form](x, y))
    g = symgraph.grad(cost, x)
    fg = check_rewrite([x, y], [cost, g], [LOGITS, TARGETS],
                       present=[nl.SoftmaxCrossEntropy1HotGrad],
                       absent=[nnet_ops.SoftmaxGrad, nnet_ops.Softmax,
                               nl.CrossentropyCategorical1HotGrad], rtol=1e-10, atol=1e-14)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1  # the softmax computed once
    got = symgraph.function([x, y], g)(HUGE, TARGETS)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, _ref_grad_of_mean(HUGE, TARGETS), atol=1e-15)


def test_gradient_alone_uses_the_fused_gradient():
    x, y = _xy()
    g = symgraph.grad(T.sum(nnet.categorical_crossentropy(nnet.softmax(x), y)), x)
    check_rewrite([x, y], g, [LOGITS, TARGETS], present=[nl.SoftmaxCrossEntropy1HotGrad],
                  absent=[nnet_ops.SoftmaxGrad, nl.CrossentropyCategorical1HotGrad],
                  rtol=1e-10, atol=1e-14)


def test_unoptimized_form_overflows_where_the_fused_one_does_not():
    x, y = _xy()
    out = nnet.categorical_crossentropy(nnet.softmax(x), y)
    with np.errstate(all="ignore"):
        plain = symgraph.function([x, y], out, mode=symgraph.Mode(optimizer=None))(HUGE, TARGETS)
    assert not np.all(np.isfinite(plain))  # -log(0): the reason for the rewrite
    assert np.all(np.isfinite(symgraph.function([x, y], out)(HUGE, TARGETS)))


def test_softmax_shared_with_other_outputs():
    x, y = _xy()
    probs = nnet.softmax(x)
    cost = T.mean(nnet.categorical_crossentropy(probs, y))
    fg = check_rewrite([x, y], [cost, probs], [LOGITS, TARGETS],
                       present=[nl.SoftmaxCrossEntropy1Hot], absent=[nnet_ops.Softmax],
                       rtol=1e-12)
    assert count_op(fg, nl.SoftmaxCrossEntropy1Hot) == 1


def test_float32_training_step_is_fused_and_finite():
    x, y = T.fmatrix("x"), T.ivector("y")
    w = symgraph.shared(np.zeros((4, 3), dtype="float32"), name="w")
    cost = T.mean(nnet.categorical_crossentropy(nnet.softmax(T.dot(x, w)), y))
    step = symgraph.function([x, y], cost, updates=[(w, w - 0.1 * symgraph.grad(cost, w))])
    assert has_op(step.maker.fgraph, nl.SoftmaxCrossEntropy1HotGrad)
    data = (RNG.standard_normal((20, 4)) * 100).astype("float32")
    labels = RNG.integers(0, 3, 20).astype("int32")
    losses = [float(step(data, labels)) for _ in range(5)]
    assert all(np.isfinite(losses))


# -- where the rewrites must not fire -----------------------------------------------------

NOT_FUSED = {
    "softmax_over_columns": lambda x, y: nnet.categorical_crossentropy(
        nnet.softmax(x, axis=0), y),
    "rows_not_from_zero": lambda x, y: -T.log(nnet.softmax(x))[T.arange(1, x.shape[0] + 1) - 1,
                                                               y],
    "column_index_first": lambda x, y: -T.log(nnet.softmax(x))[y, T.arange(y.shape[0])],
    "probability_targets": lambda x, y: nnet.categorical_crossentropy(
        nnet.softmax(x), T.cast(nnet.to_one_hot(y, 4), "float64")),
}


@pytest.mark.parametrize("form", sorted(NOT_FUSED))
def test_other_forms_are_not_fused(form):
    x, y = _xy()
    targets = TARGETS if form != "column_index_first" else np.array([0, 1, 2, 3], "int32")
    logits = LOGITS if form != "column_index_first" else LOGITS[:4]
    check_rewrite([x, y], NOT_FUSED[form](x, y), [logits, targets],
                  absent=[nl.SoftmaxCrossEntropy1Hot], rtol=1e-12)


def test_probability_targets_are_stable_through_logsoftmax():
    x, t = T.dmatrices("x", "t")
    out = nnet.categorical_crossentropy(nnet.softmax(x), t)
    onehot = np.eye(4)[TARGETS]
    fg = check_rewrite([x, t], out, [LOGITS, onehot], present=[nnet_ops.LogSoftmax],
                       rtol=1e-12)
    assert not has_op(fg, nnet_ops.Softmax)
    got = symgraph.function([x, t], out)(HUGE, onehot)
    np.testing.assert_allclose(got, _ref_nll(HUGE, TARGETS), rtol=1e-12)


def test_rewrite_can_be_excluded_by_name():
    x, y = _xy()
    mode = symgraph.Mode(optimizer="fast_run").excluding("local_softmax_crossentropy_1hot")
    f = symgraph.function([x, y], nnet.categorical_crossentropy(nnet.softmax(x), y), mode=mode)
    assert not has_op(f.maker.fgraph, nl.SoftmaxCrossEntropy1Hot)


# -- binary cross-entropy of a sigmoid ------------------------------------------------------

Z = np.array([-800.0, -40, -2, 0, 0.5, 3, 40, 800])
T_VALUES = np.array([0.0, 1, 0.3, 0.5, 1, 0, 0.2, 0.9])


def test_binary_crossentropy_of_sigmoid_becomes_the_logits_form():
    z, t = T.dvectors("z", "t")
    out = nnet.binary_crossentropy(nnet.sigmoid(z), t)
    moderate = Z.clip(-5, 5)
    check_rewrite([z, t], out, [moderate, T_VALUES], present=[nl.SigmoidBinaryCrossentropy],
                  absent=[nl.BinaryCrossentropy, sm.Sigmoid], rtol=1e-12)
    got = symgraph.function([z, t], out)(Z, T_VALUES)
    ref = T_VALUES * np.logaddexp(0, -Z) + (1 - T_VALUES) * np.logaddexp(0, Z)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_gradient_of_binary_crossentropy_of_sigmoid_is_finite():
    z, t = T.dvectors("z", "t")
    cost = T.sum(nnet.binary_crossentropy(nnet.sigmoid(z), t))
    g = symgraph.grad(cost, z)
    moderate = Z.clip(-5, 5)
    check_rewrite([z, t], g, [moderate, T_VALUES], absent=[sm.Log], rtol=1e-10, atol=1e-15)
    got = symgraph.function([z, t], g)(Z, T_VALUES)
    np.testing.assert_allclose(got, scipy.special.expit(Z) - T_VALUES, rtol=1e-12, atol=1e-300)


def test_binary_crossentropy_of_probabilities_is_left_alone():
    o, t = T.dvectors("o", "t")
    check_rewrite([o, t], nnet.binary_crossentropy(o, t), [np.array([0.2, 0.7]),
                                                          np.array([0.0, 1.0])],
                  present=[nl.BinaryCrossentropy], rtol=1e-12)
