"""Result dtypes of the element-wise ops: NumPy 2 promotion with weak Python
numbers (NEP 50), Theano's float upgrade for transcendental ops, bool results
of comparisons; and the scalar ops' value semantics (equality, identities)."""

import itertools

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import io_toposort
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import Elemwise
from symgraph.tensor.type import upgrade_to_float

NUMERIC = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16",
           "float32", "float64"]


def run(inputs, output, *values):
    """Compile with symgraph.function (or, before it exists, run each node's perform)."""
    function = getattr(symgraph, "function", None)
    if function is not None:
        return function(list(inputs), output, on_unused_input="ignore")(*values)
    memo = dict(zip(inputs, values))
    for node in io_toposort(list(inputs), [output]):
        storage = [[None] for _ in node.outputs]
        node.op.perform(node, [memo[i] if i in memo else i.data for i in node.inputs],
                        storage)
        memo.update((o, s[0]) for o, s in zip(node.outputs, storage))
    return memo[output] if output in memo else output.data


def var(dtype, ndim=1):
    return T.TensorType(dtype, shape=(None,) * ndim)()


# -- promotion between tensors --------------------------------------------------------

@pytest.mark.parametrize("a, b", list(itertools.combinations_with_replacement(NUMERIC, 2)))
def test_arithmetic_promotes_as_numpy(a, b):
    want = np.result_type(a, b).name
    x, y = var(a), var(b)
    assert T.add(x, y).dtype == want
    assert T.maximum(x, y).dtype == want
    assert T.lt(x, y).dtype == "bool"
    assert T.true_div(x, y).dtype == upgrade_to_float(a, b)
    if want != "bool":
        assert T.sub(x, y).dtype == want
        assert T.int_div(x, y).dtype == want


@pytest.mark.parametrize("dtype", NUMERIC)
def test_float_ops_upgrade_ints(dtype):
    x = var(dtype)
    want = upgrade_to_float(dtype)
    assert want == {"bool": "float32", "int8": "float32", "uint8": "float32",
                    "int16": "float32"}.get(dtype, dtype if "float" in dtype else "float64")
    for fn in (T.exp, T.log, T.sqrt, T.sigmoid, T.erf, T.floor, T.round, T.reciprocal):
        assert fn(x).dtype == want, fn


def test_documented_examples():
    f32, i32, i8 = T.fvector(), T.ivector(), T.bvector()
    assert (f32 * 0.5).dtype == "float32"  # a Python float is weak
    assert (0.5 * f32).dtype == "float32"
    assert (i32 / i32).dtype == "float64"
    assert (i8 + 1).dtype == "int8"  # a Python int is weak
    assert (i8 * 2.5).dtype == "float64"  # an int array meets a float: NumPy's rule
    assert T.exp(i8).dtype == "float32"
    assert (f32 + np.float64(1.0)).dtype == "float64"  # NumPy scalars are strong
    assert (f32 + T.dscalar()).dtype == "float64"  # so are 0-d tensors
    assert (i32 // 2).dtype == "int32"
    assert (i32 % 3).dtype == "int32"
    assert (i32 ** 2).dtype == "int32"
    assert T.abs_(T.zvector()).dtype == "float64"
    assert T.abs_(T.cvector()).dtype == "float32"


def test_python_number_alone_follows_floatx():
    from symgraph.config import config

    assert T.exp(2.0).dtype == config.floatX
    assert T.add(1, 2).dtype == "int64"


def test_switch_dtype_ignores_cond():
    for cond in (T.fvector(), T.lvector(), T.vector(dtype="bool")):
        assert T.switch(cond, T.fvector(), 0).dtype == "float32"
        assert T.switch(cond, 1, T.bvector()).dtype == "int8"
        assert T.switch(cond, T.fvector(), T.dvector()).dtype == "float64"


def test_like_dtypes():
    x = T.bmatrix()
    assert T.ones_like(x).dtype == "int8"
    assert T.zeros_like(x, dtype="float32").dtype == "float32"
    assert T.fill(x, 2.5).dtype == "float64"
    assert T.ones_like(x).broadcastable == x.broadcastable


# -- errors at build time ---------------------------------------------------------------

@pytest.mark.parametrize("fn", [T.and_, T.or_, T.xor])
def test_bitwise_refuses_floats(fn):
    with pytest.raises(TypeError, match=fn.__name__):
        fn(T.fvector(), T.ivector())
    with pytest.raises(TypeError, match="invert"):
        T.invert(T.dvector())


def test_bool_arithmetic_refused_where_numpy_refuses():
    b = T.vector(dtype="bool")
    with pytest.raises(TypeError, match="sub"):
        b - b
    with pytest.raises(TypeError, match="neg"):
        -b
    assert (b + b).dtype == "bool" and (b * b).dtype == "bool"


# -- values at the dtype boundaries ---------------------------------------------------------

def test_int_overflow_wraps_like_numpy():
    x = var("int8")
    value = np.array([100, -100, 127], dtype="int8")
    got = run([x], x + 100, value)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, value + np.int8(100))


