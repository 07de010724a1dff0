"""Activations, cross-entropies, the fused softmax cross-entropy, one-hot and dropout.

Values against NumPy/SciPy references (huge logits stay finite), gradients with
verify_grad, infer_shape, the C kernels against the Python ``perform`` (through
``kernel_harness``: dtypes, index dtypes, strided and reversed layouts, negative
and out-of-range targets) and the errors.
"""

import functools

import numpy as np
import pytest
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph.ops import nnet_loss as nl
from symgraph.tensor import nnet
from symgraph.tensor.random import RandomStream
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.ops.op_checks import check_shapes, run, verify_grad

RNG = np.random.default_rng(4)
RTOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


def ref_nll(x, y):
    """-log(softmax(x))[arange, y] through SciPy's logsumexp, in float64."""
    x = x.astype("float64")
    return scipy.special.logsumexp(x, axis=1) - x[np.arange(len(y)), y]


# -- activations ---------------------------------------------------------------------

ACTIVATIONS = [
    (nnet.elu, lambda v: np.where(v > 0, v, np.expm1(v))),
    (lambda x: nnet.elu(x, 0.5), lambda v: np.where(v > 0, v, 0.5 * np.expm1(v))),
    (nnet.selu, lambda v: nnet.SELU_SCALE * np.where(v > 0, v, nnet.SELU_ALPHA * np.expm1(v))),
    (nnet.softsign, lambda v: v / (1 + np.abs(v))),
    (lambda x: nnet.relu(x, 0.1), lambda v: np.where(v > 0, v, 0.1 * v)),
]


@pytest.mark.parametrize("fn, ref", ACTIVATIONS, ids=["elu", "elu_alpha", "selu", "softsign",
                                                      "leaky_relu"])
def test_activation_values_and_gradient(fn, ref):
    x = T.dmatrix("x")
    value = RNG.standard_normal((3, 4)) * 3
    np.testing.assert_allclose(run([x], fn(x), value), ref(value), rtol=1e-12)
    verify_grad(fn, [value + np.sign(value) * 0.05])  # away from the kink at 0


def test_activations_keep_float32():
    x = T.fvector("x")
    for fn in (nnet.elu, nnet.selu, nnet.softsign):
        assert fn(x).dtype == "float32"


# -- categorical cross-entropy ---------------------------------------------------------

def test_categorical_crossentropy_integer_targets():
    p, y = T.dmatrix("p"), T.ivector("y")
    probs = scipy.special.softmax(RNG.standard_normal((5, 4)), axis=1)
    targets = np.array([0, 3, 1, 1, 2], dtype="int32")
    out = nnet.categorical_crossentropy(p, y)
    assert isinstance(out.owner.op, nl.CrossentropyCategorical1Hot)
    np.testing.assert_allclose(run([p, y], out, probs, targets),
                               -np.log(probs[np.arange(5), targets]), rtol=1e-12)
    check_shapes([out], [p, y], [probs, targets])


def test_categorical_crossentropy_probability_targets():
    p, t = T.dmatrices("p", "t")
    probs = scipy.special.softmax(RNG.standard_normal((3, 4)), axis=1)
    target = scipy.special.softmax(RNG.standard_normal((3, 4)), axis=1)
    got = run([p, t], nnet.categorical_crossentropy(p, t), probs, target)
    np.testing.assert_allclose(got, -np.sum(target * np.log(probs), axis=1), rtol=1e-12)


def test_categorical_crossentropy_gradients():
    targets = np.array([2, 0, 1], dtype="int64")
    probs = scipy.special.softmax(RNG.standard_normal((3, 4)), axis=1)
    verify_grad(lambda p: nl.crossentropy_categorical_1hot(p, targets), [probs])
    # the gradient op's own gradient (second derivatives)
    g = RNG.standard_normal(3) + 2
    verify_grad(lambda g_, p: nl.CrossentropyCategorical1HotGrad()(g_, p, targets), [g, probs])


def test_categorical_crossentropy_bad_targets():
    p = T.dmatrix("p")
    with pytest.raises(TypeError, match="categorical_crossentropy"):
        nnet.categorical_crossentropy(p, T.dtensor3("t"))
    with pytest.raises(TypeError, match="CrossentropyCategorical1Hot.*integer vector"):
        nl.crossentropy_categorical_1hot(p, T.dvector("t"))


