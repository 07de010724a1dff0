"""In-place Gemm, Gemv and Ger kernels (``inplace=True``) against Python ``perform``.

The kernel is INPLACE: its output is z's own array, so the tests check that
the result lands in z's memory (whatever z's layout: C, transposed, strided,
negative strides), that the other inputs are untouched, that NumPy's special
values survive (beta = 0 with a NaN z), and that the shape checks still run
although the runtime never calls an in-place kernel's shape function.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import symgraph.tensor as T  # noqa: E402
from kernel_harness import KernelError, run_kernel, run_python  # noqa: E402
from symgraph.backends.native.kernel import INPLACE  # noqa: E402
from symgraph.ops.gemm import Gemm, Gemv, Ger  # noqa: E402
from symgraph.backends.cpu.lowerings import cpu_kernel

RTOL = {"float32": 1e-5, "float64": 1e-12}
RNG = np.random.default_rng(4321)
DTYPES = ["float32", "float64", "int32", "int64"]
LAYOUTS = ["c", "f", "strided", "negative"]


def _values(shape, dtype):
    if dtype.startswith("int"):
        return RNG.integers(-9, 10, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _layout(array, how):
    """``array``'s values in another memory layout (same shape and values)."""
    if how == "c" or array.ndim == 0:
        return np.ascontiguousarray(array)
    if how == "f":
        return np.asfortranarray(array)
    if how == "strided":
        big = np.zeros(tuple(2 * s for s in array.shape), dtype=array.dtype)
        view = big[tuple(slice(None, None, 2) for _ in array.shape)]
        view[...] = array
        return view
    flipped = np.ascontiguousarray(array[tuple(slice(None, None, -1) for _ in array.shape)])
    return flipped[tuple(slice(None, None, -1) for _ in array.shape)]


def _node(op_cls, dtype, inplace=True):
    ranks = op_cls.ranks
    return op_cls(inplace=inplace)(*[T.tensor(dtype, shape=(None,) * r) for r in ranks]).owner


def _clone(a):
    """A copy of ``a`` in the same kind of layout (the kernel overwrites z)."""
    a = np.asarray(a)
    if a.ndim == 0 or a.flags.c_contiguous:
        return np.array(a, order="C")
    if a.flags.f_contiguous:
        return np.array(a, order="F")
    # np.array first: _layout may return a view of its argument.
    return _layout(np.array(a), "negative" if any(s < 0 for s in a.strides) else "strided")


def _copies(inputs):
    return [_clone(a) for a in inputs]


def _check_in_place(node, inputs):
    """Run the in-place kernel on copies of ``inputs``: the result must be z's
    memory and equal the out-of-place perform; other inputs stay unchanged."""
    dtype = node.outputs[0].dtype
    expected = run_python(_node(type(node.op), dtype, inplace=False),
                          [np.array(a) for a in inputs])[0]
    args = _copies(inputs)
    z = args[0]
    kept = [np.array(a) for a in args[1:]]
    got = run_kernel(node, args)[0]
    assert got is z
    if dtype in RTOL:
        np.testing.assert_allclose(z, expected, rtol=RTOL[dtype], atol=RTOL[dtype],
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(z, expected)
    for before, after in zip(kept, args[1:]):
        np.testing.assert_array_equal(before, after)
    # The in-place perform writes into its z too, with the same values.
    py_args = _copies(inputs)
    py_out = run_python(node, py_args)[0]
    assert py_out is py_args[0]
    np.testing.assert_allclose(py_out, expected, rtol=RTOL.get(dtype, 0), equal_nan=True)


def test_in_place_ops_declare_what_they_destroy():
    for cls in (Gemm, Gemv, Ger):
        assert cls().destroy_map == {} and cls(inplace=True).destroy_map == {0: [0]}
        assert cls() != cls(inplace=True) and cls(True) == cls(inplace=True)
        assert str(cls()) == cls.__name__ and str(cls(True)) == cls.__name__ + "{inplace}"
        kernel = cpu_kernel(_node(cls, "float64"))
        assert kernel.kind == INPLACE and kernel.inplace_of == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 1, 1), (0, 3, 2), (3, 0, 2), (3, 2, 0),
                                   (5, 3, 1), (1, 3, 4)])
