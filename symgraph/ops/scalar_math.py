"""Transcendental, special-function and rounding scalar ops.

All have float results (Theano's upgrade_to_float: small ints give float32,
other ints float64) and compute float16 in float32 (see FloatScalarOp).
Gradients are tensor expressions of the inputs and outputs; constants in them
are Python floats, which promote weakly and so keep the input's dtype.
"""

import math

import numpy as np
from symgraph.ops.lazy_scipy import ScipyFunction, special as _special

from symgraph.ops.scalar import FloatScalarOp, UnaryScalarOp, complex_to_real_out, float_out


def _m():
    # ops.math imports this module; the gradient graphs use its functions.
    from symgraph.ops import math as user_math

    return user_math


class _Unary(FloatScalarOp):
    nin = 1


class _Special(_Unary):
    """A special function whose C helper is a support entry of
    its own: the libraries of other kernels need not compile those tables."""



# -- exponentials and logarithms -------------------------------------------------

class Exp(_Unary):
    """e ** x."""

    ufunc = np.exp

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * outputs[0]]


class Exp2(_Unary):
    """2 ** x."""

    ufunc = np.exp2

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * outputs[0] * math.log(2.0)]


class Expm1(_Unary):
    """e ** x - 1, accurate near 0."""

    ufunc = np.expm1

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (outputs[0] + 1.0)]


class Log(_Unary):
    """Natural logarithm."""

    ufunc = np.log

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / inputs[0]]


class Log2(_Unary):
    """Base-2 logarithm."""

    ufunc = np.log2

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] * math.log(2.0))]


class Log10(_Unary):
    """Base-10 logarithm."""

    ufunc = np.log10

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] * math.log(10.0))]


class Log1p(_Unary):
    """log(1 + x), accurate near 0."""

    ufunc = np.log1p

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (inputs[0] + 1.0)]


class Log1mexp(_Unary):
    """log(1 - e ** x) for x <= 0, accurate at both ends (Maechler's split)."""

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

    ufunc = ScipyFunction("scipy.special", "expit")

    def grad(self, inputs, outputs, output_grads):
        out = outputs[0]
        return [output_grads[0] * out * (1.0 - out)]


class Softplus(_Unary):
    """log(1 + e ** x), computed as log1p(e ** -|x|) + max(x, 0) (no overflow)."""

    def impl(self, x):
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().sigmoid(inputs[0])]


# -- powers and roots --------------------------------------------------------------

class Sqrt(_Unary):
    """Square root (NaN for negative x)."""

    ufunc = np.sqrt

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * 0.5 / outputs[0]]


# -- trigonometry --------------------------------------------------------------------

class Sin(_Unary):
    """Sine (radians)."""

    ufunc = np.sin

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().cos(inputs[0])]


class Cos(_Unary):
    """Cosine (radians)."""

    ufunc = np.cos

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] * _m().sin(inputs[0])]


class Tan(_Unary):
    """Tangent (radians)."""

    ufunc = np.tan

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (1.0 + _m().sqr(outputs[0]))]


class ArcSin(_Unary):
    """Inverse sine, in [-pi/2, pi/2]."""

    ufunc = np.arcsin

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(1.0 - _m().sqr(inputs[0]))]


class ArcCos(_Unary):
    """Inverse cosine, in [0, pi]."""

    ufunc = np.arccos

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] / _m().sqrt(1.0 - _m().sqr(inputs[0]))]


class ArcTan(_Unary):
    """Inverse tangent, in [-pi/2, pi/2]."""

    ufunc = np.arctan

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (1.0 + _m().sqr(inputs[0]))]


class ArcTan2(FloatScalarOp):
    """The angle of the point (x, y): arctan2(y, x), in [-pi, pi]."""

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

    ufunc = np.sinh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().cosh(inputs[0])]


class Cosh(_Unary):
    """Hyperbolic cosine."""

    ufunc = np.cosh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().sinh(inputs[0])]


class Tanh(_Unary):
    """Hyperbolic tangent."""

    ufunc = np.tanh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (1.0 - _m().sqr(outputs[0]))]


class ArcSinh(_Unary):
    """Inverse hyperbolic sine."""

    ufunc = np.arcsinh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(_m().sqr(inputs[0]) + 1.0)]


class ArcCosh(_Unary):
    """Inverse hyperbolic cosine (x >= 1)."""

    ufunc = np.arccosh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / _m().sqrt(_m().sqr(inputs[0]) - 1.0)]


class ArcTanh(_Unary):
    """Inverse hyperbolic tangent (|x| < 1)."""

    ufunc = np.arctanh

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] / (1.0 - _m().sqr(inputs[0]))]


class Deg2Rad(_Unary):
    """Degrees to radians."""

    ufunc = np.deg2rad

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (math.pi / 180.0)]


