"""Softmax, LogSoftmax and SoftmaxGrad: values, dtypes, odd shapes, gradients,
shapes, and the stabilize rewrites of log(softmax(x)) and of its gradient."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import Rop, verify_grad
from symgraph.ops import nnet
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import Elemwise
from tests.helpers import check_infer_shape

RNG = np.random.default_rng(0)
NO_OPT = symgraph.Mode(optimizer=None)


def ref_softmax(x, axis):
    x = np.asarray(x, dtype="float64")
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_logsoftmax(x, axis):
    x = np.asarray(x, dtype="float64")
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


FUNCS = [(nnet.softmax, ref_softmax), (nnet.logsoftmax, ref_logsoftmax)]
TOL = {"float16": 5e-3, "float32": 1e-5, "float64": 1e-12}


def run(fn, value, axis=-1, mode=None):
    x = T.tensor(str(value.dtype), shape=(None,) * value.ndim, name="x")
    return symgraph.function([x], fn(x, axis=axis), mode=mode)(value)


def has_log(fgraph):
    return any(isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, sm.Log)
               for n in fgraph.apply_nodes)


def ops_of(fgraph, cls):
    return [n for n in fgraph.apply_nodes if isinstance(n.op, cls)]


# -- values ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, axis", [((5,), 0), ((5,), -1), ((5,), None),
                                         ((3, 4), 0), ((3, 4), 1), ((3, 4), -1),
                                         ((3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), 1),
                                         ((2, 3, 4), -1), ((2, 3, 4), None), ((), None)])
def test_values_match_numpy(fn, ref, dtype, shape, axis):
    value = (RNG.normal(size=shape) * 3).astype(dtype)
    got = run(fn, value, axis)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got, ref(value, axis), rtol=TOL[dtype], atol=TOL[dtype])


def test_softmax_rows_sum_to_one():
    value = RNG.normal(size=(4, 6))
    np.testing.assert_allclose(run(nnet.softmax, value).sum(axis=1), np.ones(4), rtol=1e-12)
    np.testing.assert_allclose(run(nnet.softmax, value, axis=None).sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_values_stay_finite(dtype):
    value = np.array([[1000.0, 0.0, -1000.0], [1000.0, 1000.0, 999.0],
                      [-1000.0, -1000.0, -1000.0]], dtype=dtype)
    s, ls = run(nnet.softmax, value), run(nnet.logsoftmax, value)
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(ls))
    np.testing.assert_allclose(s, ref_softmax(value, -1), rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(ls, ref_logsoftmax(value, -1), rtol=TOL[dtype])
    assert ls[0, 2] == -2000.0  # log(softmax) would be log(0) = -inf


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
def test_size_one_dims(fn, ref):
    value = RNG.normal(size=(3, 1))
    np.testing.assert_allclose(run(fn, value, axis=1), ref(value, 1))  # 1 or 0 everywhere
    np.testing.assert_allclose(run(fn, value, axis=0), ref(value, 0))
    x = T.dcol("x")  # static size 1 on the normalized axis
    np.testing.assert_allclose(symgraph.function([x], fn(x))(value), ref(value, -1))


@pytest.mark.parametrize("fn", [nnet.softmax, nnet.logsoftmax])
@pytest.mark.parametrize("shape, axis", [((0, 3), 1), ((0, 3), 0), ((3, 0), 1),
                                         ((3, 0), None), ((0,), 0)])
def test_size_zero_dims(fn, shape, axis):
    got = run(fn, np.zeros(shape), axis)
    assert got.shape == shape and got.dtype == "float64"


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
@pytest.mark.parametrize("view", [lambda a: a[:, ::2], lambda a: a.T, lambda a: a[::-1, ::-3]])
def test_non_contiguous_inputs(fn, ref, view):
    value = view(RNG.normal(size=(5, 8)))
    assert not value.flags.c_contiguous
    np.testing.assert_allclose(run(fn, value, 1), ref(value, 1), rtol=1e-12)
    np.testing.assert_allclose(run(fn, value, 0), ref(value, 0), rtol=1e-12)


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
@pytest.mark.parametrize("dtype, out", [("int8", "float32"), ("uint8", "float32"),
                                        ("bool", "float32"), ("int32", "float64"),
                                        ("int64", "float64")])
def test_integer_inputs_are_upcast_to_float(fn, ref, dtype, out):
    value = RNG.integers(0, 2, size=(2, 3)).astype(dtype)
    x = T.tensor(dtype, shape=(None, None))
    y = fn(x)
    assert y.dtype == out
    np.testing.assert_allclose(symgraph.function([x], y)(value), ref(value, -1),
                               rtol=TOL[out])


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
def test_float16_is_computed_in_float32(fn, ref):
    value = np.array([[10.0, 0.0, -10.0, 3.0]], dtype="float16")
    got = run(fn, value)
    assert got.dtype == "float16"
    np.testing.assert_allclose(got, ref(value, -1), rtol=2e-3, atol=1e-4)


def test_nan_rows_propagate_like_numpy():
    got = run(nnet.softmax, np.array([[np.nan, 1.0], [0.0, 1.0]]))
    assert np.all(np.isnan(got[0])) and np.all(np.isfinite(got[1]))


# -- construction --------------------------------------------------------------------

def test_public_names():
    assert T.nnet.softmax is nnet.softmax
    assert T.nnet.logsoftmax is nnet.logsoftmax is nnet.log_softmax is T.nnet.log_softmax


def test_axis_is_normalized_so_nodes_merge():
    x = T.dmatrix("x")
    assert nnet.softmax(x).owner.op == nnet.softmax(x, axis=1).owner.op == nnet.Softmax(1)
    assert nnet.Softmax(1) != nnet.LogSoftmax(1) and nnet.Softmax(0) != nnet.Softmax(1)
    assert nnet.softmax(x, axis=None).owner.op.axis is None
    assert nnet.softmax(x).type == x.type


def test_bad_inputs_are_clear_errors():
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        nnet.softmax(x, axis=2)
    with pytest.raises(ValueError, match="out of range"):
        nnet.LogSoftmax(-3)(x)
    with pytest.raises(ValueError, match="axis=None"):
        nnet.softmax(T.dscalar("s"))
    with pytest.raises(TypeError, match="axis must be an int or None"):
        nnet.softmax(x, axis=1.0)
    with pytest.raises(TypeError, match="axis must be an int or None"):
        nnet.Softmax((0, 1))
    with pytest.raises(TypeError, match="must be real"):
        nnet.softmax(T.tensor("complex128", shape=(None,)))
    with pytest.raises(TypeError, match="same rank"):
        nnet.SoftmaxGrad(-1)(T.dvector(), x)


# -- gradients -----------------------------------------------------------------------

@pytest.mark.parametrize("fn", [nnet.softmax, nnet.logsoftmax])
@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 2), 1),
                                         ((3, 4), None), ((5,), 0)])
def test_verify_grad(fn, shape, axis):
    verify_grad(lambda x: fn(x, axis=axis), [RNG.normal(size=shape)],
                rng=np.random.default_rng(0))


@pytest.mark.parametrize("fn", [nnet.softmax, nnet.logsoftmax])
def test_verify_grad_float32(fn):
    verify_grad(fn, [RNG.normal(size=(3, 4)).astype("float32")], rng=np.random.default_rng(0))


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_verify_grad_of_softmax_grad(axis):
    """SoftmaxGrad's own gradient (second derivatives of softmax), both inputs."""
    dy, s = RNG.normal(size=(3, 4)), ref_softmax(RNG.normal(size=(3, 4)), axis)
    verify_grad(nnet.SoftmaxGrad(axis), [dy, s], rng=np.random.default_rng(0))


