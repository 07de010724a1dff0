"""The FFT (c_src/conv/sg_fft.h) and the FFT / Winograd convolution algorithms.

The FFT is checked against numpy.fft through a small ctypes shim; the
algorithms through ``conv_harness`` against the exact float64 reference, over
odd geometries, in float64 (tight) and float32 (relative to the magnitude).
"""

import ctypes

import numpy as np
import pytest

from symgraph.backends.native.assemble import C_SRC
from tests.native import conv_harness as H

# -- the FFT itself ------------------------------------------------------------

_FFT_SHIM = r"""
#include "conv/sg_fft.h"
#define SHIM(T, S)                                                                  \
void fft_dif_##S(T *re, T *im, int64_t n, int64_t m, T *tw) {                      \
    sg_fft_twiddles_##S(n, tw, tw + n);                                             \
    sg_fft_dif_##S(re, im, n, m, tw, tw + n);                                       \
}                                                                                   \
void fft_dit_##S(T *re, T *im, int64_t n, int64_t m, T *tw) {                      \
    sg_fft_twiddles_##S(n, tw, tw + n);                                             \
    sg_fft_dit_##S(re, im, n, m, tw, tw + n);                                       \
}                                                                                   \
void fft_bitrev_##S(T *re, T *im, int64_t n, int64_t m) {                          \
    sg_fft_bitrev_##S(re, im, n, m);                                                \
}                                                                                   \
void fft_nd_##S(T *re, T *im, const int64_t *P, const int64_t *lo, const int64_t *hi, \
                int inverse, T *tw) {                                               \
    T *t[3][2];                                                                     \
    for (int d = 0; d < 3; d++) {                                                   \
        t[d][0] = tw;                                                               \
        t[d][1] = tw + P[d];                                                        \
        sg_fft_twiddles_##S(P[d], t[d][0], t[d][1]);                                \
        tw += 2 * P[d];                                                             \
    }                                                                               \
    sg_fft_nd_##S(re, im, P, lo, hi, inverse, t);                                   \
}
SHIM(float, f32)
SHIM(double, f64)
"""

_FFT_LIB = []


def _fft_lib():
    if _FFT_LIB:
        return _FFT_LIB[0]
    from symgraph.backends.cpu.compiler import base_flags

    sources = (C_SRC / "conv" / "sg_fft.h").read_text()
    path = H.build_shim("fft", _FFT_SHIM, ["-Wall", *base_flags()], sources)
    _FFT_LIB.append(ctypes.CDLL(str(path)))
    return _FFT_LIB[0]


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _split(z, dtype):
    return np.ascontiguousarray(z.real, dtype=dtype), np.ascontiguousarray(z.imag, dtype=dtype)


def _bitrev_index(n):
    bits = max(n.bit_length() - 1, 0)
    return np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n)])


@pytest.mark.parametrize("dtype,sfx,tol", [(np.float64, "f64", 1e-12), (np.float32, "f32", 2e-6)])
@pytest.mark.parametrize("n,m", [(1, 1), (2, 1), (4, 1), (8, 3), (64, 1), (32, 5), (1024, 1)])
def test_fft_1d_matches_numpy(dtype, sfx, tol, n, m):
    rng = np.random.default_rng(n * 7 + m)
    z = rng.standard_normal((n, m)) + 1j * rng.standard_normal((n, m))
    re, im = _split(z, dtype)
    tw = np.zeros(2 * n, dtype)
    lib = _fft_lib()
    getattr(lib, f"fft_dif_{sfx}")(_ptr(re), _ptr(im), ctypes.c_int64(n), ctypes.c_int64(m),
                                   _ptr(tw))
    # DIF leaves the spectrum in bit-reversed order
    want = np.fft.fft(z, axis=0)[_bitrev_index(n)]
    scale = np.abs(want).max()
    assert np.abs(re + 1j * im - want).max() <= tol * scale * np.log2(2 * n)
    getattr(lib, f"fft_bitrev_{sfx}")(_ptr(re), _ptr(im), ctypes.c_int64(n), ctypes.c_int64(m))
    assert np.abs(re + 1j * im - np.fft.fft(z, axis=0)).max() <= tol * scale * np.log2(2 * n)
    # the inverse takes bit-reversed input and returns n * the signal
    getattr(lib, f"fft_bitrev_{sfx}")(_ptr(re), _ptr(im), ctypes.c_int64(n), ctypes.c_int64(m))
    getattr(lib, f"fft_dit_{sfx}")(_ptr(re), _ptr(im), ctypes.c_int64(n), ctypes.c_int64(m),
                                   _ptr(tw))
    assert np.abs((re + 1j * im) / n - z).max() <= tol * np.abs(z).max() * np.log2(2 * n) * 4


