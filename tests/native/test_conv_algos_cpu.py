"""The direct, tiled and GEMM convolution algorithms of ``c_src/conv``, run
through ``conv_harness`` and checked against the float64 NumPy reference.

Every implementation runs every direction (fwd, bwd_data, bwd_filter) over
odd geometries, in float32 and float64; the harness fills the output and the
workspace with NaN, so an element left unwritten, or a workspace read before
it is written, shows as NaN.
"""

import ctypes
import ctypes.util
import zlib

import numpy as np
import pytest

from tests.native import conv_harness as H

IMPLS = ("direct", "tiled", "gemm")
DIRS = ("fwd", "bwd_data", "bwd_filter")

# name: (x_shape, w_shape, stride, dilation, pad, groups)
CASES = {
    "3x3": ((2, 3, 7, 8), (4, 3, 3, 3), None, None, None, 1),
    "1x1": ((2, 4, 5, 6), (3, 4, 1, 1), None, None, None, 1),
    "1x1_stride2": ((1, 3, 5, 6), (2, 3, 1, 1), (2, 2), None, None, 1),
    "non_square": ((2, 2, 6, 7), (3, 2, 2, 4), None, None, None, 1),
    "stride_gt_filter": ((1, 2, 9, 10), (2, 2, 2, 2), (3, 4), None, None, 1),
    "pad_gt_filter": ((2, 2, 4, 5), (3, 2, 2, 3), None, None, (3, 4), 1),
    "full": ((1, 2, 3, 4), (2, 2, 3, 3), None, None, (2, 2), 1),
    "groups2": ((2, 4, 6, 6), (6, 2, 3, 3), None, None, (1, 0), 2),
    "depthwise": ((2, 3, 6, 5), (3, 1, 3, 3), (2, 1), None, (1, 1), 3),
    "dilation": ((1, 2, 9, 9), (2, 2, 3, 2), None, (2, 3), None, 1),
    "mixed": ((2, 2, 7, 6), (2, 2, 3, 3), (2, 2), (2, 1), (2, 1), 1),
    "batch1_chan1": ((1, 1, 5, 5), (1, 1, 3, 3), None, None, None, 1),
    "out_1x1": ((2, 3, 3, 3), (2, 3, 3, 3), None, None, None, 1),
    "out_empty": ((2, 2, 2, 5), (2, 2, 3, 3), None, None, None, 1),
    "batch0": ((0, 2, 4, 4), (3, 2, 3, 3), None, None, None, 1),
    "3d": ((2, 2, 4, 5, 6), (3, 2, 2, 3, 2), (1, 2, 1), (2, 1, 1), (1, 0, 2), 1),
    "3d_groups": ((1, 4, 3, 4, 4), (4, 2, 3, 1, 2), None, None, (1, 1, 0), 2),
    "3d_1x1x1": ((2, 3, 2, 3, 4), (2, 3, 1, 1, 1), None, None, None, 1),
    # several tiles of 'tiled' along both positions and rows (R = 576)
    "tiles": ((1, 64, 11, 11), (2, 64, 3, 3), None, None, None, 1),
}

TOL = {np.float32: 1e-4, np.float64: 1e-10}


def _operands(direction, case, rng):
    """(a, b, result shape, geometry) for ``direction`` on ``case``."""
    xs, wsh, stride, dil, pad, groups = case
    g = H.geometry(xs, wsh, stride, dil, pad, groups)
    ys = H.out_shape(g, len(xs) - 2)
    x, w, dy = (rng.standard_normal(s) for s in (xs, wsh, ys))
    return {"fwd": (x, w, ys), "bwd_data": (dy, w, xs),
            "bwd_filter": (x, dy, wsh)}[direction] + (g,)


def _check(out, ref, dtype):
    assert out.shape == ref.shape
    assert not np.isnan(out).any(), "an output element was not written"
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    err = float(np.abs(out - ref).max(initial=0.0)) / scale
    assert err <= TOL[dtype], f"relative error {err:.3g}"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_reference(impl, direction, name):
    case = CASES[name]
    rng = np.random.default_rng(zlib.crc32(f"{impl} {direction} {name}".encode()))
    a, b, shape, g = _operands(direction, case, rng)
    assert H.supports(direction, impl, g)
    ref = H.reference(direction, a, b, case[0], case[1], *case[2:])
    for dtype in (np.float32, np.float64):
        _check(H.run(direction, impl, a, b, g, shape, dtype), ref, dtype)


def _bits(direction, impl, case, openmp=False, seed=5):
    a, b, shape, g = _operands(direction, case, np.random.default_rng(seed))
    return H.run(direction, impl, a, b, g, shape, np.float32, openmp=openmp).view(np.uint32)