def test_second_derivative_of_softmax():
    verify_grad(lambda x: T.grad(T.sum(nnet.softmax(x) ** 3), x),
                [RNG.normal(size=(2, 3))], rng=np.random.default_rng(0))


def test_softmax_grad_broadcast_gradient():
    """A gradient broadcast along the axis counts once per position."""
    g, s = T.dcol("g"), T.dmatrix("s")
    out = nnet.SoftmaxGrad(1)(g, s)
    gv, sv = RNG.normal(size=(2, 1)), ref_softmax(RNG.normal(size=(2, 3)), 1)
    full = np.broadcast_to(gv, sv.shape)
    expect = full * sv - sv * (full * sv).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(symgraph.function([g, s], out)(gv, sv), expect)


def _numeric_directional(fn, axis, xv, vv, eps=1e-6):
    return (fn(xv + eps * vv, axis) - fn(xv - eps * vv, axis)) / (2 * eps)


@pytest.mark.parametrize("fn, ref", FUNCS, ids=["softmax", "logsoftmax"])
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_rop(fn, ref, axis):
    x, v = T.dmatrix("x"), T.dmatrix("v")
    f = symgraph.function([x, v], Rop(fn(x, axis=axis), x, v))
    xv, vv = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    np.testing.assert_allclose(f(xv, vv), _numeric_directional(ref, axis, xv, vv),
                               rtol=1e-6, atol=1e-8)


def test_rop_of_softmax_grad():
    dy, s, e_dy, e_s = T.dmatrices("dy", "s", "e_dy", "e_s")
    out = nnet.SoftmaxGrad(1)(dy, s)
    f = symgraph.function([dy, s, e_dy, e_s], Rop(out, [dy, s], [e_dy, e_s]))
    vals = [RNG.normal(size=(2, 3)) for _ in range(4)]

    def ref(d, sv):
        return d * sv - sv * (d * sv).sum(axis=1, keepdims=True)

    eps = 1e-6
    numeric = (ref(vals[0] + eps * vals[2], vals[1] + eps * vals[3]) -
               ref(vals[0] - eps * vals[2], vals[1] - eps * vals[3])) / (2 * eps)
    np.testing.assert_allclose(f(*vals), numeric, rtol=1e-6, atol=1e-8)


