"""Native kernels of the advanced-indexing forms beyond one run of arrays between
full slices (partial and symbolic slices beside arrays, non-adjacent arrays,
boolean masks) and of Nonzero, against their Python ``perform`` and NumPy."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from symgraph.ops.subtensor import SliceSpec
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.native.test_index_c import compare
from tests.native.test_shape_c import check, check_error, data, layouts
from symgraph.backends.cpu.lowerings import cpu_kernel

X = T.tensor("float64", shape=(None, None, None), name="x")
IV, JV = T.lvector("iv"), T.ivector("jv")
A, B, S = T.lscalars("a", "b", "s")
MASK = T.tensor("bool", shape=(None,), name="mask")
M2 = T.tensor("bool", shape=(None, None), name="m2")

I4 = np.array([2, 0, -1, 2])
J4 = np.array([3, 1, 0, -2], "int32")
M3 = np.array([True, False, True])
M4 = np.array([True, False, True, True])
M5 = np.array([True, False, True, True, False])
M34 = data((3, 4), "bool")
M45 = data((4, 5), "bool", seed=3)

# (expression, its index inputs, the same index in NumPy over a value v)
FORMS = [
    (X[1:, IV], [I4[:2]], lambda v: v[1:, I4[:2]]),
    (X[IV, ::2], [I4], lambda v: v[I4, ::2]),
    (X[IV, :, JV], [I4, J4], lambda v: v[I4, :, J4]),
    (X[IV, 1:3, JV], [I4, J4], lambda v: v[I4, 1:3, J4]),
    (X[::-1, IV, A:B], [I4, np.int64(-4), np.int64(4)], lambda v: v[::-1, I4, -4:4]),
    (X[A:, IV, JV], [np.int64(1), I4, J4], lambda v: v[1:, I4, J4]),
    (X[S, :, IV], [np.int64(-1), I4], lambda v: v[-1, :, I4]),
    (X[::S, IV], [np.int64(-2), I4], lambda v: v[::-2, I4]),
    (X[MASK], [M3], lambda v: v[M3]),
    (X[:, MASK], [M4], lambda v: v[:, M4]),
    (X[:, :, MASK], [M5], lambda v: v[:, :, M5]),
    (X[M2], [M34], lambda v: v[M34]),
    (X[:, M2], [M45], lambda v: v[:, M45]),
    (X[MASK, IV], [M3, I4[:2]], lambda v: v[M3, I4[:2]]),
    (X[MASK, :, IV], [M3, I4[:2]], lambda v: v[M3, :, I4[:2]]),
    (X[1, MASK], [M4], lambda v: v[1, M4]),
    (X[1, :, MASK], [M5], lambda v: v[1, :, M5]),
    (X[MASK, 1:, ::-2], [M3], lambda v: v[M3, 1:, ::-2]),
    (X[:, MASK, JV], [M4, J4[:3]], lambda v: v[:, M4, J4[:3]]),
    (X[M2, JV], [M34, J4[:1]], lambda v: v[M34, J4[:1]]),
    (X[IV, :, MASK], [I4[:3], M5], lambda v: v[I4[:3], :, M5]),
]


@pytest.mark.parametrize("k", range(len(FORMS)))
def test_forms_against_perform_and_numpy(k):
    var, extra, ref = FORMS[k]
    node = var.owner
    kernel = cpu_kernel(node)
    assert kernel is not None, node
    for arr in layouts(data((3, 4, 5), "float64")):
        compare(node, [arr] + extra, kernel)
        (got,) = run_kernel(node, [arr] + extra, kernel)
        np.testing.assert_array_equal(got, ref(arr))
        assert got.shape == ref(arr).shape


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "bool", "float16"])
def test_forms_dtypes(dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    for var in [x[IV, :, JV], x[MASK, 1:], x[:, M2]]:
        node = var.owner
        kernel = cpu_kernel(node)
        extra = {IV: I4, JV: J4, MASK: M3, M2: M45}
        for arr in layouts(data((3, 4, 5), dtype)):
            compare(node, [arr] + [extra[v] for v in node.inputs[1:]], kernel)


def test_non_contiguous_and_reversed_indices():
    """Index arrays and masks that are views with odd strides."""
    node = X[IV, 1:, JV].owner
    idx = np.array([[2, 0], [1, 1], [0, 2]])
    jdx = np.array([4, 4, 0, 1, 3], "int32")
    node2 = X[:, M2].owner
    big = np.zeros((8, 10), bool)
    big[::2, ::2] = M45
    for arr in layouts(data((3, 4, 5), "float64")):
        compare(node, [arr, I4[::-1], J4[::-2]], cpu_kernel(node))
        compare(node2, [arr, big[::2, ::2]], cpu_kernel(node2))
        compare(node2, [arr, M45[::-1, ::-1]], cpu_kernel(node2))
    node3 = X[T.lmatrix("im"), :, JV].owner
    for im in (idx, idx.T.copy().T, idx[::-1]):
        compare(node3, [data((3, 4, 5), "float64"), im, jdx[::2][:2]], cpu_kernel(node3))


def test_empty_results():
    cases = [
        (X[MASK], [np.zeros(3, bool)], (3, 4, 5)),
        (X[:, MASK, 1:], [np.zeros(4, bool)], (3, 4, 5)),
        (X[IV, :, JV], [np.zeros(0, "int64"), np.zeros(0, "int32")], (3, 4, 5)),
        (X[IV, 2:2, JV], [I4, J4], (3, 4, 5)),
        (X[M2], [np.zeros((0, 4), bool)], (0, 4, 5)),
        (X[1:, IV], [I4[:2]], (1, 4, 5)),
        (X[:, :, MASK], [M5], (3, 0, 5)),
    ]
    for var, extra, shape in cases:
        node = var.owner
        (got,) = check(node, [data(shape, "float64")] + extra)
        assert got.size == 0


def test_mask_errors_come_first():
    x = X
    arr = np.zeros((3, 4, 5))
    cases = [
        (x[MASK], [M4]),
        (x[:, M2], [np.ones((2, 5), bool)]),
        (x[M2], [np.ones((3, 3), bool)]),
        (x[S, MASK], [np.int64(9), M3]),  # the mask's shape before the int's bounds
        (x[::S, MASK], [np.int64(0), M3]),  # and before a zero step
        (x[MASK, IV], [M3, np.array([0, 1, 2])]),  # counts: 2 vs 3
        (x[M2, IV], [np.eye(3, 3, dtype=bool), np.array([0, 1])]),
        (x[MASK, :, IV], [M3, np.array([9, 1])]),
    ]
    for var, extra in cases:
        check_error(var.owner, [arr] + extra)
    # An empty broadcast checks no element, as NumPy.
    check(x[MASK, IV].owner, [arr, np.zeros(3, bool), np.array([9])])


def test_slice_and_int_errors_left_to_right():
    arr = np.zeros((3, 4, 5))
    cases = [
        (X[::S, A, IV], [np.int64(0), np.int64(9), np.array([0])]),
        (X[A, ::S, IV], [np.int64(9), np.int64(0), np.array([0])]),
        (X[IV, ::S], [np.array([7]), np.int64(0)]),
        (X[IV, A, JV], [np.array([0, 1]), np.int64(9), np.array([0, 1, 2], "int32")]),
        (X[IV, 1:, JV], [np.array([0, 1]), np.array([0, 1, 2], "int32")]),
        (X[IV, 1:, JV], [np.array([0, 7]), np.array([9, 0], "int32")]),
        (X[2:2, IV], [np.array([9])]),  # an empty result still checks the indices
        (X[IV, :, 7], [np.zeros(0, "int64")]),  # ints even when the broadcast is empty
    ]
    for var, extra in cases:
        check_error(var.owner, [arr] + extra)


@pytest.mark.parametrize("dtype,shape", [("int64", (12,)), ("int32", (3, 13)), ("int16", (2, 3, 4)),
                                         ("uint8", (40,)), ("bool", (4, 13)), ("int64", (1500,))])
def test_big_index_printed_as_numpy_repr(dtype, shape):
    """Past 10 elements perform shows repr(): aligned columns, wrapped lines, the
    dtype unless implied, and past 1000 elements a summary and the shape."""
    rng = np.random.default_rng(1)
    index = T.tensor(dtype, shape=(None,) * len(shape), name="index")
    node = T.tensor("float64", shape=(None,) * 3, name="x")[index].owner
    if dtype == "bool":
        arr, value = np.zeros((5, 14, 1)), rng.random(shape) < .5
    else:
        high = 200 if dtype == "uint8" else 4000
        arr = np.zeros((3, 2, 2))
        value = rng.integers(0 if dtype == "uint8" else -high, high, size=shape).astype(dtype)
    with pytest.raises(IndexError) as py:
        run_python(node, [arr, value])
    with pytest.raises(KernelError) as c:
        run_kernel(node, [arr, value])
    text = str(py.value)
    assert "array(" in text
    assert str(c.value) == text[:511]  # (kernel messages stop at 511 bytes)


# ---------------------------------------------------------------------------
# Inc / set


INC_FORMS = [  # (index as a function of the symbols, index inputs)
    (lambda x: x[IV, 1:], [np.array([0, 2, 0, -3])]),
    (lambda x: x[IV, :, JV], [np.array([0, 2, 0]), np.array([4, 1, 4], "int32")]),
    (lambda x: x[1:, IV, ::-2], [np.array([1, 1, 3])]),
    (lambda x: x[MASK], [M3]),
    (lambda x: x[:, M2], [M45]),
    (lambda x: x[MASK, :, IV], [M3, np.array([4, 4])]),
    (lambda x: x[S, :, IV], [np.int64(-1), np.array([0, 0, 2])]),
    (lambda x: x[A:B, IV], [np.int64(-2), np.int64(3), np.array([3, 3])]),
]


def _target_shape(node, arr, extra):
    """The shape of the part of ``arr`` that the update ``node`` indexes."""
    sub = AdvancedSubtensor(node.op.idx_list)(node.inputs[0], *node.inputs[2:]).owner
    return run_python(sub, [arr] + extra)[0].shape


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool", "float16"])
@pytest.mark.parametrize("set_", [False, True])
def test_inc_set_forms(dtype, set_):
    """A value of the indexed shape, and a row that broadcasts over it."""
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    fn = T.set_subtensor if set_ else T.inc_subtensor
    forms = INC_FORMS if dtype == "float64" else INC_FORMS[1:2] + INC_FORMS[4:6]
    arr = data((3, 4, 5), dtype)
    for form, extra in forms:
        for ndim in (form(x).ndim, 1):
            node = fn(form(x), T.tensor(dtype, shape=(None,) * ndim, name="y")).owner
            kernel = cpu_kernel(node)
            yval = data(_target_shape(node, arr, extra)[-ndim:], dtype, seed=4)
            for xarr in layouts(arr):
                for yarr in layouts(yval):
                    compare(node, [xarr, yarr] + extra, kernel)


def test_inc_matches_numpy_add_at_and_set_last_wins():
    node = T.inc_subtensor(X[IV, :, JV], T.dmatrix("y")).owner
    idx, jdx = np.array([0, 2, 0, 0]), np.array([1, 3, 1, 1], "int32")
    arr, y = data((3, 4, 5), "float64"), data((4, 4), "float64", seed=1)
    (got,) = check(node, [arr, y, idx, jdx])
    want = arr.copy()
    np.add.at(want, (idx, slice(None), jdx), y)
    np.testing.assert_allclose(got, want)
    node = T.set_subtensor(X[IV, :, JV], T.dmatrix("y")).owner
    (got,) = check(node, [arr, y, idx, jdx])
    np.testing.assert_array_equal(got[0, :, 1], y[3])
    node = T.inc_subtensor(X[MASK, 1:], T.dvector("y")).owner
    (got,) = check(node, [arr, np.arange(5.0), M3])
    want = arr.copy()
    want[M3, 1:] += np.arange(5.0)
    np.testing.assert_array_equal(got, want)


def test_inc_broadcast_value_over_matrix_index():
    """y broadcast over a 2-d index: every element adds (perform once relied on
    np.add.at broadcasting y itself, which reads garbage there)."""
    x = T.vector("x", dtype="float32")
    im = T.tensor("int16", shape=(None, None), name="im")
    node = T.inc_subtensor(x[im], T.vector("y", dtype="float32")).owner
    idx = np.array([[1, 2, 1], [0, 1, 1], [2, 2, 0]], "int16")
    (got,) = check(node, [np.zeros(3, "float32"), np.array([1, 10, 100], "float32"), idx])
    np.testing.assert_array_equal(got, [101, 211, 21])


def test_inc_set_errors():
    arr = np.zeros((3, 4, 5))
    y = T.dvector("y")
    for fn in (T.inc_subtensor, T.set_subtensor):
        cases = [
            (fn(X[MASK, :, IV], y), [np.arange(3.0), M3, np.array([0, 1, 1])]),
            (fn(X[MASK, :, IV], y), [np.arange(3.0), M4, np.array([0, 1])]),
            (fn(X[IV, 1:], y), [np.arange(5.0), np.array([0, 3])]),
            (fn(X[IV, 1:], y), [np.arange(4.0), np.array([0, 1])]),  # y does not fit
            (fn(X[:, M2], y), [np.arange(2.0), M45]),
            (fn(X[::S, IV], y), [np.arange(2.0), np.int64(0), np.array([0])]),
        ]
        for var, extra in cases:
            check_error(var.owner, [arr] + extra)


def test_inc_inplace_with_mask():
    node = AdvancedIncSubtensor(("?", SliceSpec(1, None, None)), inplace=True)(
        X, T.dvector("y"), MASK).owner
    assert cpu_kernel(node).kind == "inplace"
    arr = data((3, 4, 5), "float64")[:, ::-1]
    want = run_python(node, [arr.copy(), np.arange(5.0), M3])[0]
    (out,) = run_kernel(node, [arr, np.arange(5.0), M3])
    assert out is arr
    np.testing.assert_array_equal(arr, want)


# ---------------------------------------------------------------------------
# Random forms: every kind of entry, values and errors, against perform


def _random_case(rng):
    """(expression, [inputs' values], x's value) for a random advanced index."""
    shape = tuple(int(s) for s in rng.integers(0, 5, size=rng.integers(1, 5)))
    x = T.tensor("float32", shape=(None,) * len(shape), name="x")
    index, values, dim = [], [], 0
    while dim < len(shape):
        kind = rng.choice(["slice", "sslice", "int", "sint", "array", "mask", "end"],
                          p=[.15, .15, .1, .1, .25, .2, .05])
        n = shape[dim]
        if kind == "end":
            break
        if kind == "slice":
            index.append(slice(*[None if rng.random() < .4 else int(v)
                                 for v in rng.integers(-6, 7, size=2)],
                               [None, 1, -1, 2, -3][rng.integers(5)]))
        elif kind == "sslice":
            parts = [T.lscalar(f"p{len(values) + k}") for k in range(3)]
            index.append(slice(*parts))
            values += [np.int64(v) for v in rng.integers(-6, 7, size=3)]
            values[-1] = values[-1] or np.int64(rng.choice([0, 1]))
        elif kind == "int":
            index.append(int(rng.integers(-n, n)) if n else 0)
        elif kind == "sint":
            index.append(T.scalar(f"s{len(values)}", dtype=str(rng.choice(["int64", "int8"]))))
            values.append(np.array(rng.integers(-n - 1, n + 1), index[-1].dtype))
        elif kind == "array":
            dtype = str(rng.choice(["int64", "int32", "uint8", "int16"]))
            ashape = tuple(int(s) for s in rng.choice([1, 2, 3], size=rng.integers(1, 3)))
            index.append(T.tensor(dtype, shape=(None,) * len(ashape), name=f"i{len(values)}"))
            low = 0 if dtype == "uint8" else -n - (rng.random() < .1)
            values.append(rng.integers(low, n + (rng.random() < .1) or 1, size=ashape)
                          .astype(dtype))
        else:
            k = min(int(rng.integers(1, 3)), len(shape) - dim)
            mshape = list(shape[dim:dim + k])
            if rng.random() < .1:
                mshape[-1] += 1
            index.append(T.tensor("bool", shape=(None,) * k, name=f"m{len(values)}"))
            values.append(rng.random(mshape) < .6)
            dim += k - 1
        dim += 1
    if not any(isinstance(i, T.TensorVariable) and i.ndim for i in index):
        index.append(T.lvector(f"i{len(values)}"))
        values.append(np.array([0]))
        if dim >= len(shape):
            return None
    return x[tuple(index)], values, (rng.standard_normal(shape) * 10).astype("float32")


@pytest.mark.parametrize("seed", range(4))
def test_random_forms_against_perform(seed):
    rng = np.random.default_rng(seed)
    done = 0
    while done < 6:
        case = _random_case(rng)
        if case is None:
            continue
        var, values, arr = case
        node = var.owner
        kernel = cpu_kernel(node)
        for variant in layouts(arr):
            compare(node, [variant] + values, kernel)
        # The same index incremented by a row (the error paths included).
        inc = T.inc_subtensor(var, T.tensor("float32", shape=(None,), name="y")).owner
        yval = data(_result_shape(node, arr, values)[-1:], "float32", seed=1)
        compare(inc, [arr, yval] + values, cpu_kernel(inc))
        done += 1


def _result_shape(node, arr, values):
    """The shape perform gives, (1,) when it fails."""
    try:
        return run_python(node, [arr] + values)[0].shape
    except (IndexError, ValueError):
        return (1,)


# ---------------------------------------------------------------------------
# Nonzero


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int8", "uint16", "bool"])
def test_nonzero_dtypes_and_layouts(dtype):
    for shape in [(7,), (3, 4), (2, 3, 4)]:
        x = T.tensor(dtype, shape=(None,) * len(shape), name="x")
        node = T.nonzero(x)[0].owner
        kernel = cpu_kernel(node)
        assert kernel is not None
        arr = data(shape, dtype)
        if dtype != "bool":
            arr[arr > 20] = 0
        for variant in layouts(arr):
            got = run_kernel(node, [variant], kernel)
            want = np.nonzero(variant)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == np.int64
                np.testing.assert_array_equal(g, w)
            check(node, [variant])


def test_nonzero_nan_negative_zero_and_empty():
    x = T.dmatrix("x")
    node = T.nonzero(x)[0].owner
    check(node, [np.array([[np.nan, -0.0, 0.0], [np.inf, 1e-300, -1.0]])])
    for arr in [np.zeros((3, 4)), np.zeros((0, 4)), np.zeros((4, 0))]:
        got = check(node, [arr])
        assert all(g.shape == (0,) for g in got)