# -- the fused op ------------------------------------------------------------------------

def test_fused_values_finite_for_huge_logits():
    x, y = T.dmatrix("x"), T.lvector("y")
    nll, sm = nnet.crossentropy_softmax_1hot(x, y)
    logits = RNG.standard_normal((4, 6)) * 1000
    targets = np.array([0, 5, 2, -1])
    got_nll, got_sm = run([x, y], [nll, sm], logits, targets)
    assert np.all(np.isfinite(got_nll))
    np.testing.assert_allclose(got_nll, ref_nll(logits, targets), rtol=1e-12)
    np.testing.assert_allclose(got_sm, scipy.special.softmax(logits, axis=1), atol=1e-300)
    check_shapes([nll, sm], [x, y], [logits, targets])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_fused_low_precision(dtype):
    x, y = T.tensor(dtype, shape=(None, None)), T.ivector("y")
    nll, sm = nnet.crossentropy_softmax_1hot(x, y)
    assert nll.dtype == sm.dtype == dtype
    logits = (RNG.standard_normal((3, 5)) * 3).astype(dtype)
    targets = np.array([4, 0, 2], dtype="int32")
    got = run([x, y], nll, logits, targets)
    np.testing.assert_allclose(got, ref_nll(logits, targets), rtol=RTOL[dtype] * 5,
                               atol=RTOL[dtype])


def test_fused_gradients():
    targets = np.array([1, 0, 3])
    logits = RNG.standard_normal((3, 4))
    verify_grad(lambda x: nl.SoftmaxCrossEntropy1Hot()(x, targets)[0], [logits])
    verify_grad(lambda x: nl.SoftmaxCrossEntropy1Hot()(x, targets)[1], [logits])
    verify_grad(lambda x: (lambda nll, sm: nll.dimshuffle(0, "x") * sm)(
        *nl.SoftmaxCrossEntropy1Hot()(x, targets)), [logits])
    sm = scipy.special.softmax(logits, axis=1)
    verify_grad(lambda d, s: nl.SoftmaxCrossEntropy1HotGrad()(d, s, targets),
                [RNG.standard_normal(3), sm])


def test_fused_gradient_is_finite_for_huge_logits():
    x, y = T.dmatrix("x"), T.lvector("y")
    cost = T.mean(nnet.crossentropy_softmax_1hot(x, y)[0])
    g = run([x, y], symgraph.grad(cost, x), RNG.standard_normal((3, 4)) * 1e4,
            np.array([0, 1, 2]))
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g.sum(axis=1), 0, atol=1e-12)


def test_fused_broadcast_gradient_input():
    d = T.tensor("float64", shape=(1,))
    s, y = T.dmatrix("s"), T.lvector("y")
    out = nl.SoftmaxCrossEntropy1HotGrad()(d, s, y)
    sm = scipy.special.softmax(RNG.standard_normal((3, 4)), axis=1)
    onehot = np.eye(4)[[0, 2, 3]]
    got = run([d, s, y], out, np.array([2.0]), sm, np.array([0, 2, 3]))
    np.testing.assert_allclose(got, 2.0 * (sm - onehot), rtol=1e-12)


def test_fused_errors():
    x, y = T.dmatrix("x"), T.lvector("y")
    f = symgraph.function([x, y], nnet.crossentropy_softmax_1hot(x, y)[0])
    with pytest.raises(IndexError, match=r"SoftmaxCrossEntropy1Hot: target index 4 in row 1"):
        f(np.zeros((2, 4)), np.array([0, 4]))
    with pytest.raises(IndexError, match=r"target index -5 in row 0"):
        f(np.zeros((2, 4)), np.array([-5, 0]))
    with pytest.raises(ValueError, match="SoftmaxCrossEntropy1Hot: the targets have 3 entries"):
        f(np.zeros((2, 4)), np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="SoftmaxCrossEntropy1Hot.*matrix"):
        nl.SoftmaxCrossEntropy1Hot()(T.dvector(), y)
    with pytest.raises(TypeError, match="SoftmaxCrossEntropy1Hot.*integer vector"):
        nl.SoftmaxCrossEntropy1Hot()(x, T.dvector())


