"""Transcendental, special-function and rounding scalar ops.

All have float results (Theano's upgrade_to_float: small ints give float32,
other ints float64) and compute float16 in float32 (see FloatScalarOp).
Gradients are tensor expressions of the inputs and outputs; constants in them
are Python floats, which promote weakly and so keep the input's dtype.
"""

import math

import numpy as np
import scipy.special

from symgraph.ops.scalar import (FloatScalarOp, UnaryScalarOp, c_exact, c_fn, c_kind, c_lit,
                                 complex_to_real_out, float_out)


def _m():
    # ops.math imports this module; the gradient graphs use its functions.
    from symgraph.ops import math as user_math

    return user_math


class _Unary(FloatScalarOp):
    nin = 1
    c_name = None  # the libm function computing it (without the f suffix)
    c_helper = None  # or an sg_ helper from _C_MATH, same naming

    def c_expr(self, inputs, in_dtypes, out_dtype):
        name = self.c_name or self.c_helper
        if name is None or c_kind(out_dtype) != "f":
            return None
        return f"{c_fn(name, out_dtype)}({', '.join(inputs)})"

    def c_support(self):
        return (("sg_math_v1", c_exact(_C_MATH)),) if self.c_helper else ()


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


# -- exponentials and logarithms -------------------------------------------------

class Exp(_Unary):
    """e ** x."""

    c_name = "exp"

    ufunc = np.exp

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * outputs[0]]


class Exp2(_Unary):
    """2 ** x."""

    c_name = "exp2"

    ufunc = np.exp2

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * outputs[0] * math.log(2.0)]


class Expm1(_Unary):
    """e ** x - 1, accurate near 0."""

    c_name = "expm1"

    ufunc = np.expm1

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (outputs[0] + 1.0)]


class Log(_Unary):
    """Natural logarithm."""

    c_name = "log"

    ufunc = np.log

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / inputs[0]]


class Log2(_Unary):
    """Base-2 logarithm."""

    c_name = "log2"

    ufunc = np.log2

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] * math.log(2.0))]


class Log10(_Unary):
    """Base-10 logarithm."""

    c_name = "log10"

    ufunc = np.log10

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] * math.log(10.0))]


class Log1p(_Unary):
    """log(1 + x), accurate near 0."""

    c_name = "log1p"

    ufunc = np.log1p

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] + 1.0)]


class Log1mexp(_Unary):
    """log(1 - e ** x) for x <= 0, accurate at both ends (Maechler's split)."""

    c_helper = "sg_log1mexp"

    def impl(self, x):
        near_zero = x > -math.log(2.0)
        # Each branch is evaluated everywhere; errstate in Elemwise hides the
        # warnings of the branch that is not chosen.
        return np.where(near_zero, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))

    def grad(self, inputs, outputs, output_grads):
        # d/dx log(1 - e^x) = -e^x / (1 - e^x) = -1 / expm1(-x)
        return [-output_grads[0] / _m().expm1(-inputs[0])]


class Sigmoid(_Unary):
    """1 / (1 + e ** -x), without overflow for large |x|."""

    c_helper = "sg_sigmoid"

    ufunc = scipy.special.expit

    def grad(self, inputs, outputs, output_grads):
        out = outputs[0]
        return [output_grads[0] * out * (1.0 - out)]


class Softplus(_Unary):
    """log(1 + e ** x), computed as log1p(e ** -|x|) + max(x, 0) (no overflow)."""

    c_helper = "sg_softplus"

    def impl(self, x):
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().sigmoid(inputs[0])]


# -- powers and roots --------------------------------------------------------------

class Sqrt(_Unary):
    """Square root (NaN for negative x)."""

    c_name = "sqrt"

    ufunc = np.sqrt

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * 0.5 / outputs[0]]


# -- trigonometry --------------------------------------------------------------------

class Sin(_Unary):
    """Sine (radians)."""

    c_name = "sin"

    ufunc = np.sin

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().cos(inputs[0])]


class Cos(_Unary):
    """Cosine (radians)."""

    c_name = "cos"

    ufunc = np.cos

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] * _m().sin(inputs[0])]


class Tan(_Unary):
    """Tangent (radians)."""

    c_name = "tan"

    ufunc = np.tan

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (1.0 + _m().sqr(outputs[0]))]


class ArcSin(_Unary):
    """Inverse sine, in [-pi/2, pi/2]."""

    c_name = "asin"

    ufunc = np.arcsin

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(1.0 - _m().sqr(inputs[0]))]


class ArcCos(_Unary):
    """Inverse cosine, in [0, pi]."""

    c_name = "acos"

    ufunc = np.arccos

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] / _m().sqrt(1.0 - _m().sqr(inputs[0]))]


class ArcTan(_Unary):
    """Inverse tangent, in [-pi/2, pi/2]."""

    c_name = "atan"

    ufunc = np.arctan

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (1.0 + _m().sqr(inputs[0]))]


