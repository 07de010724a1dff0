"""Native kernels of the indexing ops against their Python ``perform``."""

import itertools

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
from symgraph.ops.subtensor import FULL_SLICE, IncSubtensor
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.native.test_shape_c import KINDS, check, check_error, data, layouts
from symgraph.backends.cpu.lowerings import cpu_kernel

BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def compare(node, inputs, kernel, view_of=None):
    """Kernel against perform for one call, errors included (``kernel`` built once)."""
    inputs = [np.asarray(i) for i in inputs]
    try:
        want = run_python(node, inputs)
    except Exception as exc:  # noqa: BLE001 - any error of perform must be mirrored
        with pytest.raises(KernelError) as c:
            run_kernel(node, inputs, kernel)
        kind = next(k for e, k in KINDS if isinstance(exc, e))
        assert (c.value.kind, str(c.value)) == (kind, str(exc))
        return
    (got,) = run_kernel(node, inputs, kernel)
    assert got.dtype == want[0].dtype and got.shape == want[0].shape
    np.testing.assert_array_equal(got, want[0])
    if view_of is not None and got.size:
        assert np.shares_memory(got, inputs[view_of])


# ---------------------------------------------------------------------------
# Subtensor


CONSTANT_INDICES = [
    (1,), (-1,), (slice(1, 3),), (slice(None, None, -1),), (slice(None, None, -2), 1),
    (slice(None), slice(2, 0, -1)), (slice(5, None),), (slice(-10, 10, 3),),
    (Ellipsis, 0), (0, -1, slice(None, None, 2)), (slice(3, 1),), (2, slice(None), -2),
]


# Moves depend on the element size only: every form in float64, a few in the others.
@pytest.mark.parametrize("dtype,indices", [("float64", CONSTANT_INDICES)] + [
    (d, CONSTANT_INDICES[3:5]) for d in ["int32", "bool", "float16"]])
def test_subtensor_constant_indices_are_views(dtype, indices):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    for index in indices:
        node = x[index].owner
        kernel = cpu_kernel(node)
        for arr in layouts(data((3, 4, 5), dtype)):
            compare(node, [arr], kernel, view_of=0)


def test_subtensor_out_of_bounds_constant_messages():
    x = T.matrix("x")
    for index in [(3,), (-4,), (slice(None), 4), (1, -5), (slice(None, None, -1), 7)]:
        node = x[index].owner
        check_error(node, [np.zeros((3, 4))])
    check_error(x[0].owner, [np.zeros((0, 4))])


VALUES = [SMALL, -12, -5, -1, 0, 1, 3, 5, 12, BIG]


@pytest.mark.parametrize("form", ["a:b:c", "a:", ":b:c", "::c", "a:b"])
def test_subtensor_symbolic_slices_clamp_as_numpy(form):
    a, b, c = (T.lscalar(n) for n in "abc")
    parts = {"a": a, "b": b, "c": c}
    pieces = form.split(":") + [""] * (3 - len(form.split(":")))
    sl = slice(*[parts[p] if p else None for p in pieces])
    used = [parts[p] for p in pieces if p]
    x = T.vector("x", dtype="int64")
    node = x[sl].owner
    kernel = cpu_kernel(node)
    for size in (0, 1, 5):
        arr = np.arange(size, dtype="int64") * 10
        for values in itertools.product(VALUES, repeat=len(used)):
            compare(node, [arr] + [np.int64(v) for v in values], kernel, view_of=0)


@pytest.mark.parametrize("idx_dtype", ["int8", "uint8", "int32", "uint64"])
def test_subtensor_symbolic_ints_of_any_dtype(idx_dtype):
    i = T.scalar("i", dtype=idx_dtype)
    j = T.scalar("j", dtype=idx_dtype)
    x = T.tensor("float32", shape=(None, None, None), name="x")
    node = x[i, 1:j].owner
    kernel = cpu_kernel(node)
    arr = data((4, 5, 2), "float32")
    info = np.iinfo(idx_dtype)
    # (uint64 values past int64's range make NumPy raise OverflowError: not tested.)
    info = np.iinfo("int64") if idx_dtype == "uint64" else info
    for vi, vj in itertools.product([0, 3, 4, info.max, info.min, -1, -4, -5], [0, 2, 9, -1]):
        low = 0 if idx_dtype.startswith("u") else info.min
        if low <= min(vi, vj) and max(vi, vj) <= info.max:
            for variant in layouts(arr):
                compare(node, [variant, np.asarray(vi, idx_dtype), np.asarray(vj, idx_dtype)],
                        kernel, view_of=0)