def test_fused_in_debug_mode():
    x, y = T.fmatrix("x"), T.ivector("y")
    cost = T.mean(nnet.crossentropy_softmax_1hot(x, y)[0])
    f = symgraph.function([x, y], [cost, symgraph.grad(cost, x)], mode="DebugMode")
    f((RNG.standard_normal((5, 7)) * 50).astype("float32"), np.arange(5, dtype="int32"))


# -- C kernels against perform ---------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _node(kind, dtype, index_dtype):
    mat, vec = T.tensor(dtype, shape=(None, None)), T.tensor(dtype, shape=(None,))
    y = T.tensor(index_dtype, shape=(None,))
    if kind == "fused":
        return nl.SoftmaxCrossEntropy1Hot()(mat, y)[0].owner
    if kind == "fused_grad":
        return nl.SoftmaxCrossEntropy1HotGrad()(vec, mat, y).owner
    if kind == "categorical":
        return nl.CrossentropyCategorical1Hot()(mat, y).owner
    return nl.CrossentropyCategorical1HotGrad()(vec, mat, y).owner


def _layouts(values):
    yield values
    yield values[::-1, ::-1].copy()[::-1, ::-1]       # negative strides
    big = np.repeat(np.repeat(values, 2, axis=0), 2, axis=1)
    yield big[::2, ::2]                              # every other element
    yield np.asfortranarray(values)


def _inputs(kind, mat, targets, dtype):
    if kind in ("fused", "categorical"):
        return [mat, targets]
    return [RNG.standard_normal(len(targets)).astype(dtype), mat, targets]


