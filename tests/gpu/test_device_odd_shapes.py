"""Device kernels on the shapes that break kernels: empty, one element, fewer
than a block, not a multiple of the block, more than the grid covers in one
pass (grid-stride), non-contiguous and broadcast, against the CPU."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from tests.gpu.device_flags import DEVICE, REAL_GPU

SIZES = [0, 1, 3, 255, 257, 1_048_576 + 3]      # the last is more than 4096 blocks of 256


@pytest.fixture(scope="module")
def functions():
    x = T.fvector("x")
    y = T.fvector("y")
    outs = [T.exp(x) * y + 1, T.sum(x * y), T.max(x)]
    with symgraph.config.change_flags(**DEVICE):
        dev = symgraph.function([x, y], outs[:2])
        dev_max = symgraph.function([x], outs[2])
    return dev, dev_max


@pytest.mark.parametrize("n", SIZES)
def test_elementwise_and_reductions_on_odd_sizes(functions, n):
    dev, dev_max = functions
    rng = np.random.default_rng(n)
    a, b = rng.random(n).astype("f"), rng.random(n).astype("f")
    got = dev(a, b)
    np.testing.assert_allclose(got[0], np.exp(a) * b + 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], (a.astype("f8") * b).sum(), rtol=1e-4, atol=1e-6)
    if n:
        assert dev_max(a) == a.max()


def test_non_contiguous_and_broadcast_inputs_of_many_shapes():
    x = T.ftensor3("x")
    y = T.fmatrix("y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [x * y.dimshuffle("x", 0, 1), (x + 1).sum(axis=(0, 2))])
    rng = np.random.default_rng(4)
    for shape in [(1, 1, 1), (2, 3, 5), (3, 1, 7), (4, 17, 2)]:
        a = rng.random((shape[0], shape[1], shape[2] * 2)).astype("f")[:, :, ::2]
        b = rng.random((1, shape[2])).astype("f") if shape[1] == 1 else \
            rng.random((shape[1], shape[2])).astype("f")
        got = f(a, b)
        np.testing.assert_allclose(got[0], a * b[None], rtol=1e-6)
        np.testing.assert_allclose(got[1], (a + 1).sum(axis=(0, 2)), rtol=1e-5)


def test_debug_mode_checks_device_kernels_against_perform():
    x = T.fmatrix("x")
    with symgraph.config.change_flags(**DEVICE, mode="DebugMode"):
        f = symgraph.function([x], [T.nnet.softmax(T.dot(x, x.T) * 2), T.exp(x).sum(axis=0)])
    a = np.random.default_rng(0).random((5, 4)).astype("f")
    got = f(a)
    s = a @ a.T * 2
    e = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.skipif(REAL_GPU, reason="injects a launch failure into the emulated device")
def test_a_failed_launch_names_the_node_and_the_device_stays_usable(monkeypatch):
    x = T.fmatrix("x")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x], T.tanh(x) * 3)        # the line the error names
    a = np.ones((4, 5), "f")
    monkeypatch.setenv("SG_CUDA_EMU_FAIL", "SG_FN(kernel)")
    with pytest.raises(RuntimeError) as info:
        f(a)
    text = str(info.value)
    assert "failed on the (emulated) device" in text and "injected" in text
    assert "GpuElemwise" in text and "DeviceArray of shape (4, 5)" in text
    assert "test_device_odd_shapes.py" in text
    monkeypatch.delenv("SG_CUDA_EMU_FAIL")
    np.testing.assert_allclose(f(a), np.tanh(a) * 3, rtol=1e-6)
