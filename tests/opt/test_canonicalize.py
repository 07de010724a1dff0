"""Canonicalization: neutral elements, n-ary add/mul, constants, casts,
dimshuffles, reshapes, specify_shape and shapes."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.fg import FunctionGraph
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import DimShuffle
from symgraph.ops.shape import Reshape, Shape, Shape_i, SpecifyShape
from symgraph.opt import optimize
from symgraph.opt.canonicalize import lossless_cast

from opt_helpers import check_rewrite, count_op, has_op

RNG = np.random.default_rng(0)
UNSAFE = symgraph.Mode(optimizer="fast_run", including=("unsafe",))


def _vec(n=4):
    return RNG.normal(size=n)


# -- neutral and absorbing elements --------------------------------------------------------

def test_times_one_and_plus_zero_disappear():
    x = T.dvector("x")
    fg = check_rewrite([x], (x * 1) + 0, [_vec()], absent=[sb.Mul, sb.Add])
    assert fg.outputs[0] is fg.inputs[0] or fg.outputs[0].owner is not None


def test_neutral_element_keeps_the_dtype():
    x = T.ivector("x")
    out = x * np.float64(1.0)  # a strong float64 constant: the result is float64
    fg = check_rewrite([x], out, [np.arange(4, dtype="int32")], absent=[sb.Mul])
    assert fg.outputs[0].dtype == "float64"


def test_neutral_element_keeps_the_broadcast_shape():
    x = T.drow("x")  # shape (1, n)
    ones = T.constant(np.ones((3, 1)))
    check_rewrite([x], x * ones, [RNG.normal(size=(1, 4))])


def test_times_zero_for_integers_is_zeros_of_the_right_shape():
    x = T.imatrix("x")
    fg = check_rewrite([x], x * 0, [np.arange(6, dtype="int32").reshape(2, 3)],
                       absent=[sb.Mul])
    assert fg.outputs[0].dtype == "int32"


def test_times_zero_for_floats_is_unsafe_only():
    x = T.dvector("x")
    values = [np.array([1.0, np.nan, np.inf])]
    check_rewrite([x], x * 0, values, present=[sb.Mul])
    ref = symgraph.function([x], x * 0, mode=symgraph.Mode(optimizer=None))(*values)
    got = symgraph.function([x], x * 0, mode=UNSAFE)(*values)
    assert np.isnan(ref[1]) and got[1] == 0  # why it is unsafe


def test_self_subtraction():
    i = T.lvector("i")
    check_rewrite([i], i - i, [np.arange(3)], absent=[sb.Sub])
    x = T.dvector("x")
    check_rewrite([x], x - x, [_vec()], present=[sb.Sub])
    f = symgraph.function([x], x - x, mode=UNSAFE)
    assert not has_op(f.maker.fgraph, sb.Sub)
    np.testing.assert_array_equal(f(_vec()), np.zeros(4))


def test_self_division_is_unsafe_only():
    x = T.dvector("x")
    check_rewrite([x], x / x, [_vec()], present=[sb.TrueDiv])
    f = symgraph.function([x], x / x, mode=UNSAFE)
    assert not has_op(f.maker.fgraph, sb.TrueDiv)
    np.testing.assert_array_equal(f(_vec() + 5), np.ones(4))


def test_double_negation():
    x = T.lvector("x")
    check_rewrite([x], -(-x), [np.array([-3, 0, 7, np.iinfo("int64").min])],
                  absent=[sb.Neg])


# -- n-ary add and mul ---------------------------------------------------------------------

def test_nested_adds_and_muls_flatten():
    x, y, z = T.dvectors("x", "y", "z")
    out = ((x + y) + z) * ((x * y) * z)
    # node structure is checked: keep the loops unfused
    fg = check_rewrite([x, y, z], out, [_vec(), _vec(), _vec()],
                       mode=symgraph.Mode(optimizer="fast_run", excluding=("fusion",)))
    assert count_op(fg, sb.Add) == 1 and count_op(fg, sb.Mul) == 1
    (add,) = [n for n in fg.apply_nodes if isinstance(getattr(n.op, "scalar_op", None), sb.Add)]
    (mul,) = [n for n in fg.apply_nodes if isinstance(getattr(n.op, "scalar_op", None), sb.Mul)]
    assert len(add.inputs) == 3 and len(mul.inputs) == 4


def test_shared_inner_nodes_are_not_flattened():
    x, y, z = T.dvectors("x", "y", "z")
    inner = x + y
    fg = check_rewrite([x, y, z], [inner + z, inner * 2], [_vec(), _vec(), _vec()])
    assert count_op(fg, sb.Add) == 2


def test_mixed_integer_dtypes_are_not_regrouped():
    a, b = T.bvector("a"), T.wvector("b")
    out = a + (a + b)
    values = [np.array([100, -100], dtype="int8"), np.array([100, 5], dtype="int16")]
    check_rewrite([a, b], out, values)


def test_constants_gather():
    x = T.dvector("x")
    fg = check_rewrite([x], 2 * x * 3, [_vec()])
    assert count_op(fg, sb.Mul) == 1
    (mul,) = [n for n in fg.apply_nodes if isinstance(getattr(n.op, "scalar_op", None), sb.Mul)]
    consts = [i for i in mul.inputs if isinstance(i, symgraph.Constant)]
    assert len(consts) == 1 and float(consts[0].data.ravel()[0]) == 6.0
    fg = check_rewrite([x], (x + 1) + 2 + (x * 0.5 + 3), [_vec()])
    assert count_op(fg, sb.Add) == 1


def test_gathered_integer_constants_wrap_like_the_original():
    x = T.bvector("x")
    out = x + np.int8(100) + np.int8(100)
    check_rewrite([x], out, [np.array([1, -5, 27], dtype="int8")])


# -- casts ---------------------------------------------------------------------------------

def test_cast_of_a_lossless_cast_becomes_one_cast():
    x = T.bvector("x")
    out = T.cast(T.cast(x, "int32"), "float64")
    fg = check_rewrite([x], out, [np.array([-128, 5, 127], dtype="int8")])
    assert count_op(fg, sb.Cast) == 1


def test_cast_back_to_the_original_dtype_disappears():
    x = T.fvector("x")
    out = T.cast(T.cast(x, "float64"), "float32")
    check_rewrite([x], out, [np.float32([1.5, -2.25])], absent=[sb.Cast])


def test_lossy_casts_stay():
    x = T.dvector("x")
    out = T.cast(T.cast(x, "int32"), "float64")
    fg = check_rewrite([x], out, [np.array([1.7, -2.5])])
    assert count_op(fg, sb.Cast) == 2
    assert not lossless_cast("int64", "float64")
    assert lossless_cast("int32", "float64") and lossless_cast("int16", "float32")


# -- dimshuffles, reshapes, specify_shape ---------------------------------------------------

def test_dimshuffle_chains_merge_and_cancel():
    x = T.dmatrix("x")
    fg = check_rewrite([x], x.T.T + 1, [RNG.normal(size=(2, 3))], absent=[DimShuffle])
    out = x.dimshuffle(1, "x", 0).dimshuffle(2, 0, 1)
    fg = check_rewrite([x], out, [RNG.normal(size=(2, 3))])
    assert count_op(fg, DimShuffle) == 1
    out = T.drow("r").dimshuffle(1).dimshuffle("x", 0)
    check_rewrite([out.owner.inputs[0].owner.inputs[0]], out, [RNG.normal(size=(1, 3))],
                  absent=[DimShuffle])


def test_useless_reshapes_disappear():
    x = T.dmatrix("x")
    check_rewrite([x], x.reshape(x.shape) * 2, [RNG.normal(size=(2, 3))], absent=[Reshape])
    check_rewrite([x], x.reshape((x.shape[0], x.shape[1])) * 2, [RNG.normal(size=(2, 3))],
                  absent=[Reshape])
    v = T.dvector("v")
    check_rewrite([v], v.reshape((-1,)) * 2, [_vec()], absent=[Reshape])
    fg = check_rewrite([x], x.reshape((x.shape[1], x.shape[0])), [RNG.normal(size=(2, 3))])
    assert has_op(fg, Reshape)


def test_reshape_of_reshape_becomes_one():
    x = T.dmatrix("x")
    fg = check_rewrite([x], x.reshape((6,)).reshape((3, 2)), [RNG.normal(size=(2, 3))])
    assert count_op(fg, Reshape) == 1


def test_useless_specify_shape_disappears():
    x = T.dmatrix("x")
    y = T.specify_shape(x, (2, None))
    out = T.specify_shape(y, (2, None)) + T.specify_shape(T.specify_shape(x, (None, 3)),
                                                          (2, None))
    fg = check_rewrite([x], out, [RNG.normal(size=(2, 3))])
    assert count_op(fg, SpecifyShape) <= 2
    z = T.specify_shape(x, (2, 3))
    node = SpecifyShape((None, None)).make_node(z)
    fg = FunctionGraph([x], [node.outputs[0] * 2])
    optimize(fg)
    assert count_op(fg, SpecifyShape) == 1


# -- shapes --------------------------------------------------------------------------------

def test_static_shapes_become_constants():
    x = T.tensor("float64", shape=(2, 3), name="x")
    fg = check_rewrite([x], T.shape(T.exp(x)), [RNG.normal(size=(2, 3))],
                       absent=[Shape, sm.Exp])
    assert isinstance(fg.outputs[0], symgraph.Constant)


def test_shape_of_an_intermediate_does_not_compute_it():
    x, y = T.dmatrices("x", "y")
    out = T.exp(x).dot(T.log(y)).shape
    fg = check_rewrite([x, y], out, [RNG.normal(size=(2, 3)), RNG.uniform(1, 2, (3, 4))],
                       absent=[sm.Exp, sm.Log])
    assert not has_op(fg, Shape) or all(n.inputs[0] in fg.inputs for n in fg.apply_nodes
                                        if isinstance(n.op, Shape))


def test_shape_entry_of_an_intermediate():
    x = T.dmatrix("x")
    out = T.exp(x).shape[1] * 2
    check_rewrite([x], out, [RNG.normal(size=(2, 3))], absent=[sm.Exp])
    out = T.shape_i(T.exp(x), 0) + 1
    check_rewrite([x], out, [RNG.normal(size=(2, 3))], absent=[sm.Exp])


def test_shape_of_a_graph_input_stays_a_read():
    x = T.dmatrix("x")
    fg = check_rewrite([x], x.shape[0] + 1, [RNG.normal(size=(2, 3))])
    assert has_op(fg, Shape_i) or has_op(fg, Shape)


@pytest.mark.parametrize("build", [
    lambda x: (x * 1 + 0) * 2,
    lambda x: -(-(x + 0)),
    lambda x: x.dimshuffle(0, "x").dimshuffle(0),
    lambda x: T.cast(T.cast(x, "float64"), "float32") * 3 * 1,
])
def test_replacements_keep_float32(build):
    x = T.fvector("x")
    fg = check_rewrite([x], build(x), [np.float32([1.0, -2.0, 0.5])], rtol=1e-6)
    assert fg.outputs[0].dtype == "float32"
