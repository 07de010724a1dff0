"""Linear algebra (symgraph.ops.blas): dot, matmul, tensordot, batched_dot and
outer against NumPy over ranks and dtypes; errors; gradients; shapes; R_op."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import blas
from tests.helpers import check_infer_shape

TOL = {"float32": 1e-4, "float64": 1e-10}


def values(dtype, shape, rng):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5, 5, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def var(dtype, ndim, name=None):
    return T.tensor(dtype, shape=(None,) * ndim, name=name)


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        tol = TOL[str(want.dtype)]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def verify_grad(fn, vals):
    from symgraph.gradient import verify_grad as vg

    vg(fn, vals, rng=np.random.default_rng(0))


# Shapes for every rank pair (0-d to 3-d) that np.dot accepts.
DOT_SHAPES = [((), ()), ((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)),
              ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 5, 3), (3,)), ((3,), (2, 3, 4)),
              ((2, 5, 3), (3, 4)), ((5, 3), (2, 3, 4)), ((2, 5, 3), (4, 3, 2))]


@pytest.mark.parametrize("xd, yd", [("float32", "float32"), ("float64", "float64"),
                                    ("int32", "int32"), ("int64", "int64"),
                                    ("float32", "float64"), ("int32", "float32")])
def test_dot_values_and_dtypes(xd, yd, rng):
    for xs, ys in DOT_SHAPES:
        x, y = var(xd, len(xs), "x"), var(yd, len(ys), "y")
        out = T.dot(x, y)
        vx, vy = values(xd, xs, rng), values(yd, ys, rng)
        want = np.dot(vx, vy)
        assert out.dtype == np.result_type(vx, vy).name
        close(symgraph.function([x, y], out)(vx, vy), np.asarray(want, dtype=out.dtype))


def test_dot_uses_dot_op_for_matrices_and_vectors():
    m, v = T.dmatrix(), T.dvector()
    for a, b in [(m, m), (m, v), (v, m), (v, v)]:
        assert isinstance(T.dot(a, b).owner.op, blas.Dot)
    assert T.dot(v, v).ndim == 0
    assert T.dot(m, v).type.shape == (None,)
    assert T.dot(T.tensor("float64", shape=(2, 3)), T.tensor("float64", shape=(3, 5))) \
        .type.shape == (2, 5)
    assert isinstance((m @ m).owner.op, blas.Dot)


def test_dot_odd_layouts_and_sizes(rng):
    x, y = T.dmatrix("x"), T.dmatrix("y")
    f = symgraph.function([x, y], T.dot(x, y))
    base = rng.normal(size=(6, 8))
    for vx, vy in [(base[::2, ::-1], base.T[::-1, :3]),
                   (base.T[:3], base[:, 1:5]),
                   (np.zeros((0, 3)), np.zeros((3, 4))),
                   (np.zeros((2, 0)), np.zeros((0, 4))),
                   (np.ones((1, 1)), np.ones((1, 5)))]:
        close(f(vx, vy), np.dot(vx, vy))
    v = T.dvector("v")
    close(symgraph.function([v], T.dot(v, v))(np.zeros(0)), np.float64(0.0))


def test_dot_shape_errors():
    x, y = T.dmatrix("x"), T.dmatrix("y")
    f = symgraph.function([x, y], T.dot(x, y))
    with pytest.raises(ValueError, match=r"Dot.*\(2, 3\).*\(4, 5\)"):
        f(np.ones((2, 3)), np.ones((4, 5)))
    a, b = T.dtensor3("a"), T.dtensor3("b")
    f = symgraph.function([a, b], T.dot(a, b))
    with pytest.raises(ValueError, match=r"TensorDot.*\(2, 3, 4\).*\(2, 5, 6\)"):
        f(np.ones((2, 3, 4)), np.ones((2, 5, 6)))
    with pytest.raises(ValueError, match="not aligned"):
        T.dot(T.tensor("float64", shape=(2, 3)), T.tensor("float64", shape=(4, 2)))
    with pytest.raises(TypeError, match="1-d or 2-d"):
        blas.Dot()(T.dtensor3(), T.dmatrix())


def test_tensordot_values(rng):
    cases = [((2, 3, 4), (3, 4, 5), 2), ((2, 3, 4), (4, 5), 1), ((2, 3), (4, 5), 0),
             ((2, 3, 4), (4, 3, 2), [[1, 2], [1, 0]]), ((2, 3, 4), (5, 4, 2), [[-1, 0], [1, 2]]),
             ((3, 4), (4, 3), [[0, 1], [1, 0]]), ((3,), (3,), [[0], [0]]), ((), (3,), 0),
             ((3, 4), (3,), [0, 0])]
    for xs, ys, axes in cases:
        x, y = var("float64", len(xs)), var("float64", len(ys))
        vx, vy = values("float64", xs, rng), values("float64", ys, rng)
        got = symgraph.function([x, y], T.tensordot(x, y, axes))(vx, vy)
        close(got, np.asarray(np.tensordot(vx, vy, axes)))


def test_tensordot_errors():
    x, y = T.dtensor3(), T.dmatrix()
    with pytest.raises(ValueError, match="tensordot"):
        T.tensordot(x, y, 3)
    with pytest.raises(ValueError, match="paired"):
        T.tensordot(x, y, [[0, 1], [0]])
    with pytest.raises(ValueError, match="out of range"):
        T.tensordot(x, y, [[3], [0]])
    with pytest.raises(ValueError, match="repeated"):
        T.tensordot(x, y, [[1, 1], [0, 1]])


@pytest.mark.parametrize("xs, ys", [((4, 2, 3), (4, 3, 5)), ((4, 2, 3), (4, 3)),
                                    ((4, 3), (4, 3, 5)), ((4, 3), (4, 3)),
                                    ((0, 2, 3), (0, 3, 5))])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_batched_dot_values(xs, ys, dtype, rng):
    x, y = var(dtype, len(xs)), var(dtype, len(ys))
    vx, vy = values(dtype, xs, rng), values(dtype, ys, rng)
    got = symgraph.function([x, y], T.batched_dot(x, y))(vx, vy)
    want = np.array([np.dot(a, b) for a, b in zip(vx, vy)], dtype=dtype).reshape(
        (xs[0],) + xs[1:-1] + ys[2:])
    close(got, want)


def test_batched_dot_errors():
    x, y = T.dtensor3("x"), T.dtensor3("y")
    f = symgraph.function([x, y], T.batched_dot(x, y))
    with pytest.raises(ValueError, match=r"BatchedDot.*batch.*\(2, 3, 4\).*\(3, 4, 5\)"):
        f(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match=r"not aligned"):
        f(np.ones((2, 3, 4)), np.ones((2, 3, 5)))
    with pytest.raises(TypeError, match="2-d or 3-d"):
        T.batched_dot(T.dvector(), T.dmatrix())


@pytest.mark.parametrize("xs, ys, xb, yb", [
    ((2, 3), (3, 4), None, None), ((3,), (2, 3, 4), None, None),
    ((2, 5, 3), (3,), None, None), ((2, 5, 3), (2, 3, 4), None, None),
    ((2, 5, 3), (3, 4), None, None), ((1, 5, 3), (2, 3, 4), (1, None, None), None),
    ((2, 1, 5, 3), (3, 3, 4), (None, 1, None, None), None)])
def test_matmul(xs, ys, xb, yb, rng):
    x = T.tensor("float64", shape=xb or (None,) * len(xs))
    y = T.tensor("float64", shape=yb or (None,) * len(ys))
    vx, vy = values("float64", xs, rng), values("float64", ys, rng)
    out = T.matmul(x, y)
    close(symgraph.function([x, y], out)(vx, vy), np.matmul(vx, vy))
    close(symgraph.function([x, y], x @ y)(vx, vy), np.matmul(vx, vy))
    verify_grad(T.matmul, [vx, vy])
    with pytest.raises(ValueError, match="matmul.*0-d"):
        T.matmul(T.dscalar(), x)


def test_outer(rng):
    x, y = T.fvector("x"), T.dmatrix("y")
    vx, vy = values("float32", (3,), rng), values("float64", (2, 2), rng)
    close(symgraph.function([x, y], T.outer(x, y))(vx, vy), np.outer(vx, vy))
    verify_grad(T.outer, [vx.astype("float64"), vy])


# -- gradients --------------------------------------------------------------------

@pytest.mark.parametrize("xs, ys", DOT_SHAPES)
def test_grad_dot(xs, ys, rng):
    verify_grad(T.dot, [rng.normal(size=xs), rng.normal(size=ys)])


def test_grad_dot_float32_shapes(rng):
    for xs, ys in [((2, 3), (3,)), ((3,), (3, 4)), ((3,), (3,))]:
        x, y = var("float32", len(xs)), var("float32", len(ys))
        gx, gy = symgraph.grad(T.sum(T.dot(x, y)), [x, y])
        assert gx.dtype == gy.dtype == "float32"
        got = symgraph.function([x, y], [gx, gy])(values("float32", xs, rng),
                                                    values("float32", ys, rng))
        assert got[0].shape == xs and got[1].shape == ys


@pytest.mark.parametrize("xs, ys, axes", [((2, 3, 4), (3, 4, 5), 2),
                                          ((2, 3, 4), (4, 3, 2), [[1, 2], [1, 0]]),
                                          ((2, 3), (4, 5), 0),
                                          ((3, 4, 2), (2, 4), [[2, 1], [0, 1]])])
def test_grad_tensordot(xs, ys, axes, rng):
    verify_grad(lambda a, b: T.tensordot(a, b, axes), [rng.normal(size=xs),
                                                       rng.normal(size=ys)])


@pytest.mark.parametrize("xs, ys", [((4, 2, 3), (4, 3, 5)), ((4, 2, 3), (4, 3)),
                                    ((4, 3), (4, 3, 5)), ((4, 3), (4, 3))])
def test_grad_batched_dot(xs, ys, rng):
    verify_grad(T.batched_dot, [rng.normal(size=xs), rng.normal(size=ys)])


# -- shapes and R_op --------------------------------------------------------------------

def test_infer_shape(rng):
    m, v, t, w = T.dmatrix("m"), T.dvector("v"), T.dtensor3("t"), T.dmatrix("w")
    b = T.tensor("float64", shape=(1, None, None), name="b")
    outs = [T.dot(m, m), T.dot(m, v), T.dot(v, m), T.dot(v, v), T.dot(t, v), T.dot(t, m),
            T.tensordot(t, t, [[0, 2], [0, 2]]), T.batched_dot(t, t.dimshuffle(0, 2, 1)),
            T.batched_dot(t, w), T.outer(v, v), T.matmul(b, t)]
    vals = [rng.normal(size=(4, 4)), rng.normal(size=4), rng.normal(size=(3, 4, 4)),
            rng.normal(size=(1, 4, 4)), rng.normal(size=(3, 4))]
    check_infer_shape(outs, [m, v, t, b, w], vals)


def test_rop(rng):
    from symgraph.gradient import Rop

    x, y = T.dmatrix("x"), T.dmatrix("y")
    ex = T.dmatrix("ex")
    vx, vy, ve = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 3))
    f = symgraph.function([x, y, ex], Rop(T.dot(x, y), x, ex), on_unused_input="ignore")
    got = f(vx, vy, ve)
    np.testing.assert_allclose(got, ve @ vy)
    a = T.dtensor3("a")
    va, vea = rng.normal(size=(2, 3, 3)), rng.normal(size=(2, 3, 3))
    ea = T.dtensor3("ea")
    got = symgraph.function([a, ea], Rop(T.batched_dot(a, a), a, ea))(va, vea)
    np.testing.assert_allclose(got, vea @ va + va @ vea)
    got = symgraph.function([a, ea], Rop(T.tensordot(a, a, [[1, 2], [1, 2]]), a, ea))(va, vea)
    want = np.tensordot(vea, va, [[1, 2], [1, 2]]) + np.tensordot(va, vea, [[1, 2], [1, 2]])
    np.testing.assert_allclose(got, want)
