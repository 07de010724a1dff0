"""docs/theano_compat.md stays true: every name its library tables call
"supported" exists in symgraph at Theano's import path (``theano`` replaced
by ``symgraph``), and every row has a status of the three."""

import importlib
import pathlib
import re

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "theano_compat.md"
ALIASES = {"tensor.nnet.nnet": "tensor.nnet", "compile.sharedvalue": "compile.shared",
           "compile.function_module": "compile.function"}


def _library_rows():
    text = DOC.read_text()
    text = text[text.index("## Theano 1.0's library reference"):]
    section, rows = None, []
    for line in text.splitlines()[1:]:
        if line.startswith("### "):
            section = line
        elif line.startswith("## "):
            break
        elif line.startswith("| `") and section is not None:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append((section, cells[0].strip("`"), cells[1]))
    return rows


ROWS = _library_rows()


def _instances():
    x = T.dscalar("x")
    return {"In": symgraph.In(x, value=1.0, update=x + 1), "Out": symgraph.Out(x),
            "Mode": symgraph.Mode(), "SharedVariable": symgraph.shared(np.zeros(2)),
            "TensorType": T.dscalar, "RandomVariable": None}


def _resolve(name):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        module = ALIASES.get(module, module)
        try:
            obj = importlib.import_module("symgraph." + module if module else "symgraph")
        except ImportError:
            continue
        rest = parts[i:]
        break
    else:
        obj, rest = symgraph, parts
    instances = _instances()
    for j, attr in enumerate(rest):
        if not hasattr(obj, attr) and j > 0 and rest[j - 1] in instances:
            obj = instances[rest[j - 1]]
        obj = getattr(obj, attr)
    return obj


def test_rows_have_a_status():
    assert len(ROWS) > 400
    assert {status for _, _, status in ROWS} <= {"supported", "different", "missing"}


@pytest.mark.parametrize("section, name", [(s, n) for s, n, st in ROWS if st == "supported"])
def test_supported_names_exist(section, name):
    if "config" in section:
        obj = symgraph.config
        for attr in name.split("."):
            obj = getattr(obj, attr)
        return
    if name.startswith("variable method "):
        var = T.dmatrix()
        for method in re.split(r"[{},\s]+", name[len("variable method "):]):
            method = method.strip("_")
            if method and method != "conf":
                assert hasattr(var, method) or hasattr(var, f"__{method}__"), method
        return
    if name.endswith("...."):
        name = name[:-4]
    if ".RandomVariable." in name:
        from symgraph.tensor.shared_randomstreams import RandomStreams

        assert hasattr(RandomStreams(1).uniform((2,)), name.rsplit(".", 1)[1])
        return
    _resolve(name)  # raises AttributeError or ImportError when missing