def test_subtensor_of_scalar_result_and_zero_step():
    x = T.vector("x")
    i = T.lscalar("i")
    node = x[i].owner
    (out,) = check(node, [np.arange(5.0), np.int64(-2)], view_of=0)
    assert out.shape == ()
    c = T.lscalar("c")
    check_error(x[::c].owner, [np.arange(5.0), np.int64(0)])


# ---------------------------------------------------------------------------
# IncSubtensor


INC_CASES = [  # (index, value type shape, value shape)
    ((slice(1, None), slice(None, None, -1)), (None, None), (2, 4)),
    ((slice(None), 2), (None,), (3,)),
    ((slice(None), 2), (1,), (1,)),
    ((-1,), (), ()),
    ((slice(None, None, 2), slice(1, 3)), (1, None), (1, 2)),
    ((slice(0, 0),), (None,), (4,)),
]


# The arithmetic depends on the dtype: every case in float64, one in the others.
@pytest.mark.parametrize("dtype,cases", [("float64", INC_CASES)] + [
    (d, INC_CASES[:1]) for d in ["float32", "int8", "uint8", "bool", "float16"]])
@pytest.mark.parametrize("set_", [False, True])
def test_inc_subtensor(dtype, cases, set_):
    x = T.tensor(dtype, shape=(None, None), name="x")
    fn = T.set_subtensor if set_ else T.inc_subtensor
    for index, yshape, yval in cases:
        y = T.tensor(dtype, shape=yshape, name="y")
        node = fn(x[index], y).owner
        kernel = cpu_kernel(node)
        for arr in layouts(data((3, 4), dtype)):
            compare(node, [arr, data(yval, dtype, seed=1)], kernel)


def test_inc_subtensor_wraps_integers_and_keeps_nan():
    x = T.tensor("int8", shape=(None,), name="x")
    node = T.inc_subtensor(x[1:], T.tensor("int8", shape=(None,), name="y")).owner
    check(node, [np.array([1, 120, -128], "int8"), np.array([100, -1], "int8")])
    f = T.vector("f")
    node = T.inc_subtensor(f[:2], T.vector("g")).owner
    check(node, [np.array([np.nan, -0.0, 1.0]), np.array([1.0, -0.0])])


def test_inc_subtensor_symbolic_index_and_errors():
    x = T.matrix("x")
    i = T.lscalar("i")
    y = T.vector("y")
    node = T.inc_subtensor(x[i], y).owner
    check(node, [np.zeros((3, 4)), np.arange(4.0), np.int64(-1)])
    check_error(node, [np.zeros((3, 4)), np.arange(4.0), np.int64(3)])
    check_error(node, [np.zeros((3, 4)), np.arange(3.0), np.int64(0)])
    node = T.set_subtensor(x[1:, i], T.vector("v")).owner
    check_error(node, [np.zeros((3, 4)), np.arange(5.0), np.int64(0)])


def test_inc_subtensor_inplace_writes_into_x():
    x = T.matrix("x")
    y = T.tensor("float64", shape=(1,), name="y")
    node = IncSubtensor((FULL_SLICE, 1), inplace=True)(x, y).owner
    kernel = cpu_kernel(node)
    assert kernel.kind == "inplace" and kernel.inplace_of == (0,)
    arr = np.arange(12.0).reshape(3, 4)[:, ::-1]
    want = run_python(node, [arr.copy(), np.array([5.0])])[0]
    (out,) = run_kernel(node, [arr, np.array([5.0])])
    assert out is arr
    np.testing.assert_array_equal(arr, want)


# ---------------------------------------------------------------------------
# AdvancedSubtensor


@pytest.mark.parametrize("dtype,shapes", [("float64", [(5,), (5, 3), (5, 2, 3)])] + [
    (d, [(5, 3)]) for d in ["int32", "bool", "float16"]])
