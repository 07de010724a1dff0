"""Arithmetic, comparison, logical and structural scalar ops.

Each gradient is written in tensor terms (see ScalarOp.grad); the Elemwise
that wraps the op sums it over broadcast dimensions.  Ops whose output does
not vary continuously with an input (comparisons, bitwise logic) declare that
input disconnected; piecewise-constant float ops (int_div, sign) return zeros,
as Theano did.
"""

import numpy as np

from symgraph.ops.scalar import (BinaryScalarOp, FloatScalarOp, ScalarOp, UnaryScalarOp,
                                 bool_out, complex_to_real_out, int_or_bool_out,
                                 no_bool_out, same_out)


def _m():
    # The user-level functions build the gradient graphs; ops.math imports
    # this module, so the import is deferred to call time.
    from symgraph.ops import math

    return math


def _disconnected(inputs):
    from symgraph.gradient import disconnected_grad_for

    return [disconnected_grad_for(x) for x in inputs]


# -- arithmetic ----------------------------------------------------------------

class Add(ScalarOp):
    """x + y + ... (any number of inputs, as Theano's add)."""

    __props__ = ("nin",)
    ufunc = np.add  # for reductions; impl folds it over the inputs
    identity = 0
    commutative = True
    associative = True

    def __init__(self, nin=2):
        self.nin = nin

    def impl(self, *inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = np.add(out, x)
        return out

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz for _ in inputs]


class Mul(ScalarOp):
    """x * y * ... (any number of inputs)."""

    __props__ = ("nin",)
    ufunc = np.multiply  # for reductions; impl folds it over the inputs
    identity = 1
    commutative = True
    associative = True

    def __init__(self, nin=2):
        self.nin = nin

    def impl(self, *inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = np.multiply(out, x)
        return out

    def grad(self, inputs, outputs, output_grads):
        from symgraph.ops.math import mul

        (gz,) = output_grads
        grads = []
        for i in range(len(inputs)):
            others = [x for j, x in enumerate(inputs) if j != i]
            grads.append(mul(gz, *others) if others else gz)
        return grads


class Sub(BinaryScalarOp):
    """x - y."""

    ufunc = np.subtract
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz, -gz]


class TrueDiv(FloatScalarOp):
    """x / y, always a float result (int32 / int32 is float64)."""

    name = "true_div"

    nin = 2
    ufunc = np.true_divide

    def grad(self, inputs, outputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz / y, -gz * x / (y * y)]


class IntDiv(BinaryScalarOp):
    """x // y: floor division as NumPy (and Python); ints stay ints."""

    name = "int_div"

    ufunc = np.floor_divide

    def grad(self, inputs, outputs, output_grads):
        # Piecewise constant: zero almost everywhere (Theano's choice).
        return [_m().zeros_like(x) for x in inputs]


class Mod(BinaryScalarOp):
    """x % y with the sign of y (NumPy's and Python's convention)."""

    ufunc = np.mod

    def grad(self, inputs, outputs, output_grads):
        # x % y == x - y * floor(x / y): the floor is constant almost everywhere.
        x, y = inputs
        (gz,) = output_grads
        return [gz, -gz * _m().int_div(x, y)]


class Pow(BinaryScalarOp):
    """x ** y (NumPy's power; an integer to a negative integer power is an error)."""

    ufunc = np.power

    def grad(self, inputs, outputs, output_grads):
        m = _m()
        x, y = inputs
        (gz,) = output_grads
        # Theano's formulas; the y-gradient is NaN where x <= 0, as log(x).
        return [gz * y * m.pow(x, y - 1), gz * m.log(x) * outputs[0]]


class Neg(UnaryScalarOp):
    """-x."""

    ufunc = np.negative
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0]]


class Abs(UnaryScalarOp):
    """|x| (the modulus for complex x, a real result)."""

    ufunc = np.abs
    output_dtype = staticmethod(complex_to_real_out)

    def grad(self, inputs, outputs, output_grads):
        # sign(0) == 0: the subgradient 0 at the kink (Theano gave NaN there).
        return [output_grads[0] * _m().sign(inputs[0])]


class Sign(UnaryScalarOp):
    """-1, 0 or 1 by the sign of x (NaN for NaN)."""

    ufunc = np.sign
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        return [_m().zeros_like(inputs[0])]


class Sqr(UnaryScalarOp):
    """x * x (ints stay ints)."""

    ufunc = np.square

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * inputs[0] * 2]


