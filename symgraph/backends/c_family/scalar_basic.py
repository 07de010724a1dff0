"""The C of arithmetic scalar ops (``symgraph/ops/scalar_basic.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

from symgraph.backends.c_family.scalar_c import attr, c_method, register_attrs
from symgraph.backends.c_family.scalar_base import (c_exact, c_kind, c_ctype, c_fn, c_lit,
                                                    c_wrapping)
from symgraph.backends.c_family.scalar_logic import c_real
from symgraph.ops.scalar_basic import (Abs, Add, Cast, Clip, Identity, IntDiv, Maximum, Minimum,
                                       Mod, Mul, Neg, Pow, Reciprocal, Second, Sign, Sqr, Sub,
                                       Switch, TrueDiv, _MinMax, _Nary)
from symgraph.ops.scalar import same_out
from symgraph.backends.c_family.c_files import c_file


_C_DIVMOD = c_file("c_family/divmod.inc")


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


@c_method(_Nary, "c_expr")
def _nary_c_expr(op, inputs, in_dtypes, out_dtype):
    return c_wrapping(attr(op, 'c_symbol'), inputs, out_dtype) if c_real(out_dtype) else None


register_attrs(_Nary, c_symbol=None)


register_attrs(Add, c_symbol="+")


register_attrs(Mul, c_symbol="*")


@c_method(Sub, "c_expr")
def _sub_c_expr(op, inputs, in_dtypes, out_dtype):
    return c_wrapping("-", inputs, out_dtype) if c_real(out_dtype) else None


@c_method(TrueDiv, "c_expr")
def _true_div_c_expr(op, inputs, in_dtypes, out_dtype):
    a, b = inputs
    return f"({a} / {b})" if c_kind(out_dtype) == "f" else None


@c_method(IntDiv, "c_expr")
def _int_div_c_expr(op, inputs, in_dtypes, out_dtype):
    return _c_helper("floordiv", inputs, in_dtypes[0]) if c_real(in_dtypes[0]) else None


@c_method(IntDiv, "c_support")
def _int_div_c_support(op):
    return (("sg_divmod_v1", c_exact(_C_DIVMOD)),)


@c_method(Mod, "c_expr")
def _mod_c_expr(op, inputs, in_dtypes, out_dtype):
    return _c_helper("mod", inputs, in_dtypes[0]) if c_real(in_dtypes[0]) else None


@c_method(Mod, "c_support")
def _mod_c_support(op):
    return (("sg_divmod_v1", c_exact(_C_DIVMOD)),)


@c_method(Pow, "c_expr")
def _pow_c_expr(op, inputs, in_dtypes, out_dtype):
    dtype = in_dtypes[0]
    if c_kind(dtype) == "f":
        return f"{c_fn('pow', dtype)}({inputs[0]}, {inputs[1]})"
    return _c_helper("ipow", inputs, dtype) if c_kind(dtype) in "biu" else None


@c_method(Pow, "c_error")
def _pow_c_error(op, inputs, in_dtypes, out_dtype):
    if c_kind(in_dtypes[1]) == "i":
        return (f"({inputs[1]} < 0)",
                "Integers to negative integer powers are not allowed.")
    return None


@c_method(Pow, "c_support")
def _pow_c_support(op):
    return (("sg_ipow_v1", c_exact(_C_IPOW)),)


@c_method(Neg, "c_expr")
def _neg_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    if c_kind(out_dtype) in "iu":
        return c_wrapping("-", ["0", a], out_dtype)
    return f"(-{a})" if c_kind(out_dtype) == "f" else None


@c_method(Abs, "c_expr")
def _abs_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    kind = c_kind(in_dtypes[0])
    if kind == "f":
        return f"{c_fn('fabs', out_dtype)}({a})"
    if kind == "i":  # abs(INT_MIN) wraps to INT_MIN, as in NumPy
        return f"({a} < 0 ? {c_wrapping('-', ['0', a], out_dtype)} : {a})"
    return a if kind in "bu" else None


@c_method(Sign, "c_expr")
def _sign_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    kind = c_kind(out_dtype)
    if kind == "f":  # sign(NaN) is NaN, sign(-0.0) is +0.0
        one, zero = c_lit(1, out_dtype), c_lit(0, out_dtype)
        return (f"({a} > 0 ? {one} : ({a} < 0 ? -{one} : ({a} == 0 ? {zero} : {a})))")
    if kind in "iu":
        return f"(({c_ctype(out_dtype)})(({a} > 0) - ({a} < 0)))"
    return None


@c_method(Sqr, "c_expr")
def _sqr_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    return c_wrapping("*", [a, a], out_dtype) if c_real(out_dtype) else None


@c_method(Reciprocal, "c_expr")
def _reciprocal_c_expr(op, inputs, in_dtypes, out_dtype):
    return f"({c_lit(1, out_dtype)} / {inputs[0]})" if c_kind(out_dtype) == "f" else None


@c_method(_MinMax, "c_expr")
def _min_max_c_expr(op, inputs, in_dtypes, out_dtype):
    # NumPy: NaN wins from either side, and a tie returns the second
    # input (which tells -0.0 from 0.0).  C's fmax would drop the NaN.
    a, b = inputs
    if c_kind(out_dtype) == "f":
        return f"(({a} {attr(op, 'c_symbol')} {b} || {a} != {a}) ? {a} : {b})"
    return f"({a} {attr(op, 'c_symbol')} {b} ? {a} : {b})" if c_real(out_dtype) else None


register_attrs(_MinMax, c_symbol=None)


register_attrs(Maximum, c_symbol=">")


register_attrs(Minimum, c_symbol="<")


@c_method(Clip, "c_expr")
def _clip_c_expr(op, inputs, in_dtypes, out_dtype):
    x, lo, hi = inputs
    return f"({x} < {lo} ? {lo} : ({x} > {hi} ? {hi} : {x}))" if c_real(out_dtype) else None


@c_method(Switch, "c_input_dtypes")
def _switch_c_input_dtypes(op, cond, ift, iff):
    out = same_out(ift, iff)
    return [cond, out, out]


@c_method(Switch, "c_expr")
def _switch_c_expr(op, inputs, in_dtypes, out_dtype):
    if not all(c_real(d) for d in in_dtypes):
        return None
    cond, a, b = inputs
    return f"({cond} ? {a} : {b})"


@c_method(Second, "c_input_dtypes")
def _second_c_input_dtypes(op, model, value):
    return [model, value]


@c_method(Second, "c_expr")
def _second_c_expr(op, inputs, in_dtypes, out_dtype):
    return inputs[1] if c_real(out_dtype) else None


@c_method(Identity, "c_expr")
def _identity_c_expr(op, inputs, in_dtypes, out_dtype):
    return inputs[0] if c_real(out_dtype) else None


@c_method(Cast, "c_input_dtypes")
def _cast_c_input_dtypes(op, x):
    return [x]


@c_method(Cast, "c_expr")
def _cast_c_expr(op, inputs, in_dtypes, out_dtype):
    (a,) = inputs
    if not (c_real(in_dtypes[0]) and c_real(out_dtype)):
        return None
    if c_kind(out_dtype) == "b":
        return f"({a} != 0)"
    if out_dtype == "float16":  # one rounding, straight from the input type
        return f"SG_ROUND_F16({a})"
    return f"(({c_ctype(out_dtype)})({a}))"
