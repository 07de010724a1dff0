"""Native Dot, Gemm, Gemv and Ger kernels against their Python ``perform``.

Dtypes, every rank combination, transposed, strided, negative-stride and
broadcast (zero-stride) operands, size-0 and size-1 dims, NumPy's special
values (alpha = 0 with an Inf product, beta = 0 with a NaN z, Inf alpha with
an empty inner dimension), output layouts other than C-contiguous, and the
copy-free path for transposed contiguous operands.
"""

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import symgraph.tensor as T  # noqa: E402
from kernel_harness import (KernelError, SgArray, SgError, describe,  # noqa: E402
                            compile_kernel, run_kernel, run_python)
from symgraph.backends.cpu.blas import support as blas_support  # noqa: E402
from symgraph.backends.native.kernel import CKernel  # noqa: E402
from symgraph.backends.cpu.support_lib import load_support  # noqa: E402
from symgraph.ops.blas import Dot  # noqa: E402
from symgraph.ops.gemm import Gemm, Gemv, Ger  # noqa: E402
from symgraph.backends.cpu.lowerings import cpu_kernel

RTOL = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}
RNG = np.random.default_rng(1234)


def _values(shape, dtype):
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return RNG.integers(-9 if dtype.startswith("int") else 0, 10, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _check(node, inputs, dtype=None):
    got = run_kernel(node, inputs)[0]
    expected = run_python(node, inputs)[0]
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    dtype = dtype or str(expected.dtype)
    if dtype in RTOL:
        np.testing.assert_allclose(got, expected, rtol=RTOL[dtype], atol=RTOL[dtype],
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def _layout(array, how):
    """``array``'s values in another memory layout (same shape and values)."""
    if how == "c" or array.ndim == 0:
        return np.ascontiguousarray(array)
    if how == "f":   # a transposed contiguous array
        return np.asfortranarray(array)
    if how == "strided":   # every other element of a bigger array
        big = np.zeros(tuple(2 * s for s in array.shape), dtype=array.dtype)
        big[tuple(slice(None, None, 2) for _ in array.shape)] = array
        return big[tuple(slice(None, None, 2) for _ in array.shape)]
    if how == "negative":
        flipped = np.ascontiguousarray(array[tuple(slice(None, None, -1) for _ in array.shape)])
        return flipped[tuple(slice(None, None, -1) for _ in array.shape)]
    raise ValueError(how)


def _other(layout):
    """Another layout than ``layout`` (so that operands of one call differ)."""
    return LAYOUTS[(LAYOUTS.index(layout) + 1) % len(LAYOUTS)]


def _var(dtype, ndim):
    return T.tensor(dtype, shape=(None,) * ndim)


LAYOUTS = ["c", "f", "strided", "negative"]
RANKS = {"mm": ((3, 4), (4, 5)), "mv": ((3, 4), (4,)), "vm": ((4,), (4, 5)), "vv": ((4,), (4,))}


# -- Dot ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16", "bool",
                                   "int8", "uint16"])
@pytest.mark.parametrize("ranks", sorted(RANKS))
def test_dot_dtypes_and_ranks(dtype, ranks):
    xs, ys = RANKS[ranks]
    node = Dot()(_var(dtype, len(xs)), _var(dtype, len(ys))).owner
    _check(node, [_values(xs, dtype), _values(ys, dtype)])


