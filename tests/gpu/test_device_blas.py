"""Matrix products on the emulated device (symgraph's tiled CUDA kernel, the
stand-in for cuBLAS): every Dot form, Gemm/Gemv/Ger from the BLAS rewrites,
strided operands, against NumPy; and an MLP training step against the CPU."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE, REAL_GPU



@pytest.fixture
def rng():
    return np.random.default_rng(5)


def _device_ops(f):
    return [type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
            if isinstance(n.op, OnDevice)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_dot_form(rng, dtype):
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    v = T.vector("v", dtype=dtype)
    with symgraph.config.change_flags(**DEVICE, warn_float64="ignore"):
        f = symgraph.function([x, y, v], [T.dot(x, y), T.dot(x, v), T.dot(v, y),
                                          T.dot(v, v), T.dot(x.T, x)])
    assert "Dot" in _device_ops(f) and f.native.python_nodes == []
    a, b = rng.random((37, 5)).astype(dtype), rng.random((19, 5)).astype(dtype).T.copy()
    c = rng.random(5).astype(dtype)
    want = [a @ b, a @ c, c @ b, c @ c, a.T @ a]
    for got, ref in zip(f(a, b, c), want):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_misaligned_shapes_are_a_value_error(rng):
    x, y = T.fmatrices("x", "y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], T.dot(x, y))
    with pytest.raises(ValueError, match="not aligned"):
        f(np.ones((3, 4), "f"), np.ones((5, 2), "f"))


def test_blas_updates_from_the_rewrites(rng):
    x, y, z = T.fmatrices("x", "y", "z")
    u, w = T.fvectors("u", "w")
    outs = [z * 0.5 + 2 * T.dot(x, y), u * 0.5 + T.dot(x, w), z + 3 * T.outer(u, w[:3])]
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y, z, u, w], outs)
    a, b = rng.random((6, 4)).astype("f"), rng.random((4, 3)).astype("f")
    c, d, e = rng.random((6, 3)).astype("f"), rng.random(6).astype("f"), rng.random(4).astype("f")
    want = [c * 0.5 + 2 * (a @ b), d * 0.5 + a @ e, c + 3 * np.outer(d, e[:3])]
    for got, ref in zip(f(a, b, c, d, e), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5)


def _mlp(rng, device_flags):
    W1 = symgraph.shared(rng.standard_normal((10, 16)).astype("f") * 0.3, name="W1")
    W2 = symgraph.shared(rng.standard_normal((16, 3)).astype("f") * 0.3, name="W2")
    x = T.fmatrix("x")
    y = T.ivector("y")
    h = T.tanh(T.dot(x, W1))
    p = T.nnet.softmax(T.dot(h, W2))
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y]) + 1e-3 * T.sum(W1 ** 2)
    updates = [(w, w - 0.5 * g) for w, g in zip([W1, W2], T.grad(cost, [W1, W2]))]
    with symgraph.config.change_flags(**device_flags):
        step = symgraph.function([x, y], cost, updates=updates)
    return step, W1, W2


def test_an_mlp_trains_on_the_device_as_on_the_cpu():
    data = np.random.default_rng(3).standard_normal((32, 10)).astype("f")
    labels = (data[:, 0] > 0).astype("int32") + (data[:, 1] > 0.5).astype("int32")
    dev_step, dW1, dW2 = _mlp(np.random.default_rng(1), DEVICE)
    cpu_step, cW1, cW2 = _mlp(np.random.default_rng(1), {"device": "cpu"})
    assert "Dot" in _device_ops(dev_step) or "Gemm" in _device_ops(dev_step)
    dev = [float(dev_step(data, labels)) for _ in range(5)]
    cpu = [float(cpu_step(data, labels)) for _ in range(5)]
    np.testing.assert_allclose(dev, cpu, rtol=1e-4)
    assert dev[-1] < dev[0]
    np.testing.assert_allclose(dW1.get_value(), cW1.get_value(), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("xs,ys", [((4, 3, 5), (4, 5, 2)), ((4, 3, 5), (4, 5)),
                                   ((4, 5), (4, 5, 2)), ((4, 5), (4, 5)), ((1, 3, 5), (4, 5, 2))])
def test_batched_dot_forms(rng, xs, ys):
    from symgraph.ops.blas import BatchedDot

    x = T.tensor(dtype="float32", shape=(1 if xs[0] == 1 else None,) + (None,) * (len(xs) - 1))
    y = T.tensor(dtype="float32", shape=(None,) * len(ys))
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], BatchedDot()(x, y))
    assert "BatchedDot" in _device_ops(f)
    a, b = rng.random(xs).astype("f"), rng.random(ys).astype("f")
    cpu = symgraph.function([x, y], BatchedDot()(x, y))
    np.testing.assert_allclose(f(a, b), cpu(a, b), rtol=1e-5)


def _blas_calls():
    import ctypes

    from symgraph.backends.cuda.device_memory import _library

    fn = _library(True).sg_cuda_emu_blas_calls
    fn.restype = ctypes.c_longlong
    return fn()


@pytest.mark.skipif(REAL_GPU, reason="counts the calls of the emulated device's cuBLAS stand-in")
@pytest.mark.parametrize("cublas", [True, False])
def test_products_through_cublas_or_the_tiled_kernel_on_any_layout(cublas):
    rng = np.random.default_rng(4)
    x, y = T.fmatrix("x"), T.fmatrix("y")
    v = T.fvector("v")
    z = T.fmatrix("z")
    a, b = T.fscalar("a"), T.fscalar("b")
    outs = [T.dot(x, y), T.dot(x.T, x), T.dot(y.T, x.T), T.dot(x, v), T.dot(v[::-1], y),
            T.dot(x[:, ::2], y[::2]), b * z + a * T.dot(x, y)]
    with symgraph.config.change_flags(**DEVICE, **{"gpu.cublas": cublas}):
        f = symgraph.function([x, y, v, z, a, b], outs)
    args = (rng.standard_normal((5, 6)).astype("f"), rng.standard_normal((6, 3)).astype("f"),
            rng.standard_normal(6).astype("f"), rng.standard_normal((5, 3)).astype("f"),
            np.float32(0.5), np.float32(-2))
    before = _blas_calls()
    got = f(*args)
    X, Y, V, Z, A, B = args
    want = [X @ Y, X.T @ X, Y.T @ X.T, X @ V, V[::-1] @ Y, X[:, ::2] @ Y[::2], B * Z + A * (X @ Y)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert (_blas_calls() > before) == cublas


def test_sgd_updates_of_device_shared_variables_become_gemms_as_on_the_cpu(rng):
    # The gradient of a device shared variable reaches the update as
    # HostFromGpu(GpuFromHost(dot(h.T, d))): cut early, the CPU rewrites see
    # ``w - lr * dot(h.T, d)`` whole and make it one Gemm, as on the CPU.
    def step(flags):
        with symgraph.config.change_flags(**flags):
            W1 = symgraph.shared(np.random.default_rng(5).standard_normal((10, 16))
                                 .astype("f") * 0.3, name="W1")
            W2 = symgraph.shared(np.random.default_rng(6).standard_normal((16, 3))
                                 .astype("f") * 0.3, name="W2")
            x = T.fmatrix("x")
            h = T.tanh(T.dot(x, W1))
            cost = T.sum(T.dot(h, W2) ** 2)
            lr = np.float32(0.01)
            f = symgraph.function([x], cost, updates=[(w, w - lr * g) for w, g in
                                                     zip((W1, W2), T.grad(cost, [W1, W2]))])
        return f, W1

    def names(f):
        return sorted(type(getattr(n.op, "op", n.op)).__name__ for n in f.maker.fgraph.toposort()
                      if type(getattr(n.op, "op", n.op)).__name__ in ("Dot", "Gemm", "Elemwise"))

    dev, dW1 = step(DEVICE)
    cpu, cW1 = step({"device": "cpu"})
    assert names(dev).count("Gemm") == names(cpu).count("Gemm") == 2, (names(dev), names(cpu))
    assert names(dev) == names(cpu)
    data = rng.standard_normal((8, 10)).astype("f")
    for _ in range(3):
        np.testing.assert_allclose(float(dev(data)), float(cpu(data)), rtol=1e-4)
    np.testing.assert_allclose(dW1.get_value(), cW1.get_value(), rtol=1e-4, atol=1e-6)


def _data_pointer(shared_var):
    value = shared_var.get_value(borrow=True, return_internal_type=True)
    return value.__cuda_array_interface__["data"][0]


def test_sgd_updates_write_into_the_weights_buffer_as_on_the_cpu(rng):
    # The inplace phase gives the update's Gemm the weight's buffer on the
    # device too: no copy of the weights per step, the same values as the CPU.
    def step(flags):
        with symgraph.config.change_flags(**flags):
            W = symgraph.shared(np.random.default_rng(1).standard_normal((7, 5)).astype("f"),
                                name="W")
            x = T.fmatrix("x")
            cost = T.sum(T.tanh(T.dot(x, W)) ** 2)
            f = symgraph.function([x], cost, updates=[(W, W - np.float32(0.05) *
                                                       T.grad(cost, W))])
        return f, W

    dev, dW = step(DEVICE)
    cpu, cW = step({"device": "cpu"})
    gemms = [n for n in dev.maker.fgraph.toposort()
             if isinstance(n.op, OnDevice) and type(n.op.op).__name__ == "Gemm"]
    assert len(gemms) == 1 and gemms[0].op.op.inplace
    assert gemms[0].op.destroy_map == {0: [0]} and "GpuGemm{inplace}" in str(gemms[0].op)
    before = _data_pointer(dW)
    data = rng.standard_normal((9, 7)).astype("f")
    for _ in range(3):
        np.testing.assert_allclose(float(dev(data)), float(cpu(data)), rtol=1e-4)
    np.testing.assert_allclose(dW.get_value(), cW.get_value(), rtol=1e-4, atol=1e-6)
    assert _data_pointer(dW) == before


@pytest.mark.parametrize("cublas", [True, False])
def test_in_place_updates_of_every_layout_match_the_cpu(rng, cublas):
    # z as a transposed or strided view of a device intermediate: the result
    # goes through a scratch and is copied back into z's own strides
    from symgraph.ops.gemm import gemm, gemv, ger

    m, x, y = T.fmatrices("m", "x", "y")
    v, u = T.fvectors("v", "u")
    a, b = T.fscalars("a", "b")
    cases = [
        gemm(m + 0, a, x, y, b, inplace=True),            # row-major z: where it lies
        gemm((m * 2).T, a, y.T, x.T, b, inplace=True),     # z a transposed view
        gemv((v + 1)[::2], a, x, u, b, inplace=True),      # z a strided vector
        ger((m - 1)[:, ::-1], a, v[::2], u[:4], inplace=True),   # z a reversed view
    ]
    inputs = [m, x, y, v, u, a, b]
    flags = dict(DEVICE, **{"gpu.cublas": cublas})
    with symgraph.config.change_flags(**flags):
        dev = symgraph.function(inputs, cases)
    cpu = symgraph.function(inputs, cases, mode="FAST_RUN")
    placed = [n.op for n in dev.maker.fgraph.toposort() if isinstance(n.op, OnDevice)
              and type(n.op.op).__name__ in ("Gemm", "Gemv", "Ger")]
    assert len(placed) == 4 and all(op.destroy_map == {0: [0]} for op in placed)
    args = [rng.standard_normal((6, 4)).astype("f"), rng.standard_normal((6, 5)).astype("f"),
            rng.standard_normal((5, 4)).astype("f"), rng.standard_normal(12).astype("f"),
            rng.standard_normal(5).astype("f"), np.float32(0.7), np.float32(-1.5)]
    for got, want in zip(dev(*args), cpu(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_debugmode_compares_in_place_device_updates_on_their_inputs_before(rng):
    # DebugMode runs each node natively, then its perform on copies of the
    # inputs taken before: a device input written in place must be copied too
    from symgraph.ops.gemm import gemm

    z, x, y = T.fmatrices("z", "x", "y")
    out = gemm(z * 1.5, np.float32(0.5), x, y, np.float32(2.0), inplace=True)
    with symgraph.config.change_flags(**DEVICE, mode="DebugMode"):
        f = symgraph.function([z, x, y], out)
    a, b, c = (rng.standard_normal(s).astype("f") for s in ((3, 4), (3, 5), (5, 4)))
    np.testing.assert_allclose(f(a, b, c), 2 * (a * 1.5) + 0.5 * (b @ c), rtol=1e-5)
