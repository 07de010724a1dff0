"""Scan with device=cuda: the step function's nodes run on the device (its
compiled inner function is placed like any other), the loop is the Python
one (the runtime's native Loop keeps host buffers), and values, gradients
and shared updates match the CPU run."""

import numpy as np

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE


def _rnn(flags, xs):
    """An Elman step over xs, its cost's gradients, and one SGD update."""
    with symgraph.config.change_flags(**flags, floatX="float32"):
        rng = np.random.default_rng(4)
        w = symgraph.shared((rng.standard_normal((3, 3)) * 0.5).astype("f"), name="w")
        u = symgraph.shared((rng.standard_normal((2, 3)) * 0.5).astype("f"), name="u")
        x = T.fmatrix("x")
        h0 = T.zeros((3,), dtype="float32")
        hs, _ = symgraph.scan(lambda xt, h: T.tanh(T.dot(h, w) + T.dot(xt, u) + 1),
                              sequences=[x], outputs_info=[h0])
        cost = T.sqr(hs).sum()
        gw, gu = symgraph.grad(cost, [w, u])
        f = symgraph.function([x], [hs, cost, gw.transfer("cpu"), gu.transfer("cpu")],
                              updates=[(w, w - 0.1 * gw)])
        first = f(xs)
        second = f(xs)
        return first, second, w.get_value(), f


def test_an_rnn_trains_on_the_device_like_on_the_cpu():
    xs = np.random.default_rng(5).standard_normal((6, 2)).astype("f")
    cpu = _rnn({"device": "cpu"}, xs)
    dev = _rnn(DEVICE, xs)
    step = [n for n in dev[3].maker.fgraph.toposort() if type(n.op).__name__ == "Scan"]
    assert step
    inner = step[0].op.inner_function(step[0]).maker.fgraph.toposort()
    assert any(isinstance(n.op, OnDevice) for n in inner)
    for got, want in zip(dev[0] + dev[1], cpu[0] + cpu[1]):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(dev[2], cpu[2], rtol=2e-5, atol=2e-6)


def test_a_step_with_a_broadcast_constant():
    # h + 1: the constant becomes a device constant of shape (1,) in the step
    with symgraph.config.change_flags(**DEVICE):
        x = T.vector("x")
        hs, _ = symgraph.scan(lambda h: h + 1, outputs_info=dict(initial=x, taps=None),
                              n_steps=3)
        f = symgraph.function([x], hs)
        np.testing.assert_array_equal(f(np.zeros(2)), [[1, 1], [2, 2], [3, 3]])
