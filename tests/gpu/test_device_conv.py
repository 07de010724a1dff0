"""Convolutions on the emulated device: the forward pass (with the bias and
ReLU epilogue) and both gradients, in 2 and 3 dimensions, against the CPU's
kernels, on odd shapes; errors as on the CPU."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from symgraph.tensor import nnet
from tests.gpu.compare import assert_same, device_and_cpu, device_op_names


TOL = {"float16": 2e-2, "float32": 2e-4, "float64": 1e-10}

CASES_2D = [
    # image shape, filter shape, keyword arguments of conv2d
    ((2, 3, 7, 6), (4, 3, 3, 2), {}),
    ((1, 1, 5, 5), (1, 1, 5, 5), {"border_mode": "full"}),
    ((3, 2, 9, 8), (5, 2, 3, 3), {"border_mode": "half", "subsample": (2, 3)}),
    ((2, 4, 8, 7), (6, 2, 3, 2), {"num_groups": 2, "border_mode": (1, 2)}),
    ((2, 2, 11, 10), (3, 2, 3, 3), {"filter_dilation": (2, 3), "filter_flip": False}),
    ((1, 1, 3, 3), (2, 1, 1, 1), {"subsample": (2, 2)}),
    # the filter gradient's sum longer than a block: each thread's positions
    # step through the batch and both output axes with carries
    ((7, 2, 19, 23), (3, 2, 3, 4), {"subsample": (2, 1), "border_mode": (1, 0)}),
]


@pytest.mark.parametrize("ishape,kshape,kwargs", CASES_2D)
def test_conv2d_and_its_gradients_match_the_cpu(ishape, kshape, kwargs):
    rng = np.random.default_rng(sum(ishape) + sum(kshape))
    x, w = T.tensor4("x"), T.tensor4("w")
    y = nnet.conv2d(x, w, **kwargs)
    cost = (y * y).sum()
    outs = [y] + T.grad(cost, [x, w])
    dev, cpu = device_and_cpu([x, w], outs)
    assert {"DnnConv", "DnnConvGradI", "DnnConvGradW"} <= device_op_names(dev)
    a = rng.standard_normal(ishape).astype("f")
    b = rng.standard_normal(kshape).astype("f")
    assert_same(dev(a, b), cpu(a, b), 2e-4)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_conv2d_dtypes(dtype):
    rng = np.random.default_rng(5)
    x, w = T.tensor4("x", dtype=dtype), T.tensor4("w", dtype=dtype)
    y = nnet.conv2d(x, w, border_mode="half")
    outs = [y] + T.grad(y.sum(), [x, w])
    dev, cpu = device_and_cpu([x, w], outs)
    assert "DnnConv" in device_op_names(dev)
    a = rng.standard_normal((2, 3, 5, 6)).astype(dtype)
    b = (rng.standard_normal((2, 3, 3, 3)) / 3).astype(dtype)
    assert_same(dev(a, b), cpu(a, b), TOL[dtype])


def test_conv3d_and_its_gradients_match_the_cpu():
    rng = np.random.default_rng(3)
    x, w = T.tensor5("x"), T.tensor5("w")
    y = nnet.conv3d(x, w, border_mode=(1, 0, 1), subsample=(1, 2, 1),
                    filter_dilation=(1, 1, 2))
    outs = [y] + T.grad((y ** 2).sum(), [x, w])
    dev, cpu = device_and_cpu([x, w], outs)
    assert {"DnnConv", "DnnConvGradI", "DnnConvGradW"} <= device_op_names(dev)
    a = rng.standard_normal((2, 2, 5, 6, 7)).astype("f")
    b = rng.standard_normal((3, 2, 2, 3, 2)).astype("f")
    assert_same(dev(a, b), cpu(a, b), 2e-4)


def test_bias_relu_epilogue_and_strided_inputs():
    rng = np.random.default_rng(4)
    x, w, b = T.tensor4("x"), T.tensor4("w"), T.vector("b")
    # transposed and sliced operands: the kernels read any strides
    xs = x.dimshuffle(0, 1, 3, 2)[:, :, ::2]
    y = nnet.relu(nnet.conv2d(xs, w[:, :, ::-1]) + b.dimshuffle("x", 0, "x", "x"))
    outs = [y] + T.grad((y * y).sum(), [x, w, b])
    dev, cpu = device_and_cpu([x, w, b], outs)
    conv = [n.op.op for n in dev.maker.fgraph.toposort()
            if isinstance(n.op, OnDevice) and type(n.op.op).__name__ == "DnnConv"]
    assert conv and conv[0].bias and conv[0].activation == "relu"
    args = (rng.standard_normal((3, 2, 9, 12)).astype("f"),
            rng.standard_normal((4, 2, 3, 3)).astype("f"),
            rng.standard_normal(4).astype("f"))
    assert_same(dev(*args), cpu(*args), 2e-4)


def test_empty_batch_and_empty_channels():
    x, w = T.tensor4("x"), T.tensor4("w")
    y = nnet.conv2d(x, w)
    outs = [y] + T.grad(y.sum(), [x, w])
    dev, cpu = device_and_cpu([x, w], outs)
    for a, b in [(np.zeros((0, 2, 4, 4), "f"), np.ones((3, 2, 2, 2), "f")),
                 (np.ones((2, 0, 4, 4), "f"), np.ones((3, 0, 2, 2), "f"))]:
        assert_same(dev(a, b), cpu(a, b), 2e-4)


def test_shape_errors_are_the_cpus():
    x, w = T.tensor4("x"), T.tensor4("w")
    dev, cpu = device_and_cpu([x, w], nnet.conv2d(x, w))
    a, b = np.ones((1, 3, 4, 4), "f"), np.ones((2, 2, 3, 3), "f")
    for f in (dev, cpu):
        with pytest.raises(ValueError, match="channels but the filters expect 2"):
            f(a, b)
    with pytest.raises(ValueError, match="larger than the padded image"):
        dev(np.ones((1, 2, 2, 2), "f"), b)