def test_advanced_take_first_axis(dtype, shapes):
    iv = T.lvector("iv")
    for shape in shapes:
        x = T.tensor(dtype, shape=(None,) * len(shape), name="x")
        node = x[iv].owner
        kernel = cpu_kernel(node)
        assert kernel is not None
        for arr in layouts(data(shape, dtype)):
            for idx in [np.array([4, 0, -1, 2, 2]), np.zeros(0, "int64"),
                        np.array([3, -5, 1, 0, 4, 4, 2, 1, 0, 3, 2])[::-2]]:
                compare(node, [arr, idx], kernel)


@pytest.mark.parametrize("idx_dtype", ["int32", "uint8", "int16"])
def test_advanced_index_dtypes_and_matrix_indices(idx_dtype):
    x = T.matrix("x", dtype="float32")
    im = T.tensor(idx_dtype, shape=(None, None), name="im")
    node = x[im].owner
    kernel = cpu_kernel(node)
    idx = np.array([[0, 2], [1, 1], [2, 0]], idx_dtype)
    for arr in layouts(data((3, 4), "float32")):
        compare(node, [arr, idx], kernel)
        compare(node, [arr, idx.T], kernel)


def test_advanced_forms():
    x = T.tensor("float64", shape=(None, None, None), name="x")
    iv, jv = T.lvector("iv"), T.ivector("jv")
    im = T.lmatrix("im")
    s = T.lscalar("s")
    arr = data((3, 4, 5), "float64")
    cases = [
        (x[:, iv], [np.array([3, 0, -1])]),
        (x[:, :, iv], [np.array([4, 0, 1, 1])]),
        (x[iv, jv], [np.array([0, 2, -1]), np.array([3, 0, 1], "int32")]),
        (x[im, jv], [np.array([[0], [2]]), np.array([3, 0, 1], "int32")]),
        (x[:, iv, jv], [np.array([0, 2, -1]), np.array([4, 0, 1], "int32")]),
        (x[iv, 2], [np.array([0, 2, -1])]),
        (x[1, iv], [np.array([0, 2, -1])]),
        (x[iv, s], [np.array([0, 2]), np.int64(-4)]),
        (x[iv, jv, s], [np.array([0, 2]), np.array([1], "int32"), np.int64(4)]),
    ]
    for var, extra in cases:
        node = var.owner
        kernel = cpu_kernel(node)
        assert kernel is not None, node
        for variant in layouts(arr):
            compare(node, [variant] + extra, kernel)
        compare(node, [np.zeros((3, 4, 5))[:0] if node.op.idx_list[0] != slice(None) else
                       np.zeros((0, 4, 5))] + extra, kernel)


def test_advanced_index_errors_match_perform():
    x = T.tensor("float64", shape=(None, None, None), name="x")
    iv, jv = T.lvector("iv"), T.lvector("jv")
    s = T.lscalar("s")
    arr = np.zeros((3, 4, 5))
    cases = [
        (x[iv], [np.array([1, 3])]),
        (x[iv], [np.array([-4])]),
        (x[iv], [np.arange(12) % 5]),  # more than 10 elements: printed as array(...)
        (x[iv, jv], [np.array([0, 1]), np.array([0, 1, 2])]),
        (x[iv, jv], [np.array([5, 7]), np.array([9, 1])]),
        (x[iv, jv], [np.array([1, 1]), np.array([9, 1])]),
        (x[iv, s, jv], [np.array([0, 1]), np.int64(9), np.array([0, 1, 2])]),
        (x[iv, s, jv], [np.array([0, 7]), np.int64(1), np.array([0, 1, 2])]),
        (x[:, iv, 7], [np.zeros(0, "int64")]),
        (x[:, iv], [np.array([5])]),
    ]
    for var, extra in cases:
        node = var.owner
        if len(extra[0]) > 10:
            with pytest.raises(KernelError, match=r"array\(\[0, 1, 2.*axis 0 with size 3"):
                run_kernel(node, [arr] + extra)
            continue
        check_error(node, [arr] + extra)
    # An empty broadcast index checks no element, as NumPy.
    check(x[iv, jv].owner, [arr, np.zeros(0, "int64"), np.array([9])])
    # Even when the result is empty, the indices are checked.
    check_error(x[:, iv].owner, [np.zeros((0, 3, 1)), np.array([5])])


