"""Batch normalization on the device: training (with running averages), its
gradient and inference, per-activation, spatial and odd axes, against the
CPU's kernels; parameter shape errors as on the CPU."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.tensor.nnet.bn import batch_normalization_test, batch_normalization_train
from tests.gpu.compare import assert_same, device_and_cpu, device_op_names


@pytest.mark.parametrize("axes,shape", [("per-activation", (7, 3, 2)),
                                        ("spatial", (4, 3, 5, 6)),
                                        ((0, 2), (5, 2, 3, 1))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_train_running_averages_and_gradient(axes, shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = T.TensorType(dtype, shape=(None,) * len(shape))("x")
    if axes == "per-activation":
        pshape = (1,) + shape[1:]
    elif axes == "spatial":
        pshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    else:
        pshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    ptype = T.TensorType(dtype, shape=tuple(1 if s == 1 else None for s in pshape))
    gamma, beta, rm, rv = (ptype(n) for n in ("gamma", "beta", "rm", "rv"))
    out, mean, invstd, new_rm, new_rv = batch_normalization_train(
        x, gamma, beta, axes=axes, running_mean=rm, running_var=rv, running_average_factor=0.3)
    cost = (out * out * np.arange(shape[-1], dtype=dtype)).sum()
    outs = [out, mean, invstd, new_rm, new_rv] + T.grad(cost, [x, gamma, beta])
    dev, cpu = device_and_cpu([x, gamma, beta, rm, rv], outs)
    assert {"AbstractBatchNormTrain", "AbstractBatchNormTrainGrad"} <= device_op_names(dev)
    args = [(rng.standard_normal(shape) * 3 + 10).astype(dtype)] + \
        [rng.random(pshape).astype(dtype) + 0.5 for _ in range(4)]
    assert_same(dev(*args), cpu(*args), 2e-4 if dtype == "float32" else 1e-10)


def test_inference_float16_and_strided_input():
    rng = np.random.default_rng(1)
    x = T.tensor4("x", dtype="float16")
    params = [T.TensorType("float16", shape=(1, None, 1, 1))(n) for n in "gbmv"]
    y = batch_normalization_test(x.dimshuffle(0, 3, 2, 1), *params, axes="spatial")
    dev, cpu = device_and_cpu([x] + params, y)
    assert "AbstractBatchNormInference" in device_op_names(dev)
    args = [rng.standard_normal((2, 5, 4, 3)).astype("float16")] + \
        [(rng.random((1, 3, 1, 1)) + 0.5).astype("float16") for _ in range(4)]
    assert_same([dev(*args)], [cpu(*args)], 2e-2)


def test_parameter_shape_errors_are_the_cpus():
    x = T.matrix("x")
    g, b = T.row("g"), T.row("b")
    out = batch_normalization_train(x, g, b)[0]
    dev, cpu = device_and_cpu([x, g, b], out)
    args = (np.ones((4, 3)), np.ones((1, 2)), np.ones((1, 3)))
    for f in (dev, cpu):
        with pytest.raises(ValueError, match=r"scale has shape \(1, 2\), but x of shape "
                                             r"\(4, 3\) normalized over axes \(0,\) needs "
                                             r"\(1, 3\)"):
            f(*args)
