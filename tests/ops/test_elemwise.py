"""Element-wise ops (symgraph.ops.math): values against NumPy/SciPy, layouts,
broadcasting, special values, errors and gradients."""

import math

import numpy as np
import pytest
import scipy.special

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import io_toposort
from symgraph.ops.elemwise import ShapeMismatchError
from symgraph.tensor.type import upgrade_to_float

RNG = np.random.default_rng(42)
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}


# -- running graphs ----------------------------------------------------------------

def run(inputs, outputs, *values):
    """Compile with symgraph.function (or, before it exists, run each node's perform)."""
    single = not isinstance(outputs, (list, tuple))
    outs = [outputs] if single else list(outputs)
    function = getattr(symgraph, "function", None)
    if function is not None:
        res = function(list(inputs), outs, on_unused_input="ignore")(*values)
    else:
        memo = dict(zip(inputs, values))
        for node in io_toposort(list(inputs), outs):
            args = [memo[i] if i in memo else i.data for i in node.inputs]
            storage = [[None] for _ in node.outputs]
            node.op.perform(node, args, storage)
            memo.update((o, s[0]) for o, s in zip(node.outputs, storage))
        res = [memo[o] if o in memo else o.data for o in outs]
    return res[0] if single else res


def check(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if np.dtype(dtype).kind == "f":
        tol = TOL[str(dtype)]
        np.testing.assert_allclose(got, np.asarray(want, dtype="float64"), rtol=tol, atol=tol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def sample(dtype, lo, hi, shape=(2, 3)):
    """Random values of ``dtype`` in [lo, hi]; None when none exist (ints in (-0.9, 0.9))."""
    if dtype == "bool":
        return RNG.random(shape) < 0.5 if lo <= 0 and hi >= 1 else None
    if np.dtype(dtype).kind in "iu":
        ilo, ihi = math.ceil(lo), math.floor(hi)
        return RNG.integers(ilo, ihi + 1, size=shape).astype(dtype) if ilo < ihi else None
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


# -- unary ops: (T name, reference, domain, result rule, differentiable) -----------------

FLOAT, SAME = "float", "same"
UNARY = [
    ("identity", np.array, (-3, 3), SAME, True),
    ("neg", np.negative, (-3, 3), SAME, True),
    ("abs_", np.abs, (-3, 3), SAME, True),
    ("sign", np.sign, (-3, 3), SAME, False),
    ("sqr", np.square, (-3, 3), SAME, True),
    ("sqrt", np.sqrt, (0.1, 5), FLOAT, True),
    ("reciprocal", np.reciprocal, (0.5, 3), FLOAT, True),
    ("exp", np.exp, (-3, 3), FLOAT, True),
    ("exp2", np.exp2, (-3, 3), FLOAT, True),
    ("expm1", np.expm1, (-3, 3), FLOAT, True),
    ("log", np.log, (0.1, 5), FLOAT, True),
    ("log2", np.log2, (0.1, 5), FLOAT, True),
    ("log10", np.log10, (0.1, 5), FLOAT, True),
    ("log1p", np.log1p, (-0.5, 3), FLOAT, True),
    ("log1mexp", lambda x: np.log(-np.expm1(x)), (-5, -0.1), FLOAT, True),
    ("sin", np.sin, (-3, 3), FLOAT, True),
    ("cos", np.cos, (-3, 3), FLOAT, True),
    ("tan", np.tan, (-1.2, 1.2), FLOAT, True),
    ("arcsin", np.arcsin, (-0.9, 0.9), FLOAT, True),
    ("arccos", np.arccos, (-0.9, 0.9), FLOAT, True),
    ("arctan", np.arctan, (-3, 3), FLOAT, True),
    ("sinh", np.sinh, (-3, 3), FLOAT, True),
    ("cosh", np.cosh, (-3, 3), FLOAT, True),
    ("tanh", np.tanh, (-3, 3), FLOAT, True),
    ("arcsinh", np.arcsinh, (-3, 3), FLOAT, True),
    ("arccosh", np.arccosh, (1.1, 4), FLOAT, True),
    ("arctanh", np.arctanh, (-0.9, 0.9), FLOAT, True),
    ("deg2rad", np.deg2rad, (-200, 200), FLOAT, True),
    ("rad2deg", np.rad2deg, (-3, 3), FLOAT, True),
    ("sigmoid", scipy.special.expit, (-5, 5), FLOAT, True),
    ("softplus", lambda x: np.logaddexp(0, x), (-5, 5), FLOAT, True),
    ("erf", scipy.special.erf, (-2, 2), FLOAT, True),
    ("erfc", scipy.special.erfc, (-2, 2), FLOAT, True),
    ("erfinv", scipy.special.erfinv, (-0.9, 0.9), FLOAT, True),
    ("gammaln", scipy.special.gammaln, (0.5, 5), FLOAT, True),
    ("psi", scipy.special.psi, (0.5, 5), FLOAT, True),
    ("tri_gamma", lambda x: scipy.special.polygamma(1, x), (0.5, 5), FLOAT, False),
    ("floor", np.floor, (-3, 3), FLOAT, False),
    ("ceil", np.ceil, (-3, 3), FLOAT, False),
    ("trunc", np.trunc, (-3, 3), FLOAT, False),
    ("round", np.round, (-3, 3), FLOAT, False),
]
NO_BOOL = {"neg", "sign"}
DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def unary_ids(case):
    return case[0]


def _unary_applies(case, dtype):
    """False where the op's domain holds no value of ``dtype`` (ints in (0.1, 5)...)."""
    name, _, (lo, hi), _, _ = case
    if dtype == "bool":
        return lo <= 0 and hi >= 1 and name not in NO_BOOL
    if np.dtype(dtype).kind in "iu":
        return math.ceil(lo) < math.floor(hi)
    return True


UNARY_PARAMS = [pytest.param(case, dtype, id=f"{case[0]}-{dtype}")
                for case in UNARY for dtype in DTYPES if _unary_applies(case, dtype)]


@pytest.mark.parametrize("case,dtype", UNARY_PARAMS)
def test_unary_values_and_dtype(case, dtype):
    name, ref, (lo, hi), rule, _ = case
    value = sample(dtype, lo, hi)
    x = T.matrix("x", dtype=dtype)
    out = getattr(T, name)(x)
    want_dtype = upgrade_to_float(dtype) if rule == FLOAT else dtype
    assert out.dtype == want_dtype
    compute = value.astype(want_dtype) if rule == FLOAT else value
    check(run([x], out, value), ref(compute), want_dtype)


@pytest.mark.parametrize("name", ["neg", "sign"])
def test_bool_refused_where_numpy_refuses(name):
    with pytest.raises(TypeError, match=name):
        getattr(T, name)(T.vector(dtype="bool"))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sigmoid", "tanh", "erf"])
def test_float16_computed_in_float32(name):
    ref = dict((c[0], c[1]) for c in UNARY)[name]
    x = T.vector("x", dtype="float16")
    value = np.linspace(0.2, 3, 7).astype("float16")
    out = getattr(T, name)(x)
    assert out.owner.op.scalar_op.compute_dtype("float16") == "float32"
    check(run([x], out, value), ref(value.astype("float32")).astype("float16"), "float16")


# -- special values ---------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 2.5, -2.5])


@pytest.mark.parametrize("case", [c for c in UNARY if c[0] not in ("log1mexp",)],
                         ids=unary_ids)
def test_nan_inf_inputs(case):
    name, ref = case[0], case[1]
    x = T.dvector("x")
    with np.errstate(all="ignore"):
        want = ref(SPECIAL)
    check(run([x], getattr(T, name)(x), SPECIAL), want, "float64")


def test_sigmoid_softplus_stable_for_large_inputs():
    x = T.dvector("x")
    big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    want_softplus = np.logaddexp(0, big)
    sig, sp = run([x], [T.sigmoid(x), T.softplus(x)], big)
    with np.errstate(over="raise", invalid="raise"):  # no overflow inside the ops
        T.sigmoid.op.scalar_op.impl(big)
        T.softplus.op.scalar_op.impl(big)
    check(sig, scipy.special.expit(big), "float64")
    check(sp, want_softplus, "float64")
    f = T.fvector("f")
    check(run([f], T.softplus(f), big.astype("float32")), want_softplus, "float32")


def test_log1mexp_accurate_at_both_ends():
    x = T.dvector("x")
    pts = np.array([-1e-20, -1e-5, -0.5, -1.0, -40.0, -800.0])
    want = np.array([math.log(-math.expm1(v)) if v > -1 else math.log1p(-math.exp(v))
                     for v in pts])
    check(run([x], T.log1mexp(x), pts), want, "float64")


def test_predicates():
    x, i = T.dvector("x"), T.lvector("i")
    isnan, isinf, isfin = run([x], [T.isnan(x), T.isinf(x), T.isfinite(x)], SPECIAL)
    check(isnan, np.isnan(SPECIAL), "bool")
    check(isinf, np.isinf(SPECIAL), "bool")
    check(isfin, np.isfinite(SPECIAL), "bool")
    ints = np.array([0, -3, 7])
    check(run([i], T.isnan(i), ints), [False] * 3, "bool")
    check(run([i], T.isfinite(i), ints), [True] * 3, "bool")


def test_rounding_modes():
    x = T.dvector("x")
    pts = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994, -0.7, 3.2])
    even, away = run([x], [T.round(x), T.round(x, mode="half_away_from_zero")], pts)
    check(even, np.round(pts), "float64")
    check(away, [-3, -2, -1, 1, 2, 3, 0, -1, 3], "float64")
    with pytest.raises(ValueError, match="half_to_even"):
        T.round(x, mode="up")


