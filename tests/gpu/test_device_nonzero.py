"""``Nonzero`` (``nonzero``, ``flatnonzero``, ``nonzero_values``) on the
emulated device: NumPy's indices exactly, in C order, for odd shapes (empty,
one element, less than a block, not a multiple of it, more than one launch
covers at once), strided and broadcast inputs, float, int and bool dtypes;
and no Nonzero left on the CPU."""

import numpy as np
import pytest

import symgraph.gpu
import symgraph.tensor as T
from symgraph.ops.advanced_subtensor import flatnonzero, nonzero, nonzero_values
from tests.gpu.compare import device_and_cpu, device_op_names


def _exactly(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


def _compiled(x, outs, inputs=None):
    dev, cpu = device_and_cpu(inputs or [x], outs)
    assert "Nonzero" in device_op_names(dev)
    report = symgraph.gpu.placement_report(dev)
    assert not [n for n, _ in report.cpu_nodes if type(n.op).__name__ == "Nonzero"], str(report)
    return dev, cpu


def _sparse(rng, shape, dtype, density=0.3):
    a = rng.standard_normal(shape) * 5
    a[rng.random(shape) > density] = 0
    return a.astype(dtype)


SHAPES = [
    (0, 4),               # empty
    (3, 0, 2),            # empty in the middle
    (1,),                 # one element
    (1, 1, 1),
    (5, 7),               # less than a block
    (3, 257),             # not a multiple of the block
    (4, 300, 260),        # more than 1024 blocks of 256: several tiles per block
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_odd_shapes(shape):
    rng = np.random.default_rng(len(shape) + sum(shape))
    x = T.TensorType("float32", shape=(None,) * len(shape))("x")
    dev, cpu = _compiled(x, list(nonzero(x)) + [flatnonzero(x), nonzero_values(x)])
    for a in (_sparse(rng, shape, "float32"), np.zeros(shape, "f"), np.ones(shape, "f")):
        got, want = dev(a), cpu(a)
        _exactly(got, want)
        _exactly(got[:len(shape)], np.nonzero(a))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64",
                                   "uint16", "bool"])
def test_dtypes(dtype):
    rng = np.random.default_rng(4)
    x = T.tensor3("x", dtype=dtype)
    dev, cpu = _compiled(x, list(nonzero(x)) + [nonzero(x, return_matrix=True)])
    a = _sparse(rng, (3, 40, 50), dtype, density=0.5)
    if dtype.startswith("float"):
        a[0, 0, :4] = [np.nan, -0.0, np.inf, -np.inf]        # NaN counts, -0.0 does not
        a[1, 2, 3] = np.finfo(dtype).tiny                      # the smallest normal
    got, want = dev(a), cpu(a)
    _exactly(got, want)
    _exactly(got[:3], np.nonzero(a))


def test_strided_and_broadcast_inputs():
    rng = np.random.default_rng(9)
    x = T.tensor3("x", dtype="float32")
    v = T.vector("v", dtype="float32")
    views = [x[::2, :, ::-3], x.dimshuffle(2, 0, 1), v.dimshuffle("x", 0, "x")]
    outs = [o for view in views for o in nonzero(view)]
    outs.append(nonzero(T.alloc(v, 3, v.shape[0]))[1])       # a stride-0 dimension
    dev, cpu = _compiled(x, outs, inputs=[x, v])
    a = _sparse(rng, (5, 6, 700), "float32")
    b = _sparse(rng, (9,), "float32", density=0.6)
    _exactly(dev(a, b), cpu(a, b))


def test_one_function_many_counts():
    """The outputs' size is read each call: the same function on inputs with
    more, fewer and no non-zero elements."""
    rng = np.random.default_rng(11)
    x = T.matrix("x", dtype="int32")
    dev, cpu = _compiled(x, list(nonzero(x)))
    for density in (0.9, 0.01, 0.0, 0.5):
        a = _sparse(rng, (33, 31), "int32", density)
        _exactly(dev(a), cpu(a))
