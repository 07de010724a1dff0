"""Functions compiled with device=cuda on the emulated device (gpu.emulate):
placement, transfers at the edges, the CUDA kernels' values against NumPy,
gradients, errors, and the generated CUDA checked by nvcc."""

import shutil
import warnings

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.backends.cuda import compiler as cuda_compiler
from symgraph.gpu.placement import placement_report
from symgraph.ops.device_op import OnDevice
from symgraph.ops.transfer import GpuFromHost, HostFromGpu, gpu_from_host, host_from_gpu
from symgraph.opt.gpu_placement import CpuOpWarning
from symgraph.tensor.gpu_type import GpuArrayType
from tests.gpu.device_flags import DEVICE



def _ops(f, cls):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, cls)]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_elementwise_graph_runs_on_the_device_and_matches_numpy(rng, dtype):
    x = T.matrix("x", dtype=dtype)
    y = T.row("y", dtype=dtype)
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [x * y + x, (x - y) * 3])
    a = (rng.random((37, 5)) * 10).astype(dtype)
    b = (rng.random((1, 5)) * 10).astype(dtype)
    got = f(a, b)
    np.testing.assert_allclose(got[0], a * b + a, rtol=1e-6)
    np.testing.assert_allclose(got[1], (a - b) * 3, rtol=1e-6)
    assert got[0].dtype == np.dtype(dtype) and type(got[0]) is np.ndarray
    assert f.native.python_nodes == []          # every step is native code
    assert _ops(f, OnDevice)


