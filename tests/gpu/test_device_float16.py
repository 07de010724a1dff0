"""float16 beyond element-wise work: products, reductions, the softmax family,
indexing, joins and a training step on the device, stored as float16 and
computed in float32, against the CPU (which computes float16 the same way)."""

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.gpu import placement_report
from symgraph.ops.device_op import OnDevice
from tests.gpu.compare import assert_same, device_and_cpu
from tests.gpu.device_flags import DEVICE

H = "float16"


def test_products_reductions_softmax_and_indexing_in_float16():
    rng = np.random.default_rng(0)
    x, w = T.matrix("x", dtype=H), T.matrix("w", dtype=H)
    idx = T.lvector("idx")
    p = T.nnet.softmax(T.dot(x, w))
    outs = [T.dot(x, w), p, T.grad(T.sum(p * p), x), x.sum(axis=0), x.max(axis=1),
            T.argmax(x, axis=1), x[idx], T.concatenate([x, x * 2], axis=0),
            T.alloc(np.float16(1.5), 2, 3)]
    dev, cpu = device_and_cpu([x, w, idx], outs, floatX=H)
    assert not placement_report(dev).cpu_nodes, placement_report(dev)
    names = {type(n.op.op).__name__ for n in dev.maker.fgraph.toposort()
             if isinstance(n.op, OnDevice)}
    assert {"Dot", "Softmax", "Join", "AdvancedSubtensor"} <= names, names
    args = (rng.standard_normal((7, 5)).astype(H), (rng.standard_normal((5, 9)) / 3).astype(H),
            np.array([6, 0, 6, 2]))
    assert_same(dev(*args), cpu(*args), 2e-2)


def test_a_float16_classifier_trains_on_the_device_as_on_the_cpu():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((32, 6)).astype(H)
    labels = (data[:, 0] > 0).astype("int32")

    def build(flags):
        with symgraph.config.change_flags(**flags, floatX=H):
            w = symgraph.shared(np.zeros((6, 2), H), name="w")
            b = symgraph.shared(np.zeros(2, H), name="b")
            x, y = T.matrix("x", dtype=H), T.ivector("y")
            cost = T.nnet.categorical_crossentropy(T.nnet.softmax(T.dot(x, w) + b), y).mean()
            g_w, g_b = T.grad(cost, [w, b])
            return symgraph.function([x, y], cost, updates=[(w, w - np.float16(0.5) * g_w),
                                                            (b, b - np.float16(0.5) * g_b)])

    dev, cpu = build(DEVICE), build({})
    dev_losses = [float(dev(data, labels)) for _ in range(6)]
    cpu_losses = [float(cpu(data, labels)) for _ in range(6)]
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=2e-2)
    assert dev_losses[-1] < dev_losses[0]
