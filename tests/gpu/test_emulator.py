"""The emulated CUDA device on its own: CUDA kernels built for the CPU with the
emulation header and launched through ctypes, checked against NumPy.

No GPU is needed (so no ``gpu`` mark). The kernel source is plain CUDA: one
test also compiles it with nvcc, so that the emulation never needs source
that a GPU build would reject.
"""

import ctypes
import subprocess
import sys

import numpy as np
import pytest

from symgraph.backends.cuda.compiler import check_with_nvcc, nvcc_path
from symgraph.backends.cuda.emulator import (EmulatedCompileError, EmulatedLaunchError,
                                             EmulatedModule, build_emulated, emulation_source,
                                             kernel_names)

SOURCE = r"""
#include <assert.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    return v;
}

// A fused element-wise kernel over a grid-stride loop: any n, any grid.
__global__ void fused(const float *__restrict__ x, const float *__restrict__ y,
                      float *__restrict__ out, long long n, float a) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = a * x[i] * y[i] + expf(-fabsf(x[i]));
}

// One partial sum per block: static shared memory, a tree with barriers.
__global__ void block_sum(const float *x, float *partial, int n) {
    __shared__ float s[256];
    float acc = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// Each block's slice reversed through dynamic shared memory, and the
// __syncthreads_count/and/or of "x > 0" per block.
__global__ void reverse_blocks(const float *x, float *out, int *votes) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = x[i];
    int count = __syncthreads_count(x[i] > 0.f);
    int all = __syncthreads_and(x[i] > 0.f);
    int any = __syncthreads_or(x[i] > 0.f);
    out[i] = buf[blockDim.x - 1 - threadIdx.x];
    if (threadIdx.x == 0) {
        votes[3 * blockIdx.x] = count;
        votes[3 * blockIdx.x + 1] = all;
        votes[3 * blockIdx.x + 2] = any;
    }
}

// Two typed arrays carved out of one aligned dynamic buffer.
__global__ void two_arrays(const float *x, const int *k, float *out) {
    extern __shared__ __align__(16) unsigned char smem[];
    float *fs = reinterpret_cast<float *>(smem);
    int *ks = reinterpret_cast<int *>(smem + blockDim.x * sizeof(float));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    fs[threadIdx.x] = x[i];
    ks[threadIdx.x] = k[i];
    __syncthreads();
    out[i] = fs[(threadIdx.x + 1) % blockDim.x] * ks[threadIdx.x];
}

// Per warp: a sum (down), a max to every lane (xor), lane 3's value (shfl), an
// inclusive scan (up), and sums over segments of 8 lanes (width 8).
__global__ void warp_ops(const float *x, float *sums, float *maxes, float *bcast,
                         float *scan, float *seg8) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    float v = x[i];
    float s = warp_sum(v);
    if (lane == 0) sums[i / 32] = s;
    float m = v;
    for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    maxes[i] = m;
    bcast[i] = __shfl_sync(0xffffffffu, v, 3);
    float c = v;
    for (int d = 1; d < 32; d <<= 1) {
        float o = __shfl_up_sync(0xffffffffu, c, d);
        if (lane >= d) c += o;
    }
    scan[i] = c;
    float s8 = v;
    for (int d = 4; d > 0; d >>= 1) s8 += __shfl_down_sync(0xffffffffu, s8, d, 8);
    if (lane % 8 == 0) seg8[i / 8] = s8;
}

// Ballot, any and all of "x > 0" per warp; a block of 48 threads ends in a
// 16-lane warp, whose mask names only the lanes that exist.
__global__ void votes(const float *x, unsigned *ballots, int *anys, int *alls) {
    unsigned warp = threadIdx.x / 32, live = blockDim.x - warp * 32;
    unsigned mask = live >= 32 ? 0xffffffffu : (1u << live) - 1u;
    int pred = x[blockIdx.x * blockDim.x + threadIdx.x] > 0.f;
    unsigned b = __ballot_sync(mask, pred);
    int any = __any_sync(mask, pred), all = __all_sync(mask, pred);
    if (threadIdx.x % 32 == 0) {
        int g = blockIdx.x * ((blockDim.x + 31) / 32) + warp;
        ballots[g] = b;
        anys[g] = any;
        alls[g] = all;
    }
}

// Per warp: __reduce_add/min/max over all lanes, then a sum over each half by
// two groups with their own masks, in divergent branches.
__global__ void warp_reductions(const int *x, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32, w = i / 32;
    int add = __reduce_add_sync(0xffffffffu, x[i]);
    int lo = __reduce_min_sync(0xffffffffu, x[i]);
    int hi = __reduce_max_sync(0xffffffffu, x[i]);
    int half = lane < 16 ? __reduce_add_sync(0x0000ffffu, x[i])
                         : __reduce_add_sync(0xffff0000u, x[i]);
    __syncwarp();
    if (lane == 0) {
        out[5 * w] = add;
        out[5 * w + 1] = lo;
        out[5 * w + 2] = hi;
        out[5 * w + 3] = half;
    }
    if (lane == 16) out[5 * w + 4] = half;
}

// A weighted histogram with float atomics, counts with int atomics, a double total.
__global__ void histogram(const int *bins, const float *w, float *hist, int *counts,
                          double *total, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&hist[bins[i]], w[i]);
        atomicAdd(&counts[bins[i]], 1);
        atomicAdd(total, (double)w[i]);
    }
}

// out = {max, min, sum, the index that won the CAS, the same index by exchange}.
__global__ void int_atomics(const int *x, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicMax(&out[0], x[i]);
    atomicMin(&out[1], x[i]);
    atomicAdd(&out[2], x[i]);
    if (atomicCAS(&out[3], -1, i) == -1) atomicExch(&out[4], i);
}

template <typename T>
__global__ void scale(T *x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
template __global__ void scale<double>(double *, double, int);

// Wrong on purpose: the odd threads leave before the barrier.
__global__ void exit_before_barrier(float *out) {
    if (threadIdx.x % 2) return;
    __syncthreads();
    out[threadIdx.x] = 1.f;
}

// Wrong on purpose: two halves of the block wait at different barriers.
__global__ void split_barriers(float *out) {
    if (threadIdx.x < 16) {
        out[threadIdx.x] = 1.f;
        __syncthreads();
    } else {
        __syncthreads();
        out[threadIdx.x] = 2.f;
    }
}

// Wrong on purpose: lane 0 waits for the block while its warp shuffles.
__global__ void warp_vs_block(float *out) {
    float v = out[threadIdx.x];
    if (threadIdx.x == 0) __syncthreads();
    else v = __shfl_down_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void trap_on_negative(const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] < 0.f) __trap();
}

__global__ void assert_non_negative(const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] >= 0.f);
}
"""

