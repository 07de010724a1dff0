"""Comparison, predicate, bitwise and logical scalar ops: bool (or integer)
results that do not vary continuously with their inputs, so every input is
disconnected for gradients.

``scalar_basic`` re-exports these classes (``sb.LT`` keeps working), and
imports the two small helpers defined here; this module imports nothing
from it, so either may be imported first.
"""

import numpy as np

from symgraph.ops.scalar import BinaryScalarOp, bool_out, int_or_bool_out

__all__ = ["LT", "GT", "LE", "GE", "EQ", "NEQ", "IsClose", "IsNan", "IsInf", "IsFinite",
           "AND", "OR", "XOR", "Invert"]



def disconnected_grads(inputs):
    """The gradient of an op disconnected from every one of ``inputs``."""
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return [disconnected_grad_for(x) for x in inputs]


# -- comparisons (bool results, no gradient) -----------------------------------

class _Comparison(BinaryScalarOp):
    output_dtype = staticmethod(bool_out)

    def connection_pattern(self):
        return [False] * self.nin

    def grad(self, inputs, outputs, output_grads):
        return disconnected_grads(inputs)


class LT(_Comparison):
    """x < y."""

    ufunc = np.less


class GT(_Comparison):
    """x > y."""

    ufunc = np.greater


class LE(_Comparison):
    """x <= y."""

    ufunc = np.less_equal


class GE(_Comparison):
    """x >= y."""

    ufunc = np.greater_equal


class EQ(_Comparison):
    """x == y (False where either is NaN)."""

    ufunc = np.equal
    commutative = True


class NEQ(_Comparison):
    """x != y (True where either is NaN)."""

    ufunc = np.not_equal
    commutative = True


class IsClose(_Comparison):
    """|x - y| <= atol + rtol * |y| (np.isclose)."""

    __props__ = ("rtol", "atol", "equal_nan")

    def __init__(self, rtol=1e-5, atol=1e-8, equal_nan=False):
        self.rtol, self.atol, self.equal_nan = float(rtol), float(atol), bool(equal_nan)

    def impl(self, x, y):
        return np.isclose(x, y, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)


class _UnaryPredicate(_Comparison):
    """A test of one float value through the C function ``c_test`` (isnan, ...);
    for bools and integers the answer is the constant ``c_discrete``."""

    nin = 1


class IsNan(_UnaryPredicate):
    """Whether x is NaN (always False for integers and bools)."""

    ufunc = np.isnan


class IsInf(_UnaryPredicate):
    """Whether x is +inf or -inf."""

    ufunc = np.isinf


class IsFinite(_UnaryPredicate):
    """Whether x is neither infinite nor NaN."""

    ufunc = np.isfinite


# -- bitwise on integers, logical on bools ---------------------------------------

class _Bitwise(_Comparison):
    output_dtype = staticmethod(int_or_bool_out)


class AND(_Bitwise):
    """x & y (bitwise on integers, logical on bools)."""

    name = "and_"

    ufunc = np.bitwise_and
    commutative = True
    associative = True


class OR(_Bitwise):
    """x | y (bitwise on integers, logical on bools)."""

    name = "or_"

    ufunc = np.bitwise_or
    identity = 0
    commutative = True
    associative = True


class XOR(_Bitwise):
    """x ^ y (bitwise on integers, logical on bools)."""

    ufunc = np.bitwise_xor
    identity = 0
    commutative = True
    associative = True


class Invert(_Bitwise):
    """~x (bitwise not on integers, logical not on bools)."""

    nin = 1
    ufunc = np.invert
