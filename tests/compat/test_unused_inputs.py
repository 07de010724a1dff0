"""An input is unused only when the graph the user wrote does not use it
(Theano's rule), whatever the rewrites later remove."""

import warnings

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.compile.errors import UnusedInputError


@pytest.mark.parametrize("make, expected", [
    (lambda x: x.shape[0], 3),
    (lambda x: x.shape[-1] * 2, 6),
    (lambda x: T.zeros((x.shape[0],)), np.zeros(3)),
    (lambda x: T.arange(x.shape[0]), np.arange(3)),
    (lambda x: x * 0, np.zeros(3)),
    (lambda x: x - x, np.zeros(3)),
    (lambda x: T.zeros_like(x), np.zeros(3)),
    (lambda x: T.grad(x.sum(), x), np.ones(3)),
])
def test_static_shape_and_rewritten_uses_count(make, expected):
    x = T.dvector("x", shape=(3,))
    f = symgraph.function([x], make(x))
    np.testing.assert_array_equal(f(np.array([1.0, 2.0, 3.0])), expected)


def test_shape_of_static_matrix_still_folds_when_optimized():
    m = T.dmatrix("m", shape=(2, 5))
    f = symgraph.function([m], m.shape[1] + 1)
    assert f(np.zeros((2, 5))) == 6
    assert not any(node.op.__class__.__name__ == "Shape_i"
                   for node in f.maker.fgraph.apply_nodes)


def test_really_unused_input_still_raises_or_warns():
    x, y = T.dvectors("x", "y")
    with pytest.raises(UnusedInputError, match="input 1"):
        symgraph.function([x, y], x * 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = symgraph.function([x, y], x * 2, on_unused_input="warn")
    assert any("not used" in str(w.message) for w in caught)
    np.testing.assert_array_equal(f(np.ones(2), np.ones(2)), [2.0, 2.0])
    symgraph.function([x, y], x, on_unused_input="ignore")
