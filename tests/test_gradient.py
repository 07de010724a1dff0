"""symgraph.gradient: grad, Lop, Rop, jacobian, hessian, the gradient-shaping ops
and verify_grad."""

import warnings

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import (DisconnectedInputError, GradientError, Lop, NullTypeGradError,
                               Rop, disconnected_grad, disconnected_grad_for, grad, grad_clip,
                               grad_not_implemented, grad_scale, hessian, is_disconnected,
                               jacobian, numeric_grad, undefined_grad, verify_grad, zero_grad)
from symgraph.graph.basic import Apply, Op
from symgraph.graph.null_type import NullType
from symgraph.tensor.type import TensorType


def fn(inputs, outputs):
    return symgraph.function(inputs, outputs, on_unused_input="ignore")


def run(inputs, outputs, *values):
    return fn(inputs, outputs)(*values)


# ---------------------------------------------------------------------------
# Test ops


class TwoOut(Op):
    """(2 * x, x ** 2): a node with two outputs; no R_op (Rop falls back to L_op)."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type(), x.type()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        output_storage[0][0] = 2 * x
        output_storage[1][0] = x * x

    def grad(self, inputs, output_grads):
        (x,) = inputs
        g_double, g_square = output_grads
        return [g_double * 2 + g_square * 2 * x]


class WithIndex(Op):
    """(x * 3, argmax-like int output); the int input ``k`` only feeds the int output."""

    def make_node(self, x, k):
        x, k = T.as_tensor_variable(x), T.as_tensor_variable(k)
        return Apply(self, [x, k], [x.type(), TensorType("int64", shape=())()])

    def perform(self, node, inputs, output_storage):
        x, k = inputs
        output_storage[0][0] = x * 3
        output_storage[1][0] = np.asarray(int(k) + 1, dtype="int64")

    def connection_pattern(self, node):
        return [[True, False], [False, True]]

    def grad(self, inputs, output_grads):
        x, k = inputs
        return [output_grads[0] * 3, disconnected_grad_for(k)]


class WrongSquare(Op):
    """x ** 2 with a deliberately wrong gradient (3x instead of 2x)."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] ** 2

    def grad(self, inputs, output_grads):
        return [output_grads[0] * 3 * inputs[0]]


