"""Theano's small internals that programs imported: ``shared_constructor``,
``compile.ops.OutputGuard``, ``sparse_grad``."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.compile.ops import OutputGuard, _output_guard
from symgraph.compile.sharedvalue import SharedVariable, shared, shared_constructor


class Box:
    def __init__(self, n):
        self.n = n


def test_shared_constructor_registers_and_removes_a_type():
    calls = []

    @shared_constructor
    def box_constructor(value, name=None, strict=False, allow_downcast=None, borrow=False,
                        **kwargs):
        if not isinstance(value, Box):
            raise TypeError("not a Box")
        calls.append(kwargs)
        return symgraph.shared(value.n * np.ones(2), name=name)

    try:
        assert box_constructor in shared.constructors
        v = symgraph.shared(Box(3), name="b", target="cpu")
        assert v.name == "b" and calls == [{"target": "cpu"}]
        np.testing.assert_array_equal(v.get_value(), [3.0, 3.0])
        # Values the constructor refuses fall through to symgraph's own types.
        w = symgraph.shared(np.zeros(3))
        assert isinstance(w, SharedVariable) and w.get_value().shape == (3,)
    finally:
        shared_constructor(box_constructor, remove=True)
    assert box_constructor not in shared.constructors
    assert not isinstance(symgraph.shared(Box(3)).get_value(), np.ndarray)
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        symgraph.shared(np.zeros(2), colour="red")
    # target is Theano's own keyword: 'cpu' keeps the value in host memory
    assert isinstance(symgraph.shared(np.zeros(2), target="cpu").get_value(), np.ndarray)


def test_output_guard_is_a_view_identity():
    x = T.dvector()
    y = _output_guard(x * 2)
    assert isinstance(y.owner.op, OutputGuard)
    f = symgraph.function([x], [y, symgraph.grad(y.sum(), x)])
    out, g = f(np.arange(3.0))
    np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(g, [2.0, 2.0, 2.0])


def test_sparse_grad_keeps_the_indexing_and_a_dense_gradient():
    x = T.dmatrix("x")
    idx = T.ivector("idx")
    rows = symgraph.sparse_grad(x[idx])
    g = symgraph.grad((rows ** 2).sum(), x)
    xv = np.arange(6.0).reshape(3, 2)
    out = symgraph.function([x, idx], g)(xv, np.array([0, 2, 2], dtype=np.int32))
    np.testing.assert_array_equal(out, [[0.0, 2.0], [0.0, 0.0], [16.0, 20.0]])


def test_sparse_grad_refuses_other_variables():
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match="indexing a tensor by one integer vector"):
        symgraph.sparse_grad(x[0])
    with pytest.raises(TypeError, match="indexing a tensor by one integer vector"):
        symgraph.sparse_grad(x * 2)
