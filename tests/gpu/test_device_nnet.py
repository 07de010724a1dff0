"""The softmax family on the emulated device: values against NumPy, gradients
against the CPU, target errors as on the CPU."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE



def _softmax(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture
def rng():
    return np.random.default_rng(2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_log_softmax_and_their_gradient(rng, dtype):
    x = T.matrix("x", dtype=dtype)
    outs = [T.nnet.softmax(x), T.nnet.logsoftmax(x), T.grad(T.sum(T.nnet.softmax(x) * x), x)]
    with symgraph.config.change_flags(**DEVICE, warn_float64="ignore"):
        f = symgraph.function([x], outs)
    cpu = symgraph.function([x], outs)
    names = {type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
             if isinstance(n.op, OnDevice)}
    assert {"Softmax", "SoftmaxGrad"} <= names or {"LogSoftmax"} <= names
    a = (rng.standard_normal((7, 300)) * 30).astype(dtype)     # large logits
    got = f(a)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0], _softmax(a.astype("f8")), rtol=tol, atol=tol)
    for g, c in zip(got, cpu(a)):
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol)


def test_the_tutorial_cost_runs_fused_on_the_device(rng):
    x = T.fmatrix("x")
    y = T.ivector("y")
    p = T.nnet.softmax(x)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [cost, T.grad(cost, x)])
    names = {type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
             if isinstance(n.op, OnDevice)}
    assert {"SoftmaxCrossEntropy1Hot", "SoftmaxCrossEntropy1HotGrad"} <= names
    a = (rng.standard_normal((33, 10)) * 1e4).astype("f")      # finite, not NaN
    t = rng.integers(-10, 10, 33).astype("int32")             # negative targets count back
    value, grad = f(a, t)
    idx = np.where(t < 0, t + 10, t)
    logp = a - a.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    np.testing.assert_allclose(value, -logp[np.arange(33), idx].mean(), rtol=1e-5)
    assert np.isfinite(grad).all()
    with pytest.raises(IndexError, match="target index 12 in row 0 is out of range"):
        f(a, np.full(33, 12, "int32"))
    with pytest.raises(ValueError, match="the targets have 2 entries but there are 33 rows"):
        f(a, np.zeros(2, "int32"))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint32"])
def test_targets_are_checked_on_the_device_for_every_row_and_integer_type(rng, dtype):
    # the targets never go to the host: the first bad row is found on the
    # device, and its value read back for the message
    x = T.fmatrix("x")
    y = T.vector("y", dtype=dtype)
    p = T.nnet.softmax(x)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [cost, T.grad(cost, x)])
        cpu = symgraph.function([x, y], [cost, T.grad(cost, x)], mode="FAST_RUN")
    a = rng.standard_normal((300, 7)).astype("f")       # more rows than one block
    low = -7 if dtype.startswith("int") else 0
    t = rng.integers(low, 7, 300).astype(dtype)
    for got, want in zip(f(a, t), cpu(a, t)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    bad = t.copy()
    bad[[260, 290]] = 9
    with pytest.raises(IndexError, match="target index 9 in row 260 is out of range for 7"):
        f(a, bad)
    if dtype.startswith("int"):
        bad[260], bad[290] = 3, -8
        with pytest.raises(IndexError, match="target index -8 in row 290 is out of range"):
            f(a, bad)
    value, _ = f(a, t)                                  # the device stays usable
    np.testing.assert_allclose(value, cpu(a, t)[0], rtol=1e-5)


def test_strided_targets_on_the_device(rng):
    x = T.fmatrix("x")
    y = T.ivector("y")
    p = T.nnet.softmax(x)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0] // 2), y[::2]])
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], cost)
    a = rng.standard_normal((5, 4)).astype("f")
    t = np.array([1, 99, 3, 99, 0, 99, 2, 99, 1, 99], "int32")
    logp = a - np.log(np.exp(a).sum(1, keepdims=True))
    np.testing.assert_allclose(f(a, t), -logp[np.arange(5), t[::2]].mean(), rtol=1e-5)