# -- shapes --------------------------------------------------------------------------

@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((2, 0, 3), 1), ((4,), None)])
def test_infer_shape(shape, axis):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    value = RNG.normal(size=shape)
    check_infer_shape([nnet.softmax(x, axis), nnet.logsoftmax(x, axis)], [x], [value])
    dy = T.tensor("float64", shape=(None,) * len(shape), name="dy")
    check_infer_shape(nnet.SoftmaxGrad(axis)(dy, x), [dy, x], [value, value])


# -- rewrites ------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, None])
def test_log_softmax_rewrite_fires(axis):
    x = T.dmatrix("x")
    out = T.log(nnet.softmax(x, axis=axis))
    f = symgraph.function([x], out)
    fgraph = f.maker.fgraph
    (node,) = ops_of(fgraph, nnet.LogSoftmax)
    assert node.op.axis == nnet.softmax(x, axis=axis).owner.op.axis
    assert not has_log(fgraph) and not ops_of(fgraph, nnet.Softmax)
    value = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(f(value), symgraph.function([x], out, mode=NO_OPT)(value),
                               rtol=1e-12)


def test_log_softmax_rewrite_on_extreme_logits():
    x = T.fmatrix("x")
    out = T.log(nnet.softmax(x))
    value = np.array([[1000.0, 0.0, -1000.0]], dtype="float32")
    unoptimized = symgraph.function([x], out, mode=NO_OPT)(value)
    assert np.isneginf(unoptimized[0, 2])  # what the rewrite is for
    got = symgraph.function([x], out)(value)
    assert got.dtype == "float32"
    np.testing.assert_allclose(got, [[0.0, -1000.0, -2000.0]])


def _cost_and_grad(x, pick):
    cost = pick(-T.log(nnet.softmax(x)))
    return cost, symgraph.grad(cost, x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_of_log_softmax_stays_finite(dtype):
    x = T.tensor(dtype, shape=(None, None), name="x")
    cost, g = _cost_and_grad(x, lambda nll: nll[0, 2] + nll[1, 0])
    f = symgraph.function([x], [cost, g])
    fgraph = f.maker.fgraph
    assert ops_of(fgraph, nnet.LogSoftmax) and not ops_of(fgraph, nnet.SoftmaxGrad)
    assert not has_log(fgraph)
    value = np.array([[1000.0, 0.0, -1000.0], [-50.0, 50.0, 0.0]], dtype=dtype)
    c, gv = f(value)
    assert np.isfinite(c) and np.all(np.isfinite(gv))
    onehot = np.array([[0, 0, 1], [1, 0, 0]])
    np.testing.assert_allclose(gv, ref_softmax(value, -1) - onehot, atol=TOL[dtype])
    np.testing.assert_allclose(c, 2000.0 + 100.0, rtol=TOL[dtype])


def test_gradient_rewrite_keeps_ordinary_values():
    x = T.dmatrix("x")
    cost, g = _cost_and_grad(x, lambda nll: T.sum(nll[:, 1]))
    value = RNG.normal(size=(3, 4))
    expected = symgraph.function([x], g, mode=NO_OPT)(value)
    np.testing.assert_allclose(symgraph.function([x], g)(value), expected, rtol=1e-10,
                               atol=1e-12)


def test_gradient_rewrite_with_a_broadcast_gradient():
    """d/dx sum(log(softmax(x))): the gradient of the log is all ones, built
    broadcastable by the graph; the sum over the axis must count every element."""
    x = T.dmatrix("x")
    g = symgraph.grad(T.sum(T.log(nnet.softmax(x, axis=0))), x)
    value = RNG.normal(size=(3, 4))
    expected = 1.0 - 3.0 * ref_softmax(value, 0)
    np.testing.assert_allclose(symgraph.function([x], g)(value), expected, rtol=1e-10)
    np.testing.assert_allclose(symgraph.function([x], g, mode=NO_OPT)(value), expected,
                               rtol=1e-10)


def test_gradient_rewrite_broadcasts_a_broadcastable_numerator():
    """SoftmaxGrad(g / sm, sm) with g of static size 1 on the axis: the rewrite
    must sum g as broadcast to sm's shape."""
    x, g = T.dmatrix("x"), T.dcol("g")
    s = nnet.softmax(x)
    out = nnet.SoftmaxGrad(1)(g / s, s)
    f = symgraph.function([x, g], out)
    assert not ops_of(f.maker.fgraph, nnet.SoftmaxGrad)
    xv, gv = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 1))
    expected = gv - 3 * gv * ref_softmax(xv, 1)
    np.testing.assert_allclose(f(xv, gv), expected, rtol=1e-12)
    np.testing.assert_allclose(symgraph.function([x, g], out, mode=NO_OPT)(xv, gv), expected,
                               rtol=1e-12)
