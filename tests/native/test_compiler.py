"""The C compiler wrapper: flags, errors, signatures, the no-compile switch."""

import ctypes
import os
import stat

import pytest

from symgraph.backends.cpu import compiler
from symgraph.backends.cpu.compiler import COMPILE_STATS, CompileError, compile_library
from symgraph.config import config

SOURCE = """
#include "sg_kernel.h"
#include <math.h>
int64_t scale(int64_t x) { return x * SCALE; }
int is_nan(double x) { return isnan(x); }
int is_inf(double x) { return isinf(x); }
double add(double a, double b) { return a + b; }
double copysign_of(double a, double b) { return copysign(a, b); }
"""


def _build(tmp_path, source=SOURCE, **kwargs):
    out = tmp_path / "lib.so"
    compile_library(source, out, extra_flags=kwargs.pop("extra_flags", ("-DSCALE=3",)),
                    **kwargs)
    lib = ctypes.CDLL(str(out))
    lib.scale.restype = ctypes.c_int64
    lib.scale.argtypes = [ctypes.c_int64]
    for name in ("is_nan", "is_inf"):
        getattr(lib, name).argtypes = [ctypes.c_double]
    for name in ("add", "copysign_of"):
        getattr(lib, name).argtypes = [ctypes.c_double, ctypes.c_double]
        getattr(lib, name).restype = ctypes.c_double
    return lib


def test_compile_and_call(tmp_path):
    before = COMPILE_STATS.snapshot()
    lib = _build(tmp_path)
    assert lib.scale(14) == 42
    count, seconds = COMPILE_STATS.snapshot()
    assert count == before[0] + 1 and seconds > before[1]
    assert (tmp_path / "lib.c").read_text() == SOURCE  # the source is kept beside it


def test_ieee_behaviour_survives_the_flags(tmp_path):
    # guards against -ffast-math creeping in: it makes isnan/isinf constant false
    lib = _build(tmp_path)
    assert lib.is_nan(float("nan")) and not lib.is_nan(1.0)
    assert lib.is_inf(float("-inf")) and not lib.is_inf(1e308)
    result = lib.add(float("nan"), 1.0)
    assert result != result
    assert str(lib.copysign_of(0.0, -1.0)) == "-0.0"
    assert "-ffast-math" not in compiler.base_flags()


def test_compile_error_keeps_source_and_stderr(tmp_path):
    with pytest.raises(CompileError) as info:
        compile_library("int broken( {\n", tmp_path / "lib.so")
    err = info.value
    assert err.source_path == str(tmp_path / "lib.c")
    assert os.path.exists(err.source_path)
    assert "error" in err.stderr
    assert str(tmp_path / "lib.c") in str(err) and "error" in str(err)
    assert len(err.stderr.splitlines()) <= compiler.STDERR_LINES + 1


def test_long_compiler_output_is_cut(tmp_path):
    source = "".join(f"int v{i} = missing{i};\n" for i in range(100))
    with pytest.raises(CompileError) as info:
        compile_library(source, tmp_path / "lib.so")
    lines = info.value.stderr.splitlines()
    assert len(lines) == compiler.STDERR_LINES + 1 and "more lines" in lines[-1]


def test_user_flags_and_include_dirs(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "extra.h").write_text("#define FROM_HEADER 5\n")
    source = '#include "extra.h"\nint value(void) { return FROM_HEADER * USER_FLAG; }\n'
    with config.change_flags({"gcc.cxxflags": "-DUSER_FLAG=7"}):
        assert "-DUSER_FLAG=7" in compiler.base_flags()
        compile_library(source, tmp_path / "lib.so", include_dirs=[inc])
    assert ctypes.CDLL(str(tmp_path / "lib.so")).value() == 35


def test_openmp_needs_the_flag_too():
    with config.change_flags(openmp=False):
        assert "-fopenmp" not in compiler.base_flags(openmp=True)
    with config.change_flags(openmp=True):
        assert "-fopenmp" in compiler.base_flags(openmp=True)
        assert "-fopenmp" not in compiler.base_flags(openmp=False)


def test_openmp_library_builds(tmp_path):
    source = ("#include <omp.h>\n"
              "int threads(void) { int n = 0;\n"
              "#pragma omp parallel\n{\n#pragma omp atomic\nn++;\n}\nreturn n; }\n")
    with config.change_flags(openmp=True):
        compile_library(source, tmp_path / "lib.so", openmp=True)
    assert ctypes.CDLL(str(tmp_path / "lib.so")).threads() >= 1


def test_no_compile_flag(tmp_path):
    before = COMPILE_STATS.snapshot()
    with config.change_flags(compile_no_compile=True):
        with pytest.raises(CompileError, match=r"compile_no_compile=True.*the kernel X "
                                               r"is missing from the cache"):
            compile_library(SOURCE, tmp_path / "lib.so", what="the kernel X")
    assert COMPILE_STATS.snapshot() == before
    assert not (tmp_path / "lib.so").exists()


def test_empty_cxx_is_an_error(tmp_path):
    with config.change_flags(cxx=""):
        with pytest.raises(CompileError, match="cxx flag is empty"):
            compile_library(SOURCE, tmp_path / "lib.so")


def _fake_tool(folder, name):
    path = folder / name
    path.write_text("#!/bin/sh\necho fake\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_c_driver_derived_from_cxx(tmp_path):
    _fake_tool(tmp_path, "x86_64-linux-gnu-g++-99")
    gcc = _fake_tool(tmp_path, "x86_64-linux-gnu-gcc-99")
    assert compiler._c_driver_for(str(tmp_path / "x86_64-linux-gnu-g++-99")) == str(gcc)
    _fake_tool(tmp_path, "clang++")
    clang = _fake_tool(tmp_path, "clang")
    assert compiler._c_driver_for(str(tmp_path / "clang++")) == str(clang)
    # no C counterpart beside it: gcc or cc from PATH
    with config.change_flags(cxx=str(_fake_tool(tmp_path, "only-g++"))):
        assert os.path.basename(compiler.compiler_command()[-1]).startswith(
            ("gcc", "cc", "x86_64"))


def test_launcher_words_are_kept():
    with config.change_flags(cxx="env g++"):
        command = compiler.compiler_command()
    assert command[0] == "env" and "gcc" in os.path.basename(command[-1])


def test_signatures():
    sig = compiler.compiler_signature()
    assert compiler.compiler_command()[-1] in sig and "gcc" in sig.lower()
    assert compiler.compiler_signature() is sig  # computed once per process
    cpu = compiler.cpu_signature()
    assert cpu and cpu == compiler.cpu_signature()


def test_c_src_is_found():
    assert (compiler.c_src_dir() / "sg_kernel.h").is_file()


def test_openmp_threads_spin_briefly_unless_the_user_chose(monkeypatch):
    from symgraph.backends.cpu.compiler import prepare_openmp_environment
    from symgraph.backends.native.threads import SPIN_COUNT

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    prepare_openmp_environment()
    assert os.environ["GOMP_SPINCOUNT"] == str(SPIN_COUNT)
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    prepare_openmp_environment()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and "GOMP_SPINCOUNT" not in os.environ
