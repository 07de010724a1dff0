"""The shared support library: generated files up to date, the installed build
checked before use, the cache fallback, and kernels bound to its table."""

import ctypes
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cpu.blas import support as blas_support
from symgraph.backends.cpu import compiler
from symgraph.backends.native import linker
from symgraph.backends.cpu import support_lib
from symgraph.backends.cpu.compiler import compile_library

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_written_once_into_the_cache(tmp_path):
    header, source = support_lib.generate()
    folder = support_lib.write_files(tmp_path)
    assert (folder / "sg_support.h").read_text() == header
    assert (folder / "sg_support.c").read_text() == source
    mtime = (folder / "sg_support.h").stat().st_mtime_ns
    support_lib.write_files(tmp_path)  # unchanged text: not rewritten
    assert (folder / "sg_support.h").stat().st_mtime_ns == mtime
    generated = support_lib.generated_dir()
    assert (generated / "support" / "sg_support.h").read_text() == header


def test_split_unit_moves_function_bodies_and_keeps_types():
    code = """#define K 3
typedef struct { int a; } sg_t;
/* doubles */
static inline int sg_twice(const sg_t *t, int (*f)(int)) {
    if (t->a) { return f(2 * t->a); }
    return 0;
}
__attribute__((visibility("default"))) int *sg_ptr = 0;
static void sg_noop(void) {}
"""
    unit = support_lib.split_unit("k", code)
    assert [f[0] for f in unit.functions] == ["sg_twice", "sg_noop"]
    assert unit.functions[0][1:] == ("int", "const sg_t *t, int (*f)(int)")
    assert "#define K 3" in unit.decls and "typedef struct" in unit.decls
    assert "sg_twice" not in unit.decls and "sg_ptr" not in unit.decls
    assert "/* doubles */" in unit.defs and unit.defs.index("sg_ptr") < unit.defs.index("sg_twice")


def test_installed_build_is_used_only_when_current(monkeypatch):
    current = support_lib.build_id(support_lib.support_source_hash(), compiler.cpu_signature())
    assert current != support_lib.build_id("other", compiler.cpu_signature())
    assert current != support_lib.build_id(support_lib.support_source_hash(), "another cpu")
    lib = support_lib.prebuilt().installed()
    if lib is not None:       # an install (pip install -e .) built it: it must be current
        text = ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_support_build")))
        assert text.value.decode() == current
    monkeypatch.setattr(support_lib, "build_id", lambda *a: "stale")
    assert support_lib.prebuilt().installed() is None


def test_cache_fallback_builds_a_library_with_the_table():
    lib = support_lib.prebuilt().cached()
    built = ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_support_build")))
    assert built.value.decode() == support_lib.build_id(support_lib.support_source_hash(),
                                                         compiler.cpu_signature())
    assert ctypes.addressof(ctypes.c_char.in_dll(lib, "sg_support")) != 0


def test_a_library_calls_the_helpers_through_the_table(tmp_path):
    source = ('#include "sg_kernel.h"\n#include <math.h>\n#include <stdlib.h>\n'
              + support_lib.SUPPORT_ENTRY[1] + r"""
int probe(void) {
    int64_t shape[3] = {2, 1, 3};
    int64_t st[3 * SG_MAXDIMS] = {0};
    st[0] = 12; st[1] = 12; st[2] = 4;
    return sg_ew_collapse(3, 1, shape, st) * 100 + (int)shape[0];
}
""")
    compile_library(source, tmp_path / "probe.so")
    lib = ctypes.CDLL(str(tmp_path / "probe.so"))
    assert not ctypes.c_void_p.in_dll(lib, "sg_sup").value
    support_lib.bind_library(lib)
    assert ctypes.c_void_p.in_dll(lib, "sg_sup").value == support_lib.support_table_address()
    assert lib.probe() == 106        # one merged dimension of 6 elements


