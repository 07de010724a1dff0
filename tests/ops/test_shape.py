"""Shape ops (symgraph.ops.shape, join, alloc): values against NumPy over dtypes and odd
layouts, static shapes, errors, gradients and infer_shape."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.ops.shape import Reshape, Shape_i, SpecifyShape, constant_int
from tests.ops.op_checks import check_shapes, odd_layouts, run, sample, verify_grad

RNG = np.random.default_rng(7)
DTYPES = ["float32", "float64", "int32", "int64", "bool"]


# -- shape, shape_i, specify_shape -------------------------------------------------

def test_shape_and_shape_i():
    x = T.tensor("float64", shape=(None, 3, None))
    s = T.shape(x)
    assert s.dtype == "int64" and s.type.shape == (3,)
    assert isinstance(x.shape[0].owner.op, Shape_i)
    assert constant_int(T.shape_i(x, 1)) == 3 and constant_int(x.shape[-2]) == 3
    v = np.zeros((2, 3, 0))
    got = run([x], [s, x.shape[0], x.shape[2], T.shape_i(x, -1)], v)
    assert got[0].tolist() == [2, 3, 0] and got[0].dtype == np.int64
    assert [int(g) for g in got[1:]] == [2, 0, 0]
    with pytest.raises(IndexError):
        T.shape_i(x, 3)
    with pytest.raises(IndexError):
        x.shape[5]


def test_specify_shape():
    x = T.dmatrix("x")
    y = T.specify_shape(x, (None, 3))
    assert isinstance(y.owner.op, SpecifyShape) and y.type.shape == (None, 3)
    assert T.specify_shape(y, (None, 3)) is y
    v = np.ones((2, 3))
    np.testing.assert_array_equal(run([x], y * 2, v), v * 2)
    with pytest.raises(AssertionError, match=r"SpecifyShape.*\(4, 5\)"):
        run([x], y, np.ones((4, 5)))
    with pytest.raises(ValueError, match="contradicts"):
        T.specify_shape(y, (None, 4))
    with pytest.raises(ValueError, match="dimensions"):
        T.specify_shape(x, (1,))
    n = T.lscalar("n")
    z = T.specify_shape(x, (n, None))
    assert z.type.shape == (None, None)
    assert run([x, n], z, v, 2).shape == (2, 3)
    with pytest.raises(AssertionError):
        run([x, n], z, v, 3)
    check_shapes([y, z], [x, n], [v, 2])
    verify_grad(lambda a: T.specify_shape(a, (2, 3)) * 3, [v])


def test_addbroadcast_unbroadcast_patternbroadcast():
    x = T.dmatrix("x")
    b = T.addbroadcast(x, 0)
    assert b.broadcastable == (True, False)
    assert run([x], b, np.ones((1, 4))).shape == (1, 4)
    with pytest.raises(AssertionError):
        run([x], b, np.ones((2, 4)))
    u = T.unbroadcast(b, 0)
    assert u.broadcastable == (False, False)
    assert T.unbroadcast(x, 0) is x
    p = T.patternbroadcast(b, (False, True))
    assert p.broadcastable == (False, True)
    assert run([x], p, np.ones((1, 1))).shape == (1, 1)
    verify_grad(lambda a: T.unbroadcast(T.addbroadcast(a, 1), 1) * 2, [np.ones((3, 1))])


# -- reshape and flatten -----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_values(dtype):
    x = T.tensor(dtype, shape=(None, None))
    n = T.lscalar("n")
    outs = [T.reshape(x, (3, 4)), x.reshape((2, -1)), x.reshape((n, -1, 2)),
            x.reshape(T.as_tensor_variable(np.array([12]))), x.reshape(x.shape[::-1])]
    assert isinstance(outs[0].owner.op, Reshape) and outs[0].type.shape == (3, 4)
    assert outs[2].type.shape == (None, None, 2)
    base = sample(dtype, (4, 3), RNG)
    for v in odd_layouts(base):
        got = run([x, n], outs, v, 3)
        want = [v.reshape(3, 4), v.reshape(2, -1), v.reshape(3, -1, 2), v.reshape(12),
                v.reshape(3, 4)]
        for g, w in zip(got, want):
            assert g.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(g, w)


def test_reshape_static_and_errors():
    x = T.tensor("float64", shape=(4, 6))
    assert x.reshape((-1, 3)).type.shape == (8, 3)
    assert x.reshape((2, 3, 4)).type.shape == (2, 3, 4)
    with pytest.raises(ValueError, match="cannot reshape"):
        x.reshape((5, 5))
    with pytest.raises(ValueError, match="more than one -1"):
        x.reshape((-1, -1))
    y = T.dmatrix("y")
    with pytest.raises(ValueError, match=r"Reshape.*cannot reshape.*\(2, 3\).*\(4, 2\)"):
        run([y], y.reshape((4, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="ndim"):
        T.reshape(y, T.lvector("s"))
    s = T.lvector("s")
    out = T.reshape(y, s, ndim=3)
    assert out.ndim == 3
    np.testing.assert_array_equal(run([y, s], out, np.arange(6.).reshape(2, 3), [3, 1, 2]),
                                  np.arange(6.).reshape(3, 1, 2))


def test_reshape_size_zero_and_scalar():
    x = T.dmatrix("x")
    got = run([x], [x.reshape((0, 5)), x.reshape((-1, 5))], np.zeros((0, 3)))
    assert got[0].shape == (0, 5) and got[1].shape == (0, 5)
    s = T.dscalar("s")
    assert run([s], s.reshape((1, 1)), 2.0).shape == (1, 1)
    v = T.dvector("v")
    assert run([v], v.reshape(()), np.array([3.0])).shape == ()


def test_reshape_infer_shape_and_grad():
    x = T.dmatrix("x")
    n = T.lscalar("n")
    v = RNG.standard_normal((4, 6))
    outs = [x.reshape((n, -1)), x.reshape((-1, n)), x.reshape((3, 8)), x.reshape((24,))]
    check_shapes(outs, [x, n], [v, 2])
    verify_grad(lambda a: a.reshape((3, 8)), [v])
    verify_grad(lambda a: a.reshape((-1,)), [v])


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_flatten(ndim):
    x = T.tensor3("x", dtype="float64")
    v = RNG.standard_normal((2, 3, 4))
    out = T.flatten(x, ndim)
    assert out.ndim == ndim
    want = v.reshape(v.shape[:ndim - 1] + (-1,))
    for arr in odd_layouts(v):
        np.testing.assert_array_equal(run([x], out, arr), want)
    empty_shape = {1: (0,), 2: (2, 0), 3: (2, 0, 4)}[ndim]
    assert run([x], x.flatten(ndim), np.zeros((2, 0, 4))).shape == empty_shape
    check_shapes(out, [x], [v])
    verify_grad(lambda a: T.flatten(a, ndim), [v])
    s = T.tensor("float64", shape=(2, 3, 4))
    assert T.flatten(s, 2).type.shape == (2, 12)
    with pytest.raises(ValueError):
        T.flatten(x, 4)


# -- axes ------------------------------------------------------------------------------

def test_transpose_swapaxes_squeeze_expand_dims():
    x = T.tensor("float64", shape=(None, 1, None))
    v = RNG.standard_normal((2, 1, 3))
    outs = [T.transpose(x), x.T, x.transpose(1, 0, 2), T.swapaxes(x, 0, -1), T.squeeze(x),
            T.expand_dims(x, (0, -1)), T.shape_padleft(x, 2), T.shape_padright(x),
            T.shape_padaxis(x, 1)]
    want = [v.transpose(), v.T, v.transpose(1, 0, 2), np.swapaxes(v, 0, -1), np.squeeze(v, 1),
            np.expand_dims(v, (0, -1)), v[None, None], v[..., None], v[:, None]]
    for g, w in zip(run([x], outs, v), want):
        np.testing.assert_array_equal(g, w)
    assert T.squeeze(x).ndim == 2
    y = T.dmatrix("y")
    sq = T.squeeze(y, axis=0)
    assert run([y], sq, np.ones((1, 3))).shape == (3,)
    with pytest.raises(AssertionError):
        run([y], sq, np.ones((2, 3)))
    with pytest.raises(ValueError):
        T.transpose(y, (0, 0))
    with pytest.raises(IndexError):
        T.swapaxes(y, 0, 2)


# -- concatenate, stack, split ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate_values(dtype):
    a = T.tensor(dtype, shape=(None, None))
    b = T.tensor(dtype, shape=(None, None))
    va, vb = sample(dtype, (2, 3), RNG), sample(dtype, (4, 3), RNG)
    for arr in odd_layouts(va):
        got = run([a, b], [T.concatenate([a, b]), T.concatenate([a, b[:2, ::-1]], axis=-1)],
                  arr, vb)
        np.testing.assert_array_equal(got[0], np.concatenate([arr, vb]))
        np.testing.assert_array_equal(got[1], np.concatenate([arr, vb[:2, ::-1]], axis=1))
        assert got[0].dtype == np.dtype(dtype)


def test_concatenate_upcast_static_and_errors():
    a = T.tensor("int32", shape=(2, None))
    b = T.tensor("float32", shape=(3, 4))
    c = T.concatenate([a, b])
    assert c.dtype == "float64" and c.type.shape == (5, 4)
    assert T.concatenate([b]) is b
    got = run([a, b], c, np.ones((2, 4), "int32"), np.zeros((3, 4), "float32"))
    np.testing.assert_array_equal(got, np.concatenate([np.ones((2, 4)), np.zeros((3, 4))]))
    m = T.dmatrix("m")
    with pytest.raises(ValueError, match="input 1.*dimension 1"):
        run([m], T.concatenate([m, m[:, 1:]]), np.ones((2, 3)))
    with pytest.raises(ValueError):
        T.concatenate([m, T.dvector("v")])
    with pytest.raises(IndexError):
        T.concatenate([m, m], axis=2)
    with pytest.raises(ValueError, match="static sizes"):
        T.concatenate([b, T.tensor("float32", shape=(3, 5))])
    z = run([m], T.concatenate([m, m[:0]]), np.ones((2, 3)))
    assert z.shape == (2, 3)
    assert T.join(1, m, m).type.shape == (None, None)


def test_concatenate_infer_shape_and_grad():
    a, b, c = T.dmatrices("a", "b", "c")
    va, vb, vc = (RNG.standard_normal((2, 3)), RNG.standard_normal((4, 3)),
                  RNG.standard_normal((2, 1)))
    outs = [T.concatenate([a, b, a]), T.concatenate([a, c], axis=1)]
    check_shapes(outs, [a, b, c], [va, vb, vc])
    verify_grad(lambda x, y: T.concatenate([x, y, x]), [va, vb])
    verify_grad(lambda x, y: T.concatenate([x, y], axis=1), [va, vc])


def test_stack():
    x, y = T.dvectors("x", "y")
    vx, vy = RNG.standard_normal(3), RNG.standard_normal(3)
    outs = [T.stack([x, y]), T.stack([x, y], axis=1), T.stack([x, y], axis=-1),
            T.stack(x, y)]
    want = [np.stack([vx, vy]), np.stack([vx, vy], 1), np.stack([vx, vy], -1),
            np.stack([vx, vy])]
    for g, w in zip(run([x, y], outs, vx, vy), want):
        np.testing.assert_array_equal(g, w)
    s, i = T.dscalar("s"), T.iscalar("i")
    v = T.stack([s, i, 2])
    assert v.type.shape == (3,) and v.dtype == "float64"
    np.testing.assert_array_equal(run([s, i], v, 1.5, 4), [1.5, 4.0, 2.0])
    lv = T.stack([i, 3])  # Python numbers promote weakly
    assert lv.dtype == "int32" and run([i], lv, 7).tolist() == [7, 3]
    assert run([i], T.as_tensor_variable([i, 3]), 7).tolist() == [7, 3]
    check_shapes(outs[:2] + [v], [x, y, s, i], [vx, vy, 1.5, 4])
    verify_grad(lambda a, b: T.stack([a, b], axis=1), [vx, vy])
    verify_grad(lambda a, b: T.stack([a, b, a]), [np.array(1.5), np.array(-2.0)])
    with pytest.raises(ValueError):
        T.stack([x, T.dmatrix()])


def test_split():
    x = T.dmatrix("x")
    v = RNG.standard_normal((5, 3))
    parts = T.split(x, [2, 0, 3], 3)
    assert len(parts) == 3 and parts[0].type.shape == (2, None)
    got = run([x], parts, v)
    for g, w in zip(got, np.split(v, [2, 2])):
        np.testing.assert_array_equal(g, w)
    sizes = T.lvector("sizes")
    cols = T.split(x, sizes, 2, axis=1)
    got = run([x, sizes], cols, v, [1, 2])
    np.testing.assert_array_equal(got[1], v[:, 1:])
    with pytest.raises(ValueError, match="do not add up"):
        run([x, sizes], cols, v, [1, 1])
    check_shapes(cols, [x, sizes], [v, [1, 2]])
    verify_grad(lambda a: T.split(a, [2, 3], 2)[1] * 2, [v])
    verify_grad(lambda a: T.split(a, [2, 3], 2)[0].sum() + T.split(a, [2, 3], 2)[1].sum() * 2,
                [v])


# -- alloc, zeros, ones, eye, arange ---------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_alloc_values(dtype):
    row = T.tensor(dtype, shape=(1, None))
    n = T.lscalar("n")
    out = T.alloc(row, 2, n, 3)
    assert out.type.shape == (2, None, 3) and out.dtype == dtype
    v = sample(dtype, (1, 3), RNG)
    got = run([row, n], out, v, 4)
    np.testing.assert_array_equal(got, np.broadcast_to(v, (2, 4, 3)))
    got[0, 0, 0] = got[1, 1, 1]  # a fresh, writable array
    assert run([row, n], out, v, 0).shape == (2, 0, 3)


def test_alloc_errors_shapes_grad():
    v = T.dvector("v")
    with pytest.raises(ValueError, match="Alloc.*not declared broadcastable"):
        run([v], T.alloc(v, 2, 3), np.ones(1))
    with pytest.raises(ValueError, match="more than"):
        T.alloc(T.dmatrix(), 3)
    with pytest.raises(ValueError, match="static shape"):
        T.alloc(T.tensor("float64", shape=(3,)), 2, 4)
    n = T.lscalar("n")
    with pytest.raises(ValueError, match="negative"):
        run([v, n], T.alloc(v, n, 3), np.ones(3), -1)
    vv = RNG.standard_normal(3)
    check_shapes(T.alloc(v, n, 3), [v, n], [vv, 2])
    assert T.alloc(0.0, T.shape(T.dmatrix())).ndim == 2
    verify_grad(lambda a: T.alloc(a, 2, 3), [vv])
    verify_grad(lambda a: T.alloc(a, 4, 3), [RNG.standard_normal((1, 3))])
    verify_grad(lambda a: T.alloc(a, 2, 3), [np.array(1.5)])


def test_zeros_ones_eye():
    from symgraph.config import config

    n = T.lscalar("n")
    x = T.dmatrix("x")
    z, o = T.zeros((2, n)), T.ones(x.shape, dtype="int32")
    assert z.dtype == config.floatX and o.dtype == "int32" and T.zeros(3).ndim == 1
    got = run([n, x], [z, o], 3, np.empty((4, 1)))
    np.testing.assert_array_equal(got[0], np.zeros((2, 3)))
    np.testing.assert_array_equal(got[1], np.ones((4, 1), "int32"))
    k = T.lscalar("k")
    outs = [T.eye(3), T.eye(n, 4, k), T.eye(2, dtype="int64")]
    assert outs[0].type.shape == (3, 3) and outs[2].dtype == "int64"
    got = run([n, k], outs, 2, -1)
    np.testing.assert_array_equal(got[1], np.eye(2, 4, -1))
    np.testing.assert_array_equal(got[2], np.eye(2, dtype="int64"))
    check_shapes(outs[1], [n, k], [2, 1])


def test_arange():
    from symgraph.config import config

    assert T.arange(5).dtype == "int64" and T.arange(5).type.shape == (5,)
    assert T.arange(0.5).dtype == config.floatX
    assert T.arange(T.iscalar()).dtype == "int32"
    assert T.arange(0, T.fscalar(), 1).dtype == "float32"
    a, b, s = T.lscalars("a", "b", "s")
    f = T.dscalar("f")
    outs = [T.arange(a), T.arange(a, b), T.arange(a, b, s), T.arange(f, b, 0.5)]
    for args in [(0, 5, 1), (5, 0, -2), (2, 2, 1), (-3, 4, 3), (4, -3, -1)]:
        va, vb, vs = args
        got = run([a, b, s, f], outs, va, vb, vs, 0.25)
        want = [np.arange(va), np.arange(va, vb), np.arange(va, vb, vs),
                np.arange(0.25, vb, 0.5)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w)
        check_shapes(outs, [a, b, s, f], [va, vb, vs, 0.25])
    with pytest.raises(ValueError, match="step"):
        run([a, s], T.arange(0, a, s), 3, 0)
    verify_grad(lambda start, step: T.arange(start, 3.0, step) ** 2,
                [np.array(0.3), np.array(0.7)])


# -- tile, repeat, roll ----------------------------------------------------------------

def test_tile_repeat_roll():
    x = T.dmatrix("x")
    v = RNG.standard_normal((2, 3))
    r = T.lscalar("r")
    outs = [T.tile(x, (2, 3)), T.tile(x, (2, 1, 2)), T.tile(x, (r, 1)), T.repeat(x, 2, 0),
            T.repeat(x, r, 1), T.repeat(x, 3), T.roll(x, 1, 1), T.roll(x, -4, 0),
            T.roll(x, r), T.roll(x, r, 1)]
    want = [np.tile(v, (2, 3)), np.tile(v, (2, 1, 2)), np.tile(v, (2, 1)), np.repeat(v, 2, 0),
            np.repeat(v, 2, 1), np.repeat(v, 3), np.roll(v, 1, 1), np.roll(v, -4, 0),
            np.roll(v, 2), np.roll(v, 2, 1)]
    assert outs[0].type.shape == (None, None)
    for g, w in zip(run([x, r], outs, v, 2), want):
        np.testing.assert_array_equal(g, w)
    st = T.tensor("float64", shape=(2, 3))
    assert T.tile(st, (2, 2)).type.shape == (4, 6)
    np.testing.assert_array_equal(run([x, r], T.roll(x, r, 0), np.zeros((0, 3)), 5),
                                  np.zeros((0, 3)))
    verify_grad(lambda a: T.tile(a, (2, 2)), [v])
    verify_grad(lambda a: T.repeat(a, 2, 1), [v])
    verify_grad(lambda a: T.roll(a, 1, 0), [v])
