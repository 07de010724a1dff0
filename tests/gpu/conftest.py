"""Every CUDA library the GPU tests build is also compiled by nvcc (device code,
warnings as errors) where the toolkit is installed: the emulated device runs
the kernels, nvcc vouches that the same text is valid CUDA."""

import pytest

import symgraph
from symgraph.backends.cuda.compiler import nvcc_path


@pytest.fixture(autouse=True)
def _cross_compile_with_nvcc():
    if nvcc_path() is None:
        yield
        return
    with symgraph.config.change_flags(**{"gpu.cross_compile": True}):
        yield