@pytest.mark.parametrize("dtype,sfx,tol", [(np.float64, "f64", 1e-12), (np.float32, "f32", 3e-6)])
@pytest.mark.parametrize("P", [(1, 8, 16), (4, 2, 8), (2, 1, 1)])
def test_fft_nd_matches_numpy(dtype, sfx, tol, P):
    rng = np.random.default_rng(sum(P))
    # data only inside a box, as the convolutions load it
    lo, hi = [p // 4 for p in P], [max(p // 4 + 1, p - 1) for p in P]
    z = np.zeros(P, complex)
    box = tuple(slice(a, b) for a, b in zip(lo, hi))
    z[box] = rng.standard_normal(z[box].shape) + 1j * rng.standard_normal(z[box].shape)
    re, im = _split(z, dtype)
    tw = np.zeros(2 * sum(P), dtype)
    Pa, loa, hia = (np.array(v, np.int64) for v in (P, lo, hi))
    fn = getattr(_fft_lib(), f"fft_nd_{sfx}")
    fn(_ptr(re), _ptr(im), _ptr(Pa), _ptr(loa), _ptr(hia), 0, _ptr(tw))
    want = np.fft.fftn(z)
    for axis, p in enumerate(P):
        want = np.take(want, _bitrev_index(p), axis=axis)
    assert np.abs(re + 1j * im - want).max() <= tol * np.abs(want).max() * 10
    # the inverse is correct inside the requested box
    fn(_ptr(re), _ptr(im), _ptr(Pa), _ptr(loa), _ptr(hia), 1, _ptr(tw))
    got = (re + 1j * im)[box] / np.prod(P)
    assert np.abs(got - z[box]).max() <= tol * np.abs(z).max() * 10


# -- the convolution algorithms --------------------------------------------------

# (x shape, w shape, stride, dilation, pad, groups)
GEOMETRIES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), None, None, None, 1),
    ((3, 3, 9, 7), (4, 3, 3, 2), None, None, (1, 2), 1),            # non-square, odd batch
    ((3, 4, 9, 7), (4, 2, 3, 2), (2, 3), (2, 1), (3, 4), 2),        # strides, dilation, groups
    ((1, 1, 6, 5), (1, 1, 1, 1), None, None, None, 1),              # 1x1, batch 1, channel 1
    ((2, 2, 1, 1), (3, 2, 3, 3), None, None, (4, 5), 1),            # padding > filter
    ((1, 2, 70, 40), (3, 2, 5, 3), (2, 1), (1, 3), (2, 1), 1),      # several tiles per axis
    ((2, 2, 5, 40, 6), (3, 2, 2, 3, 3), (1, 2, 1), None, (1, 0, 2), 1),  # 3D
    ((2, 6, 5, 6), (6, 1, 3, 3), None, None, (1, 1), 6),            # depthwise
]
DIRS = ["fwd", "bwd_data", "bwd_filter"]


def _operands(rng, xs, ws, g):
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    dy = rng.standard_normal(H.out_shape(g, len(xs) - 2))
    return {"fwd": (x, w, dy.shape), "bwd_data": (dy, w, xs), "bwd_filter": (x, dy, ws)}


