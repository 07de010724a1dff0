"""The LeNet-style convnet of tests/models/test_lenet.py trains on the
emulated device as on the CPU: every array node on the device (convolutions,
pooling and their gradients included), the same losses to float32
tolerance, and the shared weights on the device between steps."""

import numpy as np

import symgraph
from symgraph.gpu import placement_report
from tests.gpu.device_flags import DEVICE
from symgraph.ops.device_op import OnDevice
from tests.models.test_lenet import _data, _train_fn

STEPS = 5


def _losses(flags):
    with symgraph.config.change_flags(floatX="float32", **flags):
        f = _train_fn()
    x, y = _data()
    return np.array([float(f(x, y)) for _ in range(STEPS)]), f


def test_lenet_trains_on_the_device_as_on_the_cpu():
    cpu, _ = _losses({"device": "cpu"})
    dev, f = _losses(DEVICE)
    np.testing.assert_allclose(dev, cpu, rtol=1e-4)
    assert np.all(np.diff(dev) < 0), dev
    report = placement_report(f)
    assert report.cpu_nodes == [], report
    on_device = {type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
                 if isinstance(n.op, OnDevice)}
    assert {"DnnConv", "DnnConvGradI", "DnnConvGradW", "Reshape"} <= on_device
    assert on_device & {"MaxPoolWithArgmax", "Pool"}
    weights = f.maker.fgraph.outputs[1:]
    assert weights and all(type(w.type).__name__ == "GpuArrayType" for w in weights)
