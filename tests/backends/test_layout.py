"""The code base's shape rules: static C in c_src/ files rather than Python
strings, modules of at most 600 lines, and c_file's templating."""

import ast
from pathlib import Path

import pytest

from symgraph.backends.c_family import c_files
from symgraph.backends.c_family.c_files import c_file

ROOT = Path(__file__).resolve().parents[2]


def _string_constants(tree):
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)):
            docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings):
            yield node


def test_no_static_c_body_over_30_lines_in_a_python_string():
    found = []
    for path in sorted((ROOT / "symgraph" / "backends").rglob("*.py")):
        for node in _string_constants(ast.parse(path.read_text())):
            if node.value.count("\n") > 30:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_no_module_over_600_lines():
    long = [f"{p.relative_to(ROOT)} ({n})" for p in sorted((ROOT / "symgraph").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 600]
    assert not long, long


def test_c_file_fills_placeholders_and_names_a_missing_one(tmp_path, monkeypatch):
    (tmp_path / "t.inc").write_text("static $T sg_twice_$S($T x) { return x * 2; } /* $$ */\n")
    monkeypatch.setattr(c_files, "C_SRC", tmp_path)
    c_files._read.cache_clear()
    try:
        assert c_file("t.inc", T="float", S="f") == \
            "static float sg_twice_f(float x) { return x * 2; } /* $ */\n"
        assert "$T" in c_file("t.inc")          # no values: the text as it is
        with pytest.raises(ValueError, match=r"c_src/t.inc: placeholder 'S' not filled"):
            c_file("t.inc", T="float")
    finally:
        c_files._read.cache_clear()


def test_every_c_file_the_generators_name_exists():
    import re

    names = set()
    for path in (ROOT / "symgraph" / "backends").rglob("*.py"):
        names.update(re.findall(r'c_file\("([^"]+)"', path.read_text()))
    assert names
    missing = [n for n in sorted(names) if not (ROOT / "c_src" / n).is_file()]
    assert not missing, missing
