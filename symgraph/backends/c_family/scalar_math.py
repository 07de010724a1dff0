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
_C_SPECIAL = r"""
static inline double sg_horner(double t, const double *c, int n) {
    double s = c[0];
    for (int i = 1; i < n; i++) s = s * t + c[i];
    return s;
}

/* erfinv(a) / a as a polynomial in w = -log(1 - a*a), for w < 5 (|rel err| < 1e-8) */
static const double sg_erfinv_mid[11] = {
    4.671932509038665e-10, -2.0418841975426785e-08, 3.440101487642903e-07,
    -2.696533465757212e-06, 6.531430799205241e-06, 3.8981637368426895e-05,
    -0.00012002570136587074, -0.0023400270757833017, 0.011550900732630565,
    0.23201347310748227, 0.8862269294433731};
/* erfinv(a) as a polynomial in sqrt(w), for 5 <= w <= 37.2 (|rel err| < 1e-8) */
static const double sg_erfinv_tail[13] = {
    -3.45407638273324e-09, 2.1609054516835025e-07, -6.094041363223461e-06,
    0.00010260329458238696, -0.0011496385782024362, 0.009032110295764468,
    -0.05097630918165074, 0.20774756475039782, -0.6034723704481721,
    1.2037286477178484, -1.5186669426793054, 2.00577084803954,
    -0.3634326628617595};

/* A first guess good to 1e-8, then one Halley step (cubic convergence) on
   erf(y) = a; for a >= 0.5 on erfc(y) = 1 - a instead, which is exact there
   and keeps the digits that erf(y), close to 1, would lose. */
static inline double sg_erfinv(double x) {
    double a = fabs(x), c = 1.0 - a;
    double w = -log(c * (1.0 + a));
    double y = w < 5.0 ? a * sg_horner(w, sg_erfinv_mid, 11)
                       : sg_horner(sqrt(w), sg_erfinv_tail, 13);
    double slope = 1.1283791670955126 * exp(-y * y);  /* d erf(y) / dy */
    double u = (a < 0.5 ? erf(y) - a : c - erfc(y)) / slope;
    y -= u / (1.0 + y * u);
    return copysign(a < 1.0 ? y : (a == 1.0 ? HUGE_VAL : NAN), x);
}

/* psi's positive zero x0 = SG_PSI_X0 + SG_PSI_X0_LO, its first negative zero r1 likewise */
#define SG_PSI_X0 1.4616321449683622
#define SG_PSI_X0_LO 9.549995429965697e-17
#define SG_PSI_R1 -0.5040830082644554
#define SG_PSI_R1_LO -8.15428206243813e-18
/* psi(x0 + t) / t for 1 <= x0 + t <= 2 (|rel err| < 1e-19) */
static const double sg_psi_x0[25] = {
    5.596002350342592e-05, -0.00013546967989030024, 0.00013528299972540283,
    -0.0001278437874808083, 0.00021594374926787386, -0.00035556858791896184,
    0.0005127450196508451, -0.0007363047968131446, 0.0010770609629932597,
    -0.0015771169322652348, 0.002305382802163756, -0.0033697926833388334,
    0.004926756858062814, -0.0072045343210035305, 0.01053879315205164,
    -0.015424765939714499, 0.022597648171462245, -0.03316112647297097,
    0.04880428816556138, -0.07219956125649837, 0.10782405069124523,
    -0.1639427054424061, 0.2584997609556511, -0.4427631689835921,
    0.9676722454476212};
/* psi(r1 + t) / t for |t| <= 0.1 (|rel err| < 1e-19) */
static const double sg_psi_r1[20] = {
    -903797.6596093961, 2606965.644826994, -159455.9406386928,
    519678.5278259227, -36577.90939211915, 132390.0167280371,
    -8051.47315094665, 32996.872508356326, -1743.366138243434,
    8234.671144795006, -368.5783462663635, 2055.5357010603275,
    -75.37700066980081, 513.2704629730848, -14.706721735525386,
    128.27342343089586, -2.76101164879083, 32.25857206491551,
    -0.8093454625306507, 8.939798558792134};
/* psi(x) ~ log(x) - 1/(2x) - sum_k B_2k / (2k x^2k), k = 9 .. 1 */
static const double sg_psi_asym[9] = {
    3.0539543302701198, -0.4432598039215686, 0.08333333333333333,
    -0.021092796092796094, 0.007575757575757576, -0.004166666666666667,
    0.003968253968253968, -0.008333333333333333, 0.08333333333333333};
/* trigamma(x) ~ 1/x + 1/(2x^2) + sum_k B_2k / x^(2k+1), k = 10 .. 1 */
static const double sg_trigamma_asym[10] = {
    -529.1242424242424, 54.971177944862156, -7.092156862745098,
    1.1666666666666667, -0.2531135531135531, 0.07575757575757576,
    -0.03333333333333333, 0.023809523809523808, -0.03333333333333333,
    0.16666666666666666};

/* psi(x) for x > 0: the asymptotic series from 10 up; below, the recurrence
   psi(x) = psi(x - 1) + 1/(x - 1) down to [1, 2) (or up from (0, 1)), where
   psi is a polynomial times x - x0: full relative precision around its zero. */
static inline double sg_psi_pos(double x) {
    if (x >= 10.0) {
        double z = 1.0 / (x * x);
        return log(x) - 0.5 / x - z * sg_horner(z, sg_psi_asym, 9);
    }
    double acc, t;
    if (x < 1.0) {
        acc = -1.0 / x;
        t = (x - (SG_PSI_X0 - 1.0)) - SG_PSI_X0_LO;  /* (x + 1) - x0 without rounding x + 1 */
    } else {
        int m = (int)x - 1;
        acc = 0.0;
        for (int k = 1; k <= m; k++) acc += 1.0 / (x - k);  /* smallest terms first */
        t = ((x - m) - SG_PSI_X0) - SG_PSI_X0_LO;           /* x - m is exact */
    }
    return t * sg_horner(t, sg_psi_x0, 25) + acc;
}

/* pi = M_PI + SG_PI_LO; pi * a = p + *err exactly (fma gives the product's
   rounding error), so that tan(pi a) and sin(pi a) see an argument with no
   error beyond the first-order correction. */
#define SG_PI_LO 1.2246467991473532e-16
static inline double sg_pi_times(double a, double *err) {
    double p = M_PI * a;
    *err = fma(M_PI, a, -p) + SG_PI_LO * a;
    return p;
}

/* pi * cot(pi * r) for 0 < |r| <= 1/2, the argument of tan kept in [0, pi/4]
   where it is well conditioned (cot = tan of the complement near 1/2). */
static inline double sg_pi_cot_pi(double r) {
    double a = fabs(r), v;
    if (a < 0x1p-30) {
        v = 1.0 / a - 3.289868133696453 * a;  /* 1/a - pi^2 a / 3 */
    } else {
        double e, t = tan(sg_pi_times(a <= 0.25 ? a : 0.5 - a, &e));  /* 0.5 - a is exact */
        t += e * (1.0 + t * t);
        v = a <= 0.25 ? M_PI / t + SG_PI_LO / t : M_PI * t + SG_PI_LO * t;
    }
    return copysign(v, r);
}

/* The digamma function, with scipy's values at the poles: nan at negative
   integers and -inf, -inf at +0.0 and +inf at -0.0.  Negative x by
   reflection, psi(x) = psi(1 - x) - pi cot(pi x), but near the first negative
   zero (where the two terms cancel) by a polynomial times x - r1. */
static inline double sg_psi(double x) {
    if (x != x) return x;
    if (x == 0.0) return copysign(HUGE_VAL, -x);
    if (x > 0.0) return sg_psi_pos(x);
    if (x == floor(x)) return NAN;
    if (fabs(x - SG_PSI_R1) <= 0.1) {
        double t = (x - SG_PSI_R1) - SG_PSI_R1_LO;
        return t * sg_horner(t, sg_psi_r1, 20);
    }
    return sg_psi_pos(1.0 - x) - sg_pi_cot_pi(x - rint(x));
}

/* trigamma(x) for x > 0: up to 10 by the recurrence, all terms positive, then
   the asymptotic series. */
static inline double sg_trigamma_pos(double x) {
    int n = x < 10.0 ? (int)(10.0 - x) + 1 : 0;
    double z = 1.0 / (x + n), z2 = z * z;
    double s = z + z2 * (0.5 + z * sg_horner(z2, sg_trigamma_asym, 10));
    for (int k = n - 1; k >= 0; k--) {  /* smallest terms first */
        double v = x + k;
        s += 1.0 / (v * v);
    }
    return s;
}

/* The trigamma function, +inf at every pole (0, negative integers, -inf) as
   scipy's polygamma(1, x); negative x by reflection,
   trigamma(x) = pi^2 / sin(pi x)^2 - trigamma(1 - x) (no cancellation). */
static inline double sg_trigamma(double x) {
    if (x != x) return x;
    if (x > 0.0) return sg_trigamma_pos(x);
    if (x == rint(x)) return HUGE_VAL;
    double e, r = x - rint(x), p = sg_pi_times(r, &e);
    double s = sin(p) + e * cos(p);
    double reflected = fabs(r) < 0x1p-30 ? 1.0 / (r * r) + 3.289868133696453
                                         : 9.869604401089358 / (s * s);
    return reflected - sg_trigamma_pos(1.0 - x);
}

static inline float sg_erfinvf(float x) { return (float)sg_erfinv(x); }
static inline float sg_psif(float x) { return (float)sg_psi(x); }
static inline float sg_trigammaf(float x) { return (float)sg_trigamma(x); }
"""


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
    return f"((float)(_Float16)({text}))" if dtype == "float16" else text