def _check(direction, impl, xs, ws, stride, dil, pad, groups, dtype, tol, seed=0):
    g = H.geometry(xs, ws, stride, dil, pad, groups)
    assert H.supports(direction, impl, g)
    a, b, shape = _operands(np.random.default_rng(seed), xs, ws, g)[direction]
    got = H.run(direction, impl, a, b, g, shape, dtype)
    want = H.reference(direction, a, b, xs, ws, stride, dil, pad, groups)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda gm: "x".join(map(str, gm[0])))
@pytest.mark.parametrize("direction", DIRS)
def test_fft_float64(geom, direction):
    _check(direction, "fft", *geom, np.float64, 1e-12)


@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda gm: "x".join(map(str, gm[0])))
@pytest.mark.parametrize("direction", ["fwd", "bwd_data"])
def test_fft_tiled_float64(geom, direction):
    _check(direction, "fft_tiled", *geom, np.float64, 1e-12)


@pytest.mark.parametrize("impl,direction", [("fft", d) for d in DIRS] +
                         [("fft_tiled", "fwd"), ("fft_tiled", "bwd_data")])
@pytest.mark.parametrize("geom", [GEOMETRIES[2], GEOMETRIES[5]], ids=["strided", "tiles"])
def test_fft_float32(impl, direction, geom):
    _check(direction, impl, *geom, np.float32, 1e-4)


def test_fft_tiled_bounds_the_workspace():
    small = H.geometry((1, 2, 64, 64), (2, 2, 3, 3), pad=(1, 1))
    large = H.geometry((1, 2, 512, 512), (2, 2, 3, 3), pad=(1, 1))
    assert H.workspace("fwd", "fft_tiled", large) == H.workspace("fwd", "fft_tiled", small)
    assert H.workspace("fwd", "fft", large) > 16 * H.workspace("fwd", "fft", small)


def test_fft_refuses_huge_geometries():
    g = H.geometry((1, 512, 1024, 1024), (512, 512, 3, 3), pad=(1, 1))
    assert not H.supports("fwd", "fft", g)
    assert not H.supports("bwd_filter", "fft", g)
    assert H.supports("fwd", "fft_tiled", H.geometry((1, 4, 1024, 1024), (4, 4, 3, 3)))


WINO_GEOMETRIES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), None, 1),
    ((2, 4, 7, 9), (6, 2, 3, 3), (1, 4), 2),          # odd output sizes, pad > filter, groups
    ((1, 1, 3, 3), (1, 1, 3, 3), None, 1),            # one output
    ((3, 20, 11, 6), (24, 20, 3, 3), (1, 1), 1),      # channels enough for the GEMM path
    ((65, 2, 6, 6), (3, 2, 3, 3), (2, 0), 1),         # tiles past one chunk block
]


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("geom", WINO_GEOMETRIES, ids=lambda gm: "x".join(map(str, gm[0])))
def test_winograd(geom, dtype, tol):
    xs, ws, pad, groups = geom
    _check("fwd", "winograd", xs, ws, None, None, pad, groups, dtype, tol)


def test_winograd_3d_with_unit_depth_filter():
    # depth stride and padding: planes outside the input give zeros
    _check("fwd", "winograd", (2, 2, 3, 5, 6), (3, 2, 1, 3, 3), (2, 1, 1), None, (1, 1, 1), 1,
           np.float64, 1e-12)


@pytest.mark.parametrize("xs,ws,stride,dil", [
    ((1, 2, 8, 8), (2, 2, 3, 3), (2, 2), None),
    ((1, 2, 8, 8), (2, 2, 3, 3), None, (2, 2)),
    ((1, 2, 8, 8), (2, 2, 5, 5), None, None),
    ((1, 2, 8, 8), (2, 2, 3, 2), None, None),
    ((1, 2, 4, 8, 8), (2, 2, 3, 3, 3), None, None),
])
def test_winograd_refuses_what_it_does_not_support(xs, ws, stride, dil):
    g = H.geometry(xs, ws, stride, dil)
    assert not H.supports("fwd", "winograd", g)
    assert H.supports("fwd", "fft", g)
    assert not H.has("bwd_data", "winograd") and not H.has("bwd_filter", "fft_tiled")
