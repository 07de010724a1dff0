"""The user-facing element-wise functions: T.add, T.exp, T.switch, T.cast, ...

Each is an Elemwise around a scalar op from ``scalar_basic``, ``scalar_logic``
or ``scalar_math``.  Inputs follow NumPy 2's promotion with Python numbers weak
(NEP 50), and broadcast as NumPy's where a dimension is declared
broadcastable.  Names follow Theano; NumPy's spellings are aliases (``power``,
``floor_divide``, ``bitwise_and``, ``less``...).

Some names shadow Python builtins (``abs``, ``pow``, ``round``) on purpose, as
in Theano: do not use the builtins in this module.
"""

from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_logic as sl
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import Elemwise, as_elemwise_inputs

__all__ = [
    # arithmetic
    "add", "sub", "mul", "true_div", "int_div", "floor_div", "floor_divide", "mod",
    "pow", "power", "neg", "abs_", "abs", "sign", "sqr", "square", "sqrt",
    "reciprocal", "inv", "maximum", "minimum", "clip",
    # comparisons
    "lt", "gt", "le", "ge", "eq", "neq", "less", "greater", "less_equal",
    "greater_equal", "equal", "not_equal", "isclose", "isnan", "isinf", "isfinite",
    # logic
    "and_", "or_", "xor", "invert", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "logical_and", "logical_or", "logical_xor", "logical_not",
    # transcendental and special
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "log1mexp", "sin",
    "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "sigmoid", "softplus",
    "erf", "erfc", "erfinv", "gammaln", "psi", "digamma", "tri_gamma",
    # rounding
    "floor", "ceil", "trunc", "round", "round_half_to_even", "round_half_away_from_zero",
    # selection, structure, casting
    "switch", "where", "second", "fill", "ones_like", "zeros_like", "cast", "identity",
    "dot",
    # complex numbers
    "real", "imag", "conj", "angle",
]


def _elemwise(scalar_op, name, doc):
    """A user function applying ``Elemwise(scalar_op)`` (one shared Op instance)."""
    op = Elemwise(scalar_op)

    def apply(*inputs):
        return op(*inputs)

    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = doc
    apply.op = op
    return apply


# -- arithmetic ------------------------------------------------------------------

def add(*xs):
    """Element-wise sum of any number of tensors (NumPy broadcasting)."""
    return Elemwise(sb.Add(len(xs)))(*xs)


def mul(*xs):
    """Element-wise product of any number of tensors."""
    return Elemwise(sb.Mul(len(xs)))(*xs)


sub = _elemwise(sb.Sub(), "sub", "x - y.")
true_div = _elemwise(sb.TrueDiv(), "true_div",
                     "x / y, always a float result (int32 / int32 is float64, as Python 3).")
int_div = _elemwise(sb.IntDiv(), "int_div",
                    "x // y: floor division as NumPy's (ints stay ints; -7 // 2 == -4).")
floor_div = floor_divide = int_div
mod = _elemwise(sb.Mod(), "mod", "x % y with the sign of y (NumPy's and Python's rule).")
pow = _elemwise(sb.Pow(), "pow", "x ** y (an integer to a negative integer power is an error).")
power = pow
neg = _elemwise(sb.Neg(), "neg", "-x (not defined on bool).")
abs_ = _elemwise(sb.Abs(), "abs_", "|x| (the modulus, a real result, for complex x).")
abs = abs_
sign = _elemwise(sb.Sign(), "sign", "-1, 0 or 1 by the sign of x; its gradient is zero.")
sqr = _elemwise(sb.Sqr(), "sqr", "x * x.")
square = sqr
sqrt = _elemwise(sm.Sqrt(), "sqrt", "The square root (a float result; NaN for negative x).")
reciprocal = _elemwise(sb.Reciprocal(), "reciprocal", "1 / x, a float result.")
inv = reciprocal
maximum = _elemwise(sb.Maximum(), "maximum",
                    "The element-wise larger of x and y (NaN if either is NaN).")
minimum = _elemwise(sb.Minimum(), "minimum",
                    "The element-wise smaller of x and y (NaN if either is NaN).")

_clip = Elemwise(sb.Clip())


def clip(x, min, max):  # noqa: A002 - Theano's argument names
    """x limited to [min, max] (min wins if min > max).

    Gradient: to x where min <= x <= max (boundaries included, as Theano), to
    min where x < min, to max where x > max.
    """
    return _clip(x, min, max)


# -- comparisons -----------------------------------------------------------------

