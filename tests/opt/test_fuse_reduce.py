"""A reduction fused with the element-wise work that feeds it (opt/fuse_reduce.py):
the rewrite fires where it should, values are unchanged, and the fused C kernel
agrees with the op's Python perform."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import reduce as R
from symgraph.ops.composite import composite_from_nodes
from symgraph.ops.elemwise import Elemwise
from symgraph.opt.fuse_reduce import ReduceOfElemwise
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.opt.opt_helpers import check_rewrite, count_op

RNG = np.random.default_rng(7)


def _fused_nodes(fgraph):
    return [n for n in fgraph.apply_nodes if isinstance(n.op, ReduceOfElemwise)]


def test_sum_of_exp_becomes_one_node():
    x = T.matrix("x", dtype="float32")
    value = RNG.standard_normal((30, 40)).astype("float32")
    fgraph = check_rewrite([x], T.sum(T.exp(x)), [value], present=[ReduceOfElemwise],
                           rtol=1e-5)
    assert len(fgraph.apply_nodes) == 1
    (node,) = _fused_nodes(fgraph)
    assert node.inputs == [fgraph.inputs[0]]


def test_softmax_denominator_fuses_with_broadcast_max():
    x = T.matrix("x", dtype="float32")
    out = T.sum(T.exp(x - T.max(x, axis=1, keepdims=True)), axis=1)
    value = RNG.standard_normal((17, 33)).astype("float32") * 5
    fgraph = check_rewrite([x], out, [value], present=[ReduceOfElemwise], rtol=1e-5)
    (node,) = _fused_nodes(fgraph)
    assert isinstance(node.op.reduce_op, R.Sum) and node.op.reduce_op.axis == (1,)
    # the subtraction and the exponential are inside; nothing element-wise is left
    assert count_op(fgraph, Elemwise) == 0
    assert node.inputs[1].type.broadcastable == (False, True)


@pytest.mark.parametrize("fn", [T.max, T.min, T.prod, T.all, T.any])
def test_other_reductions_fuse(fn):
    x = T.matrix("x", dtype="float64")
    y = T.matrix("y", dtype="float64")
    value = [RNG.standard_normal((6, 5)), RNG.standard_normal((6, 5))]
    check_rewrite([x, y], fn(x * y + 0.5, axis=0), value, present=[ReduceOfElemwise])


def test_no_fusion_when_the_elemwise_result_is_used_elsewhere():
    x = T.vector("x", dtype="float64")
    e = T.exp(x)
    fgraph = check_rewrite([x], [T.sum(e), e * 2], [RNG.standard_normal(9)])
    assert not _fused_nodes(fgraph)
    fgraph = check_rewrite([x], [T.sum(e), e], [RNG.standard_normal(9)])
    assert not _fused_nodes(fgraph)


def test_argmax_does_not_fuse():
    x = T.vector("x", dtype="float64")
    fgraph = check_rewrite([x], T.argmax(T.exp(x)), [RNG.standard_normal(9)])
    assert not _fused_nodes(fgraph)


def test_gradients_are_unchanged():
    x = T.matrix("x", dtype="float64")
    cost = T.sum(T.exp(x - T.max(x, axis=1, keepdims=True)))
    g = symgraph.grad(cost, x)
    value = RNG.standard_normal((5, 7))
    check_rewrite([x], [cost, g], [value], rtol=1e-10)


def test_excluding_the_fusion_tag_keeps_the_reduction():
    x = T.vector("x", dtype="float64")
    mode = symgraph.Mode(optimizer="fast_run").excluding("local_reduce_of_elemwise")
    fgraph = check_rewrite([x], T.sum(T.exp(x)), [RNG.standard_normal(9)], mode=mode)
    assert not _fused_nodes(fgraph)


# -- the fused kernel against its Python perform --------------------------------------

def _softmax_piece(dtype, reduce_op):
    """ReduceOfElemwise(reduce_op, exp(i0 - i1)) on (matrix, column) inputs."""
    x = T.matrix("x", dtype=dtype)
    m = T.tensor(dtype, shape=(None, 1))
    d = x - m
    e = T.exp(d)
    comp = composite_from_nodes([d.owner, e.owner], [x, m], [e])
    return ReduceOfElemwise(reduce_op, comp).make_node(x, m)


def _same(node, values, rtol):
    (got,) = run_kernel(node, values)
    (want,) = run_python(node, values)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("axis", [(1,), (0,), None])
def test_fused_kernel_with_broadcast_input_and_strides(axis):
    node = _softmax_piece("float32", R.Sum(axis, dtype="float32", acc_dtype="float32"))
    x = RNG.standard_normal((20, 37)).astype("float32")
    m = x.max(axis=1, keepdims=True)
    for xv, mv in [(x, m), (x[::-1], m[::-1]), (np.asfortranarray(x), m),
                   (x[:, ::-2], m), (x[:0], m[:0]), (x[:, :1], m)]:
        _same(node, [xv, mv], 2e-5)


def test_fused_max_propagates_nan_and_float64():
    node = _softmax_piece("float64", R.Max((1,)))
    x = RNG.standard_normal((4, 50))
    x[1, 7] = np.nan
    m = np.zeros((4, 1))
    m[2, 0] = np.nan
    _same(node, [x, m], 1e-12)


def test_fused_kernel_errors_match_python():
    node = _softmax_piece("float32", R.Max((1,)))
    x = np.zeros((3, 0), dtype="float32")
    m = np.zeros((3, 1), dtype="float32")
    with pytest.raises(ValueError) as py_err:
        run_python(node, [x, m])
    with pytest.raises(KernelError) as c_err:
        run_kernel(node, [x, m])
    assert str(c_err.value) == str(py_err.value)
    # rows of x and m that do not match
    x = np.zeros((3, 4), dtype="float32")
    m = np.zeros((2, 1), dtype="float32")
    with pytest.raises(ValueError) as py_err:
        run_python(node, [x, m])
    with pytest.raises(KernelError) as c_err:
        run_kernel(node, [x, m])
    assert str(c_err.value) == str(py_err.value)


def test_fused_kernel_rounds_to_the_elemwise_dtype():
    # float16 element-wise result, summed in float32 (as the unfused graph does)
    x = T.matrix("x", dtype="float16")
    e = T.exp(x)
    node = ReduceOfElemwise(R.Sum((1,), dtype="float16", acc_dtype="float32"),
                            e.owner.op.scalar_op).make_node(x)
    value = RNG.standard_normal((5, 300)).astype("float16")
    _same(node, [value], 1e-3)
    # an int input converted by the scalar op (exp of int32 is float64)
    i = T.matrix("i", dtype="int32")
    e = T.exp(i)
    node = ReduceOfElemwise(R.Sum((0,), dtype="float64", acc_dtype="float64"),
                            e.owner.op.scalar_op).make_node(i)
    _same(node, [RNG.integers(-3, 3, size=(6, 4)).astype("int32")], 1e-12)


def test_fused_all_any_of_comparisons():
    x = T.matrix("x", dtype="int32")
    y = T.matrix("y", dtype="int32")
    for fn in (R.All, R.Any):
        node = ReduceOfElemwise(fn((1,)), (x < y).owner.op.scalar_op).make_node(x, y)
        a = RNG.integers(0, 3, size=(8, 5)).astype("int32")
        b = RNG.integers(0, 3, size=(8, 5)).astype("int32")
        (got,) = run_kernel(node, [a, b])
        (want,) = run_python(node, [a, b])
        np.testing.assert_array_equal(got, want)


def test_infer_shape_and_str():
    x = T.matrix("x", dtype="float64")
    out = T.sum(T.exp(x), axis=0)
    f = symgraph.function([x], out.shape)
    assert tuple(f(np.zeros((3, 4)))) == (4,)
    op = ReduceOfElemwise(R.Sum((0,)), T.exp(x).owner.op.scalar_op)
    assert "Sum" in str(op) and "exp" in str(op)
    with pytest.raises(TypeError):
        ReduceOfElemwise(R.Argmax((0,)), T.exp(x).owner.op.scalar_op)


def test_fused_kernel_on_zero_d_inputs():
    x = T.scalar("x", dtype="float64")
    y = T.scalar("y", dtype="float64")
    node = ReduceOfElemwise(R.Max(None), (x * y).owner.op.scalar_op).make_node(x, y)
    _same(node, [np.array(2.0), np.array(-3.0)], 0)
