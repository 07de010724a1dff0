"""Reshape in native code gives a view exactly where NumPy does, a copy otherwise.

The kernel is of the "view or copy" kind: its view function decides on each
call from the input's strides.  These tests check that decision (and the
view's strides) against ``np.reshape`` on many layouts, then the runtime's
handling of a slot that is a view on some calls and a copy on others: copies
reuse their buffer only while nobody holds it, views never keep their input
alive, and in-place ops never write through a view into a function input.
"""

import gc
import weakref

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native.kernel import VIEW_OR_COPY
from symgraph.graph.destroy import DestroyHandler
from symgraph.ops.shape import Reshape
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from symgraph.backends.cpu.lowerings import cpu_kernel

LINKERS = ["c|py", "c"]


def reshape_node(ndim, dtype="float64", in_ndim=2):
    x = T.tensor(dtype, shape=(None,) * in_ndim, name="x")
    return Reshape(ndim)(x, T.lvector("shp")).owner


def kernel_reshape(arr, new):
    """The native kernel's reshape of ``arr`` to ``new``, checked against perform."""
    node = reshape_node(len(new), str(arr.dtype), arr.ndim)
    (got,) = run_kernel(node, [arr, np.array(new, dtype="int64")])
    (want,) = run_python(node, [arr, np.array(new, dtype="int64")])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return got


def assert_like_numpy(arr, new):
    """The kernel views ``arr`` exactly when NumPy does, with NumPy's strides."""
    got = kernel_reshape(arr, new)
    want = np.reshape(arr, new)
    viewed = np.shares_memory(want, arr)
    assert np.shares_memory(got, arr) == viewed, (arr.shape, arr.strides, new)
    if viewed:
        stepped = [d for d in range(want.ndim) if want.shape[d] > 1]
        assert [got.strides[d] for d in stepped] == [want.strides[d] for d in stepped]
        assert got.ctypes.data == want.ctypes.data
    return got


def test_reshape_kernel_is_view_or_copy():
    kernel = cpu_kernel(reshape_node(1))
    assert kernel.kind == VIEW_OR_COPY and kernel.view_of == (0,)


# ---------------------------------------------------------------------------
# The kernel's decision against NumPy's


def test_contiguous_input_gives_a_view():
    arr = np.arange(24.0).reshape(4, 6)
    got = assert_like_numpy(arr, [2, 3, 4])
    assert np.shares_memory(got, arr)


def test_strided_inputs_that_numpy_can_still_view():
    base = np.arange(96.0).reshape(4, 24)
    cases = [
        (base.T, [2, 12, 4]),                     # Fortran order: split the inner dim
        (base[:, ::2], [4, 3, 4]),                # gapped rows, each row regrouped
        (base[::2, ::3], [2, 2, 4]),              # steps in both dims
        (base[:, ::2][:, None, :], [4, 12]),      # a size-1 dim with any stride
        (base[::-1], [4, 2, 12]),                 # negative strides
        (base[:, ::2], [4, 12]),                  # the same shape: NumPy keeps the strides
    ]
    for arr, new in cases:
        got = assert_like_numpy(arr, new)
        assert np.shares_memory(got, arr), (arr.strides, new)


def test_inputs_that_need_a_copy():
    base = np.arange(24.0).reshape(4, 6)
    for arr, new in [(base.T, [24]), (base[:, :4], [16]), (base.T, [3, 8]),
                     (base[::-1], [-1])]:
        got = assert_like_numpy(arr, new)
        assert not np.shares_memory(got, arr)
        assert got.flags.c_contiguous


def test_minus_one_size_zero_and_size_one_dims():
    arr = np.arange(12.0).reshape(3, 4)
    for new in ([-1], [2, -1], [-1, 1, 3], [1, 1, -1, 1]):
        assert_like_numpy(arr, new)
        assert_like_numpy(arr.T, new)
    empty = np.zeros((0, 3))
    for new in ([3, 0], [5, -1], [0, 1, 5]):
        assert_like_numpy(empty, new)
        assert_like_numpy(np.zeros((3, 0)).T, new)
    one = np.full((1, 1), 4.0)[:, ::-1]
    for new in ([1], [1, 1, 1], []):
        assert_like_numpy(one, new)


