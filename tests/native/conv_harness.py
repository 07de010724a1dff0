"""Run the convolution algorithms of ``c_src/conv`` directly, and a NumPy reference.

The algorithm tests compile ``conv/sg_conv.h`` into a small library with an
exported shim (``sg_conv_harness_*``), call an implementation through ctypes
and compare with ``reference``.  Arrays are 4-D (2D convolution: a depth of 1
is inserted) or 5-D; the algorithms see C-contiguous compute-type buffers.
"""

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from symgraph.backends.native.assemble import C_SRC

DIRECTIONS = {"fwd": 0, "bwd_data": 1, "bwd_filter": 2}
IMPLS = {"direct": 0, "tiled": 1, "gemm": 2, "fft": 3, "fft_tiled": 4, "winograd": 5}

_SHIM = r"""
#include "conv/sg_conv.h"
int sg_conv_harness_has(int dir, int impl) { return sg_conv_lookup(dir, impl) != 0; }
int sg_conv_harness_ok(int dir, int impl, const sg_conv_geom *g) {
    return sg_conv_lookup(dir, impl)->ok(g);
}
size_t sg_conv_harness_ws(int dir, int impl, const sg_conv_geom *g) {
    return sg_conv_lookup(dir, impl)->ws(g);
}
int sg_conv_harness_run(int dir, int impl, int dbl, const sg_conv_geom *g, const void *a,
                        const void *b, void *out, void *ws) {
    const sg_conv_impl *p = sg_conv_lookup(dir, impl);
    return dbl ? p->f64(g, a, b, out, ws) : p->f32(g, a, b, out, ws);
}
void sg_conv_harness_blas(void *s, void *d) {
    sg_conv_blas_sgemm = (sg_conv_sgemm_t)s;
    sg_conv_blas_dgemm = (sg_conv_dgemm_t)d;
}
"""


class Geom(ctypes.Structure):
    """Mirror of ``sg_conv_geom``."""

    _fields_ = [("N", ctypes.c_int64), ("C", ctypes.c_int64), ("K", ctypes.c_int64),
                ("G", ctypes.c_int64), ("inp", ctypes.c_int64 * 3), ("k", ctypes.c_int64 * 3),
                ("out", ctypes.c_int64 * 3), ("stride", ctypes.c_int64 * 3),
                ("dil", ctypes.c_int64 * 3), ("pad", ctypes.c_int64 * 3)]


_LIB = {}


