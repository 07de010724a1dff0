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
                                 c_ctype, c_exact, c_fn, c_kind, c_lit, c_wrapping,
                                 complex_to_real_out, no_bool_out, same_out)
# The comparisons and bitwise/logical ops live in scalar_logic; re-exported here,
# where the rest of the code base looks for every basic scalar op.
from symgraph.ops.scalar_logic import (AND, EQ, GE, GT, LE, LT, NEQ, OR, XOR,  # noqa: F401
                                       Invert, IsClose, IsFinite, IsInf, IsNan, c_real,
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

_C_DIVMOD = r"""
#define SG_DEF_SDIV(T, U) \
static inline T sg_floordiv_##T(T a, T b) { \
    if (b == 0) return 0; \
    if (b == -1) return (T)(0 - (U)a); \
    T q = a / b; \
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; \
    return q; } \
static inline T sg_mod_##T(T a, T b) { \
    if (b == 0 || b == -1) return 0; \
    T r = a % b; \
    if (r != 0 && ((r < 0) != (b < 0))) r += b; \
    return r; }
#define SG_DEF_UDIV(T) \
static inline T sg_floordiv_##T(T a, T b) { return b == 0 ? 0 : a / b; } \
static inline T sg_mod_##T(T a, T b) { return b == 0 ? 0 : a % b; }
SG_DEF_SDIV(int8_t, uint8_t) SG_DEF_SDIV(int16_t, uint16_t)
SG_DEF_SDIV(int32_t, uint32_t) SG_DEF_SDIV(int64_t, uint64_t)
SG_DEF_UDIV(uint8_t) SG_DEF_UDIV(uint16_t) SG_DEF_UDIV(uint32_t) SG_DEF_UDIV(uint64_t)
#define SG_DEF_FDIV(T, S) \
static inline T sg_floordiv_##T(T a, T b) { \
    if (b == 0) return a / b; \
    T mod = fmod##S(a, b); \
    T div = (a - mod) / b; \
    if (mod) { if ((b < 0) != (mod < 0)) div -= 1; } \
    if (div) { T fl = floor##S(div); if (div - fl > (T)0.5) fl += 1; return fl; } \
    return copysign##S(0, a / b); } \
static inline T sg_mod_##T(T a, T b) { \
    T mod = fmod##S(a, b); \
    if (b == 0) return mod; \
    if (mod) { if ((b < 0) != (mod < 0)) mod += b; } \
    else mod = copysign##S(0, b); \
    return mod; }
SG_DEF_FDIV(float, f) SG_DEF_FDIV(double, )
"""

_C_IPOW = r"""
#define SG_DEF_IPOW(T) \
static inline T sg_ipow_##T(T a, T b) { \
    uint64_t r = 1, base = (uint64_t)a; \
    if (b < 0) return 0; /* an error: the kernel fails the call */ \
    for (uint64_t e = (uint64_t)b; e; e >>= 1) { if (e & 1) r *= base; base *= base; } \
    return (T)r; }
SG_DEF_IPOW(int8_t) SG_DEF_IPOW(int16_t) SG_DEF_IPOW(int32_t) SG_DEF_IPOW(int64_t)
SG_DEF_IPOW(uint8_t) SG_DEF_IPOW(uint16_t) SG_DEF_IPOW(uint32_t) SG_DEF_IPOW(uint64_t)
"""


def _c_helper(name, inputs, dtype):
    # sg_floordiv_int32_t(a, b); bool is uint8_t (0/1), float16 is float.
    return f"sg_{name}_{c_ctype(dtype)}({', '.join(inputs)})"


# -- arithmetic ----------------------------------------------------------------

class _Nary(ScalarOp):
    """Add or Mul: any number of inputs (``nin``), folded with the binary ``ufunc``
    (which reductions use too); ``c_symbol`` is the C operator."""

    __props__ = ("nin",)
    commutative = True
    associative = True
    c_symbol = None

    def __init__(self, nin=2):
        self.nin = nin

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return c_wrapping(self.c_symbol, inputs, out_dtype) if c_real(out_dtype) else None

    def impl(self, *inputs):
        out = inputs[0]
        for x in inputs[1:]:
            out = self.ufunc(out, x)
        return out


class Add(_Nary):
    """x + y + ... (any number of inputs, as Theano's add)."""

    c_symbol = "+"
    ufunc = np.add
    identity = 0

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz for _ in inputs]


