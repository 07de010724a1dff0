"""Theano's names in symgraph.tensor, with Theano's meaning."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.tensor.type import TensorType

PREFIXES = {"b": "int8", "w": "int16", "i": "int32", "l": "int64", "f": "float32",
            "d": "float64", "c": "complex64", "z": "complex128"}
SHAPES = {"scalar": (), "vector": (None,), "matrix": (None, None), "row": (1, None),
          "col": (None, 1), "tensor3": (None,) * 3, "tensor4": (None,) * 4}


# -- typed constructors are TensorType instances --------------------------------------

@pytest.mark.parametrize("prefix", sorted(PREFIXES))
@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_typed_constructor_is_a_tensor_type(prefix, kind):
    ttype = getattr(T, prefix + kind)
    assert isinstance(ttype, TensorType)
    assert ttype == TensorType(PREFIXES[prefix], shape=SHAPES[kind])
    x = ttype("x")
    assert x.type == ttype and x.name == "x"
    assert x.dtype == PREFIXES[prefix] and x.type.shape == SHAPES[kind]


def test_tutorial_type_checks():
    x = T.dscalar("x")
    assert x.type == T.dscalar
    assert T.dscalar == TensorType("float64", ())
    y = T.fmatrix()
    assert y.type == T.fmatrix and y.type != T.dmatrix
    assert T.dmatrix("m").broadcastable == (False, False)
    assert T.drow.broadcastable == (True, False) and T.dcol.broadcastable == (False, True)
    f = symgraph.function([x], x * 2)
    assert f(3.0) == 6.0


def test_calls_keep_working_as_before():
    a = T.dmatrix("a", shape=(2, 3))
    assert a.type.shape == (2, 3) and a.dtype == "float64"
    assert T.fvector(dtype="float32").dtype == "float32"
    with pytest.raises(TypeError, match="not float32"):
        T.dscalar("x", dtype="float32")
    with pytest.raises(TypeError, match="does not fit"):
        T.dvector("v", shape=(2, 3))
    with pytest.raises(TypeError, match="does not fit"):
        T.drow("r", shape=(2, 3))
    a, b = T.dmatrices("a", "b")
    assert a.type == b.type == T.dmatrix
    many = T.ivectors(3)
    assert len(many) == 3 and all(v.type == T.ivector for v in many)
    assert [v.name for v in T.fscalars("p, q")] == ["p", "q"]


def test_unprefixed_constructors_follow_floatx_when_called():
    with symgraph.config.change_flags(floatX="float32"):
        assert T.matrix().dtype == "float32"
        assert T.scalar("s", dtype="int32").dtype == "int32"
    with symgraph.config.change_flags(floatX="float64"):
        assert T.vector().dtype == "float64"
        assert T.matrix().type == T.dmatrix


def test_typed_constructor_computes_like_numpy():
    x, y = T.dmatrix("x"), T.fmatrix("y")
    f = symgraph.function([x, y], x + y)
    a = np.arange(6.0).reshape(2, 3)
    b = np.ones((2, 3), dtype="float32")
    np.testing.assert_array_equal(f(a, b), a + b)
