"""Reductions on the emulated device: any axes, fused with their element-wise
input, every kind, NaN and empty inputs, against NumPy."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE



def _device_ops(f):
    return [str(n.op) for n in f.maker.fgraph.toposort() if isinstance(n.op, OnDevice)]


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_every_kind_over_any_axes(rng):
    x = T.fmatrix("x")
    y = T.ftensor3("y")
    outs = [x.max(axis=0), x.sum(axis=1), y.sum(axis=(0, 2)), T.prod(x, axis=0),
            (x > 0.5).all(axis=1), (x > 0.9).any(axis=0), y.min(), x.sum()]
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], outs)
    assert len(_device_ops(f)) == len(outs) and f.native.python_nodes == []
    a = rng.random((37, 5)).astype("f")
    b = rng.random((3, 4, 5)).astype("f")
    ref = [a.max(0), a.sum(1), b.sum((0, 2)), a.prod(0), (a > 0.5).all(1), (a > 0.9).any(0),
           b.min(), a.sum()]
    for got, want in zip(f(a, b), ref):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=2e-6)


def test_reduction_fused_with_its_elementwise_input(rng):
    x = T.fmatrix("x")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x], [T.sum(T.exp(x) * 2, axis=1), T.max(abs(x - 1))])
    assert any("ReduceOfElemwise" in op for op in _device_ops(f))
    a = rng.standard_normal((129, 7)).astype("f")
    got = f(a)
    np.testing.assert_allclose(got[0], (np.exp(a) * 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.abs(a - 1).max(), rtol=1e-6)


def test_max_propagates_nan_and_refuses_an_empty_input():
    x = T.fmatrix("x")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x], x.max(axis=1))
        s = symgraph.function([x], x.sum(axis=1))
    a = np.array([[1, np.nan, 3], [4, 5, 6]], "f")
    np.testing.assert_array_equal(f(a), [np.nan, 6])
    np.testing.assert_array_equal(s(np.zeros((2, 0), "f")), [0, 0])
    with pytest.raises(ValueError, match="no identity value"):
        f(np.zeros((2, 0), "f"))


def test_integer_sums_accumulate_as_numpy(rng):
    x = T.imatrix("x")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x], [x.sum(axis=0), x.max(axis=1), x.min()])
    a = rng.integers(-1000, 1000, (300, 3)).astype("int32")
    for got, want in zip(f(a), [a.sum(0), a.max(1), a.min()]):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_a_large_reduction_spans_many_blocks_and_threads(rng):
    x = T.fvector("x")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x], T.sum(x * x))
    a = rng.random(100003).astype("f")
    np.testing.assert_allclose(f(a), (a.astype("f8") ** 2).sum(), rtol=1e-5)


def test_argmax_and_argmin_match_the_cpu_ties_and_nan_included(rng):
    x = T.fmatrix("x")
    y = T.ftensor3("y")
    outs = [T.argmax(x, axis=1), T.argmin(x, axis=0), T.argmax(y, axis=(2, 0)), T.argmax(x)]
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], outs)
    cpu = symgraph.function([x, y], outs)
    assert sum("Arg" in op for op in _device_ops(f)) == 4
    a = rng.random((37, 300)).astype("f")
    a[3, 5] = np.nan            # a NaN wins
    a[4, :] = 1.0               # ties: the first
    b = rng.random((3, 4, 5)).astype("f")
    for got, want in zip(f(a, b), cpu(a, b)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.int64
    with pytest.raises(ValueError, match="empty array is undefined"):
        f(np.zeros((2, 0), "f"), b)