class Mul(_Nary):
    """x * y * ... (any number of inputs)."""

    c_symbol = "*"
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

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return c_wrapping("-", inputs, out_dtype) if c_real(out_dtype) else None

    ufunc = np.subtract
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        (gz,) = output_grads
        return [gz, -gz]


class TrueDiv(FloatScalarOp):
    """x / y, always a float result (int32 / int32 is float64)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        a, b = inputs
        return f"({a} / {b})" if c_kind(out_dtype) == "f" else None

    name = "true_div"

    nin = 2
    ufunc = np.true_divide

    def grad(self, inputs, outputs, output_grads):
        x, y = inputs
        (gz,) = output_grads
        return [gz / y, -gz * x / (y * y)]


class IntDiv(BinaryScalarOp):
    """x // y: floor division as NumPy (and Python); ints stay ints."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return _c_helper("floordiv", inputs, in_dtypes[0]) if c_real(in_dtypes[0]) else None

    def c_support(self):
        return (("sg_divmod_v1", c_exact(_C_DIVMOD)),)

    name = "int_div"

    ufunc = np.floor_divide

    def grad(self, inputs, outputs, output_grads):
        # Piecewise constant: zero almost everywhere (Theano's choice).
        return [_m().zeros_like(x) for x in inputs]


class Mod(BinaryScalarOp):
    """x % y with the sign of y (NumPy's and Python's convention)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return _c_helper("mod", inputs, in_dtypes[0]) if c_real(in_dtypes[0]) else None

    def c_support(self):
        return (("sg_divmod_v1", c_exact(_C_DIVMOD)),)

    ufunc = np.mod

    def grad(self, inputs, outputs, output_grads):
        # x % y == x - y * floor(x / y): the floor is constant almost everywhere.
        x, y = inputs
        (gz,) = output_grads
        return [gz, -gz * _m().int_div(x, y)]


class Pow(BinaryScalarOp):
    """x ** y (NumPy's power; an integer to a negative integer power is an error)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        dtype = in_dtypes[0]
        if c_kind(dtype) == "f":
            return f"{c_fn('pow', dtype)}({inputs[0]}, {inputs[1]})"
        return _c_helper("ipow", inputs, dtype) if c_kind(dtype) in "biu" else None

    def c_error(self, inputs, in_dtypes, out_dtype):
        if c_kind(in_dtypes[1]) == "i":
            return (f"({inputs[1]} < 0)",
                    "Integers to negative integer powers are not allowed.")
        return None

    def c_support(self):
        return (("sg_ipow_v1", c_exact(_C_IPOW)),)

    ufunc = np.power

    def grad(self, inputs, outputs, output_grads):
        m = _m()
        x, y = inputs
        (gz,) = output_grads
        # Theano's formulas; the y-gradient is NaN where x <= 0, as log(x).
        return [gz * y * m.pow(x, y - 1), gz * m.log(x) * outputs[0]]


class Neg(UnaryScalarOp):
    """-x."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        if c_kind(out_dtype) in "iu":
            return c_wrapping("-", ["0", a], out_dtype)
        return f"(-{a})" if c_kind(out_dtype) == "f" else None

    ufunc = np.negative
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0]]


class Abs(UnaryScalarOp):
    """|x| (the modulus for complex x, a real result)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        kind = c_kind(in_dtypes[0])
        if kind == "f":
            return f"{c_fn('fabs', out_dtype)}({a})"
        if kind == "i":  # abs(INT_MIN) wraps to INT_MIN, as in NumPy
            return f"({a} < 0 ? {c_wrapping('-', ['0', a], out_dtype)} : {a})"
        return a if kind in "bu" else None

    ufunc = np.abs
    output_dtype = staticmethod(complex_to_real_out)

    def grad(self, inputs, outputs, output_grads):
        # sign(0) == 0: the subgradient 0 at the kink (Theano gave NaN there).
        return [output_grads[0] * _m().sign(inputs[0])]


class Sign(UnaryScalarOp):
    """-1, 0 or 1 by the sign of x (NaN for NaN)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        kind = c_kind(out_dtype)
        if kind == "f":  # sign(NaN) is NaN, sign(-0.0) is +0.0
            one, zero = c_lit(1, out_dtype), c_lit(0, out_dtype)
            return (f"({a} > 0 ? {one} : ({a} < 0 ? -{one} : ({a} == 0 ? {zero} : {a})))")
        if kind in "iu":
            return f"(({c_ctype(out_dtype)})(({a} > 0) - ({a} < 0)))"
        return None

    ufunc = np.sign
    output_dtype = staticmethod(no_bool_out)

    def grad(self, inputs, outputs, output_grads):
        return [_m().zeros_like(inputs[0])]


class Sqr(UnaryScalarOp):
    """x * x (ints stay ints)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        return c_wrapping("*", [a, a], out_dtype) if c_real(out_dtype) else None

    ufunc = np.square

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * inputs[0] * 2]