def test_kernels_carry_no_shared_helper_code():
    x = T.matrix("x", dtype="float32")
    w = T.matrix("w", dtype="float32")
    y = T.nnet.softmax(T.tanh(T.dot(x, w)) * 2 + 1)
    t = T.lvector("t")
    out = [y, y.sum(axis=0), T.nnet.categorical_crossentropy(y, t).mean()]
    kernels = []
    orig = linker.resolve_kernels

    def spy(found, timings, *args):
        kernels.extend(found.values())
        return orig(found, timings, *args)

    linker.resolve_kernels, saved = spy, linker.resolve_kernels
    try:
        # a function stored by an earlier run would be restored without linking
        # openmp on: the OpenMP element-wise kernels used to carry their own driver
        with symgraph.config.change_flags(compile_warm_start=False, openmp=True):
            f = symgraph.function([x, w, t], out)
    finally:
        linker.resolve_kernels = saved
    assert kernels
    for kernel in kernels:
        keys = [key + '"' for key, _ in kernel.support]
        assert not any(k.startswith(("sg_ew_support", "sg_ewp_support", "sg_reduce_plan",
                                     "sg_blas_s\"", "sg_blas_d\"", "sg_nn_core",
                                     "sg_nn_driver", "sg_ce_driver")) for k in keys), keys
    a = np.random.default_rng(0).random((4, 5), dtype=np.float32)
    b = np.random.default_rng(1).random((5, 3), dtype=np.float32)
    z = np.tanh(a @ b) * 2 + 1
    e = np.exp(z - z.max(1, keepdims=True))
    e /= e.sum(1, keepdims=True)
    labels = np.array([2, 0, 1, 2])
    got = f(a, b, labels)
    np.testing.assert_allclose(got[0], e, rtol=1e-5)
    np.testing.assert_allclose(got[1], e.sum(0), rtol=1e-5)
    np.testing.assert_allclose(got[2], -np.log(e[np.arange(4), labels]).mean(), rtol=1e-5)
    assert any("sg_ce_targets" in key for kernel in kernels for key, _ in kernel.support)


def test_blas_routines_reach_the_support_library():
    if not blas_support.blas_available():
        pytest.skip("SciPy's BLAS is not available here")
    lib = support_lib.load_support()
    assert support_lib.set_support_symbol("sg_blas_dgemm", blas_support._ADDRESS_FNS["dgemm"])
    # SciPy's routine, through the thread library's wrapper (backends/native/threads.py)
    want = blas_support.routine_address("dgemm")
    assert ctypes.c_void_p.in_dll(lib, "sg_blas_dgemm").value == want
    assert not support_lib.set_support_symbol("sg_no_such_pointer", lambda: 1)


def test_cython_blas_is_found_without_importing_scipy_linalg():
    module = blas_support._cython_blas()
    assert "dgemm" in module.__pyx_capi__
    assert module.__name__ == "scipy.linalg.cython_blas"


def test_setup_py_declares_the_support_extension():
    pytest.importorskip("setuptools")
    spec = importlib.util.spec_from_file_location("symgraph_setup_support", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    ext = setup.support_extension()
    assert ext.name == "symgraph._support"
    assert ext.sources == ["build/sg_support/support/sg_support.c"]
    macros = dict(ext.define_macros)
    assert macros["SG_SUPPORT_SOURCE_HASH"] == '"%s"' % support_lib.build_id(
        support_lib.support_source_hash(), compiler.cpu_signature())
    assert "-march=native" in ext.extra_compile_args
    assert "-fopenmp" in ext.extra_compile_args and "-fopenmp" in ext.extra_link_args


def test_the_library_is_built_with_openmp():
    # the element-wise driver's parallel regions are compiled in (GOMP_parallel
    # is what GCC calls for them), in the installed build and the cache's alike
    for lib in (support_lib.load_support(), support_lib.prebuilt().cached()):
        assert hasattr(lib, "GOMP_parallel")


def test_openmp_kernels_share_a_library_with_support_table_kernels():
    # An OpenMP softmax kernel and an element-wise kernel (whose driver, in the
    # support library, shares its loop out) in one library.
    x = T.fmatrix("x")
    with symgraph.config.change_flags(openmp=True, openmp_elemwise_minsize=0,
                                    openmp_softmax_minsize=0):
        f = symgraph.function([x], [T.nnet.softmax(x), T.exp(x) * 2 + 1])
    value = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    sm, ew = f(value)
    e = np.exp(value - value.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(ew, np.exp(value) * 2 + 1, rtol=1e-5)