KERNELS = {name: name for name in kernel_names(SOURCE)} | {"scale_f64": "scale<double>"}


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = build_emulated(SOURCE, tmp_path_factory.mktemp("emu") / "kernels.so", kernels=KERNELS)
    return EmulatedModule(path)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def i32(v):
    return np.int32(v)


def test_kernel_names_skip_templates_and_comments():
    assert kernel_names(SOURCE) == [
        "fused", "block_sum", "reverse_blocks", "two_arrays", "warp_ops", "votes",
        "warp_reductions", "histogram",
        "int_atomics", "exit_before_barrier", "split_barriers", "warp_vs_block",
        "trap_on_negative", "assert_non_negative"]
    assert kernel_names("// __global__ void gone(int x) {}\n/* __global__ void also(int) */") == []


def test_emulation_source_keeps_line_numbers():
    text = ("__global__ void k(float *o) {\n  extern __shared__\n  float buf[];\n"
            "  o[0] = buf[0];\n}\n")
    out = emulation_source(text)
    assert "CUDA_EMU_EXTERN_SHARED(float, buf);" in out
    assert out.splitlines()[3] == "  o[0] = buf[0];"
    assert out.rstrip().endswith("CUDA_EMU_EXPORT_AS(k, k)")


def test_fused_elementwise_grid_stride_odd_size(module, rng):
    n = 100003
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    # 40 blocks of 256 threads: fewer threads than elements, so the loop strides.
    module.launch("fused", 40, 256, [x, y, out, np.int64(n), np.float32(1.5)])
    np.testing.assert_allclose(out, 1.5 * x * y + np.exp(-np.abs(x)), rtol=1e-5, atol=1e-6)