lt = less = _elemwise(sl.LT(), "lt", "x < y, a bool tensor.")
gt = greater = _elemwise(sl.GT(), "gt", "x > y, a bool tensor.")
le = less_equal = _elemwise(sl.LE(), "le", "x <= y, a bool tensor.")
ge = greater_equal = _elemwise(sl.GE(), "ge", "x >= y, a bool tensor.")
eq = equal = _elemwise(sl.EQ(), "eq", "x == y, a bool tensor (Variable.__eq__ is identity).")
neq = not_equal = _elemwise(sl.NEQ(), "neq", "x != y, a bool tensor.")
isnan = _elemwise(sl.IsNan(), "isnan", "Where x is NaN (all False for integers).")
isinf = _elemwise(sl.IsInf(), "isinf", "Where x is +inf or -inf.")
isfinite = _elemwise(sl.IsFinite(), "isfinite", "Where x is neither infinite nor NaN.")


def isclose(x, y, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Where |x - y| <= atol + rtol * |y| (np.isclose's rule and defaults)."""
    return Elemwise(sl.IsClose(rtol, atol, equal_nan))(x, y)


# -- logic -----------------------------------------------------------------------

and_ = bitwise_and = _elemwise(sl.AND(), "and_", "x & y: bitwise on integers, logical on bools.")
or_ = bitwise_or = _elemwise(sl.OR(), "or_", "x | y: bitwise on integers, logical on bools.")
xor = bitwise_xor = _elemwise(sl.XOR(), "xor", "x ^ y: bitwise on integers, logical on bools.")
invert = bitwise_not = _elemwise(sl.Invert(), "invert",
                                 "~x: bitwise not on integers, logical not on bools.")


def _truth(x):
    # NumPy's truth value of any number: non-zero (NaN included) is True.
    return cast(x, "bool")


def logical_and(x, y):
    """x and y, element-wise, for inputs of any dtype (non-zero is True)."""
    return and_(_truth(x), _truth(y))


def logical_or(x, y):
    """x or y, element-wise, for inputs of any dtype (non-zero is True)."""
    return or_(_truth(x), _truth(y))


def logical_xor(x, y):
    """x xor y, element-wise, for inputs of any dtype (non-zero is True)."""
    return xor(_truth(x), _truth(y))


def logical_not(x):
    """not x, element-wise, for an input of any dtype (non-zero is True)."""
    return invert(_truth(x))


# -- transcendental and special functions ----------------------------------------------

_FLOAT_NOTE = " Integer inputs give float32 (8/16-bit) or float64."

exp = _elemwise(sm.Exp(), "exp", "e ** x." + _FLOAT_NOTE)
exp2 = _elemwise(sm.Exp2(), "exp2", "2 ** x." + _FLOAT_NOTE)
expm1 = _elemwise(sm.Expm1(), "expm1", "e ** x - 1, accurate near 0." + _FLOAT_NOTE)
log = _elemwise(sm.Log(), "log", "The natural logarithm." + _FLOAT_NOTE)
log2 = _elemwise(sm.Log2(), "log2", "The base-2 logarithm." + _FLOAT_NOTE)
log10 = _elemwise(sm.Log10(), "log10", "The base-10 logarithm." + _FLOAT_NOTE)
log1p = _elemwise(sm.Log1p(), "log1p", "log(1 + x), accurate near 0." + _FLOAT_NOTE)
log1mexp = _elemwise(sm.Log1mexp(), "log1mexp",
                     "log(1 - e ** x) for x <= 0, accurate near 0 and for large -x.")
sin = _elemwise(sm.Sin(), "sin", "Sine (radians)." + _FLOAT_NOTE)
cos = _elemwise(sm.Cos(), "cos", "Cosine (radians)." + _FLOAT_NOTE)
tan = _elemwise(sm.Tan(), "tan", "Tangent (radians)." + _FLOAT_NOTE)
arcsin = _elemwise(sm.ArcSin(), "arcsin", "Inverse sine." + _FLOAT_NOTE)
arccos = _elemwise(sm.ArcCos(), "arccos", "Inverse cosine." + _FLOAT_NOTE)
arctan = _elemwise(sm.ArcTan(), "arctan", "Inverse tangent." + _FLOAT_NOTE)
arctan2 = _elemwise(sm.ArcTan2(), "arctan2",
                    "arctan2(y, x): the angle of the point (x, y), in [-pi, pi].")
sinh = _elemwise(sm.Sinh(), "sinh", "Hyperbolic sine." + _FLOAT_NOTE)
cosh = _elemwise(sm.Cosh(), "cosh", "Hyperbolic cosine." + _FLOAT_NOTE)
tanh = _elemwise(sm.Tanh(), "tanh", "Hyperbolic tangent." + _FLOAT_NOTE)
arcsinh = _elemwise(sm.ArcSinh(), "arcsinh", "Inverse hyperbolic sine." + _FLOAT_NOTE)
arccosh = _elemwise(sm.ArcCosh(), "arccosh", "Inverse hyperbolic cosine." + _FLOAT_NOTE)
arctanh = _elemwise(sm.ArcTanh(), "arctanh", "Inverse hyperbolic tangent." + _FLOAT_NOTE)
deg2rad = _elemwise(sm.Deg2Rad(), "deg2rad", "Degrees to radians.")
rad2deg = _elemwise(sm.Rad2Deg(), "rad2deg", "Radians to degrees.")
sigmoid = _elemwise(sm.Sigmoid(), "sigmoid",
                    "1 / (1 + e ** -x), computed without overflow for large |x|.")
softplus = _elemwise(sm.Softplus(), "softplus",
                     "log(1 + e ** x), computed as log1p(e ** -|x|) + max(x, 0).")
erf = _elemwise(sm.Erf(), "erf", "The error function (scipy.special.erf).")
erfc = _elemwise(sm.Erfc(), "erfc", "1 - erf(x), accurate for large x.")
erfinv = _elemwise(sm.Erfinv(), "erfinv", "The inverse error function, on (-1, 1).")
gammaln = _elemwise(sm.GammaLn(), "gammaln", "log |Gamma(x)| (scipy.special.gammaln).")
psi = digamma = _elemwise(sm.Psi(), "psi", "The digamma function, the derivative of gammaln.")
tri_gamma = _elemwise(sm.TriGamma(), "tri_gamma", "The trigamma function, the derivative of psi.")


# -- rounding (float results, zero gradients) --------------------------------------------

floor = _elemwise(sm.Floor(), "floor", "The largest integer <= x, as a float.")
ceil = _elemwise(sm.Ceil(), "ceil", "The smallest integer >= x, as a float.")
trunc = _elemwise(sm.Trunc(), "trunc", "x rounded towards zero, as a float.")
round_half_to_even = _elemwise(sm.RoundHalfToEven(), "round_half_to_even",
                               "x rounded to the nearest integer, ties to even (np.round).")
round_half_away_from_zero = _elemwise(sm.RoundHalfAwayFromZero(), "round_half_away_from_zero",
                                      "x rounded to the nearest integer, ties away from zero.")


def round(x, mode="half_to_even"):  # noqa: A001 - Theano's name
    """x rounded to the nearest integer, as a float.

    ``mode`` is 'half_to_even' (NumPy's np.round, the default) or
    'half_away_from_zero' (C's round).
    """
    if mode == "half_to_even":
        return round_half_to_even(x)
    if mode == "half_away_from_zero":
        return round_half_away_from_zero(x)
    raise ValueError(f"round: mode must be 'half_to_even' or 'half_away_from_zero', "
                     f"got {mode!r}")


# -- complex numbers (no gradients through complex values) -------------------------------

real = _elemwise(sm.Real(), "real", "The real part of x (x itself for real x).")
imag = _elemwise(sm.Imag(), "imag", "The imaginary part of x (zeros for real x).")
conj = _elemwise(sm.Conj(), "conj", "The complex conjugate of x (x itself for real x).")
angle = _elemwise(sm.Angle(), "angle", "The argument of x in [-pi, pi], a real result.")


# -- selection, structure, casting ------------------------------------------------------

_switch = Elemwise(sb.Switch())


def switch(cond, ift, iff):
    """``ift`` where ``cond`` is true (non-zero), ``iff`` elsewhere, broadcast together.

    The result has the common dtype of ift and iff (a Python number promotes
    weakly against the other branch only, so ``switch(c, x_f32, 0)`` is
    float32 whatever c's dtype); cond gets no gradient.
    """
    ift, iff = as_elemwise_inputs([ift, iff])
    return _switch(cond, ift, iff)


where = switch

_second = Elemwise(sb.Second())


def second(model, value):
    """``value`` broadcast to the shape of ``model`` (and its own), in value's dtype."""
    return _second(model, value)


fill = second


def _like(model, value, dtype):
    from symgraph.tensor.basic import as_tensor_variable, constant

    model = as_tensor_variable(model)
    return second(model, constant(value, dtype=dtype or model.dtype))


def ones_like(model, dtype=None):
    """An array of ones with ``model``'s shape, in ``dtype`` (default model's dtype)."""
    return _like(model, 1, dtype)


def zeros_like(model, dtype=None):
    """An array of zeros with ``model``'s shape, in ``dtype`` (default model's dtype)."""
    return _like(model, 0, dtype)


identity = _elemwise(sb.Identity(), "identity", "A copy of x.")


def cast(x, dtype):
    """x converted to ``dtype`` ('floatX' means config.floatX); no node if already so."""
    from symgraph.tensor.basic import as_tensor_variable
    from symgraph.tensor.type import TensorType

    x = as_tensor_variable(x)
    dtype = TensorType(dtype, shape=()).dtype
    if x.dtype == dtype:
        return x
    return Elemwise(sb.Cast(dtype))(x)


def dot(a, b):
    """The matrix product (see symgraph.ops.blas.dot); here for ``a @ b``."""
    from symgraph.ops import blas

    return blas.dot(a, b)