def test_random_layouts_against_numpy(rng):
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=rng.integers(1, 5)))
        arr = np.arange(np.prod(shape) * 8, dtype="int32").reshape(
            shape[:-1] + (shape[-1] * 8,))
        steps = tuple(slice(None, None, int(rng.choice([1, 2, -1]))) for _ in shape[:-1]) + \
            (slice(None, None, 8),)
        arr = arr[steps]
        arr = arr.transpose(rng.permutation(arr.ndim))
        sizes = sorted(int(s) for s in rng.integers(1, 4, size=rng.integers(0, 4)))
        new, left = [], arr.size
        for s in sizes:  # a random factorization of the size
            if left % s == 0:
                new.append(s)
                left //= s
        new.insert(int(rng.integers(0, len(new) + 1)), left)
        if rng.random() < 0.3:
            new[int(rng.integers(0, len(new)))] = -1
        assert_like_numpy(arr, new)


@pytest.mark.parametrize("new", [[5, 5], [-1, 5], [-1, -1], [0, -1], [7, -1], [3]])
def test_errors_are_perform_errors(new):
    node = reshape_node(2)
    arr = np.zeros((4, 6))[:, ::-1]  # a layout that would be viewed
    with pytest.raises(ValueError) as py:
        run_python(node, [arr, np.array(new)])
    with pytest.raises(KernelError) as c:
        run_kernel(node, [arr, np.array(new)])
    assert str(c.value) == str(py.value)


# ---------------------------------------------------------------------------
# Through the runtime


def compile_(inputs, outputs, linker="c|py", optimizer="fast_run", **kwargs):
    mode = symgraph.Mode(linker=linker, optimizer=optimizer)
    return symgraph.function(inputs, outputs, mode=mode, **kwargs)


@pytest.mark.parametrize("linker", LINKERS)
def test_runtime_output_is_a_view_of_a_contiguous_input(linker):
    x = T.matrix("x", dtype="float64")
    f = compile_([x], T.reshape(x, (-1,)), linker=linker)
    arr = np.arange(6.0).reshape(2, 3)
    (raw,) = f.native.program.run((arr,))
    assert np.shares_memory(raw, arr)
    (raw,) = f.native.program.run((arr.T,))
    assert not np.shares_memory(raw, arr)
    np.testing.assert_array_equal(raw, arr.T.reshape(-1))
    out = f(arr)                         # the user's copy: never the input itself
    out[0] = 100.0
    assert arr[0, 0] == 0.0


@pytest.mark.parametrize("linker", LINKERS)
def test_runtime_view_of_an_intermediate(linker):
    x = T.matrix("x", dtype="float64")
    y = x * 2.0
    f = compile_([x], [T.reshape(y, (3, 2)), y], linker=linker, optimizer=None)
    arr = np.arange(6.0).reshape(2, 3)
    r, y_val = f(arr)
    np.testing.assert_array_equal(r, (arr * 2).reshape(3, 2))
    assert np.shares_memory(r, y_val)    # as NumPy: a view of the intermediate


@pytest.mark.parametrize("linker", LINKERS)
def test_alternating_view_and_copy_calls_keep_earlier_outputs(linker):
    x = T.matrix("x", dtype="float64")
    flat = T.reshape((x * 2.0).T, (-1,))  # a view when x has one row, else a copy
    f = compile_([x], [flat, flat + 1.0], linker=linker, optimizer=None)
    inputs = [np.arange(6.0).reshape(2, 3), np.arange(3.0).reshape(1, 3),
              np.full((2, 3), 7.0), np.arange(4.0).reshape(1, 4), np.ones((3, 2))] * 3
    kept = []
    for arr in inputs:
        a, b = f(arr)
        kept.append((arr, a, b))
        f(arr[::-1])                     # a call whose outputs nobody holds
    for arr, a, b in kept:
        np.testing.assert_array_equal(a, (arr * 2).T.reshape(-1))
        np.testing.assert_array_equal(b, (arr * 2).T.reshape(-1) + 1)