def test_every_advanced_form_has_a_kernel():
    """Masks, non-adjacent arrays and partial slices too (tests in test_index_c_forms);
    only dtypes without a C type (complex) run in Python."""
    x = T.tensor("float64", shape=(None, None, None), name="x")
    iv, jv = T.lvector("iv"), T.lvector("jv")
    mask = T.tensor("bool", shape=(None,), name="mask")
    y = T.vector("y")
    for var in [x[mask], x[iv, :, jv], x[1:, iv], x[iv, ::2],
                T.inc_subtensor(x[iv, :, jv], y), T.set_subtensor(x[mask, 1:], y)]:
        assert cpu_kernel(var.owner) is not None
    z = T.tensor("complex128", shape=(None,), name="z")
    assert cpu_kernel(z[iv].owner) is None


# ---------------------------------------------------------------------------
# AdvancedIncSubtensor


ADV_INC_CASES = [  # (index, value type shape, value shape, index array)
    (("iv",), (None, None), (5, 3), np.array([0, 2, 0, -1, 0])),
    (("iv",), (1, None), (1, 3), np.array([1, 1, 1])),
    (("iv",), (None,), (3,), np.array([2, 0])),
    (("iv",), (), (), np.array([2, 2, 0])),
    ((slice(None), "iv"), (None, None), (4, 3), np.array([1, 1, 2])),
    (("iv", 1), (None,), (4,), np.array([3, 3, 0, 3])),
    (("iv",), (None, None), (0, 3), np.zeros(0, "int64")),
]


@pytest.mark.parametrize("dtype,cases", [("float64", ADV_INC_CASES)] + [
    (d, ADV_INC_CASES[:1]) for d in ["float32", "int16", "uint8", "bool", "float16"]])
@pytest.mark.parametrize("set_", [False, True])
def test_advanced_inc_repeated_indices(dtype, cases, set_):
    x = T.tensor(dtype, shape=(None, None), name="x")
    iv = T.lvector("iv")
    fn = T.set_subtensor if set_ else T.inc_subtensor
    for form, yshape, yval, idx in cases:
        y = T.tensor(dtype, shape=yshape, name="y")
        node = fn(x[tuple(iv if f == "iv" else f for f in form)], y).owner
        kernel = cpu_kernel(node)
        assert kernel is not None
        for arr in layouts(data((4, 3), dtype)):
            for yarr in layouts(data(yval, dtype, seed=2)):
                compare(node, [arr, yarr, idx], kernel)


def test_advanced_inc_pairs_and_errors():
    x = T.matrix("x")
    iv, jv = T.lvector("iv"), T.lvector("jv")
    node = T.inc_subtensor(x[iv, jv], T.vector("y")).owner
    check(node, [np.zeros((3, 4)), np.arange(4.0), np.array([0, 0, 2, 0]),
                 np.array([1, 1, 3, -4])])
    check_error(node, [np.zeros((3, 4)), np.arange(4.0), np.array([0, 0, 2, 0]),
                       np.array([1, 1, 4, 0])])
    check_error(node, [np.zeros((3, 4)), np.arange(3.0), np.array([0, 0, 2, 0]),
                       np.array([1, 1, 3, 0])])
    check_error(node, [np.zeros((3, 4)), np.arange(3.0), np.array([0, 0, 2]),
                       np.array([1, 1])])


def test_advanced_inc_inplace():
    x = T.matrix("x")
    iv = T.lvector("iv")
    y = T.vector("y")
    node = AdvancedIncSubtensor(("?",), inplace=True)(x, y, iv).owner
    kernel = cpu_kernel(node)
    assert kernel.kind == "inplace"
    arr = np.zeros((3, 2))
    want = run_python(node, [arr.copy(), np.array([1.0, 2.0]), np.array([0, 0, 2])])[0]
    (out,) = run_kernel(node, [arr, np.array([1.0, 2.0]), np.array([0, 0, 2])])
    assert out is arr
    np.testing.assert_array_equal(arr, want)
