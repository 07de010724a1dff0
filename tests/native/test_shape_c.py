"""Native kernels of the shape ops against their Python ``perform``.

Views must alias their input; compute kernels must write every element (the
harness hands them garbage-filled outputs); every error path gives perform's
exception kind and message word for word.
"""

import re

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.backends.native.assemble import C_SRC
from symgraph.ops.alloc import ARange, Eye
from symgraph.ops.join import Join, MakeVector, Split
from symgraph.ops.shape import Reshape, Shape_i, SpecifyShape, Unbroadcast
from symgraph.tensor.basic import constant
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from symgraph.backends.cpu.lowerings import cpu_kernel

DTYPES = ["float64", "float32", "float16", "int64", "int32", "uint8", "bool"]
#: One dtype per element size: enough for kernels that only move bytes.
MOVE_DTYPES = ["float64", "int32", "float16", "bool"]

_assert = re.search(r"#define SG_ERR_ASSERTION (\d+)", (C_SRC / "sg_kernel.h").read_text())
#: The kernel error kind each exception of perform maps to.
KINDS = [(AssertionError, int(_assert.group(1)) if _assert else 1), (IndexError, 2),
         (ValueError, 1), (TypeError, 3)]


def data(shape, dtype, seed=0):
    """Distinct-ish values of ``dtype`` (bools alternate)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    return (rng.random(shape) * 100 - (0 if dtype.startswith("uint") else 50)).astype(dtype)


def layouts(arr):
    """``arr`` as C-contiguous, Fortran, negative-stride and gapped (step 2) arrays
    holding the same values."""
    arr = np.asarray(arr)
    if arr.ndim == 0:  # (ascontiguousarray would make it 1-d)
        yield arr
        return
    yield np.ascontiguousarray(arr)
    yield np.asfortranarray(arr)
    flipped = np.flip(arr).copy()
    yield np.flip(flipped)
    big = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), dtype=arr.dtype)
    big[..., ::2] = arr
    yield big[..., ::2]


def inside(out, base):
    """True when ``out``'s bytes lie inside ``base``'s buffer."""
    if out.size == 0:
        return True
    lo, hi = np.lib.array_utils.byte_bounds(out)
    blo, bhi = np.lib.array_utils.byte_bounds(base)
    return blo <= lo and hi <= bhi


def check(node, inputs, view_of=None):
    """Kernel outputs equal perform's (same dtype, shape and values); views alias
    their input ``view_of``."""
    inputs = [np.asarray(i) for i in inputs]
    got = run_kernel(node, inputs)
    want = run_python(node, inputs)
    for g, w, var in zip(got, want, node.outputs):
        assert g.dtype == w.dtype == np.dtype(var.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_array_equal(g, w)
        if view_of is not None and g.size:
            assert np.shares_memory(g, inputs[view_of]) and inside(g, inputs[view_of])
    return got


def check_error(node, inputs):
    """The kernel fails as perform does: same exception kind and message."""
    inputs = [np.asarray(i) for i in inputs]
    with pytest.raises(Exception) as py:
        run_python(node, inputs)
    with pytest.raises(KernelError) as c:
        run_kernel(node, inputs)
    kind = next(k for exc, k in KINDS if isinstance(py.value, exc))
    assert (c.value.kind, str(c.value)) == (kind, str(py.value))


def consts(node):
    return [np.asarray(v.data) for v in node.inputs]


# ---------------------------------------------------------------------------
# Views


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_dimshuffle_views_over_layouts(dtype):
    x = T.tensor(dtype, shape=(None, 1, None), name="x")
    node = x.dimshuffle(2, "x", 0).owner
    for arr in layouts(data((3, 1, 4), dtype)):
        (out,) = check(node, [arr], view_of=0)
        assert out.strides[0] == arr.strides[2]


@pytest.mark.parametrize("shape", [(0, 1, 3), (2, 1, 0), (1, 1, 1)])
def test_dimshuffle_odd_sizes(shape):
    x = T.tensor("float64", shape=(None, 1, None), name="x")
    for order in [(2, 0), ("x", 0, "x", 2, 1), (1, 0, 2), (0, 2)]:
        check(x.dimshuffle(*order).owner, [data(shape, "float64")], view_of=0)


def test_dimshuffle_of_scalar_and_to_scalar():
    s = T.scalar("s", dtype="int32")
    check(s.dimshuffle("x", "x").owner, [np.int32(7)], view_of=0)
    x = T.tensor("float32", shape=(1, 1), name="x")
    check(x.dimshuffle().owner, [np.ones((1, 1), "float32")], view_of=0)


def test_dimshuffle_drop_of_wrong_size_fails():
    x = T.tensor("float64", shape=(None, 1), name="x")
    node = x.dimshuffle(0).owner
    # The type says 1; a wrong run-time size is reported like perform does.
    check_error(node, [np.zeros((2, 3))])


def test_unbroadcast_and_specify_shape_are_views():
    x = T.tensor("int32", shape=(1, None), name="x")
    node = Unbroadcast([0])(x).owner
    for arr in layouts(data((1, 5), "int32")):
        check(node, [arr], view_of=0)
    y = T.matrix("y")
    n = T.scalar("n", dtype="int64")
    node = SpecifyShape((None, "?"))(y, n).owner
    for arr in layouts(data((3, 4), "float64")):
        check(node, [arr, np.int64(4)], view_of=0)


@pytest.mark.parametrize("pattern,extra,shape", [
    ((None, "?"), [np.int64(5)], (3, 4)),
    ((2, None), [], (3, 4)),
    (("?",), [np.int32(2)], (3,)),
    ((None, 3, "?"), [np.int64(1)], (0, 3, 2)),
])
def test_specify_shape_mismatch_message(pattern, extra, shape):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    sizes = [T.scalar(f"s{i}", dtype=str(e.dtype)) for i, e in enumerate(extra)]
    node = SpecifyShape(pattern)(x, *sizes).owner
    check_error(node, [np.zeros(shape)] + extra)


@pytest.mark.parametrize("axis", [0, 1])
def test_split_views(axis):
    x = T.matrix("x", dtype="float32")
    sizes = T.lvector("sizes")
    node = Split(3, axis)(x, sizes)[0].owner
    for arr in layouts(data((5, 6) if axis == 0 else (6, 5), "float32")):
        outs = check(node, [arr, np.array([2, 0, 3])], view_of=0)
        assert [o.shape[axis] for o in outs] == [2, 0, 3]
    check(node, [np.zeros((0, 0), "float32"), np.array([0, 0, 0])], view_of=0)


def test_split_errors():
    x = T.matrix("x")
    node = Split(2, 1)(x, T.lvector("sizes"))[0].owner
    check_error(node, [np.zeros((2, 5)), np.array([1, 2, 2])])
    check_error(node, [np.zeros((2, 5)), np.array([1, 2])])
    check_error(node, [np.zeros((2, 5)), np.array([6, -1])])


# ---------------------------------------------------------------------------
# Shapes


def test_shape_and_shape_i():
    x = T.tensor("uint8", shape=(None, None, None), name="x")
    for shape in [(2, 0, 5), (1, 1, 1), (7, 3, 2)]:
        arr = np.zeros(shape, "uint8")
        check(T.shape(x).owner, [arr])
        for i in range(3):
            check(Shape_i(i)(x).owner, [arr])
    check(T.shape(T.scalar("s")).owner, [np.float64(3)])


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "float16"])
def test_reshape_views_where_numpy_does_and_copies_otherwise(dtype):
    x = T.tensor(dtype, shape=(None, None), name="x")
    shp = T.lvector("shp")
    node = Reshape(3)(x, shp).owner
    for arr in layouts(data((4, 6), dtype)):
        for new in ([2, 3, 4], [-1, 3, 2], [2, -1, 1], [24, 1, 1], [1, 1, -1], [4, 1, 6]):
            (got,) = check(node, [arr, np.array(new)])
            numpy_views = np.shares_memory(np.reshape(arr, new), arr)
            assert np.shares_memory(got, arr) == numpy_views, (arr.strides, new)
            if numpy_views:
                assert inside(got, arr)


def test_reshape_zero_sizes_and_scalars():
    x = T.matrix("x")
    node = Reshape(2)(x, T.lvector("shp")).owner
    check(node, [np.zeros((0, 3)), np.array([3, 0])])
    check(node, [np.zeros((0, 3)), np.array([5, -1])])
    to_scalar = Reshape(0)(x, T.lvector("shp")).owner
    check(to_scalar, [np.full((1, 1), 4.0), np.zeros(0, "int64")])
    from_scalar = Reshape(2)(T.scalar("s"), T.lvector("shp")).owner
    check(from_scalar, [np.float64(2.5), np.array([1, -1])])


@pytest.mark.parametrize("new", [[5, 5], [-1, 5], [-1, -1], [0, -1], [-1, 0], [7, -1],
                                 [2 ** 62, 4], [3]])
def test_reshape_errors(new):
    node = Reshape(2)(T.matrix("x"), T.lvector("shp")).owner
    check_error(node, [np.zeros((4, 6)), np.array(new)])
    node32 = Reshape(2)(T.matrix("x"), T.ivector("shp")).owner
    if len(new) != 2 and new[0] < 2 ** 31:
        check_error(node32, [np.zeros((4, 6)), np.array(new, "int32")])


# ---------------------------------------------------------------------------
# New arrays


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_alloc_broadcasts_value(dtype):
    v = T.tensor(dtype, shape=(1, None), name="v")
    a, b, c = T.lscalar("a"), T.lscalar("b"), T.lscalar("c")
    node = T.alloc(v, a, b, c).owner
    for arr in layouts(data((1, 4), dtype)):
        for sizes in [(2, 3, 4), (0, 1, 4), (1, 0, 4)]:
            check(node, [arr] + [np.int64(s) for s in sizes])


def test_alloc_scalar_and_errors():
    s = T.scalar("s", dtype="float32")
    a, b = T.lscalar("a"), T.lscalar("b")
    node = T.alloc(s, a, b).owner
    check(node, [np.float32(1.5), np.int64(3), np.int64(5)])
    check(node, [np.float32(-0.0), np.int64(0), np.int64(5)])
    check_error(node, [np.float32(1), np.int64(3), np.int64(-1)])
    v = T.vector("v")
    node = T.alloc(v, a, b).owner
    check(node, [np.arange(4.0)[::-1], np.int64(2), np.int64(4)])
    check_error(node, [np.arange(3.0), np.int64(2), np.int64(4)])


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "bool", "float16"])
def test_eye(dtype):
    n, m, k = T.lscalar("n"), T.lscalar("m"), T.iscalar("k")
    node = Eye(dtype)(n, m, k).owner
    for shape in [(3, 3), (2, 5), (5, 2), (0, 3), (1, 1)]:
        for diag in [0, 1, -1, 4, -7]:
            check(node, [np.int64(shape[0]), np.int64(shape[1]), np.int32(diag)])
    check_error(node, [np.int64(-1), np.int64(3), np.int32(0)])
    check(node, [np.int64(2), np.int64(3), np.int32(-2 ** 31)])


ARANGE_CASES = [
    # (start, stop, step) dtypes and values: NumPy's length and fill rules.
    ("float64", (0.0, 1.0, 0.1)), ("float64", (1.0, 0.0, -0.3)), ("float64", (0.0, 0.0, 1.0)),
    ("float32", (0.0, 1.0, 0.1)), ("float32", (-2.5, 2.5, 0.7)), ("float32", (0.0, 1.0, 1e-7)),
    ("float16", (0.0, 1.0, 0.1)), ("int64", (0, 10, 3)), ("int64", (10, 0, -3)),
    ("int64", (0, 10, -1)), ("int32", (-5, 5, 2)), ("int8", (100, -100, -7)),
    ("uint8", (5, 250, 11)), ("int16", (0, 3, 5)),
]


@pytest.mark.parametrize("dtype,values", ARANGE_CASES)
def test_arange_matches_numpy(dtype, values):
    start, stop, step = (T.scalar(n, dtype=dtype) for n in "abc")
    node = ARange(dtype)(start, stop, step).owner
    check(node, [np.asarray(v, dtype=dtype) for v in values])


@pytest.mark.parametrize("in_dtypes,out_dtype", [
    (("int64", "int64", "int64"), "float32"), (("float64", "float64", "float64"), "int64"),
    (("int32", "float32", "int64"), "float64"), (("float32", "float32", "float32"), "float16"),
    (("float16", "float16", "float16"), "float32"), (("uint8", "uint8", "uint8"), "int16"),
])
def test_arange_mixed_dtypes(in_dtypes, out_dtype):
    start, stop, step = (T.scalar(n, dtype=d) for n, d in zip("abc", in_dtypes))
    node = ARange(out_dtype)(start, stop, step).owner
    for values in [(0, 7, 1), (1, 20, 3), (3, 0, 1), (5, 9, 4)]:
        check(node, [np.asarray(v, dtype=d) for v, d in zip(values, in_dtypes)])
    if in_dtypes[2] != "uint8":
        check(node, [np.asarray(v, dtype=d) for v, d in zip((0, 9, 2.5 if "float" in
                                                                in_dtypes[2] else 2), in_dtypes)])


def test_arange_errors():
    start, stop, step = (T.dscalar(n) for n in "abc")
    node = ARange("float64")(start, stop, step).owner
    check_error(node, [np.float64(0), np.float64(5), np.float64(0)])
    check_error(node, [np.float64(0), np.float64(np.nan), np.float64(1)])
    check_error(node, [np.float64(0), np.float64(np.inf), np.float64(1)])
    for stop in [-np.inf, 1e300, 9e18]:
        check_error(node, [np.float64(0), np.float64(stop), np.float64(1)])
    for values in [(0, 1, np.inf), (0, -1, np.inf), (0, 1, -np.inf), (1e-300, 2e-300, 1e300),
                   (0, 0, np.inf)]:
        check(node, [np.float64(v) for v in values])
    node32 = ARange("float32")(*(T.fscalar(n) for n in "abc")).owner
    for values in [(0, 1e-30, 1e30), (0, -1e-30, 1e30)]:
        check(node32, [np.float32(v) for v in values])


def test_arange_bool_and_complex_stay_in_python():
    for dtype in ["bool", "complex128"]:
        s = T.scalar("s", dtype=dtype)
        node = ARange(dtype)(s, s, s).owner
        assert cpu_kernel(node) is None


# ---------------------------------------------------------------------------
# Joins


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "bool", "float16"])
def test_make_vector(dtype):
    scalars = [T.scalar(f"s{i}", dtype=dtype) for i in range(3)]
    node = MakeVector(dtype)(*scalars).owner
    check(node, [data((), dtype, seed=i) for i in range(3)])
    one = MakeVector(dtype)(scalars[0]).owner
    check(one, [data((), dtype)])


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_join_any_axis_and_layout(dtype, axis):
    xs = [T.tensor(dtype, shape=(None,) * 3, name=n) for n in "abc"]
    node = Join(axis)(*xs).owner
    base = [2, 3, 4]
    arrays = []
    for i, size in enumerate([1, 0, 3]):
        shape = list(base)
        shape[axis] = size
        arrays.append(data(tuple(shape), dtype, seed=i))
    for variant in zip(*[list(layouts(a)) for a in arrays]):
        check(node, list(variant))


def test_join_errors():
    a, b = T.matrix("a"), T.matrix("b")
    node = Join(1)(a, b).owner
    check_error(node, [np.zeros((2, 3)), np.zeros((3, 3))])
    node = Join(0)(a, b, T.matrix()).owner
    check_error(node, [np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 4))])


def test_complex_has_no_kernel():
    z = T.tensor("complex128", shape=(None, None), name="z")
    for node in [z.dimshuffle(1, 0).owner, T.shape(z).owner,
                 Join(0)(z, z).owner, T.alloc(constant(np.complex64(1)), 2).owner]:
        assert cpu_kernel(node) is None