def test_block_reduction_static_shared_memory(module, rng):
    n = 100003
    x = rng.standard_normal(n, dtype=np.float32)
    partial = np.zeros(24, np.float32)
    module.launch("block_sum", 24, 256, [x, partial, i32(n)])
    np.testing.assert_allclose(partial.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)


def test_shuffled_thread_order_gives_the_same_reduction(module, rng, monkeypatch):
    x = rng.standard_normal(5000, dtype=np.float32)
    results = []
    for seed in ("0", "12345"):
        monkeypatch.setenv("CUDA_EMU_SHUFFLE", seed)
        partial = np.zeros(4, np.float32)
        module.launch("block_sum", 4, 256, [x, partial, i32(x.size)])
        results.append(partial)
    np.testing.assert_array_equal(results[0], results[1])


def test_dynamic_shared_memory_and_barrier_votes(module, rng):
    block, grid = 64, 5
    x = rng.standard_normal(block * grid, dtype=np.float32)
    x[:block] = np.abs(x[:block]) + 0.1        # block 0: all positive
    x[block:2 * block] = -np.abs(x[block:2 * block]) - 0.1  # block 1: none positive
    out = np.zeros_like(x)
    votes = np.zeros(3 * grid, np.int32)
    module.launch("reverse_blocks", grid, block, [x, out, votes], shared_bytes=block * 4)
    np.testing.assert_array_equal(out, x.reshape(grid, block)[:, ::-1].ravel())
    positive = (x.reshape(grid, block) > 0)
    expected = np.stack([positive.sum(1), positive.all(1), positive.any(1)], 1).ravel()
    np.testing.assert_array_equal(votes, expected)


def test_dynamic_shared_memory_typed_views(module, rng):
    block, grid = 32, 3
    x = rng.standard_normal(block * grid, dtype=np.float32)
    k = rng.integers(-5, 5, block * grid, dtype=np.int32)
    out = np.zeros_like(x)
    module.launch("two_arrays", grid, block, [x, k, out], shared_bytes=block * 8)
    shifted = np.roll(x.reshape(grid, block), -1, axis=1).ravel()
    np.testing.assert_array_equal(out, shifted * k.astype(np.float32))


