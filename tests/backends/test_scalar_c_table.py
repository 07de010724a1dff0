"""The scalar ops' C table (backends/c_family/scalar_c.py): entries found
through the class hierarchy, and a second language overriding C entry by entry."""

import pytest

from symgraph.backends.c_family import scalar_c
from symgraph.backends.c_family.scalar_c import (attr, c_body, c_expr, c_method, c_support,
                                                 language, register_attrs)
from symgraph.ops import scalar_basic, scalar_math


def test_c_entries_come_from_the_table_not_the_op():
    exp = scalar_math.Exp()
    assert not hasattr(exp, "c_expr")       # ops hold semantics only
    assert c_expr(exp, ["x"], ["float64"], "float64") == "exp(x)"
    assert c_expr(exp, ["x"], ["float32"], "float32") == "expf(x)"
    assert c_body(exp, ["x"], ["float64"], ["r"], ["float64"]) == "r = exp(x);"


def test_entries_are_inherited_through_the_class_hierarchy():
    class MyExp(scalar_math.Exp):
        pass

    assert c_expr(MyExp(), ["x"], ["float64"], "float64") == "exp(x)"
    assert attr(MyExp(), "c_name") == "exp"


def test_a_language_overrides_entry_by_entry(monkeypatch):
    monkeypatch.setattr(scalar_c, "_METHODS", dict(scalar_c._METHODS))
    monkeypatch.setattr(scalar_c, "_ATTRS", dict(scalar_c._ATTRS))
    register_attrs(scalar_math.Exp, language="cuda", c_name="__expf_fast")

    @c_method(scalar_basic.Add, "c_expr", language="cuda")
    def add_cuda(op, inputs, in_dtypes, out_dtype):
        return "sg_cuda_add(" + ", ".join(inputs) + ")"

    exp, add, log = scalar_math.Exp(), scalar_basic.Add(), scalar_math.Log()
    with language("cuda"):
        assert scalar_c.current_language() == "cuda"
        assert c_expr(exp, ["x"], ["float64"], "float64") == "__expf_fast(x)"
        assert c_expr(add, ["a", "b"], ["float64"] * 2, "float64") == "sg_cuda_add(a, b)"
        # no CUDA entry: the C one serves
        assert c_expr(log, ["x"], ["float64"], "float64") == "log(x)"
        # the default c_body (C) calls the CUDA c_expr
        assert c_body(add, ["a", "b"], ["float64"] * 2, ["r"], ["float64"]) == \
            "r = sg_cuda_add(a, b);"
    assert scalar_c.current_language() == "c"
    assert c_expr(exp, ["x"], ["float64"], "float64") == "exp(x)"


def test_what_is_not_a_scalar_op_has_no_c():
    assert c_expr(object(), ["x"], ["float64"], "float64") is None
    assert c_support(object()) == ()


def test_c_method_names_one_of_the_six():
    with pytest.raises(ValueError, match="is not one of"):
        c_method(scalar_basic.Add, "c_code")