class Reciprocal(FloatScalarOp):
    """1 / x, a float result (Theano's inv)."""

    ufunc = np.reciprocal

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] * _m().sqr(outputs[0])]


class Maximum(BinaryScalarOp):
    """The larger of x and y; NaN if either is NaN (np.maximum)."""

    ufunc = np.maximum
    commutative = True
    associative = True

    def grad(self, inputs, outputs, output_grads):
        # Theano's convention: at ties both inputs receive the full gradient.
        (gz,) = output_grads
        return [gz * _m().eq(outputs[0], x) for x in inputs]


class Minimum(BinaryScalarOp):
    """The smaller of x and y; NaN if either is NaN (np.minimum)."""

    ufunc = np.minimum
    commutative = True
    associative = True

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz * _m().eq(outputs[0], x) for x in inputs]


class Clip(ScalarOp):
    """x limited to [lo, hi]: lo where x < lo, hi where x > hi, else x."""

    nin = 3

    def impl(self, x, lo, hi):
        # Theano's definition (lo wins when lo > hi; np.clip would give hi).
        return np.where(x < lo, lo, np.where(x > hi, hi, x))

    def grad(self, inputs, outputs, output_grads):
        # Theano's convention: at a boundary the gradient goes to x.
        m = _m()
        x, lo, hi = inputs
        (gz,) = output_grads
        inside = m.and_(m.ge(x, lo), m.le(x, hi))
        return [gz * inside, gz * m.lt(x, lo), gz * m.gt(x, hi)]


# -- comparisons (bool results, no gradient) -----------------------------------

class _Comparison(BinaryScalarOp):
    output_dtype = staticmethod(bool_out)

    def connection_pattern(self):
        return [False] * self.nin

    def grad(self, inputs, outputs, output_grads):
        return _disconnected(inputs)


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


# -- selection and structure -----------------------------------------------------

class Switch(ScalarOp):
    """ift where cond is true (non-zero), iff elsewhere (np.where)."""

    nin = 3

    def output_dtypes(self, cond, ift, iff):
        return [same_out(ift, iff)]

    def impl(self, cond, ift, iff):
        return np.where(cond, ift, iff)

    def connection_pattern(self):
        return [False, True, True]

    def grad(self, inputs, outputs, output_grads):
        m = _m()
        cond, ift, iff = inputs
        (gz,) = output_grads
        # The choice is piecewise constant in cond; a float cond gets zeros.
        if cond.dtype.startswith("float"):
            g_cond = m.zeros_like(cond)
        else:
            g_cond = _disconnected([cond])[0]
        return [g_cond, m.switch(cond, gz, 0), m.switch(cond, 0, gz)]


class Second(ScalarOp):
    """The second input broadcast to the shape of both (Theano's fill/second).

    ``second(model, value)`` has value's dtype and the broadcast shape; the
    model contributes only its shape, so it is disconnected for gradients.
    """

    nin = 2

    def output_dtypes(self, model, value):
        return [value]

    def impl(self, model, value):
        shape = np.broadcast_shapes(np.shape(model), np.shape(value))
        # A fresh writable array: later in-place ops may overwrite it.
        return np.broadcast_to(value, shape).copy()

    def connection_pattern(self):
        return [False, True]

    def grad(self, inputs, outputs, output_grads):
        model, _ = inputs
        return [_disconnected([model])[0], output_grads[0]]


class Identity(UnaryScalarOp):
    """x unchanged (a copy)."""

    def impl(self, x):
        return np.array(x, copy=True)

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0]]


class Cast(UnaryScalarOp):
    """x converted to ``dtype`` (NumPy's unsafe casting, as astype)."""

    __props__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = str(np.dtype(dtype))

    @property
    def name(self):
        return f"cast{{{self.dtype}}}"

    def output_dtypes(self, *dtypes):
        return [self.dtype]

    def impl(self, x):
        return np.asarray(x).astype(self.dtype)

    def grad(self, inputs, outputs, output_grads):
        from symgraph.ops.math import cast

        (x,) = inputs
        if x.dtype.startswith("float") and self.dtype.startswith("float"):
            return [cast(output_grads[0], x.dtype)]
        if x.dtype.startswith("float"):
            # float -> int/bool: the result is piecewise constant.
            from symgraph.ops.math import zeros_like

            return [zeros_like(x)]
        # An integer input: connected, but with a zero gradient (Theano's rule).
        from symgraph.config import config
        from symgraph.ops.math import zeros_like

        return [zeros_like(x, dtype=config.floatX)]