# Large enough to cross the threshold above which the algorithms use threads.
BIG = ((7, 4, 14, 14), (8, 4, 3, 3), None, None, (1, 1), 1)


@pytest.mark.parametrize("direction", ("bwd_data", "bwd_filter"))
def test_gemm_backward_is_deterministic(direction):
    first = _bits(direction, "gemm", BIG)
    assert np.array_equal(first, _bits(direction, "gemm", BIG))


@pytest.fixture
def three_threads():
    """OpenMP set to 3 threads (an odd count: uneven image runs) for one test."""
    H.library(openmp=True)
    gomp = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
    before = gomp.omp_get_max_threads()
    gomp.omp_set_num_threads(3)
    yield
    gomp.omp_set_num_threads(before)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("direction", DIRS)
def test_openmp_matches_reference_and_repeats(three_threads, impl, direction):
    a, b, shape, g = _operands(direction, BIG, np.random.default_rng(3))
    ref = H.reference(direction, a, b, BIG[0], BIG[1], *BIG[2:])
    out = H.run(direction, impl, a, b, g, shape, np.float64, openmp=True)
    _check(out, ref, np.float64)
    if impl == "gemm" and direction != "fwd":
        first = _bits(direction, impl, BIG, openmp=True)
        assert np.array_equal(first, _bits(direction, impl, BIG, openmp=True))


def _run_exact_workspace(direction, impl, g, a, b, shape, dtype=np.float64):
    """Run with a workspace of exactly the queried size followed by guard
    elements; returns (output, whether the guard is intact)."""
    lib = H.library()
    n = H.workspace(direction, impl, g)
    a = np.ascontiguousarray(a, dtype=dtype)
    b = np.ascontiguousarray(b, dtype=dtype)
    out = np.full(shape, np.nan, dtype=dtype)
    ws = np.full(n + 64, 12345.0, dtype=dtype)
    rc = lib.sg_conv_harness_run(H.DIRECTIONS[direction], H.IMPLS[impl], 1, ctypes.byref(g),
                                 a.ctypes.data_as(ctypes.c_void_p),
                                 b.ctypes.data_as(ctypes.c_void_p),
                                 out.ctypes.data_as(ctypes.c_void_p),
                                 ws.ctypes.data_as(ctypes.c_void_p))
    assert rc == 0
    return out, bool((ws[n:] == 12345.0).all())


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("name", ["3x3", "tiles", "groups2", "3d"])
def test_workspace_bounds_what_is_written(impl, direction, name):
    case = CASES[name]
    a, b, shape, g = _operands(direction, case, np.random.default_rng(1))
    out, intact = _run_exact_workspace(direction, impl, g, a, b, shape)
    assert intact, "the algorithm wrote past its workspace"
    _check(out, H.reference(direction, a, b, case[0], case[1], *case[2:]), np.float64)


def test_workspace_sizes():
    small = H.geometry((2, 16, 20, 20), (8, 16, 3, 3))
    large = H.geometry((2, 16, 300, 300), (8, 16, 3, 3))
    for direction in DIRS:
        assert H.workspace(direction, "direct", large) == 0
        # tiled: one tile (at most 32768 elements), whatever the image size; the
        # filter gradient adds its parts' partial gradients (2 images: 2 parts)
        partials = 8 * 16 * 9 if direction == "bwd_filter" else 0
        assert H.workspace(direction, "tiled", large) == H.workspace(direction, "tiled", small)
        assert 0 < H.workspace(direction, "tiled", large) <= 32768 + partials
    # gemm: the whole im2col matrix (R x P) of one image
    assert H.workspace("fwd", "gemm", large) == 16 * 9 * 298 * 298
    # a 1x1 stride-1 filter reads the image as it lies
    assert H.workspace("fwd", "gemm", H.geometry((2, 16, 9, 9), (8, 16, 1, 1))) == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_inconsistent_geometry_is_refused(impl):
    bad_groups = H.geometry((1, 3, 5, 5), (4, 1, 3, 3), groups=2)
    bad_out = H.geometry((1, 2, 5, 5), (2, 2, 3, 3))
    bad_out.out[2] = 4
    zero_stride = H.geometry((1, 2, 5, 5), (2, 2, 3, 3))
    zero_stride.stride[1] = 0
    for direction in DIRS:
        assert H.has(direction, impl)
        for g in (bad_groups, bad_out, zero_stride):
            assert not H.supports(direction, impl, g)
            with pytest.raises(RuntimeError, match="returned"):
                H.run(direction, impl, np.zeros(1), np.zeros(1), g, (1,), np.float64)