class NoGrad(Op):
    """Identity whose gradient is not implemented."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].copy()

    def grad(self, inputs, output_grads):
        return [grad_not_implemented(self, 0, inputs[0], "on purpose")]


class NoneGrad(NoGrad):
    """Breaks the grad contract by returning None."""

    def grad(self, inputs, output_grads):
        return [None]


# ---------------------------------------------------------------------------
# grad: values


def test_polynomial():
    x = T.dvector("x")
    cost = T.sum(x ** 3 + 2 * x ** 2 - x)
    g = grad(cost, x)
    v = np.array([-1.5, 0.0, 2.0])
    np.testing.assert_allclose(run([x], g, v), 3 * v ** 2 + 4 * v - 1)


def test_exp_log_and_structure_of_result():
    x, y = T.dvectors("x", "y")
    cost = T.sum(T.log(x) * T.exp(y))
    gx, gy = grad(cost, [x, y])
    xv, yv = np.array([0.5, 2.0]), np.array([0.1, -1.0])
    got_x, got_y = run([x, y], [gx, gy], xv, yv)
    np.testing.assert_allclose(got_x, np.exp(yv) / xv)
    np.testing.assert_allclose(got_y, np.log(xv) * np.exp(yv))
    assert isinstance(grad(cost, (x, y)), tuple)
    assert isinstance(grad(cost, [x]), list)
    assert isinstance(grad(cost, x), T.TensorVariable)


def test_shared_subexpression_and_broadcasting():
    x = T.dmatrix("x")
    b = T.dvector("b")
    z = x * b  # b broadcast over rows
    cost = T.sum(z * z + z)
    gx, gb = grad(cost, [x, b])
    xv = np.arange(6.0).reshape(2, 3) / 3
    bv = np.array([1.0, -2.0, 0.5])
    zv = xv * bv
    got_x, got_b = run([x, b], [gx, gb], xv, bv)
    np.testing.assert_allclose(got_x, (2 * zv + 1) * bv)
    np.testing.assert_allclose(got_b, ((2 * zv + 1) * xv).sum(axis=0))


def test_grad_wrt_intermediate_and_cost_itself():
    x = T.dscalar("x")
    y = x * 3
    cost = y ** 2
    assert np.allclose(run([x], grad(cost, y), 2.0), 12.0)
    assert np.allclose(run([x], grad(cost, cost), 2.0), 1.0)


def test_dtype_of_gradient_is_the_variable_dtype():
    x = T.fvector("x")
    y = T.dvector("y")
    cost = T.sum(x * y)  # float64
    gx, gy = grad(cost, [x, y])
    assert gx.dtype == "float32" and gy.dtype == "float64"


def test_cost_must_be_scalar():
    x = T.dvector("x")
    with pytest.raises(TypeError, match="the cost must be a scalar.*xx2"):
        grad(_named(x * 2, "xx2"), x)
    with pytest.raises(ValueError, match="give a cost"):
        grad(None, x)
    with pytest.raises(TypeError, match="not a set"):
        grad(T.sum(x), {x})


def _named(var, name):
    var.name = name
    return var


def test_add_names():
    x = T.dvector("x")
    cost = _named(T.sum(T.exp(x)), "c")
    assert grad(cost, x).name == "(dc/dx)"


def test_deep_graph_has_no_recursion_limit():
    x = T.dscalar("x")
    y = x
    for _ in range(600):  # deeper than a recursive walk (2+ frames a level) allows
        y = y * 0.5 + 0.25
    g = grad(y, x)
    # Without rewrites: this checks grad, not the optimizer, on a long chain.
    f = symgraph.function([x], g, mode=symgraph.Mode(optimizer=None),
                          on_unused_input="ignore")
    assert f(0.3) == 0.5 ** 600


# ---------------------------------------------------------------------------
# grad: multi-output nodes, connection patterns, integers


def test_multi_output_node_both_outputs_used():
    x = T.dvector("x")
    double, square = TwoOut()(x)
    cost = T.sum(double * square)  # 2 x^3
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(run([x], grad(cost, x), v), 6 * v ** 2)


def test_multi_output_node_one_output_used():
    x = T.dvector("x")
    double, square = TwoOut()(x)
    v = np.array([1.0, -2.0, 0.5])
    # The op gets zeros for the output the cost does not use.
    np.testing.assert_allclose(run([x], grad(T.sum(square), x), v), 2 * v)
    np.testing.assert_allclose(run([x], grad(T.sum(double), x), v), [2.0, 2.0, 2.0])


def test_connection_pattern_decides_disconnection():
    x = T.dvector("x")
    k = T.lscalar("k")
    out, idx = WithIndex()(x, k)
    cost = T.sum(out) + T.cast(idx, "float64")
    gx, gk = grad(cost, [x, k], disconnected_inputs="ignore")
    np.testing.assert_allclose(run([x, k], gx, [1.0, 2.0], 0), [3.0, 3.0])
    # k reaches the cost only through the integer output: a zero gradient.
    assert np.all(run([x, k], gk, [1.0, 2.0], 0) == 0)
    with pytest.raises(DisconnectedInputError, match="k"):
        grad(T.sum(out), k)


def test_integer_inputs_get_float_zeros():
    x = T.dvector("x")
    i = T.ivector("i")
    cost = T.sum(x * i)
    gx, gi = grad(cost, [x, i])
    assert gi.dtype == symgraph.config.floatX
    xv, iv = np.array([1.5, 2.0, 3.0]), np.array([1, -2, 3], dtype="int32")
    got_x, got_i = run([x, i], [gx, gi], xv, iv)
    np.testing.assert_allclose(got_x, iv)
    np.testing.assert_array_equal(got_i, np.zeros(3))


def test_op_returning_none_is_an_error():
    x = T.dvector("x")
    with pytest.raises(TypeError, match="NoneGrad.*returned None"):
        grad(T.sum(NoneGrad()(x)), x)


# ---------------------------------------------------------------------------
# grad: options


def test_known_grads():
    x = T.dvector("x")
    y = x * 3
    g_y = T.dvector("g_y")
    gx = grad(None, x, known_grads={y: g_y})
    np.testing.assert_allclose(run([x, g_y], gx, [1.0, 2.0], [0.5, -1.0]), [1.5, -3.0])
    # With a cost: the known gradient replaces what would flow through y.
    cost = T.sum(y * y)
    gx = grad(cost, x, known_grads={y: g_y})
    np.testing.assert_allclose(run([x, g_y], gx, [1.0, 2.0], [0.5, -1.0]), [1.5, -3.0])
    with pytest.raises(TypeError, match="must be a float tensor"):
        grad(None, x, known_grads={y: T.lvector()})


def test_consider_constant():
    x = T.dvector("x")
    y = x * 2
    cost = T.sum(x * y)
    v = np.array([1.0, 3.0])
    np.testing.assert_allclose(run([x], grad(cost, x), v), 4 * v)
    np.testing.assert_allclose(run([x], grad(cost, x, consider_constant=[y]), v), 2 * v)


def test_disconnected_inputs():
    x, z = T.dvectors("x", "z")
    cost = T.sum(x * 2)
    with pytest.raises(DisconnectedInputError, match="respect to z"):
        grad(cost, [x, z])
    with pytest.warns(UserWarning, match="respect to z"):
        grad(cost, [x, z], disconnected_inputs="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gx, gz = grad(cost, [x, z], disconnected_inputs="ignore")
    np.testing.assert_array_equal(run([x, z], gz, [1.0, 2.0], [5.0, 6.0, 7.0]), np.zeros(3))
    assert grad(cost, z, disconnected_inputs="ignore", return_disconnected="None") is None
    assert is_disconnected(grad(cost, z, disconnected_inputs="ignore",
                                return_disconnected="Disconnected"))
    with pytest.raises(ValueError, match="disconnected_inputs"):
        grad(cost, x, disconnected_inputs="maybe")


def test_null_gradient_error_says_why():
    x = T.dvector("x")
    with pytest.raises(NullTypeGradError, match="NoGrad.*not implemented: on purpose"):
        grad(T.sum(NoGrad()(x) * 2), x)
    g = grad(T.sum(NoGrad()(x)), x, null_gradients="return")
    assert isinstance(g.type, NullType)
    with pytest.raises(NullTypeGradError, match="undefined_grad"):
        grad(T.sum(undefined_grad(x)), x)
    # A null gradient on a path that does not reach wrt is harmless.
    y = T.dvector("y")
    gy = grad(T.sum(NoGrad()(x) * y), y)
    np.testing.assert_allclose(run([x, y], gy, [1.0, 2.0], [0.0, 0.0]), [1.0, 2.0])


# ---------------------------------------------------------------------------
# jacobian, hessian


def test_jacobian_of_vector_and_matrix_expressions():
    x = T.dvector("x", shape=(3,))
    y = x ** 2
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(run([x], jacobian(y, x), v), np.diag(2 * v))
    w = T.dmatrix("w", shape=(2, 3))
    m = T.dot(w, x)  # (2,): d m_i / d w_jk = delta_ij x_k
    jw, jx = jacobian(m, [w, x])
    wv = np.arange(6.0).reshape(2, 3)
    got_w, got_x = run([w, x], [jw, jx], wv, v)
    expected_w = np.zeros((2, 2, 3))
    expected_w[0, 0] = v
    expected_w[1, 1] = v
    np.testing.assert_allclose(got_w, expected_w)
    np.testing.assert_allclose(got_x, wv)


def test_jacobian_of_unknown_size_uses_scan():
    x = T.dvector("x")
    np.testing.assert_allclose(run([x], jacobian(x * 2, x), [1.0, 5.0, 2.0]), 2 * np.eye(3))
    j = jacobian(T.specify_shape(x * 2, (2,)), x)
    np.testing.assert_allclose(run([x], j, [1.0, 5.0]), 2 * np.eye(2))


def test_jacobian_of_scalar_is_grad():
    x = T.dvector("x")
    np.testing.assert_allclose(run([x], jacobian(T.sum(x * x), x), [1.0, 2.0]), [2.0, 4.0])


def test_hessian():
    x = T.dvector("x", shape=(3,))
    a = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0], [0.0, 1.0, 2.0]])
    cost = T.dot(x, T.dot(T.constant(a), x)) + T.sum(x ** 3)
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(run([x], hessian(cost, x), v), a + a.T + np.diag(6 * v))
    u = T.dvector("u")
    np.testing.assert_allclose(run([u], hessian(T.sum(u ** 3), u), v), np.diag(6 * v))
    with pytest.raises(TypeError, match="vector"):
        hessian(T.sum(T.dmatrix("m")), T.dmatrix("m"))


# ---------------------------------------------------------------------------
# Lop, Rop


def _jacobian_exp_times(a, x):
    """Jacobian of y = exp(x) * a (element-wise) at x."""
    return np.diag(np.exp(x) * a)


def test_lop_is_transposed_jacobian_product():
    x, u = T.dvectors("x", "u")
    a = np.array([1.0, 2.0, -1.0])
    y = T.exp(x) * a
    xv, uv = np.array([0.1, 0.2, -0.3]), np.array([1.0, -1.0, 2.0])
    expected = _jacobian_exp_times(a, xv).T @ uv
    np.testing.assert_allclose(run([x, u], Lop(y, x, u), xv, uv), expected)
    # The same expression twice, and an expression that is an ancestor of another:
    # every eval point counts.
    z = y * 2
    got = run([x, u], Lop([y, y, z], x, [u, u, u]), xv, uv)
    np.testing.assert_allclose(got, 4 * expected)


def test_rop_with_ops_r_op():
    x, v = T.dvectors("x", "v")
    a = np.array([1.0, 2.0, -1.0])
    y = T.exp(x) * a
    xv, vv = np.array([0.1, 0.2, -0.3]), np.array([1.0, -1.0, 2.0])
    np.testing.assert_allclose(run([x, v], Rop(y, x, v), xv, vv),
                               _jacobian_exp_times(a, xv) @ vv)
    s = T.sum(y * y)
    np.testing.assert_allclose(run([x, v], Rop(s, x, v), xv, vv),
                               (2 * np.exp(xv) * a) * np.exp(xv) * a @ vv)


def test_rop_against_finite_differences():
    x, v = T.dmatrices("x", "v")
    w = T.dmatrix("w")
    y = T.exp(T.dot(x, w)) / (1 + x.sum())
    f = fn([x, w], y)
    rop = fn([x, w, v], Rop(y, x, v))
    rng = np.random.default_rng(0)
    xv, wv, vv = rng.normal(size=(2, 3)), rng.normal(size=(3, 2)), rng.normal(size=(2, 3))
    eps = 1e-6
    numeric = (f(xv + eps * vv, wv) - f(xv - eps * vv, wv)) / (2 * eps)
    np.testing.assert_allclose(rop(xv, wv, vv), numeric, rtol=1e-6, atol=1e-8)


def test_rop_falls_back_to_double_lop():
    x, v = T.dvectors("x", "v")
    double, square = TwoOut()(x)  # TwoOut has no R_op
    r_double, r_square = Rop([double, square], x, v)
    xv, vv = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    got_d, got_s = run([x, v], [r_double, r_square], xv, vv)
    np.testing.assert_allclose(got_d, 2 * vv)
    np.testing.assert_allclose(got_s, 2 * xv * vv)


def test_rop_errors():
    x, v, z = T.dvectors("x", "v", "z")
    with pytest.raises(ValueError, match="does not depend"):
        Rop(z * 2, x, v)
    r = Rop(z * 2, x, v, disconnected_outputs="ignore")
    np.testing.assert_array_equal(run([z, x, v], r, [1.0], [1.0], [1.0]), [0.0])
    with pytest.raises(ValueError, match="dimensions"):
        Rop(x * 2, x, T.dmatrix())
    with pytest.raises(NotImplementedError, match="NoGrad"):
        Rop(NoGrad()(x), x, v)


# ---------------------------------------------------------------------------
# Gradient-shaping ops


def test_zero_grad():
    x = T.dvector("x")
    y = zero_grad(x)
    v = np.array([1.0, 2.0])
    np.testing.assert_allclose(run([x], y, v), v)
    np.testing.assert_allclose(run([x], grad(T.sum(y * x), x), v), v)
    np.testing.assert_array_equal(run([x], grad(T.sum(y), x), v), [0.0, 0.0])
    w = T.dvector("w")
    np.testing.assert_array_equal(run([x, w], Rop(y, x, w), v, v), [0.0, 0.0])


def test_disconnected_grad():
    x = T.dvector("x")
    y = disconnected_grad(x)
    v = np.array([1.0, 2.0])
    np.testing.assert_allclose(run([x], y, v), v)
    np.testing.assert_allclose(run([x], grad(T.sum(y * x), x), v), v)
    with pytest.raises(DisconnectedInputError):
        grad(T.sum(y), x)


def test_grad_clip():
    x = T.dvector("x")
    y = grad_clip(x, -1.0, 2.5)
    v = np.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(run([x], y, v), v)
    g = grad(T.sum(y * T.constant(np.array([0.5, 4.0, -3.0]))), x)
    np.testing.assert_allclose(run([x], g, v), [0.5, 2.5, -1.0])
    with pytest.raises(ValueError, match="smaller"):
        grad_clip(x, 1, 0)
    assert grad_clip(x, -1, 1).owner.op == grad_clip(x, -1.0, 1.0).owner.op


def test_grad_scale():
    x = T.fvector("x")
    y = grad_scale(x, -2)
    v = np.array([1.0, 2.0], dtype="float32")
    np.testing.assert_allclose(run([x], y, v), v)
    g = grad(T.sum(y * 3), x)
    assert g.dtype == "float32"
    np.testing.assert_allclose(run([x], g, v), [-6.0, -6.0])


def test_gradient_shaping_ops_are_views_with_shapes():
    from tests.helpers import check_infer_shape

    x = T.dmatrix("x")
    v = np.ones((2, 3))
    for y in (zero_grad(x), disconnected_grad(x), grad_clip(x, -1, 1), grad_scale(x, 2)):
        assert y.owner.op.view_map == {0: [0]}
        assert y.type == x.type
        check_infer_shape(y, [x], [v])


# ---------------------------------------------------------------------------
# verify_grad


def test_verify_grad_passes_on_correct_gradients():
    rng = np.random.default_rng(0)
    verify_grad(lambda a, b: T.exp(a) * b + a ** 2,
                [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))], rng=rng)
    verify_grad(lambda a: T.log(a).sum(), [rng.uniform(1, 2, size=4)], rng=1)
    verify_grad(lambda a: a * 2, [rng.normal(size=3).astype("float32")],
                rng=np.random.RandomState(0))
    verify_grad(lambda a: TwoOut()(a)[1], [rng.normal(size=(3,))], rng=rng)


def test_verify_grad_raises_on_wrong_gradient():
    rng = np.random.default_rng(0)
    point = np.array([1.0, -2.0, 0.5])
    with pytest.raises(GradientError) as info:
        verify_grad(lambda a, b: a + WrongSquare()(b), [point, point], rng=rng)
    err = info.value
    assert err.arg == 1
    text = str(err)
    assert "input 1" in text and "symbolic gradient" in text and "numeric gradient" in text
    np.testing.assert_allclose(err.analytic / err.numeric, 1.5, rtol=1e-5)


def test_verify_grad_rejects_bad_arguments():
    with pytest.raises(TypeError, match="float"):
        verify_grad(lambda a: a * 2, [np.array([1, 2])], rng=0)
    with pytest.raises(TypeError, match="list"):
        verify_grad(lambda a: a * 2, np.array([1.0]), rng=0)


def test_numeric_grad():
    ng = numeric_grad(lambda a, b: float(np.sum(a ** 2 * b)),
                      [np.array([1.0, 2.0]), np.array([3.0, -1.0])])
    np.testing.assert_allclose(ng.gf[0], [6.0, -4.0], rtol=1e-6)
    np.testing.assert_allclose(ng.gf[1], [1.0, 4.0], rtol=1e-6)
    arg, pos, abs_err, rel_err = ng.max_err([np.array([6.0, -4.0]), np.array([1.0, 5.0])],
                                            1e-4, 1e-4)
    assert (arg, pos) == (1, 1) and abs_err == pytest.approx(1.0, rel=1e-5)


def test_undefined_gradient_propagates_through_multi_output_node():
    x = T.dvector("x")
    double, square = TwoOut()(x)
    cost = T.sum(NoGrad()(double) + square)
    with pytest.raises(NullTypeGradError, match="NoGrad"):
        grad(cost, x)


def test_verify_grad_on_a_logistic_regression_cost():
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(5, 4))
    yv = (rng.random(5) > 0.5).astype("float64")

    def cost(w, b):
        p = 1 / (1 + T.exp(-T.dot(T.constant(xv), w) - b))
        xent = -yv * T.log(p) - (1 - yv) * T.log(1 - p)
        return xent.mean() + 0.01 * (w ** 2).sum()

    verify_grad(cost, [rng.normal(size=4), np.array(0.3)], rng=rng)


def test_rop_with_several_wrt():
    x, y, vx, vy = T.dvectors("x", "y", "vx", "vy")
    out = x * y
    r = Rop([out], [x, y], [vx, vy])
    assert isinstance(r, list)
    xv, yv, a, b = (np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 0.5]),
                    np.array([2.0, 1.0]))
    np.testing.assert_allclose(run([x, y, vx, vy], r[0], xv, yv, a, b), a * yv + xv * b)
