"""The README's demo model trains on the emulated device as on the CPU:
the same losses to float32 tolerance, every compute node on the device."""

import sys
from pathlib import Path

import numpy as np

import symgraph
from symgraph.gpu import placement_report
from tests.gpu.device_flags import DEVICE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import demo  # noqa: E402


def _losses(flags):
    with symgraph.config.change_flags(floatX="float32", **flags):
        rng = np.random.default_rng(0)
        points, labels = demo.make_data(rng, n_samples=400)
        train, predict = demo.build_model(rng, points.shape[1], 32, 4)
        losses = [float(train(points[i:i + 100], labels[i:i + 100]))
                  for _ in range(3) for i in range(0, 300, 100)]
        return losses, train, predict(points[300:])


def test_the_demo_trains_on_the_device_as_on_the_cpu():
    cpu, _, cpu_pred = _losses({"device": "cpu"})
    dev, train, dev_pred = _losses(DEVICE)
    np.testing.assert_allclose(dev, cpu, rtol=1e-4)
    assert dev[-1] < dev[0]
    assert (dev_pred == cpu_pred).mean() > 0.95
    report = placement_report(train)
    # every array node is on the device; the index ramp (arange) is host
    # bookkeeping, read on the host by the gathers
    assert report.cpu_nodes == [], report
    host = [n for n in train.maker.fgraph.toposort() if type(n.op).__name__ == "ARange"]
    assert host and "bookkeeping" in host[0].tag.cpu_reason