def test_gemm_in_place(dtype, layout, m, k, n):
    node = _node(Gemm, dtype)
    z, x, y = _values((m, n), dtype), _values((m, k), dtype), _values((k, n), dtype)
    other = LAYOUTS[(LAYOUTS.index(layout) + 1) % len(LAYOUTS)]
    for a, b in ((2, 3), (1, 1), (-1, 0), (3, -1)):
        _check_in_place(node, [_layout(z, layout), np.asarray(a, dtype), _layout(x, other),
                               _layout(y, layout), np.asarray(b, dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n", [(3, 4), (1, 1), (0, 3), (3, 0)])
def test_gemv_in_place(dtype, layout, m, n):
    node = _node(Gemv, dtype)
    z, A, x = _values((m,), dtype), _values((m, n), dtype), _values((n,), dtype)
    for a, b in ((2, 3), (1, 1), (-1, 0)):
        _check_in_place(node, [_layout(z, layout), np.asarray(a, dtype), _layout(A, layout),
                               _layout(x, layout), np.asarray(b, dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n", [(3, 4), (1, 1), (0, 3), (3, 0), (4, 1)])
def test_ger_in_place(dtype, layout, m, n):
    node = _node(Ger, dtype)
    z, x, y = _values((m, n), dtype), _values((m,), dtype), _values((n,), dtype)
    for a in (2, 1, -1, 0):
        _check_in_place(node, [_layout(z, layout), np.asarray(a, dtype), _layout(x, layout),
                               _layout(y, layout)])


def test_sgd_shaped_update_writes_straight_into_the_weights():
    """``w - lr * dot(x.T, g)`` with C-contiguous w: beta 1, BLAS writes into w."""
    w, x, g = (_values(s, "float32") for s in ((40, 30), (16, 40), (16, 30)))
    node = _node(Gemm, "float32")
    _check_in_place(node, [w, np.float32(-0.01), x.T, g, np.float32(1)])
    _check_in_place(node, [w.T.copy().T, np.float32(-0.01), x.T, g, np.float32(1)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_place_updates_keep_numpy_special_values(dtype):
    s = lambda v: np.asarray(v, dtype)  # noqa: E731
    z = _values((2, 3), dtype)
    z[0, 0] = np.nan
    z[1, 2] = np.inf
    x, y = _values((2, 4), dtype), _values((4, 3), dtype)
    x[1, 1] = np.inf
    for layout in ("c", "f", "negative"):
        for a, b in ((0, 1), (1, 0), (0, 0), (np.inf, 1), (np.nan, 2), (1, -0.0)):
            _check_in_place(_node(Gemm, dtype), [_layout(z, layout), s(a), x, y, s(b)])
        _check_in_place(_node(Gemm, dtype), [_layout(z, layout), s(np.inf),
                                             np.zeros((2, 0), dtype), np.zeros((0, 3), dtype),
                                             s(1)])
        for a in (0, np.inf, 1):
            _check_in_place(_node(Ger, dtype), [_layout(z, layout), s(a), x[:, 1].copy(),
                                                y[0].copy()])
    for a, b in ((0, 1), (1, 0), (np.inf, 1)):
        _check_in_place(_node(Gemv, dtype), [z[:, 0].copy(), s(a), x, y[:, 0].copy(), s(b)])


def test_in_place_kernels_check_shapes_before_writing():
    x = np.ones((2, 3))
    one = np.asarray(1.0)
    cases = [
        (_node(Gemm, "float64"), [np.ones((2, 2)), one, x, x, one], "not aligned"),
        (_node(Gemm, "float64"), [np.ones((3, 2)), one, x, x.T, one], "z has shape"),
        (_node(Gemv, "int32"), [np.ones(3, "int32"), np.asarray(1, "int32"),
                                np.ones((2, 3), "int32"), np.ones(3, "int32"),
                                np.asarray(1, "int32")], "z has shape"),
        (_node(Ger, "float32"), [np.ones((2, 2), "float32"), np.asarray(1, "float32"),
                                 np.ones(2, "float32"), np.ones(3, "float32")], "z has shape"),
    ]
    for node, inputs, message in cases:
        z_before = inputs[0].copy()
        with pytest.raises(KernelError, match=message):
            run_kernel(node, inputs)
        np.testing.assert_array_equal(inputs[0], z_before)   # nothing written
    with pytest.raises(ValueError, match="z has shape"):
        run_python(_node(Gemm, "float64"), [np.ones((3, 2)), one, x, x.T, one])


def test_float16_in_place_runs_in_python():
    node = _node(Gemm, "float16")
    assert cpu_kernel(node) is None
    z = np.ones((2, 2), "float16")
    out = run_python(node, [z, np.float16(2), z, z, np.float16(1)])[0]
    assert out is z
    np.testing.assert_array_equal(z, np.full((2, 2), 5, "float16"))
