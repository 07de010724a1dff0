"""Theano's GPU flags: force_device, print_active_device, init_gpu_device,
gpuarray.preallocate/sched/single_stream/cache_path, dnn.conv.workmem(_bwd),
magma.*, ctc.root.  What each does in symgraph is in docs/theano_compat.md.

The device is set up once per process, so the flags read then are tried in
fresh interpreters."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.config import ConfigError, config
from tests.gpu.device_flags import DEVICE, REAL_GPU


def _run(code, **flags):
    """Run ``code`` in a new interpreter on the test device with ``flags``;
    its completed process."""
    settings = {**DEVICE, "compiledir": config.compiledir, **flags}
    env = dict(os.environ, SYMGRAPH_FLAGS=",".join(f"{k}={v}" for k, v in settings.items()))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=600)


_STATS = ("import numpy, symgraph.gpu as g\n"
          "a = g.to_device(numpy.ones(1000, 'f')); del a\n"
          "print(g.memory_stats())\n")


def test_print_active_device_names_the_device_once():
    shown = _run(_STATS + "g.to_device(numpy.ones(3))\n")
    assert shown.returncode == 0, shown.stderr
    name = "NVIDIA" if REAL_GPU else "the emulated device"
    assert shown.stderr.count("symgraph: cuda0 is ") == 1 and name in shown.stderr
    quiet = _run(_STATS, print_active_device=False)
    assert quiet.returncode == 0 and "symgraph: cuda0" not in quiet.stderr


def test_preallocate_reserves_or_turns_the_cache_off():
    default = eval(_run(_STATS).stdout)
    assert default["bytes_cached"] == 4096                # the freed array, kept
    off = eval(_run(_STATS, **{"gpuarray.preallocate": -1}).stdout)
    assert off["bytes_cached"] == 0 and off["device_frees"] == off["device_mallocs"]
    reserved = eval(_run(_STATS, **{"gpuarray.preallocate": 64}).stdout)
    assert reserved["bytes_cached"] >= 64 * 2 ** 20
    assert reserved["device_mallocs"] == 2 and reserved["bytes_in_use"] == 0
    too_much = _run(_STATS, **{"gpuarray.preallocate": 1e12})
    assert too_much.returncode != 0
    assert "gpuarray.preallocate=1e+12 asks for" in too_much.stderr
    assert "MemoryError" in too_much.stderr


@pytest.mark.parametrize("sched", ["single", "multi"])
def test_sched_settings_run(sched):
    done = _run(_STATS, **{"gpuarray.sched": sched})
    assert done.returncode == 0, done.stderr
    with pytest.raises(ConfigError):
        config.gpuarray.sched = "threads"


def test_a_second_stream_is_refused_and_unhonoured_flags_warn():
    from symgraph.backends.cuda import backend

    x = T.fvector("x")
    with config.change_flags(**DEVICE):
        symgraph.function([x], x * 3)              # the device in use already
    with config.change_flags(**DEVICE, **{"gpuarray.single_stream": False}):
        with pytest.raises(ConfigError, match="one stream"):
            symgraph.function([x], x * 2)
    backend._warn_unhonoured_flags.cache_clear()
    with config.change_flags(**DEVICE, **{"gpuarray.cache_path": "/somewhere",
                                          "magma.enabled": True, "ctc.root": "/opt/ctc"}):
        with pytest.warns(UserWarning) as caught:
            f = symgraph.function([x], x * 2)
    texts = " ".join(str(w.message) for w in caught)
    for name in ("gpuarray.cache_path", "magma.enabled", "ctc.root"):
        assert name in texts
    np.testing.assert_allclose(f(np.ones(3, "f")), 2)
    backend._warn_unhonoured_flags.cache_clear()


def test_init_gpu_device_with_device_cpu_warns():
    import importlib

    function_module = importlib.import_module("symgraph.compile.function")

    function_module._warn_init_gpu_device.cache_clear()
    x = T.dvector("x")
    with config.change_flags(device="cpu", init_gpu_device="cuda0"):
        with pytest.warns(UserWarning, match="init_gpu_device has no effect"):
            f = symgraph.function([x], x + 1)
    np.testing.assert_allclose(f(np.zeros(2)), 1)
    function_module._warn_init_gpu_device.cache_clear()


@pytest.mark.skipif(REAL_GPU, reason="needs a machine without a GPU")
def test_force_device_false_falls_back_to_the_cpu():
    from symgraph.backends.cuda.device import driver_available

    if driver_available() > 0:
        pytest.skip("this machine has a GPU")
    x = T.dvector("x")
    with config.change_flags(device="cuda", force_device=True):
        with pytest.raises(Exception, match="emulate"):
            symgraph.function([x], x + 1)
    with config.change_flags(device="cuda", force_device=False):
        with pytest.warns(UserWarning, match="running on the CPU instead"):
            w = symgraph.shared(np.ones(3), name="w")
        assert str(config.device) == "cpu"
        assert isinstance(w.get_value(borrow=True), np.ndarray)
        config.device = "cuda"
        with pytest.warns(UserWarning, match="force_device=False"):
            f = symgraph.function([x], x + w)
        np.testing.assert_allclose(f(np.ones(3)), 2)
        with pytest.raises(Exception, match="emulate"):
            symgraph.gpu.to_device(np.ones(2))     # an explicit device request still fails


def test_workmem_flags_set_the_algorithm_flags():
    with config.change_flags(**{"dnn.conv.workmem": "large"}):
        assert config.dnn.conv.algo_fwd == "large"
    with config.change_flags(**{"dnn.conv.workmem_bwd": "deterministic"}):
        assert config.dnn.conv.algo_bwd_data == "deterministic"
        assert config.dnn.conv.algo_bwd_filter == "deterministic"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError):
            config.dnn.conv.workmem = "huge"
