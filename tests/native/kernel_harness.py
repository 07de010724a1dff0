"""Run one node's native kernel directly (compiled with gcc, called through ctypes).

Kernel tests use this to compare a node's C code with its Python ``perform``
without going through function(): ``run_kernel(node, [arrays]) -> [arrays]``.
"""

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from symgraph.backends.native.assemble import C_SRC, assemble
from symgraph.backends.cpu.support_lib import generated_dir
from symgraph.backends.cpu.backend import CPU
from symgraph.backends.cpu.lowerings import cpu_kernel

MAXDIMS = 32
FLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-std=gnu11", "-fno-math-errno",
         "-fno-trapping-math", "-Wno-unused-function"]


class SgArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAXDIMS), ("strides", ctypes.c_int64 * MAXDIMS)]


class SgError(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class KernelError(Exception):
    """A kernel reported an error: ``kind`` is the SG_ERR_* code."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


_BUILD_DIR = Path(tempfile.gettempdir()) / "symgraph-kernel-harness"
_LIBS = {}


def compile_kernel(kernel, openmp=False):
    """Compile ``kernel`` alone into a library (cached per source); returns the CDLL."""
    return compile_kernels([("k", kernel)], openmp)


def compile_kernels(named, openmp=False):
    """Compile ``named`` ((prefix, kernel) pairs) into one library, cached by
    source and headers; returns the CDLL with every kernel's symbols set."""
    kernels = [kernel for _, kernel in named]
    openmp = openmp or any(kernel.openmp for kernel in kernels)
    source = assemble(list(named))
    # The headers the source includes are part of the key, as in the linker's:
    # an edited header must not reuse a stale library.
    digest = hashlib.sha256((source + str(openmp) + CPU.headers_digest()).encode()).hexdigest()[:20]
    if digest in _LIBS:
        return _LIBS[digest]
    _BUILD_DIR.mkdir(exist_ok=True)
    lib_path = _BUILD_DIR / f"{digest}.so"
    if not lib_path.exists():
        # Per-process names: test workers may build the same kernel at once.
        src = _BUILD_DIR / f"{digest}.{os.getpid()}.c"
        src.write_text(source)
        flags = FLAGS + (["-fopenmp"] if openmp else [])
        tmp = _BUILD_DIR / f"{digest}.{os.getpid()}.tmp"
        includes = ["-I", str(C_SRC), "-I", str(generated_dir())]
        proc = subprocess.run(["gcc", *flags, *includes, str(src), "-o", str(tmp), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"compiling {src} failed:\n{proc.stderr[:4000]}")
        tmp.rename(lib_path)
    lib = ctypes.CDLL(str(lib_path))
    for kernel in kernels:
        CPU.prepare_library(lib, kernel)   # the shared helpers' table, BLAS pointers
    _LIBS[digest] = lib
    return lib


def describe(arr):
    """The ``sg_array`` of a NumPy array."""
    desc = SgArray()
    desc.data = arr.ctypes.data if arr.size else (arr.__array_interface__["data"][0] or 0)
    desc.ndim = arr.ndim
    for d in range(arr.ndim):
        desc.shape[d] = arr.shape[d]
        desc.strides[d] = arr.strides[d]
    return desc


class _View:
    def __init__(self, base, interface):
        self.base = base
        self.__array_interface__ = interface


#: What a view-or-copy kernel's view function returns when it needs a copy.
NO_VIEW = -1


def run_kernel(node, inputs, kernel=None):
    """Outputs of ``node`` computed by its native kernel on ``inputs`` (ndarrays)."""
    kernel = kernel or cpu_kernel(node)
    if kernel is None:
        raise ValueError(f"{node.op} has no native kernel for {node}")
    lib = compile_kernel(kernel)
    inputs = [np.asarray(x) for x in inputs]
    in_desc = (SgArray * max(1, len(inputs)))(*[describe(x) for x in inputs])
    n_out = len(node.outputs)
    out_desc = (SgArray * n_out)()
    err = SgError()
    outputs = [None] * n_out
    kind = kernel.kind
    if kind in ("compute", "view_or_copy"):
        shapes = (ctypes.c_int64 * (MAXDIMS * n_out))()
        if lib.k_shape(in_desc, shapes, ctypes.byref(err)):
            raise KernelError(err.kind, err.msg.decode())
    if kind == "view_or_copy":
        rc = lib.k_view(in_desc, shapes, out_desc, ctypes.byref(err))
        if rc not in (0, NO_VIEW):
            raise KernelError(err.kind, err.msg.decode())
        kind = "view" if rc == 0 else "compute"
    if kind == "compute":
        for k, out in enumerate(node.outputs):
            shape = tuple(shapes[k * MAXDIMS + d] for d in range(out.ndim))
            # Garbage in the fresh buffer: a kernel must write every element.
            outputs[k] = np.full(shape, 7, dtype=out.dtype) if out.dtype != "bool" \
                else np.ones(shape, dtype=bool)
            out_desc[k] = describe(outputs[k])
    elif kind == "inplace":
        for k, i in enumerate(kernel.inplace_of):
            outputs[k] = inputs[i]
            out_desc[k] = describe(inputs[i])
    if kernel.kind != "view_or_copy" or kind == "compute":
        if lib.k_run(in_desc, out_desc, ctypes.byref(err)):
            raise KernelError(err.kind, err.msg.decode())
    if kind == "view":
        for k, out in enumerate(node.outputs):
            base = inputs[kernel.view_of[k]]
            d = out_desc[k]
            interface = {"data": (d.data or 0, False), "typestr": np.dtype(out.dtype).str,
                         "shape": tuple(d.shape[i] for i in range(d.ndim)),
                         "strides": tuple(d.strides[i] for i in range(d.ndim)), "version": 3}
            outputs[k] = np.asarray(_View(base, interface))
    return outputs


def run_python(node, inputs):
    """Outputs of ``node`` computed by its Python ``perform`` (the reference)."""
    storage = [[None] for _ in node.outputs]
    node.op.perform(node, [np.asarray(x) for x in inputs], storage)
    return [cell[0] for cell in storage]
