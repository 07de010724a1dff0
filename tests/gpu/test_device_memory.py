"""Device memory on the emulated device: DeviceArray, its copies, the caching
allocator (a training loop stops allocating after its first step), and an
out-of-memory that names the node and leaves the device usable.  The same
library runs on a GPU (built by nvcc instead of the host compiler)."""

import ctypes
import pickle

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.backends.cuda import device_memory
from tests.gpu.device_flags import DEVICE, REAL_GPU



@pytest.fixture
def emulated():
    with symgraph.config.change_flags(**DEVICE):
        yield


def test_device_array_copies_describes_and_pickles(emulated):
    host = np.arange(12, dtype="f").reshape(3, 4)
    a = device_memory.put(host)
    assert type(a).__name__ == "DeviceArray"
    assert (a.shape, a.strides, a.dtype, a.ndim, a.size, a.nbytes) == \
        ((3, 4), (16, 4), np.dtype("f"), 2, 12, 48)
    assert a.base is None and isinstance(a.ptr, int)
    got = a.get()
    assert type(got) is np.ndarray and (got == host).all()
    got[:] = 0                                        # a copy: the device keeps its data
    assert (np.asarray(a) == host).all()
    assert np.asarray(a, dtype="f8").dtype == np.float64
    assert repr(a).startswith("DeviceArray(array([[ 0.,  1.")
    back = pickle.loads(pickle.dumps(a))
    assert type(back) is type(a) and back.ptr != a.ptr and (back.get() == host).all()
    empty = device_memory.put(np.zeros((0, 5), "i8"))
    assert empty.shape == (0, 5) and empty.get().shape == (0, 5)


def test_device_arrays_convert_to_python_numbers_as_ndarrays_do(emulated):
    # a device result (a gradient's norm, a count) converts like its host copy
    assert float(device_memory.put(np.float32(2.5))) == 2.5
    assert int(device_memory.put(np.int64(-7))) == -7
    matrix = device_memory.put(np.ones((3, 4), "f"))
    assert len(matrix) == 3
    with pytest.raises(TypeError, match="0-d DeviceArray"):
        len(device_memory.put(np.float32(1)))
    with pytest.raises(TypeError):
        float(matrix)


def test_the_cache_reuses_blocks_across_calls(emulated):
    # Blocks are counted at their size, and a request may get a cached block
    # up to twice as large: with blocks cached by earlier tests in the
    # process, the update's output alternates between two sizes of block
    # (bounded, but not constant), so the test starts from an empty cache.
    symgraph.gpu.empty_cache()
    w = symgraph.shared(np.ones((64, 32), "f"), name="w")
    x = T.fmatrix("x")
    cost = T.sum(T.tanh(T.dot(x, w)) ** 2)
    f = symgraph.function([x], cost, updates=[(w, w - 0.01 * T.grad(cost, w))])
    data = np.random.default_rng(0).standard_normal((16, 64)).astype("f")
    f(data)
    f(data)
    before = device_memory.memory_stats()
    for _ in range(5):
        f(data)
    after = device_memory.memory_stats()
    assert after["device_mallocs"] == before["device_mallocs"]     # all from the cache
    assert after["bytes_in_use"] <= before["bytes_in_use"] + 512
    symgraph.gpu.empty_cache()
    assert symgraph.gpu.memory_stats()["bytes_cached"] == 0
    w.set_value(symgraph.gpu.to_device(np.zeros((64, 32), "f")))
    assert (w.get_value() == 0).all()
    f(data)                                                        # and it still runs


def test_kernels_take_their_scratch_memory_from_the_cache(emulated):
    # a gather copies its index vector to the device, the cross-entropy its
    # targets: scratch blocks of the cache, not a cudaMalloc per call
    x = T.fmatrix("x")
    rows, y = T.lvector("rows"), T.lvector("y")
    cost = T.nnet.categorical_crossentropy(T.nnet.softmax(x[rows]), y).mean()
    f = symgraph.function([x, rows, y], [cost, T.grad(cost, x)])
    a = np.random.default_rng(1).standard_normal((6, 3)).astype("f")
    args = (a, np.array([0, 5, 5, 2]), np.array([1, 0, 2, 2]))
    first = f(*args)
    before = device_memory.memory_stats()
    for _ in range(4):
        again = f(*args)
    assert device_memory.memory_stats()["device_mallocs"] == before["device_mallocs"]
    for g, w in zip(again, first):
        np.testing.assert_array_equal(g, w)


def _limit(nbytes):
    lib = device_memory._library(True)     # the emulated device's build
    fn = lib.sg_cuda_emu_set_max_allocation
    fn.argtypes, fn.restype = (ctypes.c_size_t,), None
    fn(nbytes)


@pytest.mark.skipif(REAL_GPU, reason="sets the emulated device's allocation limit")
def test_out_of_memory_names_the_node_and_the_device_stays_usable(emulated):
    x = T.fmatrix("x")
    f = symgraph.function([x], T.exp(x) * 2)
    small, big = np.ones((2, 2), "f"), np.ones((1000, 1000), "f")
    np.testing.assert_allclose(f(small), np.exp(small) * 2, rtol=1e-6)
    _limit(1 << 16)
    try:
        with pytest.raises(MemoryError,
                           match="out of device memory on cuda0: 4000256 bytes") as info:
            f(big)
        assert "GpuFromHost" in str(info.value) or "Gpu" in str(info.value)
        np.testing.assert_allclose(f(small), np.exp(small) * 2, rtol=1e-6)
    finally:
        _limit(0)
    np.testing.assert_allclose(f(big), np.exp(big) * 2, rtol=1e-6)


@pytest.mark.skipif(not REAL_GPU, reason="asks a real GPU for more than it holds; the test "
                    "above sets the emulated device's limit instead")
def test_out_of_memory_on_a_real_gpu_names_the_node_and_the_device_stays_usable(emulated):
    n = T.lscalar("n")
    f = symgraph.function([n], T.alloc(np.float32(1.5), n, n) * 2)
    np.testing.assert_allclose(f(3), np.full((3, 3), 3.0, "f"))
    huge = 400_000                     # 640 GB of float32: more than any GPU has
    with pytest.raises(MemoryError, match="out of device memory on cuda0") as info:
        f(huge)
    assert "Gpu" in str(info.value) and "test_device_memory.py" in str(info.value)
    np.testing.assert_allclose(f(5), np.full((5, 5), 3.0, "f"))


def test_the_gpu_build_of_the_memory_library_compiles_and_links():
    # the library a GPU loads: nvcc, the shared CUDA runtime, warnings as errors
    from symgraph.backends.cuda.compiler import nvcc_path

    if nvcc_path() is None:
        pytest.skip("no CUDA toolkit here: nothing to build the GPU library with")
    lib = device_memory._library(False)
    assert lib.sg_cuda_allocator_of is not None
