"""The reductions' C kernels against their Python ``perform``.

Each kernel is compiled once (``kernel_harness`` caches by source) and run on
several arrays: contiguous, strided, transposed, negative strides, size-0 and
size-1 dimensions, NaN and Inf.
"""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.backends.cpu.reduce.codegen import PAIR_BLOCK, PLAIN_BLOCK, COL_CHUNK
from symgraph.ops import reduce as R
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from symgraph.backends.cpu.lowerings import cpu_kernel

RNG = np.random.default_rng(42)

CA_FNS = {"sum": T.sum, "prod": T.prod, "max": T.max, "min": T.min, "all": T.all,
          "any": T.any, "argmax": T.argmax, "argmin": T.argmin}


def _data(shape, dtype):
    if dtype == "bool":
        return RNG.random(shape) < 0.6
    if dtype.startswith("int"):
        return RNG.integers(-3, 4, size=shape).astype(dtype)
    # Values near 1 keep products of many elements finite.
    return ((RNG.random(shape) * 0.5 + 0.75) * RNG.choice([-1, 1], size=shape)).astype(dtype)


def _variants(shape, dtype):
    """The same logical input laid out in several ways."""
    base = _data(shape, dtype)
    out = [base]
    if base.ndim >= 1:
        out.append(base[::-1])
        big = _data(tuple(2 * s for s in shape), dtype)
        out.append(big[tuple(slice(None, None, 2) for _ in shape)])
    if base.ndim >= 2:
        out.append(np.ascontiguousarray(np.swapaxes(base, 0, -1)).swapaxes(0, -1))
        out.append(np.asfortranarray(base)[..., ::-1])
    return out


def _node(kind, in_dtype="float64", axis=(0, 2), ndim=3, **kwargs):
    """The reduction node most tests share (so that its kernel compiles once)."""
    x = T.tensor(in_dtype, shape=(None,) * ndim)
    return CA_FNS[kind](x, axis=axis, **kwargs).owner


def _check(node, x, exact=None):
    """C output == Python output (dtype, shape, values); float sums and
    products to rounding (the C kernel adds in another order)."""
    (got,) = run_kernel(node, [x])
    (want,) = run_python(node, [x])
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if exact is None:
        exact = not (want.dtype.kind == "f" and node.op.__class__ in (R.Sum, R.Prod))
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        rtol = {"float16": 1e-3, "float32": 2e-6, "float64": 1e-13}[str(want.dtype)]
        group = x.size // max(1, want.size)
        scale = float(np.max(np.abs(x))) if x.size else 1.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale * max(1, group) ** 0.5)


DTYPES = ["float32", "float64", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(CA_FNS))
def test_kernel_matches_perform_over_dtypes_and_layouts(kind, dtype):
    node = _node(kind, dtype)
    for value in _variants((3, 4, 5), dtype):
        _check(node, value)


@pytest.mark.parametrize("axis", [None, 0, -1, 1, (0, 1), ()])
@pytest.mark.parametrize("kind", ["sum", "argmin"])
def test_kernel_matches_perform_over_axes(kind, axis):
    node = _node(kind, axis=axis)
    for value in _variants((4, 3, 6), "float64"):
        _check(node, value)


@pytest.mark.parametrize("kind", ["max", "all"])
def test_column_and_all_axes_paths(kind):
    for axis in (0, None):
        node = _node(kind, axis=axis)
        for value in _variants((4, 3, 6), "float64"):
            _check(node, value)


@pytest.mark.parametrize("kind", ["sum", "max", "argmax", "all"])
def test_float16_goes_through_float32(kind):
    x = T.tensor("float16", shape=(None, None))
    node = CA_FNS[kind](x, axis=1).owner
    for value in _variants((5, 300), "float16"):
        _check(node, value, exact=kind != "sum")


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "all", "any"])
def test_size_zero_and_size_one_dims(kind):
    node = _node(kind)
    for shape in [(1, 4, 1), (4, 1, 3), (1, 1, 1), (0, 3, 2), (3, 0, 2), (2, 3, 0), (0, 0, 0)]:
        value = _data(shape, "float64")
        for value in (value, value[::-1, :, ::-1]):
            empty_group = 0 in (shape[0], shape[2])
            if kind in ("max", "min") and empty_group:
                with pytest.raises(ValueError) as py_err:
                    run_python(node, [value])
                with pytest.raises(KernelError) as c_err:
                    run_kernel(node, [value])
                assert str(c_err.value) == str(py_err.value)
                assert c_err.value.kind == 1  # SG_ERR_VALUE
            else:
                _check(node, value)
    if kind == "sum":
        _check(_node(kind, axis=None), np.zeros((2, 0, 3)))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_of_empty_group_raises_the_python_message(kind):
    node = _node(kind, "float32")
    value = np.zeros((2, 3, 0), dtype="float32")
    with pytest.raises(ValueError) as py_err:
        run_python(node, [value])
    with pytest.raises(KernelError) as c_err:
        run_kernel(node, [value])
    assert str(c_err.value) == str(py_err.value)
    # an empty output with non-empty groups is fine
    _check(node, np.zeros((2, 0, 3), dtype="float32"))