# -- binary ops ---------------------------------------------------------------------------

BOOL_OUT, INT_ONLY = "bool", "int"
BINARY = [
    ("add", np.add, (-3, 3), (-3, 3), SAME),
    ("sub", np.subtract, (-3, 3), (-3, 3), SAME),
    ("mul", np.multiply, (-3, 3), (-3, 3), SAME),
    ("true_div", np.true_divide, (-3, 3), (1, 4), FLOAT),
    ("int_div", np.floor_divide, (-9, 9), (1, 4), SAME),
    ("mod", np.mod, (-9, 9), (-4, -1), SAME),
    ("pow", np.power, (0.5, 3), (0, 3), SAME),
    ("maximum", np.maximum, (-3, 3), (-3, 3), SAME),
    ("minimum", np.minimum, (-3, 3), (-3, 3), SAME),
    ("arctan2", np.arctan2, (-3, 3), (-3, 3), FLOAT),
    ("lt", np.less, (-2, 2), (-2, 2), BOOL_OUT),
    ("gt", np.greater, (-2, 2), (-2, 2), BOOL_OUT),
    ("le", np.less_equal, (-2, 2), (-2, 2), BOOL_OUT),
    ("ge", np.greater_equal, (-2, 2), (-2, 2), BOOL_OUT),
    ("eq", np.equal, (-2, 2), (-2, 2), BOOL_OUT),
    ("neq", np.not_equal, (-2, 2), (-2, 2), BOOL_OUT),
    ("isclose", np.isclose, (-2, 2), (-2, 2), BOOL_OUT),
    ("and_", np.bitwise_and, (-9, 9), (-9, 9), INT_ONLY),
    ("or_", np.bitwise_or, (-9, 9), (-9, 9), INT_ONLY),
    ("xor", np.bitwise_xor, (-9, 9), (-9, 9), INT_ONLY),
]
PAIRS = [("float32", "float32"), ("float64", "float32"), ("int32", "int32"),
         ("int64", "int32"), ("int32", "float32"), ("int8", "int16"), ("bool", "bool")]