@pytest.mark.parametrize("x_layout", ["c", "f", "strided", "negative"])
@pytest.mark.parametrize("y_layout", ["c", "f", "strided", "negative"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_dot_matrix_layouts(x_layout, y_layout, dtype):
    node = Dot()(_var(dtype, 2), _var(dtype, 2)).owner
    x, y = _values((5, 3), dtype), _values((3, 6), dtype)
    _check(node, [_layout(x, x_layout), _layout(y, y_layout)])


@pytest.mark.parametrize("layout", ["c", "f", "strided", "negative"])
@pytest.mark.parametrize("ranks", ["mv", "vm", "vv"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_dot_vector_layouts(layout, ranks, dtype):
    xs, ys = RANKS[ranks]
    node = Dot()(_var(dtype, len(xs)), _var(dtype, len(ys))).owner
    _check(node, [_layout(_values(xs, dtype), layout), _layout(_values(ys, dtype), layout)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_dot_broadcast_operands(dtype):
    """Zero strides (np.broadcast_to) are copied before BLAS reads them."""
    node = Dot()(_var(dtype, 2), _var(dtype, 2)).owner
    x = np.broadcast_to(_values((1, 4), dtype), (3, 4))
    y = np.broadcast_to(_values((4, 1), dtype), (4, 5))
    _check(node, [x, y])
    node = Dot()(_var(dtype, 2), _var(dtype, 1)).owner
    _check(node, [x, np.broadcast_to(_values((), dtype), (4,))])


@pytest.mark.parametrize("shapes", [((0, 4), (4, 5)), ((3, 0), (0, 5)), ((3, 4), (4, 0)),
                                    ((0, 0), (0, 0)), ((1, 1), (1, 1)), ((1, 4), (4, 1)),
                                    ((3, 1), (1, 5)), ((0,), (0,)), ((3, 0), (0,)),
                                    ((0,), (0, 2)), ((1,), (1,)), ((1,), (1, 1))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_dot_size_zero_and_one(shapes, dtype):
    xs, ys = shapes
    node = Dot()(_var(dtype, len(xs)), _var(dtype, len(ys))).owner
    _check(node, [_values(xs, dtype), _values(ys, dtype)])


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int32", "float32"),
                                    ("float16", "float32"), ("int32", "int64"),
                                    ("bool", "int32"), ("uint8", "int8")])
@pytest.mark.parametrize("ranks", sorted(RANKS))
def test_dot_mixed_dtypes(dtypes, ranks):
    xs, ys = RANKS[ranks]
    node = Dot()(_var(dtypes[0], len(xs)), _var(dtypes[1], len(ys))).owner
    _check(node, [_values(xs, dtypes[0]), _values(ys, dtypes[1])])


def test_dot_integer_overflow_wraps_as_numpy():
    node = Dot()(_var("int32", 2), _var("int32", 2)).owner
    x = np.full((2, 3), 2**30, dtype="int32")
    _check(node, [x, x.T.copy()])
    node = Dot()(_var("int8", 1), _var("int8", 1)).owner
    _check(node, [np.full(5, 100, "int8"), np.full(5, 120, "int8")])


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_special_values(dtype):
    node = Dot()(_var(dtype, 2), _var(dtype, 2)).owner
    x = _values((3, 4), dtype)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    _check(node, [x, _values((4, 2), dtype)])


def test_dot_bigger_than_blocking():
    """Sizes past the BLAS's internal blocking, transposed operands."""
    node = Dot()(_var("float64", 2), _var("float64", 2)).owner
    x, y = RNG.standard_normal((300, 257)), RNG.standard_normal((150, 257))
    _check(node, [x, y.T])
    _check(node, [x.T.copy().T, np.asfortranarray(y.T)])


def test_dot_complex_has_no_kernel():
    node = Dot()(_var("complex128", 2), _var("complex128", 2)).owner
    assert cpu_kernel(node) is None


@pytest.mark.parametrize("ranks", sorted(RANKS))
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_dot_shape_mismatch_is_a_value_error(ranks, dtype):
    xs, ys = RANKS[ranks]
    node = Dot()(_var(dtype, len(xs)), _var(dtype, len(ys))).owner
    bad = (5,) + ys[1:]
    with pytest.raises(KernelError, match="not aligned") as info:
        run_kernel(node, [_values(xs, dtype), _values(bad, dtype)])
    assert info.value.kind == 1   # SG_ERR_VALUE


# -- output layouts other than C-contiguous --------------------------------------------

def _run_into(node, inputs, out):
    """Run ``node``'s kernel with ``out`` (any layout) as its output array."""
    kernel = cpu_kernel(node)
    lib = compile_kernel(kernel)
    in_desc = (SgArray * len(inputs))(*[describe(np.asarray(x)) for x in inputs])
    out_desc = (SgArray * 1)(describe(out))
    err = SgError()
    if lib.k_run(in_desc, out_desc, ctypes.byref(err)):
        raise KernelError(err.kind, err.msg.decode())
    return out


@pytest.mark.parametrize("layout", ["f", "strided", "negative"])
@pytest.mark.parametrize("ranks", ["mm", "mv"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_dot_into_other_output_layouts(layout, ranks, dtype):
    xs, ys = RANKS[ranks]
    node = Dot()(_var(dtype, len(xs)), _var(dtype, len(ys))).owner
    x, y = _values(xs, dtype), _values(ys, dtype)
    expected = run_python(node, [x, y])[0]
    out = _layout(np.full(expected.shape, 7, dtype=dtype), layout)
    _run_into(node, [x, y], out)
    np.testing.assert_allclose(out, expected, rtol=RTOL[dtype])


# -- the copy-free path ----------------------------------------------------------------

def _prep_probe(T):
    """A kernel reporting how sg_bmat_*_prep describes in[0]: (no copy, trans, ld)."""
    p = "s" if T == "float" else "d"
    source = f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)in; (void)err; out_shapes[0] = 3; return 0;
}}
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    sg_bmat_{p} op;
    if (sg_bmat_{p}_prep(in[0].data, in[0].shape[0], in[0].shape[1], in[0].strides[0],
                         in[0].strides[1], &op, err)) return 1;
    int64_t *o = (int64_t *)out[0].data;
    o[0] = op.work == NULL; o[1] = op.trans; o[2] = op.ld;
    free(op.work);
    return 0;
}}
"""
    return CKernel(source=source, support=blas_support.typed_support(T),
                   symbols=blas_support.blas_symbols(T))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transposed_contiguous_operands_are_not_copied(dtype):
    T_ = "float" if dtype == "float32" else "double"
    probe = T.shape(_var(dtype, 2)).owner    # any node with one int64 vector output
    kernel = _prep_probe(T_)

    def prep(array):
        return tuple(run_kernel(probe, [array], kernel=kernel)[0])

    a = np.zeros((5, 7), dtype)
    assert prep(a) == (1, ord("N"), 7)
    assert prep(a.T) == (1, ord("T"), 7)             # F-contiguous (7, 5): no copy
    assert prep(np.zeros((9, 7), dtype)[:5]) == (1, ord("N"), 7)
    assert prep(np.zeros((5, 9), dtype)[:, :7]) == (1, ord("N"), 9)   # row stride 9
    assert prep(np.zeros((9, 5), dtype)[:7].T) == (1, ord("T"), 5)
    assert prep(a[::2]) == (1, ord("N"), 14)
    assert prep(a[:, ::2])[:2] == (0, ord("N"))       # copied
    assert prep(a[::-1])[:2] == (0, ord("N"))         # negative strides: copied
    assert prep(np.broadcast_to(np.zeros(7, dtype), (5, 7)))[0] == 0
    assert prep(np.zeros((1, 7), dtype)) == (1, ord("N"), 7)
    assert prep(np.zeros((5, 1), dtype)[::-1]) == (0, ord("N"), 1)


def test_unset_blas_pointer_is_a_runtime_error():
    node = Dot()(_var("float64", 2), _var("float64", 2)).owner
    compile_kernel(cpu_kernel(node))
    # the BLAS helpers, and so their pointers, are in the shared support library
    pointer = ctypes.c_void_p.in_dll(load_support(), "sg_blas_dgemm")
    saved = pointer.value
    pointer.value = None
    try:
        with pytest.raises(KernelError, match="dgemm") as info:
            run_kernel(node, [np.ones((2, 2)), np.ones((2, 2))])
        assert info.value.kind == 5   # SG_ERR_RUNTIME
    finally:
        pointer.value = saved
    _check(node, [np.ones((2, 2)), np.ones((2, 2))])


# -- Gemm, Gemv, Ger ------------------------------------------------------------------------

def _scalar(value, dtype):
    return np.asarray(value, dtype=dtype)


def _gemm_node(dtype):
    return Gemm()(_var(dtype, 2), _var(dtype, 0), _var(dtype, 2), _var(dtype, 2),
                  _var(dtype, 0)).owner


def _gemv_node(dtype):
    return Gemv()(_var(dtype, 1), _var(dtype, 0), _var(dtype, 2), _var(dtype, 1),
                  _var(dtype, 0)).owner


def _ger_node(dtype):
    return Ger()(_var(dtype, 2), _var(dtype, 0), _var(dtype, 1), _var(dtype, 1)).owner


UPDATE_DTYPES = ["float32", "float64", "int32", "int64"]


@pytest.mark.parametrize("dtype", UPDATE_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 1, 1), (0, 3, 2), (3, 0, 2), (3, 2, 0)])
def test_gemm(dtype, layout, m, k, n):
    node = _gemm_node(dtype)
    z, x, y = _values((m, n), dtype), _values((m, k), dtype), _values((k, n), dtype)
    for a, b in ((2, 3), (1, 1), (-1, 0)):
        _check(node, [_layout(z, layout), _scalar(a, dtype), _layout(x, layout),
                      _layout(y, _other(layout)), _scalar(b, dtype)])


@pytest.mark.parametrize("dtype", UPDATE_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n", [(3, 4), (1, 1), (0, 3), (3, 0)])
def test_gemv(dtype, layout, m, n):
    node = _gemv_node(dtype)
    z, A, x = _values((m,), dtype), _values((m, n), dtype), _values((n,), dtype)
    for a, b in ((2, 3), (1, 1), (-1, 0)):
        _check(node, [_layout(z, layout), _scalar(a, dtype), _layout(A, layout),
                      _layout(x, layout), _scalar(b, dtype)])


@pytest.mark.parametrize("dtype", UPDATE_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n", [(3, 4), (1, 1), (0, 3), (3, 0)])
def test_ger(dtype, layout, m, n):
    node = _ger_node(dtype)
    z, x, y = _values((m, n), dtype), _values((m,), dtype), _values((n,), dtype)
    for a in (2, 1, -1):
        _check(node, [_layout(z, layout), _scalar(a, dtype), _layout(x, layout),
                      _layout(y, layout)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_updates_keep_numpy_special_values(dtype):
    """alpha = 0 times an Inf product, beta = 0 times a NaN z, and an Inf alpha
    with an empty inner dimension give NaN, as NumPy computes them."""
    s = lambda v: _scalar(v, dtype)  # noqa: E731
    z = _values((2, 3), dtype)
    z[0, 0] = np.nan
    x, y = _values((2, 4), dtype), _values((4, 3), dtype)
    x[1, 1] = np.inf
    gemm = _gemm_node(dtype)
    for a, b in ((0, 1), (1, 0), (0, 0), (np.inf, 1), (np.nan, 2)):
        _check(gemm, [z, s(a), x, y, s(b)])
    _check(gemm, [z, s(np.inf), np.zeros((2, 0), dtype), np.zeros((0, 3), dtype), s(1)])
    gemv = _gemv_node(dtype)
    for a, b in ((0, 1), (1, 0), (np.inf, 1)):
        _check(gemv, [z[:, 0].copy(), s(a), x, y[:, 0].copy(), s(b)])
    _check(gemv, [z[:, 0].copy(), s(np.inf), np.zeros((2, 0), dtype), np.zeros(0, dtype),
                  s(1)])
    ger = _ger_node(dtype)
    for a in (0, np.inf, 1):
        _check(ger, [z, s(a), x[:, 1].copy(), y[0].copy()])


def test_update_kernels_check_shapes():
    x = np.ones((2, 3))
    with pytest.raises(KernelError, match="not aligned"):
        run_kernel(_gemm_node("float64"), [np.ones((2, 2)), _scalar(1, "float64"), x, x,
                                           _scalar(1, "float64")])
    with pytest.raises(KernelError, match="z has shape"):
        run_kernel(_gemm_node("float64"), [np.ones((3, 2)), _scalar(1, "float64"), x, x.T,
                                           _scalar(1, "float64")])
    with pytest.raises(KernelError, match="z has shape"):
        run_kernel(_gemv_node("int32"), [np.ones(3, "int32"), _scalar(1, "int32"),
                                         np.ones((2, 3), "int32"), np.ones(3, "int32"),
                                         _scalar(1, "int32")])
    with pytest.raises(KernelError, match="z has shape"):
        run_kernel(_ger_node("float32"), [np.ones((2, 2), "float32"), _scalar(1, "float32"),
                                          np.ones(2, "float32"), np.ones(3, "float32")])


def test_update_kernels_for_other_dtypes():
    """float16 runs in Python (None); 16-bit integers have loops."""
    assert cpu_kernel(_gemm_node("float16")) is None
    node = _gemm_node("int16")
    big = np.full((2, 2), 300, "int16")
    _check(node, [big, _scalar(7, "int16"), big, big, _scalar(-5, "int16")])


@pytest.mark.parametrize("layout", ["f", "strided"])
@pytest.mark.parametrize("maker", [_gemm_node, _gemv_node, _ger_node])
def test_updates_into_other_output_layouts(layout, maker):
    node = maker("float64")
    ndims = [i.ndim for i in node.inputs]
    shapes = {"Gemm": [(3, 5), (), (3, 4), (4, 5), ()], "Gemv": [(3,), (), (3, 4), (4,), ()],
              "Ger": [(3, 4), (), (3,), (4,)]}[type(node.op).__name__]
    inputs = [_values(s, "float64") for s in shapes]
    assert [len(s) for s in shapes] == ndims
    expected = run_python(node, inputs)[0]
    out = _layout(np.full(expected.shape, 7.0), layout)
    _run_into(node, inputs, out)
    # The inputs come from the module's shared generator (their values follow the
    # test order), so an element can cancel to near zero; the BLAS and NumPy round
    # its products differently (fused multiply-adds), by ulps of the operands (~1).
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


# -- BatchedDot -----------------------------------------------------------------------------

BATCHED = {   # nbatch, x shape, y shape, x static shape, y static shape
    "mm": (1, (3, 2, 4), (3, 4, 5), (None,) * 3, (None,) * 3),
    "mv": (1, (3, 2, 4), (3, 4), (None,) * 3, (None,) * 2),
    "vm": (1, (3, 4), (3, 4, 5), (None,) * 2, (None,) * 3),
    "vv": (1, (3, 4), (3, 4), (None,) * 2, (None,) * 2),
    "broadcast x": (1, (1, 2, 4), (3, 4, 5), (1, None, None), (None,) * 3),
    "broadcast y": (2, (2, 3, 2, 4), (2, 1, 4), (None,) * 4, (None, 1, None)),
    "both broadcast": (1, (1, 2, 4), (1, 4, 5), (1, None, None), (1, None, None)),
    "empty batch": (1, (0, 2, 4), (0, 4, 5), (None,) * 3, (None,) * 3),
    "empty core": (1, (3, 2, 0), (3, 0, 5), (None,) * 3, (None,) * 3),
}


@pytest.mark.parametrize("case", sorted(BATCHED))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["c", "strided", "negative", "f"])
def test_batched_dot(case, dtype, layout):
    from symgraph.ops.blas import BatchedDot

    nbatch, xs, ys, xstatic, ystatic = BATCHED[case]
    x, y = T.tensor(dtype, shape=xstatic), T.tensor(dtype, shape=ystatic)
    node = BatchedDot(nbatch)(x, y).owner
    _check(node, [_layout(_values(xs, dtype), layout), _layout(_values(ys, dtype), layout)])


def test_batched_dot_other_dtypes_run_in_python():
    from symgraph.ops.blas import BatchedDot

    node = BatchedDot(1)(_var("int32", 3), _var("int32", 3)).owner
    assert cpu_kernel(node) is None


def test_batched_dot_batch_mismatch_is_a_value_error():
    from symgraph.ops.blas import BatchedDot

    node = BatchedDot(1)(_var("float64", 3), _var("float64", 3)).owner
    with pytest.raises(KernelError, match="batch dimension 0"):
        run_kernel(node, [np.ones((2, 2, 3)), np.ones((3, 3, 2))])