def test_fused_composite_moves_as_one_kernel_with_transfers_only_at_the_edges(rng):
    x, y = T.fvectors("x", "y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], T.exp(x) * 2 + T.tanh(y) - x)
    device = _ops(f, OnDevice)
    assert len(device) == 1 and "Composite" in str(device[0].op)
    assert len(_ops(f, GpuFromHost)) == 2 and len(_ops(f, HostFromGpu)) == 1
    a, b = rng.random(100003).astype("f"), rng.random(100003).astype("f")
    np.testing.assert_allclose(f(a, b), np.exp(a) * 2 + np.tanh(b) - a, rtol=1e-5)


def test_strided_and_broadcast_inputs(rng):
    x = T.fmatrix("x")
    y = T.fcol("y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], T.sqrt(x) + y)
    a = rng.random((9, 14)).astype("f")[:, ::3]     # strided host input
    b = rng.random((9, 1)).astype("f")
    np.testing.assert_allclose(f(a, b), np.sqrt(a) + b, rtol=1e-6)
    empty = np.zeros((0, 5), "f")
    assert f(empty, np.zeros((0, 1), "f")).shape == (0, 5)


def test_gradients_match_the_cpu(rng):
    x = T.fvector("x")
    w = symgraph.shared(rng.random(6).astype("f"), name="w")
    cost = T.sum(T.exp(x * w) + w * w)
    updates = [(w, w - 0.1 * T.grad(cost, w))]
    a = rng.random(6).astype("f")
    with symgraph.config.change_flags(**DEVICE):
        f_dev = symgraph.function([x], cost, updates=updates)
        dev = [f_dev(a) for _ in range(3)]
        w_dev = w.get_value()
    w.set_value(rng.random(6).astype("f") * 0 + np.float32(0.5))
    w2 = symgraph.shared(np.full(6, 0.5, "f"), name="w2")
    cost2 = T.sum(T.exp(x * w2) + w2 * w2)
    f_cpu = symgraph.function([x], cost2, updates=[(w2, w2 - 0.1 * T.grad(cost2, w2))])
    w.set_value(np.full(6, 0.5, "f"))
    with symgraph.config.change_flags(**DEVICE):
        dev = [f_dev(a) for _ in range(3)]
    cpu = [f_cpu(a) for _ in range(3)]
    np.testing.assert_allclose(dev, cpu, rtol=1e-5)
    np.testing.assert_allclose(w.get_value(), w2.get_value(), rtol=1e-5)
    assert isinstance(w.get_value(), np.ndarray) and w_dev.shape == (6,)


def test_a_shape_mismatch_on_the_device_is_a_value_error(rng):
    x, y = T.fvectors("x", "y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], x * y)
    with pytest.raises(ValueError, match="device element-wise"):
        f(np.ones(3, "f"), np.ones(4, "f"))


def test_nodes_left_on_the_cpu_are_reported_with_their_reason():
    x = T.fmatrix("x")
    out = T.sort(T.exp(x), axis=1)
    with symgraph.config.change_flags(**DEVICE, assert_no_cpu_op="warn"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = symgraph.function([x], out)
    assert any(issubclass(w.category, CpuOpWarning) and "no CUDA" in str(w.message)
               for w in caught)
    report = placement_report(f)
    assert any("Sort" in str(node.op) and "no CUDA" in reason
               for node, reason in report.cpu_nodes), report
    assert report.device_nodes and report.transfers
    assert "on the CPU" in str(report)
    with symgraph.config.change_flags(**DEVICE, assert_no_cpu_op="raise"):
        with pytest.raises(AssertionError, match="stay on the CPU"):
            symgraph.function([x], out)


def test_a_function_restored_from_the_cache_warns_and_reports_as_a_new_one():
    # The warm start restores an optimized graph without rewriting it: the
    # flags' warnings and errors, and the reasons of the placement report,
    # must not depend on whether the graph was in the cache.
    x = T.dvector("x")
    out = T.sort(T.exp(x) + 1.5)
    flags = dict(DEVICE, assert_no_cpu_op="warn", warn_float64="warn")
    for attempt in range(2):
        with symgraph.config.change_flags(**flags):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                f = symgraph.function([x], out)
        messages = [str(w.message) for w in caught]
        assert any("stay on the CPU" in m and "no CUDA" in m for m in messages), messages
        assert any("float64 on the GPU" in m for m in messages), messages
        assert any("Sort" in str(node.op) and "no CUDA" in reason
                   for node, reason in placement_report(f).cpu_nodes)
    assert f.maker.warm.restored
    with symgraph.config.change_flags(**dict(flags, assert_no_cpu_op="raise")):
        with pytest.raises(AssertionError, match="stay on the CPU"):
            symgraph.function([x], out)


def test_float64_on_the_device_follows_warn_float64():
    # (with warn_float64=raise no float64 variable can be made at all)
    x = T.dvector("x")
    out = T.exp(x)
    with symgraph.config.change_flags(**DEVICE, warn_float64="warn"):
        with pytest.warns(UserWarning, match="float64 on the GPU"):
            f = symgraph.function([x], out)
    np.testing.assert_allclose(f(np.arange(3.0)), np.exp(np.arange(3.0)))


def test_device_cuda_without_a_gpu_or_emulation_is_a_clear_error():
    from symgraph.backends.cuda.backend import NoDeviceError, _device_count

    if _device_count():
        pytest.skip("this machine has a GPU")
    from symgraph.backends.cuda.device import missing

    x = T.fvector("x")
    with symgraph.config.change_flags(device="cuda"):
        with pytest.raises(NoDeviceError, match="gpu.emulate=True") as info:
            symgraph.function([x], x + 1)
    # it says what is missing: here, the driver (or a device it sees)
    assert missing() and missing() in str(info.value)
    assert "NVIDIA driver" in str(info.value)


def test_transfer_ops_and_their_gradients(rng):
    x = T.fvector("x")
    with symgraph.config.change_flags(**DEVICE):
        d = gpu_from_host(x)
        assert isinstance(d.type, GpuArrayType) and d.type.context_name == "cuda0"
        back = host_from_gpu(d)
        g = T.grad(T.sum(back * back), x)
        f = symgraph.function([x], [back, g])
        a = rng.random(5).astype("f")
        value, grad = f(a)
    np.testing.assert_allclose(value, a)
    np.testing.assert_allclose(grad, 2 * a, rtol=1e-6)
    with pytest.raises(TypeError, match="is not a device array variable"):
        host_from_gpu(x)


def test_gpu_array_type_checks_values():
    from symgraph.backends.cuda.backend import ensure_device

    with symgraph.config.change_flags(**DEVICE):
        ensure_device()
        t = GpuArrayType("float32", shape=(None, 3))
        value = t.filter(np.ones((2, 3), "f"))           # copied to the device
        assert type(value).__name__ == "DeviceArray"
        with pytest.raises(TypeError, match="expected a device array"):
            t.filter(np.ones((2, 3), "f"), strict=True)
        with pytest.raises(TypeError, match="dimension 1 must have size 3"):
            t.filter(np.ones((2, 4), "f"))
        assert str(t) == "GpuArrayType<cuda0>(float32, (?, 3))"


@pytest.mark.skipif(cuda_compiler.nvcc_path() is None and shutil.which("nvcc") is None,
                    reason="nvcc is not installed (the CUDA toolkit)")
def test_generated_cuda_is_valid_for_nvcc(rng, tmp_path):
    x = T.fmatrix("x")
    y = T.frow("y")
    with symgraph.config.change_flags(**DEVICE, **{"gpu.cross_compile": True},
                                      compiledir=str(tmp_path / "cache")):
        f = symgraph.function([x, y], T.tanh(x) * y - T.log(x + 2))
        a, b = rng.random((4, 3)).astype("f"), rng.random((1, 3)).astype("f")
        np.testing.assert_allclose(f(a, b), np.tanh(a) * b - np.log(a + 2), rtol=1e-6)
    assert list((tmp_path / "cache").rglob("check.o")) or \
        list((tmp_path / "cache").rglob("*.cu"))


def test_basic_indexing_is_a_device_view_with_host_index_values(rng):
    x = T.fmatrix("x")
    i = T.iscalar("i")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, i], [T.exp(x[i:, 1]), x[::2, ::-1] * 2, x[-1]])
    views = [n for n in _ops(f, OnDevice) if "Subtensor" in str(n.op)]
    assert views and all(n.op.host_inputs == tuple(range(1, len(n.inputs))) for n in views)
    assert f.native.python_nodes == []
    a = rng.random((7, 4)).astype("f")
    got = f(a, 2)
    np.testing.assert_allclose(got[0], np.exp(a[2:, 1]), rtol=1e-6)
    np.testing.assert_allclose(got[1], a[::2, ::-1] * 2)
    np.testing.assert_allclose(got[2], a[-1])
    with symgraph.config.change_flags(**DEVICE):
        g = symgraph.function([x, i], x[i] + 1)
    with pytest.raises(IndexError):
        g(a, 9)


def test_float16_storage_with_float32_arithmetic_matches_the_cpu_bit_for_bit(rng):
    x = T.vector("x", dtype="float16")
    y = T.vector("y", dtype="float16")
    outs = [T.exp(x) * y + x, (x + y) * 3, T.cast(x, "float32") * 2]
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], outs)
    cpu = symgraph.function([x, y], outs)
    assert len(_ops(f, OnDevice)) == 3
    a = (rng.random(1001) * 4).astype("float16")
    b = rng.random(1001).astype("float16")
    for got, want in zip(f(a, b), cpu(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_elementwise_helpers_run_on_the_device(rng):
    # the C helpers of these scalar ops have device versions (scalar_cuda.py)
    from tests.gpu.compare import assert_same, device_and_cpu, device_op_names

    x = T.fmatrix("x")
    i, j = T.imatrix("i"), T.imatrix("j")
    outs = [i // j, i % j, T.erfinv(T.tanh(x)), T.psi(abs(x) + 0.5), T.nnet.sigmoid(x),
            T.nnet.softplus(x), T.gammaln(abs(x) + 0.1)]
    dev, cpu = device_and_cpu([x, i, j], outs)
    assert dev.maker.fgraph.toposort() and "Elemwise" in device_op_names(dev)
    assert not symgraph.gpu.placement_report(dev).cpu_nodes
    a = rng.standard_normal((3, 5)).astype("f")
    b = rng.integers(-9, 9, (3, 5)).astype("int32")
    c = np.where(rng.random((3, 5)) < 0.5, -3, 4).astype("int32")
    assert_same(dev(a, b, c), cpu(a, b, c), 1e-5)