class Rad2Deg(_Unary):
    """Radians to degrees."""

    ufunc = np.rad2deg

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (180.0 / math.pi)]


# -- special functions (SciPy) ------------------------------------------------------

class Erf(_Unary):
    """The error function."""

    ufunc = ScipyFunction("scipy.special", "erf")

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (2.0 / math.sqrt(math.pi)) * _m().exp(-_m().sqr(x))]


class Erfc(_Unary):
    """1 - erf(x), accurate for large x."""

    ufunc = ScipyFunction("scipy.special", "erfc")

    def grad(self, inputs, outputs, output_grads):
        x = inputs[0]
        return [output_grads[0] * (-2.0 / math.sqrt(math.pi)) * _m().exp(-_m().sqr(x))]


class Erfinv(_Special):
    """The inverse of erf, on (-1, 1) (+-inf at +-1, NaN beyond).

    Odd, as erf: erfinv(-0.0) = -0.0 (scipy gives +0.0; the Python
    implementation restores the sign so that it agrees with the C).

    C: ``sg_erfinv``, within 1.8 ulp in float64 (measured against mpmath at
    60000 points over (-1, 1), near +-1 and down to 1e-320), correctly
    rounded in float32 (scipy's own float32 loop is up to 3 ulp off).
    """

    @staticmethod
    def ufunc(x):
        result = _special().erfinv(x)
        return np.where(x == 0, x, result).astype(result.dtype, copy=False)[()]

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * (math.sqrt(math.pi) / 2.0) * _m().exp(_m().sqr(outputs[0]))]


class GammaLn(_Unary):
    """log |Gamma(x)|."""

    ufunc = ScipyFunction("scipy.special", "gammaln")

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().psi(inputs[0])]


class Psi(_Special):
    """The digamma function, d/dx log Gamma(x).

    C: ``sg_psi``, within 3.1 ulp in float64 (measured against mpmath on
    (0, 20), 1e-300 .. 1e300 and (-1, 0)); below -1, where psi(x) =
    psi(1 - x) - pi cot(pi x), the error is a few ulps of those terms, which
    cancel near psi's zeros (scipy's too).  Correctly rounded in float32.
    """

    ufunc = ScipyFunction("scipy.special", "psi")

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * _m().tri_gamma(inputs[0])]


class TriGamma(_Special):
    """The trigamma function, d/dx psi(x).

    C: ``sg_trigamma``, within 2.5 ulp in float64 for x > 0 and 4.7 ulp for
    x < 0 (measured against mpmath; scipy's polygamma is up to 5 ulp off).
    Correctly rounded in float32.
    """

    name = "tri_gamma"

    def impl(self, x):
        return _special().polygamma(1, x)

    def grad(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import grad_not_implemented

        return [grad_not_implemented(self, 0, inputs[0])]


# -- rounding (zero gradient almost everywhere) ---------------------------------------

class _Rounding(_Unary):
    def grad(self, inputs, outputs, output_grads):
        return [_m().zeros_like(inputs[0])]


class Floor(_Rounding):
    """The largest integer <= x (a float result)."""

    ufunc = np.floor


class Ceil(_Rounding):
    """The smallest integer >= x (a float result)."""

    ufunc = np.ceil


class Trunc(_Rounding):
    """x rounded towards zero (a float result)."""

    ufunc = np.trunc


class RoundHalfToEven(_Rounding):
    """x rounded to the nearest integer, ties to even (np.round)."""

    name = "round_half_to_even"

    def impl(self, x):
        return np.round(x)


class RoundHalfAwayFromZero(_Rounding):
    """x rounded to the nearest integer, ties away from zero (C's round)."""

    name = "round_half_away_from_zero"

    def impl(self, x):
        t = np.trunc(x)
        # x - trunc(x) is exact, unlike floor(|x| + 0.5) near 0.5 - ulp.
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# -- complex numbers (values only: no gradients through complex dtypes) ----------

class Real(UnaryScalarOp):
    """The real part (x itself for real x)."""

    output_dtype = staticmethod(complex_to_real_out)

    def impl(self, x):
        return np.array(np.real(x), copy=True)  # np.real gives a view


class Imag(UnaryScalarOp):
    """The imaginary part (zeros for real x)."""

    output_dtype = staticmethod(complex_to_real_out)

    def impl(self, x):
        return np.array(np.imag(x), copy=True)  # np.imag gives a view


class Conj(UnaryScalarOp):
    """The complex conjugate (x itself for real x)."""

    ufunc = np.conjugate


class Angle(UnaryScalarOp):
    """The argument of complex x, in [-pi, pi] (0 or pi for real x)."""

    def output_dtypes(self, *dtypes):
        return [complex_to_real_out(float_out(*dtypes))]

    def impl(self, x):
        return np.angle(x)