def build_shim(name, source, flags, key_text=""):
    """Compile the C ``source`` (which may include headers from c_src/) with
    ``flags`` into a library cached by content; returns its path.  ``key_text``:
    what else the build depends on (the text of the headers it includes)."""
    digest = hashlib.sha256((source + key_text + " ".join(flags)).encode()).hexdigest()[:20]
    build = Path(tempfile.gettempdir()) / "symgraph-conv-harness"
    build.mkdir(exist_ok=True)
    path = build / f"{name}-{digest}.so"
    if not path.exists():
        # Per-process names: test workers may build the same library at once.
        src = build / f"{name}-{digest}.{os.getpid()}.c"
        src.write_text(source)
        tmp = build / f"{name}-{digest}.{os.getpid()}.tmp"
        proc = subprocess.run(["gcc", *flags, "-I", str(C_SRC), str(src), "-o", str(tmp), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"compiling the {name} test library failed:\n{proc.stderr}")
        os.replace(tmp, path)
        src.unlink()
    return path


def library(openmp=False):
    """The harness library, built once per (sources, openmp)."""
    from symgraph.backends.cpu.compiler import base_flags

    # The flags of the native backend, so that the algorithms are tested and
    # timed as generated code compiles them (vectorizer cost model, no FMA
    # contraction).
    flags = ["-Wall", *base_flags()] + (["-fopenmp"] if openmp else [])
    sources = "".join(p.read_text() for p in sorted((C_SRC / "conv").iterdir()) if p.is_file())
    path = build_shim("conv", _SHIM, flags, sources)
    if path in _LIB:
        return _LIB[path]
    lib = ctypes.CDLL(str(path))
    lib.sg_conv_harness_ws.restype = ctypes.c_size_t
    from symgraph.backends.cpu.blas.support import blas_address

    lib.sg_conv_harness_blas(ctypes.c_void_p(blas_address("sgemm")),
                             ctypes.c_void_p(blas_address("dgemm")))
    _LIB[path] = lib
    return lib


def _spatial3(values, fill):
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values


def out_size(i, k, stride, dil, pad):
    """The output length of one spatial dimension."""
    return (i + 2 * pad - dil * (k - 1) - 1) // stride + 1


def geometry(x_shape, w_shape, stride=None, dil=None, pad=None, groups=1):
    """An ``sg_conv_geom`` for input shape ``x_shape`` and filter shape ``w_shape``."""
    nd = len(x_shape) - 2
    stride = stride or (1,) * nd
    dil = dil or (1,) * nd
    pad = pad or (0,) * nd
    g = Geom()
    g.N, g.C, g.K, g.G = x_shape[0], x_shape[1], w_shape[0], groups
    ins, ks = _spatial3(x_shape[2:], 1), _spatial3(w_shape[2:], 1)
    st, dl, pd = _spatial3(stride, 1), _spatial3(dil, 1), _spatial3(pad, 0)
    for d in range(3):
        g.inp[d], g.k[d], g.stride[d], g.dil[d], g.pad[d] = ins[d], ks[d], st[d], dl[d], pd[d]
        g.out[d] = out_size(ins[d], ks[d], st[d], dl[d], pd[d])
    return g


def out_shape(g, nd):
    """The shape of y for geometry ``g`` with ``nd`` spatial dimensions."""
    return (g.N, g.K) + tuple(g.out)[3 - nd:]


def has(direction, impl):
    """True when ``impl`` exists for ``direction``."""
    return bool(library().sg_conv_harness_has(DIRECTIONS[direction], IMPLS[impl]))


def supports(direction, impl, g):
    """True when ``impl`` handles geometry ``g`` (False when it does not exist)."""
    if not has(direction, impl):
        return False
    return bool(library().sg_conv_harness_ok(DIRECTIONS[direction], IMPLS[impl],
                                             ctypes.byref(g)))


def workspace(direction, impl, g):
    """The workspace of ``impl`` for ``g``, in elements."""
    return library().sg_conv_harness_ws(DIRECTIONS[direction], IMPLS[impl], ctypes.byref(g))


def run(direction, impl, a, b, g, result_shape, dtype, openmp=False):
    """Run one algorithm; ``a``/``b`` as the direction's inputs; returns the output."""
    lib = library(openmp)
    a = np.ascontiguousarray(a, dtype=dtype)
    b = np.ascontiguousarray(b, dtype=dtype)
    # NaN-filled: an algorithm that leaves an element unwritten shows it.
    out = np.full(result_shape, np.nan, dtype=dtype)
    ws_elems = lib.sg_conv_harness_ws(DIRECTIONS[direction], IMPLS[impl], ctypes.byref(g))
    ws = np.full(max(int(ws_elems), 1) + 16, np.nan, dtype=dtype)
    rc = lib.sg_conv_harness_run(DIRECTIONS[direction], IMPLS[impl], int(dtype == np.float64),
                                 ctypes.byref(g), a.ctypes.data_as(ctypes.c_void_p),
                                 b.ctypes.data_as(ctypes.c_void_p),
                                 out.ctypes.data_as(ctypes.c_void_p),
                                 ws.ctypes.data_as(ctypes.c_void_p))
    if rc:
        raise RuntimeError(f"{direction} {impl} returned {rc}")
    return out


def reference(direction, a, b, x_shape, w_shape, stride=None, dil=None, pad=None, groups=1):
    """The exact result (float64, cross-correlation) of ``direction`` on ``(a, b)``."""
    from symgraph.ops import conv_reference as ref

    nd = len(x_shape) - 2
    stride = tuple(stride or (1,) * nd)
    dil = tuple(dil or (1,) * nd)
    pad = tuple(pad or (0,) * nd)
    if direction == "fwd":
        return ref.conv_forward(a, b, pad, stride, dil, groups, flip=False)
    if direction == "bwd_data":
        return ref.conv_backward_data(a, b, x_shape[2:], pad, stride, dil, groups, flip=False)
    return ref.conv_backward_filter(a, b, w_shape[2:], pad, stride, dil, groups, flip=False)