BOOL_REFUSED = ("sub",)


def _binary_defined(case, dtypes):
    """False where NumPy refuses the dtypes too (bitwise on floats, bool subtraction)."""
    name, _, _, _, rule = case
    floats = any(np.dtype(d).kind == "f" for d in dtypes)
    return not (rule == INT_ONLY and floats or "bool" in dtypes and name in BOOL_REFUSED)


def _in_domain(dtype, lo, hi):
    if dtype == "bool":
        return lo <= 0 and hi >= 1
    return np.dtype(dtype).kind not in "iu" or math.ceil(lo) < math.floor(hi)


BINARY_PARAMS = [pytest.param(case, dtypes, id=f"{case[0]}-{'-'.join(dtypes)}")
                 for case in BINARY for dtypes in PAIRS
                 if _binary_defined(case, dtypes) and _in_domain(dtypes[0], *case[2])
                 and _in_domain(dtypes[1], *case[3])]
REFUSED_PARAMS = [pytest.param(case, dtypes, id=f"{case[0]}-{'-'.join(dtypes)}")
                  for case in BINARY for dtypes in PAIRS if not _binary_defined(case, dtypes)]


@pytest.mark.parametrize("case,dtypes", REFUSED_PARAMS)
def test_binary_refuses_dtypes_numpy_refuses(case, dtypes):
    name = case[0]
    x, y = T.matrix("x", dtype=dtypes[0]), T.matrix("y", dtype=dtypes[1])
    with pytest.raises(TypeError, match=name.rstrip("_") if name != "int_div" else "div"):
        getattr(T, name)(x, y)


