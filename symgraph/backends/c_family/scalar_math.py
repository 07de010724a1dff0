"""The C of transcendental, special-function and rounding scalar ops (``symgraph/ops/scalar_math.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

import math
import numpy as np

from symgraph.backends.c_family.scalar_c import attr, c_method, register_attrs
from symgraph.backends.c_family.scalar_base import c_exact, c_kind, c_fn, c_lit
from symgraph.ops.scalar_math import (Angle, ArcCos, ArcCosh, ArcSin, ArcSinh, ArcTan, ArcTan2,
                                      ArcTanh, Ceil, Conj, Cos, Cosh, Deg2Rad, Erf, Erfc, Erfinv,
                                      Exp, Exp2, Expm1, Floor, GammaLn, Imag, Log, Log10, Log1mexp,
                                      Log1p, Log2, Psi, Rad2Deg, Real, RoundHalfAwayFromZero,
                                      RoundHalfToEven, Sigmoid, Sin, Sinh, Softplus, Sqrt, Tan,
                                      Tanh, TriGamma, Trunc, _Special, _Unary)
from symgraph.backends.c_family.c_files import c_file


# C helpers for the functions libm lacks.  Both sides of a choice are
# computed, so that the compiler can vectorize the loop (blend, no branch).
_C_MATH = r"""
#define SG_DEF_MATH(T, S) \
static inline T sg_sigmoid##S(T x) { \
    T e = exp##S(-fabs##S(x)); \
    T pos = (T)1 / ((T)1 + e), neg = e / ((T)1 + e); \
    return x >= 0 ? pos : neg; } \
static inline T sg_softplus##S(T x) { \
    return log1p##S(exp##S(-fabs##S(x))) + (x > 0 ? x : (x == x ? (T)0 : x)); } \
static inline T sg_log1mexp##S(T x) { \
    T a = log##S(-expm1##S(x)), b = log1p##S(-exp##S(x)); \
    return x > (T)-0.6931471805599453 ? a : b; } \
static inline T sg_lgamma##S(T x) { /* scipy's gammaln(-inf) is -inf */ \
    int sign; return isinf(x) && x < 0 ? x : lgamma##S##_r(x, &sign); }
SG_DEF_MATH(float, f) SG_DEF_MATH(double, )
"""


# C for the special functions libm lacks, in double (the float versions round
# the double result: correctly rounded but for rare double roundings).  The
# tables were fitted with mpmath (Chebyshev fits turned into monomial
# coefficients, highest degree first); the comment above each says what it
# approximates.  The errors, measured against mpmath, are in the docstrings of
# Erfinv, Psi and TriGamma; tests/native/test_special_c.py checks them
# against scipy.special.  Their branches and loop counts depend on the value,
# so loops calling them stay scalar; as pure static inline functions they are
# still inlined into fused loops.
_C_SPECIAL = c_file("c_family/special_functions.inc")


@c_method(_Unary, "c_expr")
def _unary_c_expr(op, inputs, in_dtypes, out_dtype):
    name = attr(op, 'c_name') or attr(op, 'c_helper')
    if name is None or c_kind(out_dtype) != "f":
        return None
    return f"{c_fn(name, out_dtype)}({', '.join(inputs)})"


@c_method(_Unary, "c_support")
def _unary_c_support(op):
    return (("sg_math_v1", c_exact(_C_MATH)),) if attr(op, 'c_helper') else ()


register_attrs(_Unary, c_name=None, c_helper=None)


@c_method(_Special, "c_support")
def _special_c_support(op):
    return (("sg_special_v1", c_exact(_C_SPECIAL)),)


register_attrs(Exp, c_name="exp")


register_attrs(Exp2, c_name="exp2")


register_attrs(Expm1, c_name="expm1")


register_attrs(Log, c_name="log")


register_attrs(Log2, c_name="log2")


register_attrs(Log10, c_name="log10")


register_attrs(Log1p, c_name="log1p")


register_attrs(Log1mexp, c_helper="sg_log1mexp")


register_attrs(Sigmoid, c_helper="sg_sigmoid")


register_attrs(Softplus, c_helper="sg_softplus")


register_attrs(Sqrt, c_name="sqrt")


register_attrs(Sin, c_name="sin")


register_attrs(Cos, c_name="cos")


register_attrs(Tan, c_name="tan")


register_attrs(ArcSin, c_name="asin")


register_attrs(ArcCos, c_name="acos")


register_attrs(ArcTan, c_name="atan")


@c_method(ArcTan2, "c_expr")
def _arc_tan2_c_expr(op, inputs, in_dtypes, out_dtype):
    if c_kind(out_dtype) != "f":
        return None
    return f"{c_fn('atan2', out_dtype)}({inputs[0]}, {inputs[1]})"


register_attrs(Sinh, c_name="sinh")


register_attrs(Cosh, c_name="cosh")


register_attrs(Tanh, c_name="tanh")


register_attrs(ArcSinh, c_name="asinh")


register_attrs(ArcCosh, c_name="acosh")


register_attrs(ArcTanh, c_name="atanh")


@c_method(Deg2Rad, "c_expr")
def _deg2_rad_c_expr(op, inputs, in_dtypes, out_dtype):
    return f"({inputs[0]} * {c_lit(math.pi / 180.0, out_dtype)})"


@c_method(Rad2Deg, "c_expr")
def _rad2_deg_c_expr(op, inputs, in_dtypes, out_dtype):
    return f"({inputs[0]} * {c_lit(180.0 / math.pi, out_dtype)})"


register_attrs(Erf, c_name="erf")


register_attrs(Erfc, c_name="erfc")


register_attrs(Erfinv, c_helper="sg_erfinv")


register_attrs(GammaLn, c_helper="sg_lgamma")


register_attrs(Psi, c_helper="sg_psi")


register_attrs(TriGamma, c_helper="sg_trigamma")


register_attrs(Floor, c_name="floor")


register_attrs(Ceil, c_name="ceil")


register_attrs(Trunc, c_name="trunc")


register_attrs(RoundHalfToEven, c_name="rint")


register_attrs(RoundHalfAwayFromZero, c_name="round")


@c_method(Real, "c_expr")
def _real_c_expr(op, inputs, in_dtypes, out_dtype):
    return inputs[0] if c_kind(in_dtypes[0]) in "biuf" else None


@c_method(Imag, "c_expr")
def _imag_c_expr(op, inputs, in_dtypes, out_dtype):
    return c_lit(0, out_dtype) if c_kind(in_dtypes[0]) in "biuf" else None


@c_method(Conj, "c_expr")
def _conj_c_expr(op, inputs, in_dtypes, out_dtype):
    return inputs[0] if c_kind(in_dtypes[0]) in "biuf" else None


@c_method(Angle, "c_input_dtypes")
def _angle_c_input_dtypes(op, x):
    # np.angle(real x) is arctan2(0, x), computed in NumPy's smallest
    # float loop that holds x: int8 and bool in float16, int32 in float64.
    return [str(np.promote_types(x, "float16"))]


@c_method(Angle, "c_expr")
def _angle_c_expr(op, inputs, in_dtypes, out_dtype):
    dtype = in_dtypes[0]
    if c_kind(dtype) != "f":
        return None
    text = f"{c_fn('atan2', dtype)}({c_lit(0, dtype)}, {inputs[0]})"
    return f"SG_ROUND_F16({text})" if dtype == "float16" else text
