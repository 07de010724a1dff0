"""Pooling with a symbolic window (``PoolDynamic``, ``PoolDynamicGrad``) on
the emulated device, against the CPU op: every mode, both border rules, 2-D
and 3-D, odd shapes and strides, dtypes, the gradient, the window errors with
the CPU's messages, and nothing of it left on the CPU."""

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.ops.pool_dynamic import PoolDynamic, PoolDynamicGrad
from tests.gpu.compare import assert_same, device_and_cpu, device_op_names

MODES = ["max", "sum", "average_inc_pad", "average_exc_pad"]


def _window():
    return T.lvector("ws"), T.lvector("st"), T.lvector("pd")


def _pool_and_grad(x, ignore_border, mode, nd=2):
    ws, st, pd = _window()
    y = PoolDynamic(nd, ignore_border, mode)(x, ws, st, pd)
    return [x, ws, st, pd], [y, T.grad((y * y).sum(), x)]


def _no_pool_on_cpu(f):
    names = device_op_names(f)
    assert {"PoolDynamic", "PoolDynamicGrad"} & names, names
    report = symgraph.gpu.placement_report(f)
    assert not report.cpu_nodes, str(report)


GEOMETRIES = [
    # ws, stride, pad, ignore_border
    ((2, 2), (2, 2), (0, 0), True),
    ((3, 2), (1, 2), (0, 0), False),     # overlapping rows, partial windows kept
    ((3, 3), (2, 2), (1, 2), True),      # padding
    ((2, 3), (3, 1), (0, 0), False),     # stride larger than the window
    ((1, 1), (1, 1), (0, 0), True),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ignore_border", [True, False])
def test_every_mode_and_geometry_with_its_gradient(mode, ignore_border):
    """One compiled function per mode and border rule serves every window:
    the window is a run-time value."""
    rng = np.random.default_rng(len(mode))
    x = T.tensor4("x", dtype="float32")
    inputs, outs = _pool_and_grad(x, ignore_border, mode)
    dev, cpu = device_and_cpu(inputs, outs)
    _no_pool_on_cpu(dev)
    a = rng.standard_normal((2, 3, 7, 9)).astype("f")
    a[0, 0, :2, :2] = 1.5                                   # ties: the first one wins
    for ws, st, pd, ib in GEOMETRIES:
        if ib != ignore_border and any(pd):
            continue
        args = (a, ws, st, pd)
        assert_same(dev(*args), cpu(*args), 1e-5)


SHAPES = [
    (0, 2, 5, 5),          # empty batch
    (1, 1, 0, 4),          # an empty pooled dimension
    (1, 1, 1, 1),          # one element
    (1, 3, 5, 7),          # fewer outputs than a block
    (3, 5, 23, 19),        # not a multiple of the block
]


@pytest.mark.parametrize("shape", SHAPES)
def test_odd_shapes(shape):
    rng = np.random.default_rng(sum(shape))
    x = T.tensor4("x", dtype="float32")
    inputs, outs = _pool_and_grad(x, False, "average_exc_pad")
    dev, cpu = device_and_cpu(inputs, outs)
    a = rng.standard_normal(shape).astype("f")
    for ws, st in (((2, 2), (2, 2)), ((3, 1), (1, 2))):
        args = (a, ws, st, (0, 0))
        assert_same(dev(*args), cpu(*args), 1e-5)


def test_more_outputs_than_one_grid():
    """More elements than the launch's 4096 blocks of 256 threads cover at once
    (grid-stride loops)."""
    rng = np.random.default_rng(5)
    x = T.tensor4("x", dtype="float32")
    inputs, outs = _pool_and_grad(x, True, "max")
    dev, cpu = device_and_cpu(inputs, outs)
    a = rng.standard_normal((2, 2, 520, 520)).astype("f")
    args = (a, (1, 2), (1, 1), (0, 0))                     # 2 * 2 * 520 * 519 outputs
    assert_same(dev(*args), cpu(*args), 1e-6)


def test_3d_with_batch_dims_strided_and_broadcast_inputs():
    rng = np.random.default_rng(1)
    x = T.TensorType("float32", shape=(None,) * 6)("x")
    xs = x[:, ::2].dimshuffle(1, 0, 2, 3, 5, 4)             # a non-contiguous view
    m = T.matrix("m", dtype="float32")
    xb = m.dimshuffle("x", "x", "x", 0, 1, "x")              # broadcast dimensions
    ws, st, pd = _window()
    outs = []
    for mode in ("max", "average_inc_pad"):
        op = PoolDynamic(3, True, mode)
        y, yb = op(xs, ws, st, pd), op(xb, ws, st, pd)
        outs += [y, T.grad((y * y).sum(), x), yb]
    inputs = [x, m, ws, st, pd]
    dev, cpu = device_and_cpu(inputs, outs)
    _no_pool_on_cpu(dev)
    a = rng.standard_normal((2, 5, 3, 4, 5, 6)).astype("f")
    b = rng.standard_normal((4, 6)).astype("f")
    for ws_, st_, pd_ in (((2, 2, 3), (1, 2, 2), (0, 0, 0)), ((1, 3, 2), (1, 1, 2), (0, 1, 1))):
        args = (a, b, ws_, st_, pd_)
        assert_same(dev(*args), cpu(*args), 1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "int8"])
