"""Indexing (symgraph.ops.subtensor, advanced_subtensor): every index form against NumPy,
set/inc_subtensor, nonzero, errors, gradients and infer_shape."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from symgraph.ops.subtensor import IncSubtensor, Subtensor
from tests.ops.op_checks import check_shapes, odd_layouts, run, sample, verify_grad

RNG = np.random.default_rng(11)
DTYPES = ["float32", "float64", "int32", "int64", "bool"]


# -- helpers -----------------------------------------------------------------------

def assert_same(got, want):
    got = np.asarray(got)
    assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want), \
        (got.dtype, got.shape, np.asarray(want).dtype, np.shape(want))
    np.testing.assert_array_equal(got, want)


# -- basic indexing ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_basic_index_forms(dtype):
    x = T.tensor(dtype, shape=(None, None, None))
    i, j = T.lscalar("i"), T.iscalar("j")
    a, b, s = T.lscalars("a", "b", "s")
    cases = [
        (x[1], lambda v: v[1]),
        (x[-1, 0], lambda v: v[-1, 0]),
        (x[1, 2, 3], lambda v: v[1, 2, 3]),
        (x[i, :, j], lambda v: v[2, :, -1]),
        (x[1:], lambda v: v[1:]),
        (x[::-1], lambda v: v[::-1]),
        (x[:, ::-2, 1:-1], lambda v: v[:, ::-2, 1:-1]),
        (x[-2:0:-1, 5:1:-2], lambda v: v[-2:0:-1, 5:1:-2]),
        (x[a:b], lambda v: v[-3:3]),
        (x[:, a:b:s], lambda v: v[:, -3:3:2]),
        (x[b:a:-s], lambda v: v[3:-3:-2]),
        (x[..., 1], lambda v: v[..., 1]),
        (x[1, ...], lambda v: v[1, ...]),
        (x[None], lambda v: v[None]),
        (x[:, None, 1, None, ::2], lambda v: v[:, None, 1, None, ::2]),
        (x[..., None], lambda v: v[..., None]),
        (x[10:], lambda v: v[10:]),
        (x[:], lambda v: v[:]),
        (x[np.int32(1), np.int64(-1)], lambda v: v[1, -1]),
        (x[T.constant(1)], lambda v: v[1]),
    ]
    outs = [c[0] for c in cases]
    base = sample(dtype, (4, 5, 6), RNG)
    for v in odd_layouts(base):
        got = run([x, i, j, a, b, s], outs, v, 2, -1, -3, 3, 2)
        for (_, ref), g in zip(cases, got):
            assert_same(g, ref(v))
    assert all(isinstance(o.owner.op, Subtensor) for o in outs[:13])
    check_shapes(outs, [x, i, j, a, b, s], [base, 2, -1, -3, 3, 2])


def test_basic_static_shapes_and_view():
    x = T.tensor("float64", shape=(4, None, 1))
    assert x[1:3].type.shape == (2, None, 1)
    assert x[::-1, 0].type.shape == (4, 1)
    assert x[T.lscalar():].type.shape == (None, None, 1)
    assert x[None, :, :, 0].type.shape == (1, 4, None)
    assert x[10:].type.shape == (0, None, 1)
    with pytest.raises(IndexError, match="out of bounds.*static size 4"):
        x[4]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(TypeError, match="integer"):
        x[1.5]
    with pytest.raises(TypeError, match="integer"):
        x[T.dscalar()]
    with pytest.raises(ValueError, match="step"):
        x[::0]
    # A view: the output of perform shares the input's memory (0-d results too).
    v = np.arange(8.0).reshape(4, 2, 1)
    for out in (x[1:3, ::-1], x[2, 1, 0]):
        storage = [[None]]
        out.owner.op.perform(out.owner, [v], storage)
        assert np.shares_memory(storage[0][0], v) and isinstance(storage[0][0], np.ndarray)
    assert Subtensor((1,)).view_map == {0: [0]}


def test_basic_odd_sizes_and_out_of_bounds():
    x = T.dmatrix("x")
    i = T.lscalar("i")
    v0 = np.zeros((0, 3))
    got = run([x, i], [x[1:], x[:, 1], x[::-1]], v0, 0)
    assert [g.shape for g in got] == [(0, 3), (0,), (0, 3)]
    v1 = np.ones((1, 1))
    got = run([x, i], [x[0], x[-1:], x[:, i]], v1, 0)
    assert [g.shape for g in got] == [(1,), (1, 1), (1,)]
    with pytest.raises(IndexError, match=r"Subtensor.*index \(5,\).*shape \(2, 3\)"):
        run([x, i], x[i], np.ones((2, 3)), 5)
    with pytest.raises(IndexError, match="Subtensor"):
        run([x, i], x[:, i], np.ones((2, 3)), -4)


def test_shape_indexing():
    x = T.dtensor3("x")
    v = np.zeros((2, 3, 4))
    s = x.shape
    outs = [s[0], s[-1], s[1:], s[::-1], s[T.lscalar("k")]]
    got = run([x, outs[-1].owner.inputs[1]], outs, v, 1)
    assert [np.asarray(g).tolist() for g in got] == [2, 4, [3, 4], [4, 3, 2], 3]


# -- advanced indexing ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_advanced_index_forms(dtype):
    x = T.tensor(dtype, shape=(None, None, None))
    iv, im = T.lvector("iv"), T.imatrix("im")
    i = T.lscalar("i")
    vals = dict(iv=np.array([2, 0, -1, 0]), im=np.array([[0, 1], [3, 3]], "int32"), i=1)
    cases = [
        (x[[0, 2, 2]], lambda v: v[[0, 2, 2]]),
        (x[iv], lambda v: v[vals["iv"]]),
        (x[im], lambda v: v[vals["im"]]),
        (x[1:, [0, 2]], lambda v: v[1:, [0, 2]]),
        (x[:, iv, 1:3], lambda v: v[:, vals["iv"], 1:3]),
        (x[iv, :, iv], lambda v: v[vals["iv"], :, vals["iv"]]),  # not adjacent: first
        (x[:, [0, 1], [1, 2]], lambda v: v[:, [0, 1], [1, 2]]),
        (x[[[0], [1]], [0, 2]], lambda v: v[[[0], [1]], [0, 2]]),  # broadcast
        (x[i, :, iv], lambda v: v[1, :, vals["iv"]]),  # int counts as advanced
        (x[1, iv], lambda v: v[1, vals["iv"]]),
        (x[::-1, [-1, 0], None], lambda v: v[::-1, [-1, 0], None]),
        (x[..., [0, 0]], lambda v: v[..., [0, 0]]),
        (x[[]], lambda v: v[np.array([], dtype="int64")]),
        (x[np.array([3, 1])], lambda v: v[[3, 1]]),
        (x[[i, 0]], lambda v: v[[1, 0]]),
    ]
    outs = [c[0] for c in cases]
    base = sample(dtype, (4, 5, 6), RNG)
    args = [x, iv, im, i]
    for v in odd_layouts(base):
        got = run(args, outs, v, vals["iv"], vals["im"], vals["i"])
        for (_, ref), g in zip(cases, got):
            assert_same(g, ref(v))
    assert all(isinstance(o.owner.op, AdvancedSubtensor) for o in outs[:10])
    check_shapes(outs, args, [base, vals["iv"], vals["im"], vals["i"]])


def test_advanced_static_shapes_and_errors():
    x = T.tensor("float64", shape=(4, None, 3))
    assert x[[0, 1, 1]].type.shape == (3, None, 3)
    assert x[:, T.lmatrix()].type.shape == (4, None, None, 3)
    assert x[T.lvector(), :, T.lvector()].type.shape == (None, None)
    assert x[np.array([True, False, True, True])].type.shape == (3, None, 3)
    with pytest.raises(IndexError, match="out of bounds.*static size 4"):
        x[[0, 4]]
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False])]
    with pytest.raises(TypeError, match="integers or bools"):
        x[np.array([0.5])]
    with pytest.raises(TypeError):
        x[T.dvector()]
    y = T.dmatrix("y")
    iv = T.lvector("iv")
    with pytest.raises(IndexError, match=r"AdvancedSubtensor.*out of bounds.*shape \(2, 3\)"):
        run([y, iv], y[iv], np.ones((2, 3)), [0, 2])
    with pytest.raises(IndexError, match="AdvancedSubtensor"):
        run([y, iv], y[:, iv], np.ones((2, 3)), [-4])
    mask = T.bvector("mask")
    with pytest.raises(IndexError, match="AdvancedSubtensor"):
        run([y, mask], y[T.cast(mask, "bool")], np.ones((2, 3)), np.ones(3, "int8"))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_boolean_masks(dtype):
    x = T.tensor(dtype, shape=(None, None))
    bv = T.tensor("bool", shape=(None,))
    v = sample(dtype, (4, 3), RNG)
    vb = np.array([True, False, True, True])
    cases = [
        (x[x > 0] if dtype != "bool" else x[x], lambda v: v[v > 0] if dtype != "bool" else v[v]),
        (x[bv], lambda v: v[vb]),
        (x[bv, 1:], lambda v: v[vb, 1:]),
        (x[1:, bv[:3]], lambda v: v[1:, vb[:3]]),
        (x[bv, [0, 2, 1]], lambda v: v[vb, [0, 2, 1]]),
        (x[[True, False, False, True]], lambda v: v[[True, False, False, True]]),
    ]
    outs = [c[0] for c in cases]
    assert outs[0].type.shape == (None,) and outs[1].type.shape == (None, None)
    assert outs[5].type.shape[0] == 2
    for arr in odd_layouts(v):
        for (_, ref), g in zip(cases, run([x, bv], outs, arr, vb)):
            assert_same(g, ref(arr))
    check_shapes(outs, [x, bv], [v, vb])
    empty = run([x, bv], x[bv], v, np.zeros(4, bool))
    assert empty.shape == (0, 3)


# -- set_subtensor / inc_subtensor -------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_set_inc_basic(dtype):
    x = T.tensor(dtype, shape=(None, None))
    y = T.tensor(dtype, shape=(None,))
    a = T.lscalar("a")
    vx, vy = sample(dtype, (4, 3), RNG), sample(dtype, (3,), RNG)
    outs = [T.set_subtensor(x[1], y), T.inc_subtensor(x[a], y), T.set_subtensor(x[:, 0], 1),
            T.set_subtensor(x[::-2, a:], y[:2]), T.inc_subtensor(x[1:3], y),
            T.set_subtensor(x[...], y), T.inc_subtensor(x[2, 1], y[0]),
            T.set_subtensor(x[None, 1:2], y)]

    def updated(arr, change):
        out = arr.copy()
        change(out)
        return out

    changes = [lambda r: r.__setitem__(1, vy), lambda r: r.__setitem__(-2, r[-2] + vy),
               lambda r: r.__setitem__((slice(None), 0), 1),
               lambda r: r.__setitem__((slice(None, None, -2), slice(-2, None)), vy[:2]),
               lambda r: r.__setitem__(slice(1, 3), r[1:3] + vy),
               lambda r: r.__setitem__(Ellipsis, vy),
               lambda r: r.__setitem__((2, 1), r[2, 1] + vy[0]),
               lambda r: r.__setitem__(slice(1, 2), vy)]
    for arr in odd_layouts(vx):
        got = run([x, y, a], outs, arr, vy, -2)
        for g, change in zip(got, changes):
            assert_same(g, updated(arr, change))
    assert all(isinstance(o.owner.op, IncSubtensor) for o in outs[:7])
    assert outs[-1].type.shape == (None, None)
    check_shapes(outs, [x, y, a], [vx, vy, -2])


def test_set_inc_input_untouched_and_errors():
    x = T.dmatrix("x")
    y = T.dvector("y")
    vx = np.zeros((2, 3))
    out = T.inc_subtensor(x[0], y)
    run([x, y], out, vx, np.ones(3))
    assert not vx.any()  # the input is never modified
    with pytest.raises(ValueError, match="IncSubtensor.*does not match"):
        run([x, y], out, vx, np.ones(1))
    with pytest.raises(ValueError, match="more than"):
        T.set_subtensor(x[0], T.dmatrix())
    with pytest.raises(TypeError, match="result of indexing"):
        T.set_subtensor(x, y)
    with pytest.raises(TypeError, match="cast"):
        T.set_subtensor(T.lmatrix()[0], y)
    with pytest.raises(ValueError, match="static size"):
        T.set_subtensor(T.tensor("float64", shape=(2, 3))[0], T.tensor("float64", shape=(4,)))
    iy = T.lvector("iy")
    got = run([x, iy], T.set_subtensor(x[1], iy), vx, [1, 2, 3])  # ints into floats: safe
    assert_same(got, np.array([[0, 0, 0], [1, 2, 3.0]]))
    k = T.lscalar("k")
    with pytest.raises(IndexError, match="SetSubtensor.*out of bounds"):
        run([x, y, k], T.set_subtensor(x[k], y), vx, np.ones(3), 2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_set_inc_advanced(dtype):
    x = T.tensor(dtype, shape=(None, None))
    y = T.tensor(dtype, shape=(None, None))
    iv = T.lvector("iv")
    vx, vy = sample(dtype, (4, 3), RNG), sample(dtype, (3, 3), RNG)
    idx = np.array([0, 2, 0])
    outs = [T.inc_subtensor(x[iv], y), T.set_subtensor(x[iv], y),
            T.inc_subtensor(x[[1, 1, 1], [0, 0, 2]], y[0]), T.inc_subtensor(x[:, [2, 2]], 1),
            T.set_subtensor(x[x > 0], 0), T.inc_subtensor(x[iv, 1:], y[:, :2])]
    assert all(isinstance(o.owner.op, AdvancedIncSubtensor) for o in outs)
    want = []
    r = vx.copy(); np.add.at(r, idx, vy); want.append(r)  # noqa: E702
    r = vx.copy(); r[idx] = vy; want.append(r)  # noqa: E702
    r = vx.copy(); np.add.at(r, ([1, 1, 1], [0, 0, 2]), vy[0]); want.append(r)  # noqa: E702
    r = vx.copy(); np.add.at(r, (slice(None), [2, 2]), 1); want.append(r)  # noqa: E702
    r = vx.copy(); r[r > 0] = 0; want.append(r)  # noqa: E702
    r = vx.copy(); np.add.at(r, (idx, slice(1, None)), vy[:, :2]); want.append(r)  # noqa: E702
    for arr in odd_layouts(vx):
        for g, w in zip(run([x, y, iv], outs, arr, vy, idx), want):
            assert_same(g, w)
    # Repeated indices accumulate with inc; with set, the last one wins.
    assert run([x, y, iv], outs[1], vx, vy, idx)[0].tolist() == vy[2].tolist()
    check_shapes(outs, [x, y, iv], [vx, vy, idx])


def test_set_inc_boolean_mask_and_none():
    x = T.dmatrix("x")
    bv = T.tensor("bool", shape=(None,))
    y = T.dvector("y")
    vx = RNG.standard_normal((4, 3))
    vb = np.array([True, False, True, False])
    outs = [T.inc_subtensor(x[bv], y), T.set_subtensor(x[bv, 0], 7.0),
            T.inc_subtensor(x[None, :, 1], y[:4])]
    want = [vx.copy(), vx.copy(), vx.copy()]
    want[0][vb] += np.ones(3)
    want[1][vb, 0] = 7.0
    want[2][:, 1] += np.arange(4.0)
    got = run([x, bv, y], outs[:2], vx, vb, np.ones(3))
    got.append(run([x, y], outs[2], vx, np.arange(4.0)))
    for g, w in zip(got, want):
        assert_same(g, w)
    assert outs[2].ndim == 2


# -- nonzero -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype):
    x = T.tensor(dtype, shape=(None, None))
    v = sample(dtype, (3, 4), RNG)
    nz = T.nonzero(x)
    assert isinstance(nz, tuple) and len(nz) == 2 and all(n.dtype == "int64" for n in nz)
    got = run([x], list(nz) + [T.nonzero(x, return_matrix=True), T.flatnonzero(x),
                               T.nonzero_values(x)], v)
    want = list(np.nonzero(v)) + [np.array(np.nonzero(v)), np.flatnonzero(v), v[v != 0]]
    for g, w in zip(got, want):
        assert_same(g, w)
    assert run([x], nz[0], np.zeros((2, 2), dtype)).shape == (0,)
    check_shapes(list(nz), [x], [v])
    with pytest.raises(ValueError, match="0-d"):
        T.nonzero(T.dscalar())


# -- gradients ---------------------------------------------------------------------

def test_grad_basic_subtensor():
    v = RNG.standard_normal((4, 5))
    verify_grad(lambda a: a[1:3, ::-2], [v])
    verify_grad(lambda a: a[2], [v])
    verify_grad(lambda a: a[-1, 0], [v])
    verify_grad(lambda a: a[None, :, 1:2] * a[0, 0], [v])


def test_grad_advanced_subtensor():
    v = RNG.standard_normal((4, 5))
    verify_grad(lambda a: a[[0, 2, 2, 0]], [v])  # repeated: gradients accumulate
    verify_grad(lambda a: a[1:, [1, 1, 4]], [v])
    verify_grad(lambda a: a[[0, 1, 1], [4, 3, 3]], [v])
    verify_grad(lambda a: a[np.array([True, False, True, True])], [v])
    verify_grad(lambda a: a[a > 0], [v])


def test_grad_set_inc_subtensor():
    vx, vy = RNG.standard_normal((4, 5)), RNG.standard_normal(5)
    verify_grad(lambda a, b: T.set_subtensor(a[1], b), [vx, vy])
    verify_grad(lambda a, b: T.inc_subtensor(a[1:3], b), [vx, vy])  # b broadcasts: summed
    verify_grad(lambda a, b: T.set_subtensor(a[::-2, 1:3], b[:2]), [vx, vy])
    verify_grad(lambda a, b: T.inc_subtensor(a[[0, 2, 0]], b), [vx, vy])
    verify_grad(lambda a, b: T.set_subtensor(a[[0, 2, 1]], b), [vx, vy])
    verify_grad(lambda a, b: T.inc_subtensor(a[:, [1, 1]], b[:4].dimshuffle(0, "x")), [vx, vy])
    verify_grad(lambda a, b: T.set_subtensor(a[a > 0.5], b[0]), [vx, vy])