class ArcTan2(FloatScalarOp):
    """The angle of the point (x, y): arctan2(y, x), in [-pi, pi]."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        if c_kind(out_dtype) != "f":
            return None
        return f"{c_fn('atan2', out_dtype)}({inputs[0]}, {inputs[1]})"

    nin = 2
    ufunc = np.arctan2

    def grad(self, inputs, outputs, output_grads):
        m = _m()
        y, x = inputs
        (gz,) = output_grads
        r2 = m.sqr(x) + m.sqr(y)
        return [gz * x / r2, -gz * y / r2]


class Sinh(_Unary):
    """Hyperbolic sine."""

    c_name = "sinh"

    ufunc = np.sinh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().cosh(inputs[0])]


class Cosh(_Unary):
    """Hyperbolic cosine."""

    c_name = "cosh"

    ufunc = np.cosh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().sinh(inputs[0])]


class Tanh(_Unary):
    """Hyperbolic tangent."""

    c_name = "tanh"

    ufunc = np.tanh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (1.0 - _m().sqr(outputs[0]))]


class ArcSinh(_Unary):
    """Inverse hyperbolic sine."""

    c_name = "asinh"

    ufunc = np.arcsinh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(_m().sqr(inputs[0]) + 1.0)]


class ArcCosh(_Unary):
    """Inverse hyperbolic cosine (x >= 1)."""

    c_name = "acosh"

    ufunc = np.arccosh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(_m().sqr(inputs[0]) - 1.0)]


class ArcTanh(_Unary):
    """Inverse hyperbolic tangent (|x| < 1)."""

    c_name = "atanh"

    ufunc = np.arctanh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (1.0 - _m().sqr(inputs[0]))]


class Deg2Rad(_Unary):
    """Degrees to radians."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return f"({inputs[0]} * {c_lit(math.pi / 180.0, out_dtype)})"

    ufunc = np.deg2rad

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (math.pi / 180.0)]


class Rad2Deg(_Unary):
    """Radians to degrees."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return f"({inputs[0]} * {c_lit(180.0 / math.pi, out_dtype)})"

    ufunc = np.rad2deg

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (180.0 / math.pi)]


# -- special functions (SciPy) ------------------------------------------------------

class Erf(_Unary):
    """The error function."""

    c_name = "erf"

    ufunc = scipy.special.erf

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (2.0 / math.sqrt(math.pi)) * _m().exp(-_m().sqr(x))]


class Erfc(_Unary):
    """1 - erf(x), accurate for large x."""

    c_name = "erfc"

    ufunc = scipy.special.erfc

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (-2.0 / math.sqrt(math.pi)) * _m().exp(-_m().sqr(x))]


class Erfinv(_Unary):
    """The inverse of erf, on (-1, 1)."""

    ufunc = scipy.special.erfinv

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (math.sqrt(math.pi) / 2.0) * _m().exp(_m().sqr(outputs[0]))]


class GammaLn(_Unary):
    """log |Gamma(x)|."""

    c_helper = "sg_lgamma"

    ufunc = scipy.special.gammaln

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().psi(inputs[0])]


class Psi(_Unary):
    """The digamma function, d/dx log Gamma(x)."""

    ufunc = scipy.special.psi

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().tri_gamma(inputs[0])]


class TriGamma(_Unary):
    """The trigamma function, d/dx psi(x)."""

    name = "tri_gamma"

    def impl(self, x):
        return scipy.special.polygamma(1, x)

    def grad(self, inputs, outputs, output_grads):
        from symgraph.gradient import grad_not_implemented

        return [grad_not_implemented(self, 0, inputs[0])]


# -- rounding (zero gradient almost everywhere) ---------------------------------------

class _Rounding(_Unary):
    def grad(self, inputs, outputs, output_grads):
        return [_m().zeros_like(inputs[0])]


class Floor(_Rounding):
    """The largest integer <= x (a float result)."""

    c_name = "floor"

    ufunc = np.floor


class Ceil(_Rounding):
    """The smallest integer >= x (a float result)."""

    c_name = "ceil"

    ufunc = np.ceil


class Trunc(_Rounding):
    """x rounded towards zero (a float result)."""

    c_name = "trunc"

    ufunc = np.trunc


class RoundHalfToEven(_Rounding):
    """x rounded to the nearest integer, ties to even (np.round)."""

    c_name = "rint"

    name = "round_half_to_even"

    def impl(self, x):
        return np.round(x)


class RoundHalfAwayFromZero(_Rounding):
    """x rounded to the nearest integer, ties away from zero (C's round)."""

    c_name = "round"

    name = "round_half_away_from_zero"

    def impl(self, x):
        t = np.trunc(x)
        # x - trunc(x) is exact, unlike floor(|x| + 0.5) near 0.5 - ulp.
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# -- complex numbers (values only: no gradients through complex dtypes) ----------

class Real(UnaryScalarOp):
    """The real part (x itself for real x)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return inputs[0] if c_kind(in_dtypes[0]) in "biuf" else None

    output_dtype = staticmethod(complex_to_real_out)

    def impl(self, x):
        return np.array(np.real(x), copy=True)  # np.real gives a view


class Imag(UnaryScalarOp):
    """The imaginary part (zeros for real x)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return c_lit(0, out_dtype) if c_kind(in_dtypes[0]) in "biuf" else None

    output_dtype = staticmethod(complex_to_real_out)

    def impl(self, x):
        return np.array(np.imag(x), copy=True)  # np.imag gives a view


class Conj(UnaryScalarOp):
    """The complex conjugate (x itself for real x)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return inputs[0] if c_kind(in_dtypes[0]) in "biuf" else None

    ufunc = np.conjugate


class Angle(UnaryScalarOp):
    """The argument of complex x, in [-pi, pi] (0 or pi for real x)."""

    def c_input_dtypes(self, x):
        # np.angle(real x) is arctan2(0, x), computed in NumPy's smallest
        # float loop that holds x: int8 and bool in float16, int32 in float64.
        return [str(np.promote_types(x, "float16"))]

    def c_expr(self, inputs, in_dtypes, out_dtype):
        dtype = in_dtypes[0]
        if c_kind(dtype) != "f":
            return None
        text = f"{c_fn('atan2', dtype)}({c_lit(0, dtype)}, {inputs[0]})"
        return f"((float)(_Float16)({text}))" if dtype == "float16" else text

    def output_dtypes(self, *dtypes):
        return [complex_to_real_out(float_out(*dtypes))]

    def impl(self, x):
        return np.angle(x)