@pytest.mark.parametrize("case,dtypes", BINARY_PARAMS)
def test_binary_values_and_dtype(case, dtypes):
    name, ref, xdom, ydom, rule = case
    a, b = sample(dtypes[0], *xdom), sample(dtypes[1], *ydom)
    if name == "int_div" and dtypes[1] in ("float32",):
        b[0, 0] = 0.5  # a float divisor that is not an integer
    x, y = T.matrix("x", dtype=dtypes[0]), T.matrix("y", dtype=dtypes[1])
    out = getattr(T, name)(x, y)
    want_dtype = {SAME: np.result_type(*dtypes).name, INT_ONLY: np.result_type(*dtypes).name,
                  FLOAT: upgrade_to_float(*dtypes), BOOL_OUT: "bool"}[rule]
    assert out.dtype == want_dtype
    ra, rb = (a.astype(want_dtype), b.astype(want_dtype)) if rule == FLOAT else (a, b)
    check(run([x, y], out, a, b), ref(ra, rb), want_dtype)


def test_python_operators_build_the_right_ops():
    x, y = T.dvectors("x", "y")
    i, j = T.lvectors("i", "j")
    a, b = np.array([7.5, -3.25, 2.0]), np.array([2.0, 1.5, -0.75])
    ia, ib = np.array([7, -7, 12]), np.array([2, 2, -5])
    got = run([x, y], [x + y, x - y, x * y, x / y, x // y, x % y, abs(x) ** y, -x,
                       abs(x), x < y, x <= y, x > y, x >= y, 2 - x, 2 / x, 2 ** x], a, b)
    want = [a + b, a - b, a * b, a / b, a // b, a % b, abs(a) ** b, -a, abs(a), a < b,
            a <= b, a > b, a >= b, 2 - a, 2 / a, 2 ** a]
    for g, w in zip(got, want):
        check(g, w, w.dtype)
    got = run([i, j], [i // j, i % j, i & j, i | j, i ^ j, ~i, 1 - i], ia, ib)
    for g, w in zip(got, [ia // ib, ia % ib, ia & ib, ia | ib, ia ^ ib, ~ia, 1 - ia]):
        check(g, w, "int64")


def test_logical_ops_on_any_dtype():
    x, y = T.dvectors("x", "y")
    a, b = np.array([0.0, 0.0, 2.0, np.nan]), np.array([0.0, -1.5, 3.0, 0.0])
    funcs = [T.logical_and, T.logical_or, T.logical_xor]
    refs = [np.logical_and, np.logical_or, np.logical_xor]
    got = run([x, y], [f(x, y) for f in funcs] + [T.logical_not(x)], a, b)
    for g, w in zip(got, [r(a, b) for r in refs] + [np.logical_not(a)]):
        check(g, w, "bool")
    bx = T.vector("bx", dtype="bool")
    bv = np.array([True, False])
    check(run([bx], T.invert(bx), bv), ~bv, "bool")
    with pytest.raises(TypeError, match="and_"):
        T.and_(x, y)


def test_isclose_options():
    x, y = T.dvectors("x", "y")
    a, b = np.array([1.0, np.nan, 1.0]), np.array([1.05, np.nan, 2.0])
    got = run([x, y], T.isclose(x, y, rtol=0.1, equal_nan=True), a, b)
    check(got, np.isclose(a, b, rtol=0.1, equal_nan=True), "bool")


# -- ternary and structural ops ------------------------------------------------------------

def test_clip():
    x, lo, hi = T.dvectors("x", "lo", "hi")
    a = np.array([-2.0, 0.0, 0.5, 1.0, 3.0, np.nan])
    check(run([x], T.clip(x, 0, 1), a), np.clip(a, 0, 1), "float64")
    check(run([x], x.clip(0.25, 0.75), a), np.clip(a, 0.25, 0.75), "float64")
    ints = T.ivector("i")
    out = T.clip(ints, -1, 2)
    assert out.dtype == "int32"
    check(run([ints], out, np.arange(-3, 4, dtype="int32")),
          np.clip(np.arange(-3, 4), -1, 2), "int32")
    # min > max: min wins (Theano's definition)
    got = run([x, lo, hi], T.clip(x, lo, hi), np.array([0.0, 5.0]), np.array([3.0, 3.0]),
              np.array([1.0, 1.0]))
    check(got, [3.0, 1.0], "float64")


@pytest.mark.parametrize("cond_dtype", ["bool", "int32", "float64"])
def test_switch(cond_dtype):
    c = T.vector("c", dtype=cond_dtype)
    x, y = T.fvector("x"), T.dvector("y")
    cv = np.array([1, 0, 2, 0]).astype(cond_dtype)
    xv, yv = np.arange(4, dtype="float32"), -np.arange(4.0)
    out = T.switch(c, x, y)
    assert out.dtype == "float64"
    check(run([c, x, y], out, cv, xv, yv), np.where(cv, xv, yv), "float64")
    out = T.where(c, x, 0)  # a weak Python scalar keeps float32
    assert out.dtype == "float32"
    check(run([c, x], out, cv, xv), np.where(cv, xv, 0).astype("float32"), "float32")


def test_fill_ones_zeros_like():
    x = T.fmatrix("x")
    xv = np.ones((2, 3), dtype="float32")
    ones, zeros, z64, bones = run([x], [T.ones_like(x), T.zeros_like(x),
                                        T.zeros_like(x, dtype="float64"),
                                        T.ones_like(x, dtype="bool")], xv)
    check(ones, np.ones((2, 3)), "float32")
    check(zeros, np.zeros((2, 3)), "float32")
    check(z64, np.zeros((2, 3)), "float64")
    check(bones, np.ones((2, 3), bool), "bool")
    check(run([x], T.fill(x, 7), xv), np.full((2, 3), 7), "float32")
    v = T.lvector("v")
    check(run([x, v], T.second(x, v.dimshuffle("x", 0)), xv, np.arange(3)),
          np.tile(np.arange(3), (2, 1)), "int64")
    ones[0, 0] = 5  # the result is a fresh writable array


def test_identity_and_cast():
    x = T.dvector("x")
    xv = np.array([1.7, -2.2, 3.0])
    got_id, got_cast = run([x], [T.identity(x), T.cast(x, "int32")], xv)
    check(got_id, xv, "float64")
    assert got_id is not xv
    check(got_cast, xv.astype("int32"), "int32")
    assert T.cast(x, "float64") is x


# -- shapes and layouts ---------------------------------------------------------------------

def test_broadcast_row_col():
    r, c = T.row("r", dtype="float64"), T.col("c", dtype="float64")
    m = T.TensorType("float32", shape=(1, None))("m")
    rv, cv = np.arange(3.0)[None, :], np.arange(4.0)[:, None]
    got = run([r, c], [r + c, T.maximum(r, c), T.switch(r > c, r, c)], rv, cv)
    check(got[0], rv + cv, "float64")
    check(got[1], np.maximum(rv, cv), "float64")
    check(got[2], np.where(rv > cv, rv, cv), "float64")
    assert (r + c).broadcastable == (False, False)
    assert (m * 2).broadcastable == (True, False)
    # A lower-rank input is padded on the left.
    v = T.dvector("v")
    check(run([c, v], c * v, cv, np.arange(3.0)), cv * np.arange(3.0), "float64")


@pytest.mark.parametrize("shape", [(0,), (1,), (0, 3), (1, 1), (3, 0, 2)])
def test_size_zero_and_one(shape):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    y = T.tensor("float32", shape=(None,) * len(shape), name="y")
    a, b = RNG.random(shape), RNG.random(shape).astype("float32")
    got = run([x, y], [T.exp(x), x * y, T.switch(x > y, x, y), T.clip(x, 0.2, 0.8)], a, b)
    check(got[0], np.exp(a), "float64")
    check(got[1], a * b, "float64")
    check(got[2], np.where(a > b, a, b), "float64")
    check(got[3], np.clip(a, 0.2, 0.8), "float64")


@pytest.mark.parametrize("layout", ["reversed", "transposed", "strided"])
def test_non_contiguous_inputs(layout):
    base = RNG.uniform(0.5, 2, size=(6, 6))
    view = {"reversed": base[::-1, ::-1], "transposed": base.T, "strided": base[::2, 1::2]}
    a = view[layout]
    assert not a.flags.c_contiguous
    b = np.ascontiguousarray(a[::-1]) + 1
    x, y = T.dmatrices("x", "y")
    got = run([x, y], [T.log(x), x / y, T.pow(x, y), T.ones_like(x)], a, b)
    for g, w in zip(got, [np.log(a), a / b, a ** b, np.ones_like(a)]):
        check(g, w, "float64")


def test_shape_mismatch_names_the_op():
    x, y = T.dvectors("x", "y")
    with pytest.raises((ShapeMismatchError, ValueError), match="add"):
        run([x, y], x + y, np.ones(3), np.ones(4))
    with pytest.raises(ShapeMismatchError, match="dimension 0"):
        T.add(T.TensorType("float64", shape=(3,))(), T.TensorType("float64", shape=(4,))())


def test_wrong_arity_is_an_error():
    with pytest.raises(TypeError, match="exp takes 1"):
        T.exp(T.dvector(), T.dvector())


# -- gradients ------------------------------------------------------------------------------

def _partials(fn, values, wrt):
    """d out / d input ``wrt`` by the ops' own L_op, element by element."""
    xs = [T.dvector(f"x{k}") for k in range(len(values))]
    out = fn(*xs)
    gz = T.dvector("gz")
    grads = out.owner.op.L_op(out.owner.inputs, out.owner.outputs, [gz])
    return run(xs + [gz], grads[wrt], *values, np.ones_like(values[0]))


DIFF_UNARY = [c for c in UNARY if c[4]]


@pytest.mark.parametrize("case", DIFF_UNARY, ids=unary_ids)
def test_unary_derivative_formulas(case):
    """Each op's L_op against central differences (float64, inside the domain)."""
    name, ref, (lo, hi) = case[:3]
    pts = np.linspace(lo, hi, 7)[1:-1] + 0.013  # avoid kinks at 0 and the ends
    h = 1e-6
    numeric = (ref(pts + h) - ref(pts - h)) / (2 * h)
    got = _partials(getattr(T, name), [pts], 0)
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6)


DIFF_BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
               ("true_div", np.true_divide), ("pow", np.power), ("mod", np.mod),
               ("maximum", np.maximum), ("minimum", np.minimum), ("arctan2", np.arctan2)]


@pytest.mark.parametrize("case", DIFF_BINARY, ids=unary_ids)
def test_binary_derivative_formulas(case):
    name, ref = case
    a, b = np.array([0.7, 1.3, 2.9, 3.3]), np.array([1.1, 0.6, 1.7, 3.6])
    h = 1e-6
    for wrt in (0, 1):
        da = [h if k == wrt else 0 for k in (0, 1)]
        numeric = (ref(a + da[0], b + da[1]) - ref(a - da[0], b - da[1])) / (2 * h)
        got = _partials(getattr(T, name), [a, b], wrt)
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-6)


def test_piecewise_gradients():
    a = np.array([-2.0, 0.0, 0.5, 1.0, 3.0])
    # clip: x gets the gradient inside and at the boundaries, min/max outside.
    gx, glo, ghi = (_partials(lambda x, lo, hi: T.clip(x, lo, hi),
                              [a, np.zeros(5), np.ones(5)], k) for k in range(3))
    check(gx, [0, 1, 1, 1, 0], "float64")
    check(glo, [1, 0, 0, 0, 0], "float64")
    check(ghi, [0, 0, 0, 0, 1], "float64")
    check(_partials(T.abs_, [a], 0), np.sign(a), "float64")
    for name in ("sign", "floor", "ceil", "trunc", "round"):
        check(_partials(getattr(T, name), [a], 0), np.zeros(5), "float64")
    check(_partials(T.int_div, [a, np.full(5, 0.7)], 1), np.zeros(5), "float64")
    c = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    gift = _partials(lambda cond, x, y: T.switch(cond, x, y), [c, a, a], 1)
    giff = _partials(lambda cond, x, y: T.switch(cond, x, y), [c, a, a], 2)
    check(gift, c, "float64")
    check(giff, 1 - c, "float64")


def test_disconnected_gradients():
    from symgraph.gradient import is_disconnected

    x, y = T.dvectors("x", "y")
    for out in (x < y, T.eq(x, y), T.isnan(x), T.second(x, y)):
        node = out.owner
        grads = node.op.L_op(node.inputs, node.outputs, [T.dvector()])
        pattern = node.op.connection_pattern(node)
        assert is_disconnected(grads[0]) and pattern[0] == [False]
    i = T.lvector("i")
    node = (i & i).owner
    assert all(is_disconnected(g) for g in node.op.L_op(node.inputs, node.outputs,
                                                        [T.lvector()]))


def _verify_grad():
    verify_grad = getattr(symgraph.gradient, "verify_grad", None)
    if verify_grad is None:
        pytest.skip("symgraph.gradient.verify_grad is not written yet")
    return verify_grad


@pytest.mark.parametrize("case", DIFF_UNARY, ids=unary_ids)
def test_unary_verify_grad(case):
    verify_grad = _verify_grad()
    name, _, (lo, hi) = case[:3]
    pts = np.linspace(lo, hi, 6)[1:-1].reshape(2, 2) + 0.013
    verify_grad(getattr(T, name), [pts], rng=np.random.default_rng(0))


@pytest.mark.parametrize("name", [n for n, _ in DIFF_BINARY] + ["clip", "switch"])
def test_binary_verify_grad(name):
    verify_grad = _verify_grad()
    a, b = np.array([[0.7, 1.3], [2.9, 3.3]]), np.array([[1.1, 0.6], [1.7, 3.6]])
    if name == "clip":
        fn, pts = (lambda x, lo, hi: T.clip(x, lo, hi)), [a, b - 0.35, b + 0.25]
    elif name == "switch":
        fn, pts = (lambda x, y: T.switch(x > 2, x * y, y)), [a, b]
    else:
        fn, pts = getattr(T, name), [a, b]
    verify_grad(fn, pts, rng=np.random.default_rng(0))


def test_broadcast_gradient_is_summed():
    verify_grad = _verify_grad()
    row = np.array([[0.5, 1.5, 2.5]])
    mat = np.arange(6.0).reshape(2, 3) + 0.5
    verify_grad(lambda r, m: r * m + T.exp(r), [row, mat], rng=np.random.default_rng(0))


def test_infer_shape():
    from tests.helpers import check_infer_shape

    r, c = T.row("r", dtype="float64"), T.col("c", dtype="float64")
    m = T.dmatrix("m")
    rv, cv, mv = np.ones((1, 3)), np.ones((4, 1)), np.ones((4, 3))
    outs = [r + c, T.switch(c > 0, r, m), T.clip(m, r, c), T.ones_like(c), T.exp(m),
            T.second(r, c)]
    check_infer_shape(outs, [r, c, m], [rv, cv, mv])


def test_rop_and_matmul():
    from symgraph.gradient import Rop

    x, y, v = T.dvectors("x", "y", "v")
    a, b, e = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.3, -2.0]), np.array([1.0, 2.0, 3.0])
    out = T.exp(x) * T.maximum(x, y) + T.switch(x > 0, T.sqr(x), y)
    got = run([x, y, v], Rop(out, x, v), a, b, e)
    d = np.exp(a) * np.maximum(a, b) + np.exp(a) * (a >= b) + np.where(a > 0, 2 * a, 0)
    check(got, d * e, "float64")
    m = T.dmatrix("m")
    check(run([m, x], m @ x, np.eye(3) * 2, a), 2 * a, "float64")