def test_copy_buffer_is_reused_only_when_nobody_holds_it():
    x = T.matrix("x", dtype="float64")
    flat = T.reshape((x * 2.0).T, (-1,))
    f = compile_([x], flat + 1.0, optimizer=None)
    slot = f.native.slot_of[f.maker.fgraph.outputs[0].owner.inputs[0]]
    arr = np.arange(6.0).reshape(2, 3)
    f(arr)
    address = f.native.program.slot(slot).ctypes.data
    f(arr)
    assert f.native.program.slot(slot).ctypes.data == address
    f(np.arange(3.0).reshape(1, 3))      # a view this time: the slot keeps nothing
    assert f.native.program.slot(slot) is None


def test_a_view_does_not_keep_the_input_alive():
    x = T.matrix("x", dtype="float64")
    f = compile_([x], T.reshape(x, (-1,)) * 2.0, optimizer=None)
    arr = np.arange(6.0).reshape(2, 3)
    ref = weakref.ref(arr)
    np.testing.assert_array_equal(f(arr), np.arange(6.0) * 2)
    del arr
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("linker", LINKERS)
def test_inplace_after_a_reshape_view_never_writes_a_function_input(linker):
    x = T.matrix("x", dtype="float64")
    out = T.reshape(x, (-1,)) + 1.0
    f = compile_([x], out, linker=linker)
    handler = f.maker.fgraph.get_feature(DestroyHandler)
    for node in f.maker.fgraph.apply_nodes:  # the destroy handler allowed no such write
        for inputs in (node.op.destroy_map or {}).values():
            for i in inputs:
                assert handler.view_root(node.inputs[i]) is not f.maker.fgraph.inputs[0]
    for arr in (np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2).T):
        before = arr.copy()
        np.testing.assert_array_equal(f(arr), before.reshape(-1) + 1.0)
        np.testing.assert_array_equal(arr, before)


def test_inplace_after_a_reshape_view_of_a_shared_variable_keeps_it():
    s = symgraph.shared(np.arange(6.0).reshape(2, 3), name="s")
    f = compile_([], T.reshape(s, (-1,)) * 3.0)
    for _ in range(2):
        np.testing.assert_array_equal(f(), np.arange(6.0) * 3)
    np.testing.assert_array_equal(s.get_value(), np.arange(6.0).reshape(2, 3))


def test_inplace_after_a_reshape_view_of_an_intermediate():
    x = T.matrix("x", dtype="float64")
    out = T.exp(T.reshape(x * 2.0, (-1,)))
    f = compile_([x], out)
    for arr in (np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2).T):
        np.testing.assert_allclose(f(arr), np.exp(arr * 2).reshape(-1))


@pytest.mark.parametrize("linker", LINKERS)
def test_runtime_errors_are_unchanged(linker):
    x = T.matrix("x", dtype="float64")
    shp = T.lvector("shp")
    f = compile_([x, shp], T.reshape(x, shp, ndim=2), linker=linker)
    arr = np.zeros((4, 6))
    node = next(n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Reshape))
    with pytest.raises(ValueError) as py:
        run_python(node, [arr, np.array([5, 5])])
    with pytest.raises(ValueError) as c:
        f(arr, np.array([5, 5]))
    assert str(py.value) in str(c.value)
    np.testing.assert_array_equal(f(arr.T, np.array([-1, 4])), arr.T.reshape(-1, 4))


def test_debug_mode_accepts_views_and_copies():
    x = T.matrix("x", dtype="float64")
    y = x * 2.0
    out = [T.reshape(y, (-1,)), T.reshape(y.T, (-1,)), T.reshape(x, (3, -1)) + 1.0]
    f = symgraph.function([x], out, mode="DebugMode")
    for arr in (np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2).T,
                np.arange(6.0).reshape(1, 6)[:, ::-1].reshape(2, 3)):
        a, b, c = f(arr)
        np.testing.assert_array_equal(a, (arr * 2).reshape(-1))
        np.testing.assert_array_equal(b, (arr * 2).T.reshape(-1))
        np.testing.assert_array_equal(c, arr.reshape(3, -1) + 1)
