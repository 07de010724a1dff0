"""Comparison, predicate, bitwise and logical scalar ops: bool (or integer)
results that do not vary continuously with their inputs, so every input is
disconnected for gradients.

``scalar_basic`` re-exports these classes (``sb.LT`` keeps working), and
imports the two small helpers defined here; this module imports nothing
from it, so either may be imported first.
"""

import numpy as np

from symgraph.ops.scalar import (BinaryScalarOp, bool_out, c_ctype, c_fn, c_kind, c_lit,
                                 int_or_bool_out, upcast)

__all__ = ["LT", "GT", "LE", "GE", "EQ", "NEQ", "IsClose", "IsNan", "IsInf", "IsFinite",
           "AND", "OR", "XOR", "Invert"]


def c_real(dtype):
    """Whether ``dtype`` is bool, an integer or a real float: the C types that the
    plain C expressions of the scalar ops handle (complex ones have none)."""
    return c_kind(dtype) in "biuf"


def disconnected_grads(inputs):
    """The gradient of an op disconnected from every one of ``inputs``."""
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return [disconnected_grad_for(x) for x in inputs]


# -- comparisons (bool results, no gradient) -----------------------------------

class _Comparison(BinaryScalarOp):
    output_dtype = staticmethod(bool_out)
    c_symbol = None  # the C operator of a comparison

    def c_expr(self, inputs, in_dtypes, out_dtype):
        if self.c_symbol is None or not all(c_real(d) for d in in_dtypes):
            return None
        a, b = inputs
        return f"({a} {self.c_symbol} {b})"

    def connection_pattern(self):
        return [False] * self.nin

    def grad(self, inputs, outputs, output_grads):
        return disconnected_grads(inputs)


class LT(_Comparison):
    """x < y."""

    c_symbol = "<"
    ufunc = np.less


class GT(_Comparison):
    """x > y."""

    c_symbol = ">"
    ufunc = np.greater


class LE(_Comparison):
    """x <= y."""

    c_symbol = "<="
    ufunc = np.less_equal


class GE(_Comparison):
    """x >= y."""

    c_symbol = ">="
    ufunc = np.greater_equal


class EQ(_Comparison):
    """x == y (False where either is NaN)."""

    c_symbol = "=="
    ufunc = np.equal
    commutative = True


class NEQ(_Comparison):
    """x != y (True where either is NaN)."""

    c_symbol = "!="
    ufunc = np.not_equal
    commutative = True


class IsClose(_Comparison):
    """|x - y| <= atol + rtol * |y| (np.isclose)."""

    def c_input_dtypes(self, x, y):
        # np.isclose converts y to result_type(y, 1.0), then works in the
        # common dtype of x and that (Python floats atol/rtol are weak).
        y = "float64" if c_kind(y) in "biu" else y
        return [upcast(x, y)] * 2

    def c_expr(self, inputs, in_dtypes, out_dtype):
        dtype = in_dtypes[0]
        if dtype not in ("float32", "float64"):
            return None  # float16: NumPy rounds every step to float16
        x, y = inputs
        fabs = c_fn("fabs", dtype)
        text = (f"((({fabs}({x} - {y}) <= {c_lit(self.atol, dtype)} + {c_lit(self.rtol, dtype)}"
                f" * {fabs}({y})) && isfinite({y})) || ({x} == {y})")
        if self.equal_nan:
            text += f" || (isnan({x}) && isnan({y}))"
        return text + ")"

    __props__ = ("rtol", "atol", "equal_nan")

    def __init__(self, rtol=1e-5, atol=1e-8, equal_nan=False):
        self.rtol, self.atol, self.equal_nan = float(rtol), float(atol), bool(equal_nan)

    def impl(self, x, y):
        return np.isclose(x, y, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)


class _UnaryPredicate(_Comparison):
    """A test of one float value through the C function ``c_test`` (isnan, ...);
    for bools and integers the answer is the constant ``c_discrete``."""

    nin = 1
    c_test = None
    c_discrete = None

    def c_expr(self, inputs, in_dtypes, out_dtype):
        kind = c_kind(in_dtypes[0])
        if kind == "f":
            return f"({self.c_test}({inputs[0]}) != 0)"
        return self.c_discrete if kind in "biu" else None


class IsNan(_UnaryPredicate):
    """Whether x is NaN (always False for integers and bools)."""

    c_test, c_discrete = "isnan", "0"
    ufunc = np.isnan


class IsInf(_UnaryPredicate):
    """Whether x is +inf or -inf."""

    c_test, c_discrete = "isinf", "0"
    ufunc = np.isinf


class IsFinite(_UnaryPredicate):
    """Whether x is neither infinite nor NaN."""

    c_test, c_discrete = "isfinite", "1"
    ufunc = np.isfinite


# -- bitwise on integers, logical on bools ---------------------------------------

class _Bitwise(_Comparison):
    output_dtype = staticmethod(int_or_bool_out)

    def c_expr(self, inputs, in_dtypes, out_dtype):
        if self.c_symbol is None or c_kind(out_dtype) not in "biu":
            return None
        return f"(({c_ctype(out_dtype)})({f' {self.c_symbol} '.join(inputs)}))"


class AND(_Bitwise):
    """x & y (bitwise on integers, logical on bools)."""

    c_symbol = "&"
    name = "and_"

    ufunc = np.bitwise_and
    commutative = True
    associative = True


class OR(_Bitwise):
    """x | y (bitwise on integers, logical on bools)."""

    c_symbol = "|"
    name = "or_"

    ufunc = np.bitwise_or
    identity = 0
    commutative = True
    associative = True


class XOR(_Bitwise):
    """x ^ y (bitwise on integers, logical on bools)."""

    c_symbol = "^"
    ufunc = np.bitwise_xor
    identity = 0
    commutative = True
    associative = True


class Invert(_Bitwise):
    """~x (bitwise not on integers, logical not on bools)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        kind = c_kind(out_dtype)
        if kind == "b":
            return f"(!{a})"
        return f"(({c_ctype(out_dtype)})(~{a}))" if kind in "iu" else None

    nin = 1
    ufunc = np.invert
