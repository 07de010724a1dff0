"""Truth values of variables follow Theano: true, except comparison results.

Theano's tutorials write ``if not W:`` (W a shared variable or None) and
``if b is None or not b:``; both must work, while ``a < b < c`` (Python's
``(a < b) and (b < c)``) must raise instead of dropping ``a < b``.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T


def test_plain_variables_are_true():
    x = T.dmatrix("x")
    W = symgraph.shared(np.zeros((2, 2)), name="W")
    c = T.constant(0.0)
    assert bool(x) and bool(W) and bool(c)
    assert bool(x + 1) and bool(T.exp(x)) and bool(x.sum()) and bool(x.shape)
    assert bool(T.eq(x, 0)) and bool(T.lt(x, 1))  # functions, not operators: true


def test_if_not_shared_variable_idiom():
    def make_layer(W=None):
        if not W:
            W = symgraph.shared(np.ones((3, 2)), name="W")
        return W

    W = make_layer()
    assert make_layer(W) is W
    x = T.dmatrix("x")
    f = symgraph.function([x], T.dot(x, make_layer(W)))
    np.testing.assert_allclose(f(np.ones((1, 3))), np.dot(np.ones((1, 3)), np.ones((3, 2))))


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_comparison_results_raise(op):
    a, b = T.dscalars("a", "b")
    result = eval(f"a {op} b")
    with pytest.raises(TypeError, match="chained comparison"):
        bool(result)
    with pytest.raises(TypeError):
        if result:
            pass


def test_chained_comparison_raises():
    a, b, c = T.dvectors("a", "b", "c")
    with pytest.raises(TypeError, match="no truth value"):
        a < b < c  # noqa: B015


def test_comparison_still_computes():
    a, b = T.dvectors("a", "b")
    f = symgraph.function([a, b], [a < b, a >= b])
    x, y = np.array([1.0, 3.0, 2.0]), np.array([2.0, 1.0, 2.0])
    lt, ge = f(x, y)
    np.testing.assert_array_equal(lt, x < y)
    np.testing.assert_array_equal(ge, x >= y)


def test_constant_comparison_raises_and_reversed_operand():
    x = T.dvector("x")
    with pytest.raises(TypeError):
        bool(1.0 < x)  # Python calls x.__gt__(1.0)
    with pytest.raises(TypeError):
        bool(np.float64(1.0) < x)