def test_dtypes(dtype):
    x = T.tensor4("x", dtype=dtype)
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((2, 2, 6, 7)) * 10).astype(dtype)
    args = (a, (2, 3), (1, 2), (0, 0))
    if dtype.startswith("int"):
        ws, st, pd = _window()
        outs = [PoolDynamic(2, False, mode)(x, ws, st, pd) for mode in ("max", "sum")]
        dev, cpu = device_and_cpu([x, ws, st, pd], outs)
        assert_same(dev(*args), cpu(*args), 0)
        return
    for mode in ("max", "average_exc_pad"):
        inputs, outs = _pool_and_grad(x, False, mode)
        dev, cpu = device_and_cpu(inputs, outs)
        _no_pool_on_cpu(dev)
        assert_same(dev(*args), cpu(*args), 1e-2 if dtype == "float16" else 1e-12)


@pytest.mark.parametrize("mode", ["max", "average_inc_pad"])
def test_gradient_by_finite_differences(mode):
    rng = np.random.default_rng(7)
    x = T.tensor4("x", dtype="float64")
    ws, st, pd = _window()
    y = PoolDynamic(2, True, mode)(x, ws, st, pd)
    w = rng.standard_normal((1, 2, 3, 3))
    cost = (y * w).sum()
    dev, _ = device_and_cpu([x, ws, st, pd], [cost, T.grad(cost, x)])
    a = rng.permutation(2 * 5 * 6).reshape((1, 2, 5, 6)) * 0.1   # distinct: no ties
    window = ((2, 3), (2, 2), (1, 1))
    _, g = dev(a, *window)
    eps, num = 1e-6, np.zeros_like(a)
    for i in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[i] += eps
        down[i] -= eps
        num[i] = (dev(up, *window)[0] - dev(down, *window)[0]) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


BAD = [
    (((0, 2), (1, 1), (0, 0)), r"Pool: every entry of ws \(the window size\) must be >= 1, "
                               r"got \(0, 2\)"),
    (((2, 2), (1, 0), (0, 0)), r"Pool: every entry of stride must be >= 1, got \(1, 0\)"),
    (((2, 2), (1, 1), (0, -1)), r"Pool: every entry of pad must be >= 0, got \(0, -1\)"),
    (((2, 2), (1, 1), (2, 0)), r"Pool: the padding \(2, 0\) must be smaller than the window "
                               r"\(2, 2\) in every dimension"),
]


def _message(f, args):
    with pytest.raises(ValueError) as info:
        f(*args)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("window,message", BAD)
def test_bad_windows_fail_as_on_the_cpu(window, message):
    x = T.tensor4("x", dtype="float32")
    inputs, outs = _pool_and_grad(x, True, "max")
    dev, cpu = device_and_cpu(inputs, outs[:1])
    args = (np.ones((1, 1, 4, 4), "f"),) + window
    got = _message(dev, args)
    assert got == _message(cpu, args)
    with pytest.raises(ValueError, match=message):
        dev(*args)


def test_padding_needs_ignore_border_and_gradient_shapes_are_checked():
    x, out, gz = (T.tensor4(name, dtype="float32") for name in ("x", "out", "gz"))
    ws, st, pd = _window()
    dev, cpu = device_and_cpu([x, ws, st, pd], [PoolDynamic(2, False, "sum")(x, ws, st, pd)])
    args = (np.ones((1, 1, 4, 4), "f"), (2, 2), (2, 2), (1, 0))
    assert _message(dev, args) == _message(cpu, args)
    assert "Pool: padding (1, 0) works only with ignore_border=True" in _message(dev, args)
    for mode in ("max", "average_inc_pad"):
        grad = PoolDynamicGrad(2, True, mode)(x, out, gz, ws, st, pd)
        dev, cpu = device_and_cpu([x, out, gz, ws, st, pd], [grad])
        _no_pool_on_cpu(dev)
        good = np.ones((1, 1, 2, 2), "f")
        bad = np.ones((1, 1, 3, 2), "f")
        a = np.ones((1, 1, 4, 4), "f")
        for args in ((a, bad, good), (a, good, bad)):
            args += ((2, 2), (2, 2), (0, 0))
            if mode != "max" and args[1] is bad:
                assert_same(dev(*args), cpu(*args), 0)          # out is not read
                continue
            got = _message(dev, args)
            assert got == _message(cpu, args)
            assert "gives (1, 1, 2, 2)" in got and "ws=(2, 2), stride=(2, 2)" in got


def test_a_pooled_maximum_of_another_dtype_stays_on_the_host():
    """PoolDynamicGrad, unlike MaxPoolGrad, takes a pooled maximum of any
    dtype; the device kernel reads it as x's type, so such a node runs on the
    host (it read float64 maxima as float32: a zero gradient)."""
    x, gz = T.tensor4("x", dtype="float32"), T.tensor4("gz", dtype="float32")
    out = T.tensor4("out", dtype="float64")
    ws, st, pd = _window()
    grad = PoolDynamicGrad(2, True, "max")(x, out, gz, ws, st, pd)
    dev, cpu = device_and_cpu([x, out, gz, ws, st, pd], [grad])
    assert "PoolDynamicGrad" not in device_op_names(dev)
    a = np.random.default_rng(2).standard_normal((1, 2, 4, 4)).astype("f")
    maxima = a.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)).astype("f8")
    args = (a, maxima, np.ones((1, 2, 2, 2), "f"), (2, 2), (2, 2), (0, 0))
    got, want = dev(*args)[0], cpu(*args)[0]
    assert want.sum() == 8
    assert_same([got], [want], 0)