KINDS = ["fused", "fused_grad", "categorical", "categorical_grad"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_kernel_matches_perform(kind, dtype):
    index_dtype = {"float16": "int16", "float32": "int32", "float64": "uint16"}[dtype]
    node = _node(kind, dtype, index_dtype)
    rows, cols = 6, 300  # longer than one exp block
    values = (RNG.standard_normal((rows, cols)) * 5).astype(dtype)
    if kind.startswith("categorical") or kind == "fused_grad":
        values = scipy.special.softmax(values.astype("float64"), axis=1).astype(dtype) + \
            np.asarray(1e-3, dtype)
    signed = index_dtype != "uint16"
    targets = np.array([0, cols - 1, 7, -1 if signed else 3, 150, -cols if signed else 9],
                       dtype=index_dtype)
    for mat in _layouts(values):
        inputs = _inputs(kind, mat, targets, dtype)
        got, want = run_kernel(node, inputs), run_python(node, inputs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g.astype("float64"), w.astype("float64"),
                                       rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_kernel_errors_match_perform(kind):
    node = _node(kind, "float64", "int64")
    mat = np.full((3, 4), 0.25)
    bad = _inputs(kind, mat, np.array([0, 1, 4]), "float64")
    with pytest.raises(KernelError, match=r"target index 4 in row 2 is out of range for 4"):
        run_kernel(node, bad)
    with pytest.raises(IndexError, match=r"target index 4 in row 2 is out of range for 4"):
        run_python(node, bad)
    short = _inputs(kind, mat, np.array([0, 1]), "float64")
    with pytest.raises(KernelError, match="the targets have 2 entries but there are 3 rows"):
        run_kernel(node, short)
    with pytest.raises(ValueError, match="the targets have 2 entries but there are 3 rows"):
        run_python(node, short)


def test_kernel_huge_logits_and_empty_batch():
    node = _node("fused", "float32", "int64")
    logits = np.array([[1000, -1000, 0], [-1e30, 0, 1e30]], dtype="float32")
    (got,) = run_kernel(node, [logits, np.array([1, 0])])[:1]
    assert np.all(np.isfinite(got)) and got[0] == pytest.approx(2000)
    empty = run_kernel(node, [np.zeros((0, 3), "float32"), np.zeros(0, "int64")])
    assert empty[0].shape == (0,) and empty[1].shape == (0, 3)


# -- binary cross-entropies ------------------------------------------------------------------

def test_binary_crossentropy_values_and_gradients():
    o, t = T.dvectors("o", "t")
    probs, target = RNG.uniform(0.05, 0.95, 6), RNG.uniform(0, 1, 6)
    got = run([o, t], nnet.binary_crossentropy(o, t), probs, target)
    np.testing.assert_allclose(got, -(target * np.log(probs) + (1 - target) * np.log(1 - probs)),
                               rtol=1e-12)
    verify_grad(nnet.binary_crossentropy, [probs, target])


def test_sigmoid_binary_crossentropy_values_and_gradients():
    z, t = T.dvectors("z", "t")
    logits = np.array([-800.0, -30, -1, 0, 0.5, 40, 800])
    target = RNG.uniform(0, 1, 7)
    got = run([z, t], nnet.sigmoid_binary_crossentropy(z, t), logits, target)
    ref = target * np.logaddexp(0, -logits) + (1 - target) * np.logaddexp(0, logits)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    verify_grad(nnet.sigmoid_binary_crossentropy, [RNG.standard_normal(5) * 3,
                                                   RNG.uniform(0, 1, 5)])


def test_binary_crossentropies_fuse_and_run_in_c():
    z, t = T.fmatrices("z", "t")
    out = nnet.sigmoid_binary_crossentropy(z, t) * 2 + nnet.binary_crossentropy(
        T.clip(z, 0.1, 0.9), t)
    f = symgraph.function([z, t], out, mode="DebugMode")
    values = [RNG.standard_normal((3, 4)).astype("float32"),
              RNG.uniform(0, 1, (3, 4)).astype("float32")]
    assert f(*values).dtype == "float32"


# -- one-hot -------------------------------------------------------------------------------

def test_to_one_hot():
    y = T.ivector("y")
    got = run([y], nnet.to_one_hot(y, 4), np.array([0, 3, -1, 2], dtype="int32"))
    np.testing.assert_array_equal(got, np.eye(4)[[0, 3, 3, 2]])
    assert got.dtype == symgraph.config.floatX
    assert nnet.one_hot(y, 3, dtype="int8").dtype == "int8"
    with pytest.raises(IndexError):
        run([y], nnet.to_one_hot(y, 4), np.array([4], dtype="int32"))
    with pytest.raises(TypeError, match="to_one_hot"):
        nnet.to_one_hot(T.dvector(), 3)


# -- dropout ----------------------------------------------------------------------------------

def test_dropout_mask_rescale_and_seed():
    x = T.dmatrix("x")
    ones = np.ones((40, 50))
    f = symgraph.function([x], nnet.dropout(x, 0.25, rng=RandomStream(3)))
    first, second = f(ones), f(ones)
    assert set(np.unique(first)) <= {0.0, 1 / 0.75}
    assert 0.15 < np.mean(first == 0) < 0.35
    assert not np.array_equal(first, second)  # a new mask per call
    again = symgraph.function([x], nnet.dropout(x, 0.25, rng=3))
    np.testing.assert_array_equal(again(ones), first)  # same seed, same masks
    plain = symgraph.function([x], nnet.dropout(x, 0.25, rng=3, rescale=False))(ones)
    np.testing.assert_array_equal(plain, first * 0.75)


def test_dropout_gradient_is_the_mask():
    x = T.dmatrix("x")
    out = nnet.dropout(x, 0.5, rng=7)
    f = symgraph.function([x], [out, symgraph.grad(T.sum(out), x)])
    value = RNG.uniform(1, 2, (6, 7))
    dropped, g = f(value)
    np.testing.assert_allclose(g, np.where(dropped != 0, 2.0, 0.0))


def test_dropout_symbolic_probability_and_errors():
    x, p = T.dvector("x"), T.dscalar("p")
    f = symgraph.function([x, p], nnet.dropout(x, p, rng=1))
    np.testing.assert_array_equal(f(np.ones(20), 0.0), np.ones(20))
    with pytest.raises(ValueError, match="dropout"):
        nnet.dropout(x, 1.0)
    with pytest.raises(TypeError, match="dropout"):
        nnet.dropout(T.ivector(), 0.5)
    with pytest.raises(TypeError, match="RandomStream"):
        nnet.dropout(x, 0.5, rng="seed")
