"""The GPU tests: every one carries the ``gpu`` mark and runs on the emulated
device (CI) or, with SYMGRAPH_TEST_DEVICE=gpu, on a real GPU
(``tests/gpu/device_flags.py``).

On the emulated device, every CUDA library the tests build is also compiled
by nvcc (device code, warnings as errors) where the toolkit is installed: the
emulator runs the kernels, nvcc vouches that the same text is valid CUDA."""

from pathlib import Path

import pytest

import symgraph
from symgraph.backends.cuda.compiler import nvcc_path
from tests.gpu.device_flags import REAL_GPU

_HERE = Path(__file__).resolve().parent


#: Tests of the emulator itself: they run kernels on the CPU by design.
_EMULATOR_ONLY = {"test_emulator.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if _HERE in path.parents and path.name not in _EMULATOR_ONLY:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(autouse=True)
def _cross_compile_with_nvcc():
    if REAL_GPU or nvcc_path() is None:
        yield
        return
    with symgraph.config.change_flags(**{"gpu.cross_compile": True}):
        yield
