"""ifelse: picking a branch on a scalar condition, types, gradients, shapes."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ifelse import IfElse, ifelse


@pytest.mark.parametrize("cond_ctor,true_value,false_value", [
    (T.lscalar, 3, 0),
    (T.iscalar, -1, 0),
    (lambda name: T.scalar(name, dtype="bool"), True, False),
    (T.dscalar, 0.5, 0.0),
])
def test_picks_the_branch(cond_ctor, true_value, false_value):
    c = cond_ctor("c")
    x, y = T.dvector("x"), T.dvector("y")
    f = symgraph.function([c, x, y], ifelse(c, x, y))
    a, b = np.arange(3.0), -np.arange(5.0)
    np.testing.assert_array_equal(f(true_value, a, b), a)
    np.testing.assert_array_equal(f(false_value, a, b), b)


def test_lists_and_tuples_of_outputs():
    c = T.bscalar("c")
    x, y = T.dmatrix("x"), T.lscalar("y")
    outs = ifelse(c, [x, y], [x * 2, y + 1])
    assert isinstance(outs, list) and len(outs) == 2
    assert outs[0].owner.op == IfElse(2)
    f = symgraph.function([c, x, y], outs)
    m = np.ones((2, 2))
    got = f(1, m, 5)
    np.testing.assert_array_equal(got[0], m)
    assert got[1] == 5
    got = f(0, m, 5)
    np.testing.assert_array_equal(got[0], 2 * m)
    assert got[1] == 6
    pair = ifelse(c, (x, y), (x, y))
    assert isinstance(pair, tuple)


def test_python_numbers_take_the_other_branch_dtype():
    c = T.lscalar("c")
    x = T.fvector("x")
    out = ifelse(c, x, np.zeros(3, dtype="float32"))
    assert out.dtype == "float32"
    s = ifelse(c, T.fscalar("s"), 0.0)
    assert s.dtype == "float32"
    i = ifelse(c, T.iscalar("i"), 7)
    assert i.dtype == "int32"
    with pytest.raises(TypeError, match="exactly"):
        ifelse(c, T.iscalar("i"), 0.5)


def test_type_errors():
    c = T.lscalar("c")
    with pytest.raises(TypeError, match="dtype"):
        ifelse(c, T.fvector("a"), T.dvector("b"))
    with pytest.raises(TypeError, match="rank|same"):
        ifelse(c, T.dvector("a"), T.dmatrix("b"))
    with pytest.raises(TypeError, match="scalar"):
        ifelse(T.lvector("v"), T.dvector("a"), T.dvector("b"))
    with pytest.raises(ValueError, match="values"):
        ifelse(c, [T.dvector("a")], [T.dvector("b"), T.dvector("d")])
    with pytest.raises(TypeError, match="both"):
        ifelse(c, [T.dvector("a")], T.dvector("b"))


def test_more_general_output_type_and_different_shapes():
    c = T.lscalar("c")
    a = T.tensor("float64", shape=(3,), name="a")
    b = T.tensor("float64", shape=(None,), name="b")
    out = ifelse(c, a, b)
    assert out.type.shape == (None,)
    same = ifelse(c, a, T.tensor("float64", shape=(3,)))
    assert same.type.shape == (3,)
    row = ifelse(c, T.tensor("float64", shape=(1, 4)), T.tensor("float64", shape=(2, 4)))
    assert row.type.shape == (None, 4)
    f = symgraph.function([c, a, b], out)
    assert f(0, np.ones(3), np.ones(7)).shape == (7,)
    assert f(1, np.ones(3), np.ones(7)).shape == (3,)


def test_output_does_not_alias_input():
    c = T.lscalar("c")
    x = T.dvector("x")
    node = ifelse(c, x, x * 2).owner
    value = np.arange(3.0)
    out = [[None]]
    node.op.perform(node, [np.array(1), value, value * 2], out)
    assert out[0][0] is not value and np.array_equal(out[0][0], value)
    view = IfElse(1, as_view=True)
    assert view != IfElse(1) and view.view_map == {0: [1, 2]}
    view.perform(node, [np.array(1), value, value * 2], out)
    assert out[0][0] is value


def test_gradient_goes_through_the_taken_branch():
    c = T.lscalar("c")
    x, y = T.dvector("x"), T.dvector("y")
    cost = T.sum(ifelse(c, x * x, 3 * y))
    gx, gy = symgraph.grad(cost, [x, y])
    f = symgraph.function([c, x, y], [gx, gy])
    a, b = np.array([1.0, -2.0]), np.array([4.0, 5.0])
    got_x, got_y = f(1, a, b)
    np.testing.assert_allclose(got_x, 2 * a)
    np.testing.assert_allclose(got_y, 0)
    got_x, got_y = f(0, a, b)
    np.testing.assert_allclose(got_x, 0)
    np.testing.assert_allclose(got_y, 3)


@pytest.mark.parametrize("taken", [0, 1])
def test_verify_grad(taken):
    from symgraph.gradient import verify_grad

    def fn(x, y):
        outs = ifelse(np.int64(taken), [T.exp(x), y * 2], [x * 3, T.exp(y)])
        return outs[0] * outs[1]

    rng = np.random.default_rng(0)
    verify_grad(fn, [rng.normal(size=(3,)), rng.normal(size=(3,))], rng=rng)


def test_condition_is_disconnected():
    from symgraph.gradient import is_disconnected

    c = T.dscalar("c")
    x = T.dvector("x")
    node = ifelse(c, x, x).owner
    grads = node.op.L_op(node.inputs, node.outputs, [T.dvector("g")])
    assert is_disconnected(grads[0])
    assert node.op.connection_pattern(node) == [[False], [True], [True]]


def test_infer_shape():
    from tests.helpers import check_infer_shape

    c = T.lscalar("c")
    x, y = T.dmatrix("x"), T.dmatrix("y")
    outs = ifelse(c, [x, x], [y, x.T])
    values_a = [np.ones((2, 3)), np.ones((4, 3))]
    check_infer_shape(outs, [c, x, y], [1] + values_a)
    check_infer_shape(outs, [c, x, y], [0] + values_a)


def test_r_op():
    c = T.lscalar("c")
    x = T.dvector("x")
    v = T.dvector("v")
    out = ifelse(c, x * 2, x * x)
    jv = symgraph.Rop(out, x, v)
    f = symgraph.function([c, x, v], jv)
    a, d = np.array([1.0, 3.0]), np.array([0.5, -1.0])
    np.testing.assert_allclose(f(1, a, d), 2 * d)
    np.testing.assert_allclose(f(0, a, d), 2 * a * d)
