"""What keeps cold compiles short: the installed runtime, the compiler flags, and
how a function's missing kernels are split into libraries.  Behaviour only:
nothing here measures a duration."""

import importlib.util
import random
import importlib.machinery
import sys
import types
from pathlib import Path

import pytest

from symgraph.backends.cpu import compiler
from symgraph.backends.cpu.backend import CPU
from symgraph.backends.native import linker
from symgraph.backends.native import runtime
from symgraph.backends.native.kernel import CKernel
from symgraph.config import config

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- runtime

def _setup_module():
    """setup.py as a module (its setup() call only runs as __main__)."""
    spec = importlib.util.spec_from_file_location("symgraph_setup_under_test",
                                                  ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_setup_py_hashes_the_runtime_sources_as_the_loader_does():
    setup = _setup_module()
    assert setup.runtime_source_hash() == runtime.runtime_source_hash()
    assert setup.RUNTIME_SOURCES == runtime.RUNTIME_SOURCES


def test_setup_py_declares_the_runtime_extension():
    pytest.importorskip("setuptools")
    ext = _setup_module().runtime_extension()
    assert ext.name == "symgraph._runtime"
    assert ext.sources == ["c_src/runtime.c"]
    macros = dict(ext.define_macros)
    assert macros["SG_RUNTIME_PACKAGED"] == "1"
    assert macros["SG_RUNTIME_SOURCE_HASH"] == '"%s"' % runtime.runtime_source_hash()


def test_the_installed_runtime_is_used_when_current(monkeypatch):
    try:
        from symgraph import _runtime
    except ImportError:
        pytest.skip("symgraph is not installed with its runtime extension (pip install -e .)")
    if _runtime.source_hash != runtime.runtime_source_hash():
        pytest.skip("the installed runtime extension is older than c_src/ (reinstall)")
    monkeypatch.setattr(runtime, "_RUNTIME", None)
    assert runtime.load_runtime() is _runtime
    assert _runtime.Program.__module__ == "symgraph._runtime"
    assert issubclass(_runtime.InputMismatch, TypeError)


def test_a_stale_installed_runtime_is_ignored(monkeypatch, tmp_path):
    fake = types.ModuleType("symgraph._runtime")
    fake.source_hash = "built from older sources"
    fake.__spec__ = importlib.machinery.ModuleSpec("symgraph._runtime", None,
                                                   origin=str(tmp_path / "_runtime.so"))
    monkeypatch.setitem(sys.modules, "symgraph._runtime", fake)
    monkeypatch.setattr(runtime, "_RUNTIME", None)
    with config.change_flags(compiledir=str(tmp_path / "cache")):
        module = runtime.load_runtime()
    assert module is not fake and module.__name__ == "symgraph_runtime"


def test_without_the_installed_runtime_it_is_built_in_the_cache(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "symgraph._runtime", None)   # import fails
    monkeypatch.setattr(runtime, "_RUNTIME", None)
    with config.change_flags(compiledir=str(tmp_path / "cache")):
        module = runtime.load_runtime()
        assert module.__name__ == "symgraph_runtime"
        assert module.source_hash == ""           # not a setup.py build
        assert runtime.load_runtime() is module   # once per process
    assert any((tmp_path / "cache").rglob("lib.so"))


# ----------------------------------------------------------------------------- flags

def test_gcc_gets_o2_with_two_options_of_o3(monkeypatch):
    monkeypatch.setattr(compiler, "compiler_signature",
                        lambda: "/usr/bin/gcc-12: gcc-12 (Debian 12.2.0-14) 12.2.0")
    flags = compiler.base_flags()
    assert "-O2" in flags and "-O3" not in flags
    assert "-fvect-cost-model=dynamic" in flags and "-fpeel-loops" in flags
    assert "-ffast-math" not in flags and "-ffp-contract=off" in flags


def test_clang_gets_no_gcc_only_flags(monkeypatch):
    monkeypatch.setattr(compiler, "compiler_signature",
                        lambda: "/usr/bin/clang: Debian clang version 16.0.6")
    flags = compiler.base_flags()
    assert "-O2" in flags
    assert not set(compiler.GCC_FLAGS) & set(flags)


def test_user_flags_come_last_so_they_can_override(monkeypatch):
    with config.change_flags(**{"gcc.cxxflags": "-O3"}):
        assert compiler.base_flags()[-1] == "-O3"


EXP_LOOP = """
#include <math.h>
#include <stdint.h>
/* as elemwise_codegen declares it: glibc's vector expf (libmvec) */
__attribute__((__simd__("notinbranch"))) float expf(float);
void sg_test_exp(const float *restrict x, float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}
"""


def test_math_loops_of_unknown_length_are_vectorized(tmp_path):
    """The point of -fvect-cost-model=dynamic: plain -O2 leaves this loop scalar
    (it needs an epilogue), -O2 with the dynamic model calls libmvec's vector expf."""
    if not compiler.mvec_available() or compiler._is_clang():
        pytest.skip("needs GCC and glibc's libmvec")
    out = tmp_path / "lib.so"
    compiler.compile_library(EXP_LOOP, out)
    assert b"_ZGV" in out.read_bytes()    # a vector variant of expf is called


# ----------------------------------------------------------------------------- grouping

def _kernel(size, support=()):
    body = "/* %s */\n" % ("x" * size)
    return CKernel(source=body, support=tuple((name, "/* %s */" % ("s" * length))
                                              for name, length in support))


def _flat(groups):
    return [key for group in groups for key, _ in group]


def test_one_core_gives_one_library(monkeypatch):
    monkeypatch.setattr(linker, "_cores", lambda: 1)
    missing = {f"k{i:02d}": _kernel(5000) for i in range(40)}
    groups = linker._groups(missing)
    assert len(groups) == 1 and sorted(_flat(groups)) == sorted(missing)


def test_a_small_function_stays_in_one_library(monkeypatch):
    monkeypatch.setattr(linker, "_cores", lambda: 2)
    missing = {f"k{i}": _kernel(300, [("ew", 20000)]) for i in range(4)}
    assert len(linker._groups(missing)) == 1


def test_a_large_function_is_split_over_the_cores(monkeypatch):
    monkeypatch.setattr(linker, "_cores", lambda: 2)
    missing = {f"k{i:02d}": _kernel(4000 + 10 * i) for i in range(30)}
    groups = linker._groups(missing)
    assert len(groups) == 2
    assert sorted(_flat(groups)) == sorted(missing)          # each kernel once
    sizes = [sum(len(missing[k].source) for k, _ in g) for g in groups]
    assert max(sizes) < 0.55 * sum(sizes)                     # balanced
    for group in groups:                                      # prefixes unique per library
        assert len({prefix for _, prefix in group}) == len(group)


def test_libraries_are_balanced_by_compile_weight(monkeypatch):
    """Kernels that cost the compiler about twice as much per character: two
    of them and much element-wise C split one heavy kernel per library, where
    by characters alone both would share one."""
    import dataclasses

    monkeypatch.setattr(linker, "_cores", lambda: 2)
    heavy = dataclasses.replace(_kernel(14000), compile_weight=2.2)
    missing = {"r0": heavy, "r1": dataclasses.replace(heavy, source=heavy.source + " "),
               **{f"e{i}": _kernel(13000 + i) for i in range(3)}}
    groups = linker._groups(missing)
    assert len(groups) == 2
    assert [sum(k.startswith("r") for k, _ in g) for g in groups] == [1, 1]
    assert heavy == _kernel(14000)       # the weight is not part of a kernel's identity


def test_kernels_sharing_support_code_share_a_library(monkeypatch):
    monkeypatch.setattr(linker, "_cores", lambda: 2)
    missing = {}
    for i in range(6):
        missing[f"a{i}"] = _kernel(2000, [("sup_a", 30000)])
        missing[f"b{i}"] = _kernel(2000, [("sup_b", 30000)])
    groups = linker._groups(missing)
    assert len(groups) == 2
    for group in groups:
        assert len({key[0] for key, _ in group}) == 1


def test_grouping_is_deterministic(monkeypatch):
    monkeypatch.setattr(linker, "_cores", lambda: 4)
    items = [(f"k{i:02d}", _kernel(1000 + 37 * i % 900, [(f"s{i % 3}", 8000)]))
             for i in range(25)]
    first = linker._groups(dict(items))
    random.Random(0).shuffle(items)
    assert linker._groups(dict(items)) == first


def test_kernel_keys_do_not_depend_on_shared_environment_parts():
    kernel = _kernel(10)
    shared = {}
    assert linker._kernel_key(kernel, CPU, shared) == linker._kernel_key(kernel, CPU)
    assert linker._kernel_key(kernel, CPU, shared) == linker._kernel_key(kernel, CPU, shared)
