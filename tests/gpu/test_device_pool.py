"""Pooling on the emulated device: every mode, 2-D and 3-D, overlapping
windows, padding and partial windows, and each gradient op, against the CPU's
kernels; NaN and errors as on the CPU."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.pool import Pool
from symgraph.ops.pool_argmax import (MaxPoolArgmaxGather, MaxPoolGradFromArgmax,
                                      MaxPoolWithArgmax)
from symgraph.ops.pool_grad import AveragePoolGrad, DownsampleFactorMaxGradGrad, MaxPoolGrad
from tests.gpu.compare import assert_same, device_and_cpu, device_op_names


GEOMETRIES = [
    # ws, stride, pad, ignore_border
    ((2, 2), None, (0, 0), True),
    ((3, 2), (1, 2), (0, 0), False),     # overlapping rows, partial windows kept
    ((3, 3), (2, 2), (1, 2), True),      # padding
    ((2, 3), (3, 1), (0, 0), False),     # stride larger than the window
]


@pytest.mark.parametrize("ws,stride,pad,ignore_border", GEOMETRIES)
@pytest.mark.parametrize("mode", ["max", "sum", "average_inc_pad", "average_exc_pad"])
def test_pool_2d_and_its_gradient(ws, stride, pad, ignore_border, mode):
    rng = np.random.default_rng(len(mode) + ws[0])
    x = T.tensor4("x")
    op = Pool(ndim=2, ignore_border=ignore_border, mode=mode, ws=ws, stride=stride, pad=pad)
    y = op(x)
    outs = [y, T.grad((y * y).sum(), x)]
    dev, cpu = device_and_cpu([x], outs)
    assert "Pool" in device_op_names(dev) or "MaxPoolWithArgmax" in device_op_names(dev)
    a = rng.standard_normal((2, 3, 7, 9)).astype("f")
    assert_same(dev(a), cpu(a), 1e-5)


def test_pool_3d_with_batch_dims_and_strided_input():
    rng = np.random.default_rng(1)
    x = T.TensorType("float32", shape=(None,) * 6)("x")
    xs = x[:, ::2].dimshuffle(1, 0, 2, 3, 5, 4)
    for mode in ("max", "average_exc_pad"):
        op = Pool(ndim=3, ignore_border=False, mode=mode, ws=(2, 2, 3), stride=(1, 2, 2))
        y = op(xs)
        dev, cpu = device_and_cpu([x], [y, T.grad(y.sum(), x)])
        a = rng.standard_normal((2, 5, 3, 4, 5, 6)).astype("f")
        assert_same(dev(a), cpu(a), 1e-5)


def test_each_gradient_op_on_the_device():
    rng = np.random.default_rng(2)
    params = dict(ndim=2, ignore_border=True, ws=(3, 2), stride=(2, 1), pad=(1, 0))
    x, gz, ggx = T.tensor4("x"), T.tensor4("gz"), T.tensor4("ggx")
    maxout, argmax = MaxPoolWithArgmax(mode="max", **params)(x)
    outs = [maxout, argmax,
            MaxPoolGrad(mode="max", **params)(x, maxout, gz),
            MaxPoolGradFromArgmax(mode="max", **params)(x, gz, argmax),
            DownsampleFactorMaxGradGrad(mode="max", **params)(x, maxout, ggx),
            MaxPoolArgmaxGather(mode="max", **params)(x, ggx, argmax),
            AveragePoolGrad(mode="average_inc_pad", **params)(x, gz)]
    dev, cpu = device_and_cpu([x, gz, ggx], outs)
    assert {"MaxPoolWithArgmax", "MaxPoolGradFromArgmax", "MaxPoolArgmaxGather",
            "AveragePoolGrad"} <= device_op_names(dev)
    a = rng.standard_normal((2, 2, 8, 5)).astype("f")
    a[0, 0, :2, :2] = 1.5                                   # ties: the first one wins
    a[1, 1, 3, 3] = np.nan                                  # NaN is the maximum
    pooled = (2, 2, 4, 4)
    g = rng.standard_normal(pooled).astype("f")
    gg = rng.standard_normal(a.shape).astype("f")
    got, want = dev(a, g, gg), cpu(a, g, gg)
    assert np.isnan(got[0]).any()
    assert_same(got, want, 1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
def test_pool_dtypes(dtype):
    x = T.tensor4("x", dtype=dtype)
    op = Pool(ndim=2, ignore_border=False, mode="max" if dtype == "int32" else "average_exc_pad",
              ws=(2, 2))
    dev, cpu = device_and_cpu([x], [op(x)])
    a = (np.random.default_rng(3).standard_normal((1, 2, 5, 5)) * 10).astype(dtype)
    assert_same(dev(a), cpu(a), 1e-3 if dtype == "float16" else 1e-12)


def test_empty_inputs_and_shape_errors():
    x, gz = T.tensor4("x"), T.tensor4("gz")
    params = dict(ndim=2, ignore_border=True, ws=(2, 2))
    dev, cpu = device_and_cpu([x, gz], [AveragePoolGrad(mode="sum", **params)(x, gz)])
    empty = (np.zeros((0, 1, 4, 4), "f"), np.zeros((0, 1, 2, 2), "f"))
    assert_same(dev(*empty), cpu(*empty), 1e-6)
    with pytest.raises(ValueError, match=r"the output gradient has shape \(1, 1, 3, 2\) but "
                                         r"pooling an input of shape \(1, 1, 4, 4\) gives"):
        dev(np.zeros((1, 1, 4, 4), "f"), np.zeros((1, 1, 3, 2), "f"))
