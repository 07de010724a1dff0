"""The flag nvcc.archs: which architectures a GPU build targets, how a bad
value is refused, and that the choice reaches nvcc's command line and the
compile cache's key."""

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
