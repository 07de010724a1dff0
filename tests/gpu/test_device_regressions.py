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


def _error(fn, *args):
    """The ValueError message of ``fn(*args)``."""
    with pytest.raises(ValueError) as info:
        fn(*args)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("xs, ys", [((2, 3), (4, 5)), ((2, 3), (4,)), ((3,), (4, 5))])
def test_dot_shape_error_names_the_shapes(xs, ys):
    """The device's Dot fails with the CPU's message, both shapes in it."""
    x = T.tensor("float64", shape=(None,) * len(xs))
    y = T.tensor("float64", shape=(None,) * len(ys))
    dev, cpu = _both([x, y], T.dot(x, y))
    a, b = np.ones(xs), np.ones(ys)
    assert _error(dev, a, b) == _error(cpu, a, b)


@pytest.mark.parametrize("xs, ys", [((2, 3, 4), (3, 4, 5)), ((1, 3, 4), (2, 4, 5)),
                                    ((2, 3, 4), (2, 3, 5))])
def test_batched_dot_errors_as_on_the_cpu(xs, ys):
    """A batch of one broadcasts only where the type declares it; the
    messages name both shapes, as the CPU's."""
    x, y = T.dtensor3("x"), T.dtensor3("y")
    dev, cpu = _both([x, y], T.batched_dot(x, y))
    a, b = np.ones(xs), np.ones(ys)
    assert _error(dev, a, b) == _error(cpu, a, b)


def test_batched_dot_declared_broadcast_batch():
    """A batch dimension declared broadcastable still broadcasts."""
    x, y = T.tensor("float64", shape=(1, None, None)), T.dtensor3("y")
    dev, cpu = _both([x, y], T.batched_dot(x, y))
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(1, 3, 4)), rng.normal(size=(2, 4, 5))
    np.testing.assert_allclose(np.asarray(dev(a, b)), cpu(a, b), rtol=1e-12)


@pytest.mark.parametrize("value, sizes", [(np.ones(1), (2, 3)), (np.ones(2), (2, 3)),
                                          (np.ones(3), (-1, 3))])
def test_alloc_broadcasts_only_declared_dimensions(value, sizes):
    """A size-1 dimension that the type does not declare broadcastable is an
    error, as on the CPU; the messages give the shapes."""
    v, n = T.dvector("v"), T.lscalar("n")
    dev, cpu = _both([v, n], T.alloc(v, n, sizes[1]))
    want = _error(cpu, value, sizes[0]).replace("v of shape", "the value of shape")
    assert _error(dev, value, sizes[0]) == want


def test_alloc_of_a_declared_broadcastable_value():
    v = T.dvector("v")
    dev, cpu = _both([v], [T.alloc(T.shape_padleft(v), 4, 3), T.alloc(v[:1], 2, 1)])
    a = np.arange(3.0)
    for got, want in zip(dev(a), cpu(a)):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_gemm_gemv_ger_shape_errors_as_on_the_cpu():
    """The device's BLAS updates check shapes in the CPU's order, with its
    messages (which operand, which dimension, both shapes)."""
    from symgraph.ops.gemm import gemm, gemv, ger

    z, x, y, a, b = T.dmatrix(), T.dmatrix(), T.dmatrix(), T.dscalar(), T.dscalar()
    u, v = T.dvector(), T.dvector()
    cases = [([z, a, x, y, b], gemm(z, a, x, y, b),
              [((2, 4), (2, 3), (4, 3)), ((4, 2), (2, 3), (3, 4)), ((2, 5), (2, 3), (3, 4))]),
             ([u, a, x, v, b], gemv(u, a, x, v, b), [((2,), (2, 3), (4,)), ((3,), (2, 3), (3,))]),
             ([z, a, u, v], ger(z, a, u, v), [((2, 3), (3,), (3,)), ((2, 3), (2,), (4,))])]
    for inputs, out, shapes in cases:
        dev, cpu = _both(inputs, out)
        for s0, s1, s2 in shapes:
            args = [np.ones(s0), 2.0, np.ones(s1), np.ones(s2)] + [0.5] * (len(inputs) == 5)
            assert _error(dev, *args) == _error(cpu, *args)
