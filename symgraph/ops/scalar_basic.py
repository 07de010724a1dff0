"""Arithmetic and structural scalar ops (and, re-exported from ``scalar_logic``,
the comparison and logical ones).

Each gradient is written in tensor terms (see ScalarOp.grad); the Elemwise
that wraps the op sums it over broadcast dimensions.  Ops whose output does
not vary continuously with an input (comparisons, bitwise logic) declare that
input disconnected; piecewise-constant float ops (int_div, sign) return zeros,
as Theano did.
"""

import numpy as np

from symgraph.ops.scalar import (BinaryScalarOp, FloatScalarOp, ScalarOp, UnaryScalarOp,
                                 complex_to_real_out, no_bool_out, same_out)
# The comparisons and bitwise/logical ops live in scalar_logic; re-exported here,
# where the rest of the code base looks for every basic scalar op.
from symgraph.ops.scalar_logic import (AND, EQ, GE, GT, LE, LT, NEQ, OR, XOR,  # noqa: F401
                                       Invert, IsClose, IsFinite, IsInf, IsNan,
                                       disconnected_grads)


def _m():
    # The user-level functions build the gradient graphs; ops.math imports
    # this module, so the import is deferred to call time.
    from symgraph.ops import math

    return math


# -- C helpers: NumPy's floor division, remainder and integer power ------------
#
# Integers: x // 0 and x % 0 give 0 (NumPy warns), INT_MIN // -1 wraps to
# INT_MIN (C would trap).  Floats follow NumPy's npy_divmod, so the signs of
# zeros, infinities and NaNs match.



# -- arithmetic ----------------------------------------------------------------

class _Nary(ScalarOp):
    """Add or Mul: any number of inputs (``nin``), folded with the binary ``ufunc``
    (which reductions use too); ``c_symbol`` is the C operator."""

    __props__ = ("nin",)
    commutative = True
    associative = True

    def __init__(self, nin=2):
        self.nin = nin

    def impl(self, *inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = self.ufunc(out, x)
        return out


class Add(_Nary):
    """x + y + ... (any number of inputs, as Theano's add)."""

    ufunc = np.add
    identity = 0

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz for _ in inputs]


class Mul(_Nary):
    """x * y * ... (any number of inputs)."""

    ufunc = np.multiply
    identity = 1

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


class _MinMax(BinaryScalarOp):
    """Maximum or Minimum: ``c_symbol`` is the comparison that keeps the first input."""

    commutative = True
    associative = True

    def grad(self, inputs, outputs, output_grads):
        # Theano's convention: at ties both inputs receive the full gradient.
        (gz,) = output_grads
        return [gz * _m().eq(outputs[0], x) for x in inputs]


class Maximum(_MinMax):
    """The larger of x and y; NaN if either is NaN (np.maximum)."""

    ufunc = np.maximum


class Minimum(_MinMax):
    """The smaller of x and y; NaN if either is NaN (np.minimum)."""

    ufunc = np.minimum


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
            g_cond = disconnected_grads([cond])[0]
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
        return [disconnected_grads([model])[0], output_grads[0]]


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