def test_small_ints_computed_in_their_float_type():
    # NumPy computes exp(int8) in float16; the op's type says float32.
    x = var("int8")
    value = np.array([-5, 3, 10], dtype="int8")
    got = run([x], T.exp(x), value)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.exp(value.astype("float32")), rtol=1e-6)
    got = run([x], x / 3, value)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, value / np.float32(3), rtol=1e-6)


def test_floor_division_and_mod_follow_numpy_signs():
    x, y = var("int32"), var("int32")
    a, b = np.array([7, -7, 7, -7], "int32"), np.array([2, 2, -2, -2], "int32")
    np.testing.assert_array_equal(run([x, y], x // y, a, b), [3, -4, -4, 3])
    np.testing.assert_array_equal(run([x, y], x % y, a, b), [1, 1, -1, -1])
    f, g = var("float64"), var("float64")
    af, bf = a.astype(float) + 0.5, b.astype(float)
    np.testing.assert_array_equal(run([f, g], T.mod(f, g), af, bf), np.mod(af, bf))
    np.testing.assert_array_equal(run([f, g], T.floor_divide(f, g), af, bf), af // bf)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32"])
def test_cast_to_every_dtype(dtype):
    x = T.dvector()
    value = np.array([0.0, 1.7, -2.2, 300.5])
    out = T.cast(x, dtype)
    assert out.dtype == dtype
    with np.errstate(all="ignore"):
        want = value.astype(dtype)
    np.testing.assert_array_equal(run([x], out, value), want)


# -- scalar ops are values ---------------------------------------------------------------------

def test_scalar_ops_compare_by_props():
    assert sb.Add(2) == sb.Add(2) and sb.Add(2) != sb.Add(3)
    assert hash(sb.Cast("float32")) == hash(sb.Cast(np.float32))
    assert sb.IsClose(1e-3) != sb.IsClose(1e-4)
    assert Elemwise(sm.Exp()) == Elemwise(sm.Exp())
    assert T.exp(T.dvector()).owner.op == T.exp(T.fvector()).owner.op


def test_algebraic_properties():
    assert sb.Add().identity == 0 and sb.Add().commutative and sb.Add().associative
    assert sb.Mul().identity == 1 and sb.Mul().commutative and sb.Mul().associative
    assert sb.Maximum().commutative and sb.Minimum().associative
    assert sb.OR().identity == 0 and sb.XOR().identity == 0 and sb.AND().commutative
    assert sb.EQ().commutative and not sb.LT().commutative
    assert not sb.Sub().commutative and not sb.TrueDiv().associative


def test_all_names_exported():
    from symgraph.ops import math

    for name in math.__all__:
        fn = getattr(T, name)
        assert callable(fn) and fn.__doc__, name


def test_complex_parts():
    z = T.zvector("z")
    value = np.array([1 + 2j, -3 - 0.5j, 0j])
    for fn, ref, dtype in [(T.real, np.real, "float64"), (T.imag, np.imag, "float64"),
                           (T.conj, np.conj, "complex128"), (T.angle, np.angle, "float64"),
                           (T.abs_, np.abs, "float64")]:
        out = fn(z)
        assert out.dtype == dtype
        got = run([z], out, value)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, ref(value), rtol=1e-12)
    assert T.real(T.fvector()).dtype == "float32"
    assert T.angle(T.ivector()).dtype == "float64"
    assert T.real(T.cvector()).dtype == "float32"
