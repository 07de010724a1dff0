"""docs/gpu.md lists every op class the CPU runs natively and the CUDA backend
does not, so that the page cannot fall behind the lowering tables."""

from pathlib import Path

import symgraph.backends.cpu.backend  # noqa: F401  (registers the CPU table)
import symgraph.backends.cuda.lowerings  # noqa: F401  (registers the CUDA table)
from symgraph.backends.lowering import registered_lowerings

DOC = Path(__file__).resolve().parents[2] / "docs" / "gpu.md"


def test_every_op_without_a_cuda_lowering_is_listed_with_a_reason():
    cuda = registered_lowerings("cuda")
    text = DOC.read_text()
    section = text.split("## Ops without a CUDA lowering yet", 1)[1]
    # (tests register their own toy ops; only symgraph's count)
    missing = [cls.__name__ for cls in registered_lowerings("cpu")
               if cls.__module__.startswith("symgraph.")
               and not any(issubclass(cls, done) for done in cuda)]
    assert missing
    unlisted = [name for name in missing if f"`{name}`" not in section and
                not (name == "_ArgReduce" and "`_ArgReduce`" in section)]
    assert not unlisted, unlisted
