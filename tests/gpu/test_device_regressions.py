"""Defects found by running the CPU test directories on the emulated device:
each test compiles a small function under the device flags and compares it
with the CPU's function (or the CPU's error)."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from tests.gpu.device_flags import DEVICE


def _both(inputs, outputs):
    """The function compiled for the device and for the CPU."""
    with symgraph.config.change_flags(**DEVICE, warn_float64="ignore"):
        dev = symgraph.function(inputs, outputs)
    return dev, symgraph.function(inputs, outputs)


@pytest.mark.parametrize("fn", [T.nnet.softmax, T.nnet.logsoftmax])
def test_softmax_over_every_element_of_a_matrix(fn):
    """axis=None normalizes over the whole matrix, not over each row."""
    x = T.dmatrix("x")
    dev, cpu = _both([x], [fn(x, axis=None), T.grad(T.sum(fn(x, axis=None) * x), x)])
    a = np.random.default_rng(0).normal(size=(3, 4))
    for got, want in zip(dev(a), cpu(a)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    if fn is T.nnet.softmax:
        np.testing.assert_allclose(np.asarray(dev(a)[0]).sum(), 1.0, rtol=1e-12)
