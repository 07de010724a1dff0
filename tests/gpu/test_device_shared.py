"""Shared variables on the device (device=cuda): values stay there between
calls; get_value/set_value speak NumPy unless asked for the device array."""

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.compile.shared import GpuArraySharedVariable, TensorSharedVariable
from symgraph.ops.transfer import GpuFromHost, HostFromGpu
from tests.gpu.device_flags import DEVICE



def test_float_shared_variables_live_on_the_device_and_ints_on_the_host():
    with symgraph.config.change_flags(**DEVICE):
        w = symgraph.shared(np.ones((3, 2), "f"), name="w")
        n = symgraph.shared(np.arange(3), name="n")
    assert isinstance(w, GpuArraySharedVariable) and str(w.type).startswith("GpuArrayType")
    assert isinstance(n, TensorSharedVariable)
    value = w.get_value()
    assert type(value) is np.ndarray and value.shape == (3, 2)
    inner = w.get_value(borrow=True, return_internal_type=True)
    assert type(inner).__name__ == "DeviceArray" and inner.shape == (3, 2)
    assert w.get_value(borrow=True, return_internal_type=True) is inner
    assert w.get_value(return_internal_type=True) is not inner      # a copy
    value[:] = 7                                                    # a copy too
    assert (w.get_value() == 1).all()


def test_updates_stay_on_the_device_and_only_inputs_and_outputs_move():
    with symgraph.config.change_flags(**DEVICE):
        w = symgraph.shared(np.ones((3, 2), "f"), name="w")
        x = T.fmatrix("x")
        cost = T.sum(T.dot(x, w) ** 2)
        f = symgraph.function([x], cost, updates=[(w, w - 0.01 * T.grad(cost, w))])
    nodes = f.maker.fgraph.toposort()
    assert sum(isinstance(n.op, GpuFromHost) for n in nodes) == 1       # x
    assert sum(isinstance(n.op, HostFromGpu) for n in nodes) == 1       # the cost
    data = np.ones((4, 3), "f")
    expected_w = np.ones((3, 2), "f")
    for _ in range(3):
        expected_cost = ((data @ expected_w) ** 2).sum()
        np.testing.assert_allclose(f(data), expected_cost, rtol=1e-5)
        expected_w = expected_w - 0.01 * (2 * data.T @ (data @ expected_w))
    np.testing.assert_allclose(w.get_value(), expected_w, rtol=1e-5)


def test_set_value_takes_host_or_device_arrays_and_checks_them():
    with symgraph.config.change_flags(**DEVICE):
        w = symgraph.shared(np.ones(4, "f"), name="w")
        f = symgraph.function([], w * 2)
    w.set_value(np.arange(4, dtype="f"))
    np.testing.assert_allclose(f(), np.arange(4) * 2)
    inner = w.get_value(borrow=True, return_internal_type=True)
    w.set_value(inner)                                    # copied: inner is not w's
    assert w.get_value(borrow=True, return_internal_type=True) is not inner
    with symgraph.config.change_flags(**DEVICE):
        w.set_value(symgraph.gpu.to_device(inner.get() + 1))
    np.testing.assert_allclose(f(), (np.arange(4) + 1) * 2)
    with pytest.raises(TypeError, match="wrong number of dimensions"):
        w.set_value(np.ones((2, 2), "f"))


def test_shapes_of_device_values_are_read_without_copying_them_back():
    from symgraph.ops.shape import Shape_i

    with symgraph.config.change_flags(**DEVICE):
        w = symgraph.shared(np.ones((3, 2), "f"), name="w")
        x = T.fmatrix("x")
        f = symgraph.function([x], (T.dot(x, w) - w.mean()).sum() + w.shape[0])
    nodes = f.maker.fgraph.toposort()
    reads = [n for n in nodes if isinstance(n.op, Shape_i)]
    assert all(not isinstance(n.inputs[0].owner and n.inputs[0].owner.op, HostFromGpu)
               for n in reads)
    data = np.ones((4, 3), "f")
    np.testing.assert_allclose(f(data), (data @ np.ones((3, 2)) - 1).sum() + 3)


def test_device_shared_variables_replace_host_inputs_in_givens():
    from symgraph.ops.transfer import GpuFromHost

    with symgraph.config.change_flags(**DEVICE):
        data = symgraph.shared(np.arange(6, dtype="f").reshape(2, 3), name="data")
        x = T.fmatrix("x")
        f = symgraph.function([], T.tanh(x).sum(), givens={x: data})
    np.testing.assert_allclose(f(), np.tanh(np.arange(6)).sum(), rtol=1e-6)
    assert not any(isinstance(n.op, GpuFromHost) for n in f.maker.fgraph.toposort())
    symgraph.gpu.synchronize()
