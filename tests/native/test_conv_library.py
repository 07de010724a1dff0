"""The convolution algorithm library (compiled once, shared by the kernels) and
the tuning cache's key: thread counts, and disturbed timings kept out."""

import json
import time

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cpu.conv import library as conv_library
from symgraph.backends.cpu.conv import tuning as conv_tuning
from symgraph.backends.native.cache import get_cache
from symgraph.backends.cpu.compiler import COMPILE_STATS
from symgraph.ops.conv_algorithms import DnnConv
from symgraph.backends.cpu.lowerings import cpu_kernel


def test_library_is_in_the_cache_and_loaded_once():
    lib, address = conv_library.load()
    assert conv_library.load() == (lib, address)
    assert address == conv_library.library_address() != 0
    assert get_cache().get(conv_library.library_key()) is not None


def test_kernels_do_not_compile_the_algorithms(tmp_path):
    """A kernel's source includes only the small API, and a new kernel is a
    small compile (the library is not rebuilt, even in a new compiledir,
    where it is copied)."""
    op = DnnConv(2, border_mode=(3, 1), algo="large", precision="float32")
    x, w = T.ftensor4("x"), T.ftensor4("w")
    kernel = cpu_kernel(op(x, w).owner)
    assert kernel.headers == ('"conv/sg_conv_choose.h"',)
    assert "sg_conv_lib" in dict(kernel.symbols)
    conv_library.load()
    with symgraph.config.change_flags(compiledir=str(tmp_path)):
        COMPILE_STATS.reset()
        start = time.perf_counter()
        f = symgraph.function([x, w], op(x, w))
        elapsed = time.perf_counter() - start
        count, _seconds = COMPILE_STATS.snapshot()
        assert count == 1  # the kernel's library only
        assert get_cache().get(conv_library.library_key()) is not None
    # a generous bound for a loaded machine: the algorithms alone take several seconds
    assert elapsed < 3.0
    out = f(np.ones((1, 2, 3, 3), "float32"), np.ones((2, 2, 2, 2), "float32"))
    assert out.shape == (1, 2, 8, 4)


def test_tuning_key_includes_the_threads(monkeypatch):
    """BLAS threads are part of the tuning file's key; the OpenMP threads of the
    library are in the kernel's shape key."""
    monkeypatch.setattr(conv_library, "blas_threads", lambda: "1")
    one = conv_tuning.disk_key("fwd f32 N=1")
    monkeypatch.setattr(conv_library, "blas_threads", lambda: "2")
    assert conv_tuning.disk_key("fwd f32 N=1") != one
    assert conv_library.blas_threads() == "2"
    monkeypatch.undo()
    assert conv_library.blas_threads().isdigit() or conv_library.blas_threads() == "unknown"


def test_time_key_names_threads_and_epilogue(tmp_path, rng):
    op = DnnConv(2, algo="time_on_shape_change", bias=True, activation="relu")
    x, w, b = T.ftensor4("x"), T.ftensor4("w"), T.fvector("b")
    with symgraph.config.change_flags(compiledir=str(tmp_path)):
        conv_tuning.reset()
        try:
            f = symgraph.function([x, w, b], op(x, w, b))
            f(rng.standard_normal((1, 2, 5, 5)).astype("float32"),
              rng.standard_normal((2, 2, 3, 3)).astype("float32"), np.zeros(2, "float32"))
            (key,) = conv_tuning.choices_for(op)
        finally:
            conv_tuning.reset()
    assert key.startswith("fwd f32 ") and " bias relu threads=" in key


def _record(shape, cpu_share):
    times = (conv_tuning.ctypes.c_double * 6)(1e-3, 2e-3, -1, -1, -1, -1)
    conv_tuning._record(b"op", shape.encode(), 0, conv_tuning.SOURCES.index("timing"), times,
                        6, cpu_share)


def test_disturbed_timing_is_not_cached(tmp_path):
    """A timing whose runs got little CPU serves the process but is not written
    for later ones; an undisturbed one is."""
    with symgraph.config.change_flags(compiledir=str(tmp_path)):
        conv_tuning.reset()
        try:
            _record("disturbed shape", 0.1)
            _record("quiet shape", 0.98)
            choices = conv_tuning.choices()["op"]
            assert choices["disturbed shape"].disturbed
            assert "disturbed: not cached" in choices["disturbed shape"].text()
            assert not choices["quiet shape"].disturbed
            assert conv_tuning.load("disturbed shape") is None
            assert conv_tuning.load("quiet shape")[0] == "direct"
            files = list((tmp_path / "tuning").glob("*.json"))
            assert [json.loads(p.read_text())["key"]["shape"] for p in files] == ["quiet shape"]
        finally:
            conv_tuning.reset()


@pytest.mark.parametrize("share", [-1.0, 0.5, 3.0])
def test_undisturbed_or_unmeasured_timings_are_cached(tmp_path, share):
    with symgraph.config.change_flags(compiledir=str(tmp_path)):
        conv_tuning.reset()
        try:
            _record("shape", share)
            assert conv_tuning.load("shape") is not None
        finally:
            conv_tuning.reset()
