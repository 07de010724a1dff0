"""The README's demos run and their losses go down (they are what a new user
runs first)."""

import importlib.util
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["demo", "convnet_demo"])
def test_demo_trains(name, capsys):
    spec = importlib.util.spec_from_file_location(f"symgraph_example_{name}",
                                                  EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    printed = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", printed)]
    assert len(losses) >= 5
    assert losses[-1] < 0.8 * losses[0]
    assert "DnnConv" in printed or name == "demo"
