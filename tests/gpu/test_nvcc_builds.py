"""nvcc builds: the flag nvcc.archs (which architectures a GPU build targets,
how a bad value is refused, that the choice reaches nvcc's command line and
the compile cache's key), and what the cross-compile check vouches for."""

import pytest

import symgraph
from symgraph.backends.cuda import compiler as cuda_compiler
from symgraph.backends.cuda import device as cuda_device
from symgraph.backends.cuda.backend import CudaBackend

pytestmark = pytest.mark.gpu


def _gencode_targets():
    flags = cuda_compiler._gencode()
    return [flags[i + 1] for i in range(0, len(flags), 2)]


def test_common_is_the_default_and_targets_every_arch_plus_ptx():
    info = {f.name: f for f in symgraph.config.flags()}["nvcc.archs"]
    assert info.default == "common"
    with symgraph.config.change_flags(**{"nvcc.archs": "common"}):
        assert cuda_compiler.target_archs() == cuda_compiler.ARCHS
        last = cuda_compiler.ARCHS[-1]
        assert _gencode_targets() == [f"arch=compute_{a},code=sm_{a}"
                                      for a in cuda_compiler.ARCHS] \
            + [f"arch=compute_{last},code=compute_{last}"]


def test_a_list_names_the_architectures():
    with symgraph.config.change_flags(**{"nvcc.archs": " 80, 90 "}):
        assert cuda_compiler.target_archs() == ("80", "90")
        assert _gencode_targets() == ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
                                      "arch=compute_90,code=compute_90"]


def test_native_takes_the_devices_the_driver_sees(monkeypatch):
    monkeypatch.setattr(cuda_device, "compute_capabilities", lambda: ["90", "80", "90"])
    with symgraph.config.change_flags(**{"nvcc.archs": "native"}):
        assert cuda_compiler.target_archs() == ("80", "90")


def test_native_without_a_device_says_what_to_do(monkeypatch):
    monkeypatch.setattr(cuda_device, "compute_capabilities", lambda: [])
    with symgraph.config.change_flags(**{"nvcc.archs": "native"}):
        with pytest.raises(cuda_compiler.CudaCompileError, match="nvcc.archs=80,90"):
            cuda_compiler.target_archs()


@pytest.mark.parametrize("bad", ["sm_90", "9.0", "all", "80;90", ""])
def test_a_bad_value_is_refused_with_what_is_allowed(bad):
    with pytest.raises(ValueError, match="nvcc.archs"):
        with symgraph.config.change_flags(**{"nvcc.archs": bad}):
            pass


def test_the_architectures_are_part_of_the_cache_key(monkeypatch):
    monkeypatch.setattr(cuda_compiler, "nvcc_version", lambda: "release 13.0")
    monkeypatch.setattr("symgraph.backends.cuda.backend._emulated", lambda: False)
    with symgraph.config.change_flags(**{"nvcc.archs": "80"}):
        only_80 = CudaBackend().key_parts()
    with symgraph.config.change_flags(**{"nvcc.archs": "90"}):
        only_90 = CudaBackend().key_parts()
    assert only_80["archs"] == "80" and only_90["archs"] == "90"


def test_compute_capabilities_is_empty_without_a_driver(monkeypatch):
    monkeypatch.setattr(cuda_device, "_driver", lambda: None)
    monkeypatch.setattr(cuda_device, "driver_available", lambda: 0)
    assert cuda_device.compute_capabilities() == []


_HOST_WARNING = """
int sg_check_entry(int x) { if (x > 0) return 1; }
"""

_LONG_MESSAGE = r"""
#include <stdio.h>
#include <string.h>
int sg_check_message(char *out, const char *src) {
    char shape[200], buf[64];
    strncpy(shape, src, sizeof shape - 1);
    shape[sizeof shape - 1] = 0;
    snprintf(buf, sizeof buf, "a long message that names the shape %s", shape);
    return out[0] = buf[0];
}
"""


@pytest.mark.skipif(cuda_compiler.nvcc_path() is None, reason="nvcc is not installed")
def test_the_cross_compile_check_catches_host_code_warnings(tmp_path):
    # the device's real build failed on host-compiler warnings that a
    # device-only check never saw: the check compiles host code too
    with pytest.raises(cuda_compiler.CudaCompileError, match="return"):
        cuda_compiler.check_with_nvcc(_HOST_WARNING, tmp_path, what="a host warning")


@pytest.mark.skipif(cuda_compiler.nvcc_path() is None, reason="nvcc is not installed")
def test_error_messages_cut_short_by_snprintf_build(tmp_path):
    # SG_FAIL writes into a fixed buffer and may cut a message short: by
    # design, so GCC's format-truncation warning must not fail the build
    assert cuda_compiler.check_with_nvcc(_LONG_MESSAGE, tmp_path).stat().st_size > 0
