"""Stabilization (log1p, expm1, softplus, sigmoid, inverse pairs) and
specialization (constant powers)."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.fg import FunctionGraph
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.opt import optimize
from symgraph.opt.stabilize import is_non_negative, local_log_softmax

from opt_helpers import check_rewrite, count_op, has_op

RNG = np.random.default_rng(1)
SMALL = np.array([1e-12, -1e-10, 0.25, -0.5])


# -- stabilize ------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [lambda x: T.log(1 + x), lambda x: T.log(x + 1),
                                   lambda x: T.log(1 + x + 0)])
def test_log_one_plus_x_is_log1p(build):
    x = T.dvector("x")
    check_rewrite([x], build(x), [SMALL], present=[sm.Log1p], absent=[sm.Log])
    f = symgraph.function([x], build(x))
    assert f(SMALL)[0] == pytest.approx(1e-12, rel=1e-9)  # log(1 + 1e-12) would be off


def test_log_of_one_plus_a_sum():
    x, y = T.dvectors("x", "y")
    check_rewrite([x, y], T.log(1 + x + y), [SMALL, SMALL], present=[sm.Log1p],
                  absent=[sm.Log])


def test_log_one_minus_x_is_log1p_of_minus_x():
    x = T.dvector("x")
    check_rewrite([x], T.log(1 - x), [SMALL], present=[sm.Log1p], absent=[sm.Log])


def test_log1p_keeps_the_precision_of_the_output_dtype():
    x = T.wvector("x")  # int16 + 1 stays int16; log of it is float32
    check_rewrite([x], T.log(1 + x), [np.array([0, 3, 100], dtype="int16")],
                  present=[sm.Log1p], rtol=1e-6)
    b = T.bvector("b")
    out = T.log(np.float64(1.0) + b)  # a float64 result from an int8 input
    fg = check_rewrite([b], out, [np.array([0, 3, 100], dtype="int8")], present=[sm.Log1p])
    assert fg.outputs[0].dtype == "float64"


def test_exp_minus_one_is_expm1():
    x = T.dvector("x")
    check_rewrite([x], T.exp(x) - 1, [SMALL], present=[sm.Expm1], absent=[sm.Exp])
    f = symgraph.function([x], T.exp(x) - 1)
    assert f(SMALL)[0] == pytest.approx(1e-12, rel=1e-9)


def test_log_sigmoid_is_minus_softplus():
    x = T.dvector("x")
    values = [np.array([-10.0, -3.0, 0.0, 2.0, 10.0])]
    check_rewrite([x], T.log(T.sigmoid(x)), values, present=[sm.Softplus],
                  absent=[sm.Log, sm.Sigmoid])
    check_rewrite([x], T.log(1 - T.sigmoid(x)), values, present=[sm.Softplus],
                  absent=[sm.Log, sm.Sigmoid])
    # Where the original under/overflowed, the rewrite gives the right value.
    f = symgraph.function([x], [T.log(T.sigmoid(x)), T.log(1 - T.sigmoid(x))])
    a, b = f(np.array([-800.0, 800.0]))
    assert a[0] == pytest.approx(-800.0) and b[-1] == pytest.approx(-800.0)


def test_one_over_one_plus_exp_is_sigmoid():
    x = T.dvector("x")
    values = [np.array([-30.0, -1.0, 0.0, 2.5, 40.0])]
    fg = check_rewrite([x], 1 / (1 + T.exp(-x)), values, present=[sm.Sigmoid],
                       absent=[sm.Exp])
    assert not has_op(fg, sb.Neg)
    check_rewrite([x], 1 / (1 + T.exp(x)), values, present=[sm.Sigmoid], absent=[sm.Exp])
    check_rewrite([x], T.reciprocal(1 + T.exp(-x)), values, present=[sm.Sigmoid])


def test_one_minus_sigmoid():
    x = T.dvector("x")
    check_rewrite([x], 1 - T.sigmoid(x), [np.array([-3.0, 0.0, 40.0])],
                  present=[sm.Sigmoid], absent=[sb.Sub])
    f = symgraph.function([x], 1 - T.sigmoid(x))
    assert f(np.array([40.0]))[0] == pytest.approx(np.exp(-40.0), rel=1e-9)


def test_log_exp_is_x():
    x = T.dvector("x")
    check_rewrite([x], T.log(T.exp(x)) * 2, [RNG.normal(size=4)], absent=[sm.Log, sm.Exp])
    i = T.ivector("i")
    fg = check_rewrite([i], T.log(T.exp(i)), [np.arange(4, dtype="int32")],
                       absent=[sm.Log])
    assert fg.outputs[0].dtype == "float64"


def test_exp_log_only_for_non_negative_inputs():
    x = T.dvector("x")
    values = [np.array([-1.0, 0.0, 2.0])]
    check_rewrite([x], T.exp(T.log(x)), values, present=[sm.Exp, sm.Log])
    check_rewrite([x], T.exp(T.log(T.sqr(x))), values, absent=[sm.Exp, sm.Log])
    check_rewrite([x], T.exp(T.log(abs(x))), values, absent=[sm.Exp, sm.Log])
    assert is_non_negative(T.constant(np.array([0.0, 3.0])))
    assert not is_non_negative(T.constant(np.array([0.0, -3.0])))
    assert is_non_negative(T.bvector().astype("uint8"))


def test_log_softmax_hook_is_inactive_without_softmax():
    x = T.dvector("x")
    node = T.log(x).owner
    assert local_log_softmax.transform(FunctionGraph([x], [node.outputs[0]]), node) is None


def test_log_softmax_becomes_logsoftmax_when_the_ops_exist():
    nnet = pytest.importorskip("symgraph.ops.nnet")
    if not hasattr(nnet, "Softmax") or not hasattr(nnet, "LogSoftmax"):
        pytest.skip("softmax is not written yet")
    x = T.dmatrix("x")
    out = T.log(nnet.softmax(x))
    check_rewrite([x], out, [RNG.normal(size=(2, 3))], present=[nnet.LogSoftmax],
                  absent=[nnet.Softmax])


# -- specialize -----------------------------------------------------------------------------

POW_VALUES = [np.array([0.5, 1.5, 2.0, 3.0])]


@pytest.mark.parametrize("exponent,present", [
    (2, [sb.Sqr]), (2.0, [sb.Sqr]), (0.5, [sm.Sqrt]), (-1, [sb.Reciprocal]),
    (-0.5, [sm.Sqrt, sb.Reciprocal]), (3, [sb.Sqr, sb.Mul]), (4, [sb.Sqr]),
    (5, [sb.Sqr, sb.Mul]), (8, [sb.Sqr]), (-3, [sb.Reciprocal, sb.Mul]),
])
def test_constant_powers_are_specialized(exponent, present):
    x = T.dvector("x")
    check_rewrite([x], x ** exponent, POW_VALUES, present=present, absent=[sb.Pow],
                  rtol=1e-12)


def test_power_by_squaring_uses_few_multiplications():
    x = T.dvector("x")
    fg = check_rewrite([x], x ** 8, POW_VALUES, absent=[sb.Pow, sb.Mul], rtol=1e-12)
    assert count_op(fg, sb.Sqr) == 3


def test_power_one_and_zero():
    x = T.dmatrix("x")
    check_rewrite([x], x ** 1, [RNG.normal(size=(2, 3))], absent=[sb.Pow])
    fg = check_rewrite([x], x ** 0, [np.array([[np.nan, 0.0, np.inf]])], absent=[sb.Pow])
    assert fg.outputs[0].dtype == "float64"


def test_large_or_fractional_powers_stay():
    x = T.dvector("x")
    check_rewrite([x], x ** 9, POW_VALUES, present=[sb.Pow])
    check_rewrite([x], x ** 1.5, POW_VALUES, present=[sb.Pow])
    y = T.dvector("y")
    check_rewrite([x, y], x ** y, POW_VALUES * 2, present=[sb.Pow])


def test_integer_powers():
    i = T.lvector("i")
    values = [np.array([-3, 0, 2, 7])]
    fg = check_rewrite([i], i ** 3, values, absent=[sb.Pow])
    assert fg.outputs[0].dtype == "int64"
    # An integer to a negative integer power is an error in NumPy: keep it one.
    check_rewrite([i], i ** 2.0, values, absent=[sb.Pow])
    fg = FunctionGraph([i], [i ** -1])
    optimize(fg)
    assert has_op(fg, sb.Pow)


def test_power_of_float32_stays_float32():
    x = T.fvector("x")
    fg = check_rewrite([x], x ** 2 + x ** 0.5, [np.float32([1.0, 4.0])], absent=[sb.Pow],
                       rtol=1e-6)
    assert fg.outputs[0].dtype == "float32"


def test_broadcasting_exponent_keeps_the_shape():
    x = T.dcol("x")  # (n, 1) against a (3,) exponent of twos: a (n, 3) result
    twos = T.constant(np.full((1, 3), 2.0))
    check_rewrite([x], x ** twos, [np.array([[1.0], [3.0]])], absent=[sb.Pow])
