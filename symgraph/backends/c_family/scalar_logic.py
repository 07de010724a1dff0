"""The C of comparison and logic scalar ops (``symgraph/ops/scalar_logic.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

from symgraph.backends.c_family.scalar_c import attr, c_method, register_attrs
from symgraph.tensor.type import upcast
from symgraph.backends.c_family.scalar_base import c_kind, c_ctype, c_fn, c_lit
from symgraph.ops.scalar_logic import (AND, EQ, GE, GT, Invert, IsClose, IsFinite, IsInf, IsNan,
                                       LE, LT, NEQ, OR, XOR, _Bitwise, _Comparison,
                                       _UnaryPredicate)


def c_real(dtype):
    """Whether ``dtype`` is bool, an integer or a real float: the C types that the
    plain C expressions of the scalar ops handle (complex ones have none)."""
    return c_kind(dtype) in "biuf"


@c_method(_Comparison, "c_expr")
def _comparison_c_expr(op, inputs, in_dtypes, out_dtype):
    if attr(op, 'c_symbol') is None or not all(c_real(d) for d in in_dtypes):
        return None
    a, b = inputs
    return f"({a} {attr(op, 'c_symbol')} {b})"


register_attrs(_Comparison, c_symbol=None)


register_attrs(LT, c_symbol="<")


register_attrs(GT, c_symbol=">")


register_attrs(LE, c_symbol="<=")


register_attrs(GE, c_symbol=">=")


register_attrs(EQ, c_symbol="==")


register_attrs(NEQ, c_symbol="!=")


@c_method(IsClose, "c_input_dtypes")
def _is_close_c_input_dtypes(op, x, y):
    # np.isclose converts y to result_type(y, 1.0), then works in the
    # common dtype of x and that (Python floats atol/rtol are weak).
    y = "float64" if c_kind(y) in "biu" else y
    return [upcast(x, y)] * 2


@c_method(IsClose, "c_expr")
def _is_close_c_expr(op, inputs, in_dtypes, out_dtype):
    dtype = in_dtypes[0]
    if dtype not in ("float32", "float64"):
        return None  # float16: NumPy rounds every step to float16
    x, y = inputs
    fabs = c_fn("fabs", dtype)
    text = (f"((({fabs}({x} - {y}) <= {c_lit(op.atol, dtype)} + {c_lit(op.rtol, dtype)}"
            f" * {fabs}({y})) && isfinite({y})) || ({x} == {y})")
    if op.equal_nan:
        text += f" || (isnan({x}) && isnan({y}))"
    return text + ")"


@c_method(_UnaryPredicate, "c_expr")
def _unary_predicate_c_expr(op, inputs, in_dtypes, out_dtype):
    kind = c_kind(in_dtypes[0])
    if kind == "f":
        return f"({attr(op, 'c_test')}({inputs[0]}) != 0)"
    return attr(op, 'c_discrete') if kind in "biu" else None


register_attrs(_UnaryPredicate, c_test=None, c_discrete=None)


register_attrs(IsNan, c_test="isnan", c_discrete="0")


register_attrs(IsInf, c_test="isinf", c_discrete="0")


register_attrs(IsFinite, c_test="isfinite", c_discrete="1")


@c_method(_Bitwise, "c_expr")
def _bitwise_c_expr(op, inputs, in_dtypes, out_dtype):
    if attr(op, 'c_symbol') is None or c_kind(out_dtype) not in "biu":
        return None
    joined = f" {attr(op, 'c_symbol')} ".join(inputs)
    return f"(({c_ctype(out_dtype)})({joined}))"


register_attrs(AND, c_symbol="&")


register_attrs(OR, c_symbol="|")


register_attrs(XOR, c_symbol="^")


@c_method(Invert, "c_expr")
def _invert_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    kind = c_kind(out_dtype)
    if kind == "b":
        return f"(!{a})"
    return f"(({c_ctype(out_dtype)})(~{a}))" if kind in "iu" else None