def test_zero_d_input():
    x = T.scalar("x", dtype="float32")
    for kind in CA_FNS:
        _check(CA_FNS[kind](x).owner, np.array(-2.5, dtype="float32"))


@pytest.mark.parametrize("kind", ["max", "min", "argmax", "argmin", "sum", "any"])
def test_nan_and_inf(kind):
    value = _data((6, 3, 70), "float32")
    value[1, :, 5] = np.nan
    value[2, 1, 3] = np.inf
    value[3, 2, 7] = -np.inf
    value[4, :, :] = np.nan
    value[5, 0, 10] = np.nan
    value[5, 2, 60] = np.nan
    value[0, 1, 50] = -0.0
    value[:, 2, 40] = np.nan
    node = _node(kind, "float32")
    # each group (of axes 0 and 2) and each row (axis 2) holds NaNs or not
    for v in (value, value[::-1, :, ::-2], np.asfortranarray(value), value.swapaxes(0, 1)):
        _check(node, v)
    if kind in ("max", "argmax"):
        rows = _node(kind, "float32", axis=1, ndim=2)
        for v in (value[:, 0], value[4], value[:, 2], value[:, 2, ::-1]):
            _check(rows, np.ascontiguousarray(v))
            _check(rows, v)


def test_argmax_first_at_ties_and_c_order_of_axes():
    value = np.zeros((3, 4, 5), dtype="int32")
    value[1, 2, 3] = value[1, 3, 1] = value[0, 0, 4] = 7
    for node in (_node("argmax", "int32"), _node("argmax", "int32", axis=None)):
        for v in (value, value[::-1, :, ::-1], np.asfortranarray(value)):
            _check(node, v)


@pytest.mark.parametrize("dtype,acc,out", [("int32", "float64", None),
                                           ("float32", "float64", "float64"),
                                           ("bool", None, None), ("int32", None, None),
                                           ("float16", "float32", "float32")])
def test_sum_dtypes_and_accumulators(dtype, acc, out):
    node = _node("sum", dtype, dtype=out, acc_dtype=acc)
    for value in _variants((7, 9, 4), dtype):
        _check(node, value)
    _check(_node("prod", dtype, dtype=out, acc_dtype=acc), _data((7, 9, 3), dtype))


def test_int_overflow_wraps_as_numpy():
    value = np.full((4, 3, 10), 2 ** 62, dtype="int64")
    for kind in ("sum", "prod"):
        _check(_node(kind, "int64"), value)


def test_long_rows_and_columns_cross_block_boundaries():
    """Row sums longer than a pairwise block, ints longer than a plain block,
    column reductions wider than a column chunk."""
    x = T.matrix("x", dtype="float32")
    wide = _data((3, 3 * PAIR_BLOCK + 17), "float32")
    _check(T.sum(x, axis=1).owner, wide)
    _check(T.max(x, axis=1).owner, wide)
    _check(T.argmin(x, axis=1).owner, wide)
    cols = _data((9, 2 * COL_CHUNK + 5), "float32")
    _check(T.sum(x, axis=0).owner, cols)
    _check(T.min(x, axis=0).owner, cols)
    i = T.vector("i", dtype="int32")
    _check(T.sum(i).owner, _data((PLAIN_BLOCK + 123,), "int32"))


def test_float32_sum_of_a_million_is_within_1e6_of_float64():
    x = T.vector("x", dtype="float32")
    node = T.sum(x).owner
    value = RNG.random(10 ** 6).astype("float32")
    (got,) = run_kernel(node, [value])
    exact = np.float32(value.astype("float64").sum())
    assert abs(float(got) - float(exact)) <= 1e-6 * abs(float(exact))
    (strided,) = run_kernel(node, [np.repeat(value, 2)[::2]])
    assert abs(float(strided) - float(exact)) <= 1e-6 * abs(float(exact))
    # all axes of a contiguous matrix: the same flat pairwise sum
    m = T.matrix("m", dtype="float32")
    (flat,) = run_kernel(T.sum(m).owner, [value.reshape(1000, 1000)])
    assert abs(float(flat) - float(exact)) <= 1e-6 * abs(float(exact))


def test_output_is_fully_written_with_keepdims_outside():
    # keepdims is a DimShuffle after the op: the op itself drops axes.
    x = T.tensor("float64", shape=(None, None, None))
    out = T.sum(x, axis=(0, 2), keepdims=True)
    node = out.owner.inputs[0].owner
    assert isinstance(node.op, R.Sum) and node.outputs[0].ndim == 1
    _check(node, _data((5, 3, 2), "float64"))


def test_non_reduction_scalar_ops_have_no_kernel():
    from symgraph.ops import scalar_basic as sb

    x = T.matrix("x")
    op = R.CAReduce(sb.Maximum(), (0,))
    assert cpu_kernel(op.make_node(x)) is None