class Reciprocal(FloatScalarOp):
    """1 / x, a float result (Theano's inv)."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return f"({c_lit(1, out_dtype)} / {inputs[0]})" if c_kind(out_dtype) == "f" else None

    ufunc = np.reciprocal

    def grad(self, inputs, outputs, output_grads):
        return [-output_grads[0] * _m().sqr(outputs[0])]


class _MinMax(BinaryScalarOp):
    """Maximum or Minimum: ``c_symbol`` is the comparison that keeps the first input."""

    commutative = True
    associative = True
    c_symbol = None

    def c_expr(self, inputs, in_dtypes, out_dtype):
        # NumPy: NaN wins from either side, and a tie returns the second
        # input (which tells -0.0 from 0.0).  C's fmax would drop the NaN.
        a, b = inputs
        if c_kind(out_dtype) == "f":
            return f"(({a} {self.c_symbol} {b} || {a} != {a}) ? {a} : {b})"
        return f"({a} {self.c_symbol} {b} ? {a} : {b})" if c_real(out_dtype) else None

    def grad(self, inputs, outputs, output_grads):
        # Theano's convention: at ties both inputs receive the full gradient.
        (gz,) = output_grads
        return [gz * _m().eq(outputs[0], x) for x in inputs]


class Maximum(_MinMax):
    """The larger of x and y; NaN if either is NaN (np.maximum)."""

    c_symbol = ">"
    ufunc = np.maximum


class Minimum(_MinMax):
    """The smaller of x and y; NaN if either is NaN (np.minimum)."""

    c_symbol = "<"
    ufunc = np.minimum


class Clip(ScalarOp):
    """x limited to [lo, hi]: lo where x < lo, hi where x > hi, else x."""

    def c_expr(self, inputs, in_dtypes, out_dtype):
        x, lo, hi = inputs
        return f"({x} < {lo} ? {lo} : ({x} > {hi} ? {hi} : {x}))" if c_real(out_dtype) else None

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

    def c_input_dtypes(self, cond, ift, iff):
        out = same_out(ift, iff)
        return [cond, out, out]

    def c_expr(self, inputs, in_dtypes, out_dtype):
        if not all(c_real(d) for d in in_dtypes):
            return None
        cond, a, b = inputs
        return f"({cond} ? {a} : {b})"

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

    def c_input_dtypes(self, model, value):
        return [model, value]

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return inputs[1] if c_real(out_dtype) else None

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

    def c_expr(self, inputs, in_dtypes, out_dtype):
        return inputs[0] if c_real(out_dtype) else None

    def impl(self, x):
        return np.array(x, copy=True)

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0]]


class Cast(UnaryScalarOp):
    """x converted to ``dtype`` (NumPy's unsafe casting, as astype)."""

    def c_input_dtypes(self, x):
        return [x]

    def c_expr(self, inputs, in_dtypes, out_dtype):
        (a,) = inputs
        if not (c_real(in_dtypes[0]) and c_real(out_dtype)):
            return None
        if c_kind(out_dtype) == "b":
            return f"({a} != 0)"
        if out_dtype == "float16":  # one rounding, straight from the input type
            return f"((float)(_Float16)({a}))"
        return f"(({c_ctype(out_dtype)})({a}))"

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
