"""Warm start of a function compiled for the device: a new process restores
its optimized graph and loads its CUDA kernel libraries from the compile
cache, with no rewriting, code generation or compile (tripwires in the child
make any of them an error), and computes what the first process did."""

from tests.compile.test_warm_start import CHILD, _run_child
from tests.gpu.device_flags import REAL_GPU

FLAGS = f"device=cuda,gpu.emulate={not REAL_GPU},floatX=float32,print_active_device=False"


def test_a_device_function_is_restored_in_a_new_process(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for attempt in range(3):
        compiledir = tmp_path / f"cache{attempt}"
        cold = _run_child(script, compiledir, flags=FLAGS)
        warm = _run_child(script, compiledir, tripwires=cold["stamp"], flags=FLAGS)
        if warm["stamp"] == cold["stamp"]:
            break
    else:
        raise AssertionError("symgraph's files changed during every attempt")
    assert cold["stats"]["stored"] == 1 and warm["stats"]["restored"] == 1
    assert "rewriting" not in warm["phases"] and "codegen" not in warm["phases"]
    assert "GpuDot" in warm["debugprint"] and warm["debugprint"] == cold["debugprint"]
    assert warm["out"] == cold["out"]
    assert warm["w"] == cold["w"] and warm["b"] == cold["b"]
    assert warm["error"] == cold["error"] and warm["error"] is not None
    # another device setting is another function: a miss, compiled and stored
    other = _run_child(script, compiledir, flags=FLAGS + ",gpu.cublas=False")
    assert other["stats"]["restored"] == 0 and other["stats"]["stored"] == 1