def test_warp_shuffles(module, rng):
    n = 128
    x = rng.standard_normal(n, dtype=np.float32)
    sums, seg8 = np.zeros(n // 32, np.float32), np.zeros(n // 8, np.float32)
    maxes, bcast, scan = (np.zeros(n, np.float32) for _ in range(3))
    module.launch("warp_ops", 2, 64, [x, sums, maxes, bcast, scan, seg8])
    warps = x.reshape(-1, 32)
    np.testing.assert_allclose(sums, warps.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(maxes, np.repeat(warps.max(1), 32))
    np.testing.assert_array_equal(bcast, np.repeat(warps[:, 3], 32))
    np.testing.assert_allclose(scan, np.cumsum(warps, axis=1).ravel(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(seg8, x.reshape(-1, 8).sum(1), rtol=1e-5)


def test_warp_reductions_and_masked_groups(module, rng):
    x = rng.integers(-1000, 1000, 128, dtype=np.int32)
    out = np.zeros(5 * 4, np.int32)
    module.launch("warp_reductions", 2, 64, [x, out])
    warps = x.reshape(4, 32)
    expected = np.stack([warps.sum(1), warps.min(1), warps.max(1),
                         warps[:, :16].sum(1), warps[:, 16:].sum(1)], 1).ravel()
    np.testing.assert_array_equal(out, expected)


def test_ballot_any_all_with_a_partial_warp(module, rng):
    block, grid = 48, 3
    x = rng.standard_normal(block * grid, dtype=np.float32)
    x[block:block + 32] = 1.0      # block 1, warp 0: all lanes vote yes
    x[2 * block + 32:] = -1.0      # block 2, warp 1 (16 lanes): none votes yes
    ballots = np.zeros(2 * grid, np.uint32)
    anys, alls = np.zeros(2 * grid, np.int32), np.zeros(2 * grid, np.int32)
    module.launch("votes", grid, block, [x, ballots, anys, alls])
    expected_ballot, expected_any, expected_all = [], [], []
    for b in range(grid):
        for w, live in ((0, 32), (1, 16)):
            pred = x[b * block + 32 * w: b * block + 32 * w + live] > 0
            expected_ballot.append(sum(1 << lane for lane in np.flatnonzero(pred)))
            expected_any.append(pred.any())
            expected_all.append(pred.all())
    np.testing.assert_array_equal(ballots, expected_ballot)
    np.testing.assert_array_equal(anys, expected_any)
    np.testing.assert_array_equal(alls, expected_all)
    assert ballots[2] == 0xFFFFFFFF and ballots[5] == 0  # no phantom lanes in the last warp


def test_atomic_histogram(module, rng):
    n, nbins = 20011, 17
    bins = rng.integers(0, nbins, n, dtype=np.int32)
    w = rng.random(n, dtype=np.float32)
    hist, counts, total = np.zeros(nbins, np.float32), np.zeros(nbins, np.int32), np.zeros(1)
    module.launch("histogram", 8, 128, [bins, w, hist, counts, total, i32(n)])
    np.testing.assert_allclose(hist, np.bincount(bins, weights=w, minlength=nbins), rtol=1e-4)
    np.testing.assert_array_equal(counts, np.bincount(bins, minlength=nbins))
    np.testing.assert_allclose(total[0], w.sum(dtype=np.float64), rtol=1e-12)


def test_integer_atomics(module, rng):
    n = 1000
    x = rng.integers(-10**6, 10**6, n, dtype=np.int32)
    out = np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -1, -1], np.int32)
    module.launch("int_atomics", 4, 256, [x, out, i32(n)])
    assert out[0] == x.max() and out[1] == x.min() and out[2] == x.sum()
    assert 0 <= out[3] < n and out[4] == out[3]


def test_template_kernel_exported_by_name(module):
    x = np.arange(10, dtype=np.float64)
    module.launch("scale_f64", 1, 32, [x, np.float64(2.5), i32(10)])
    np.testing.assert_array_equal(x, np.arange(10) * 2.5)


def test_exit_before_barrier_is_an_error_naming_the_kernel(module):
    out = np.zeros(32, np.float32)
    with pytest.raises(EmulatedLaunchError,
                       match=r"exit_before_barrier: barrier divergence") as info:
        module.launch("exit_before_barrier", 2, 32, [out])
    assert info.value.kernel == "exit_before_barrier"
    assert "16 of 32 threads exited" in str(info.value)


def test_different_barriers_are_an_error(module):
    out = np.zeros(32, np.float32)
    with pytest.raises(EmulatedLaunchError, match=r"split_barriers: .*different __syncthreads\(\), "
                       r"kernels.emu.cu:\d+ \(thread 0\) and kernels.emu.cu:\d+ \(thread 16\)"):
        module.launch("split_barriers", 1, 32, [out])


def test_warp_op_waiting_on_a_block_barrier_is_an_error(module):
    out = np.zeros(32, np.float32)
    with pytest.raises(EmulatedLaunchError,
                       match=r"warp_vs_block: warp divergence.*__syncthreads"):
        module.launch("warp_vs_block", 1, 32, [out])


def test_trap_and_device_assert_fail_the_launch_only(module):
    x = np.ones(64, np.float32)
    x[40] = -1.0
    with pytest.raises(EmulatedLaunchError,
                       match=r"__trap\(\) called.*thread \(8, 0, 0\)") as info:
        module.launch("trap_on_negative", 2, 32, [x, i32(64)])
    assert info.value.code == 715
    with pytest.raises(EmulatedLaunchError,
                       match=r"device-side assert triggered.*x\[i\] >= 0") as info:
        module.launch("assert_non_negative", 2, 32, [x, i32(64)])
    assert info.value.code == 710
    # The device stays usable after a failed launch.
    module.launch("assert_non_negative", 2, 32, [np.abs(x), i32(64)])


def test_invalid_launch_configurations(module):
    out = np.zeros(4, np.float32)
    args = [out, out, out, np.int64(0), np.float32(1)]
    with pytest.raises(EmulatedLaunchError,
                       match=r"block \(2048, 1, 1\) has 2048 threads") as info:
        module.launch("fused", 1, 2048, args)
    assert info.value.code == 9
    with pytest.raises(EmulatedLaunchError, match=r"grid \(0, 1, 1\) has a zero dimension"):
        module.launch("fused", 0, 32, args)
    with pytest.raises(EmulatedLaunchError, match=r"block \(32, 1, 128\)"):
        module.launch("fused", 1, (32, 1, 128), args)
    with pytest.raises(EmulatedLaunchError, match=r"dynamic shared memory of 1048576 bytes"):
        module.launch("fused", 1, 32, args, shared_bytes=1 << 20)


def test_arguments_are_checked_against_the_kernel(module):
    out = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"fused takes 5 arguments, 2 given"):
        module.launch("fused", 1, 32, [out, out])
    with pytest.raises(TypeError, match=r"argument 4: the parameter has 4 bytes"):
        module.launch("fused", 1, 32, [out, out, out, np.int64(4), np.float64(1)])
    with pytest.raises(TypeError, match=r"no fixed C type"):
        module.launch("fused", 1, 32, [out, out, out, 4, np.float32(1)])
    with pytest.raises(ValueError, match=r"C-contiguous"):
        module.launch("fused", 1, 32, [out[::2], out, out, np.int64(2), np.float32(1)])
    with pytest.raises(KeyError, match=r"no kernel 'nope'"):
        module.launch("nope", 1, 32, [])
    assert module.kernel_params("fused") == (8, 8, 8, 8, 4)
    module.launch("fused", 1, 32, [out, out, out, ctypes.c_longlong(4), ctypes.c_float(1)])


def test_compile_error_carries_the_compiler_output(tmp_path):
    bad = "__global__ void broken(float *x) { x[0] = undefined_name; }\n"
    with pytest.raises(EmulatedCompileError,
                       match=r"(?s)bad.emu.cu:1:.*error.*undefined_name"):
        build_emulated(bad, tmp_path / "bad.so")
    assert not (tmp_path / "bad.so").exists()


def test_source_is_valid_cuda_for_nvcc(tmp_path):
    if nvcc_path() is None:
        pytest.skip("nvcc not found under the CUDA root (flag cuda.root, or CUDA_ROOT/CUDA_HOME)")
    obj = check_with_nvcc(SOURCE, tmp_path, arch="90", what="the emulator's test kernels")
    assert obj.stat().st_size > 0


def test_is_available_and_cheap_import():
    # A fresh interpreter: what does `import symgraph.gpu` add to `import symgraph`?
    code = ("import sys, symgraph; before = set(sys.modules); import symgraph.gpu; "
            "from symgraph.backends.cuda.device import driver_available; "
            "print(symgraph.gpu.is_available(), driver_available()); "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    available, count = proc.stdout.splitlines()[0].split()
    added = set(proc.stdout.splitlines()[1].split())
    assert available == str(int(count) > 0)
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert available == "False"  # no driver on this machine
    assert added <= {"symgraph.gpu", "symgraph.gpu.placement", "symgraph.backends.cuda",
                     "symgraph.backends.cuda.device", "symgraph.tensor.gpu_contexts"}, added
