"""Reductions (symgraph.ops.reduce): values and dtypes against NumPy, axes and
keepdims, odd layouts, empty inputs, errors, gradients, shapes and R_op."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import reduce as R
from symgraph.ops import scalar_basic as sb
from tests.helpers import check_infer_shape

TOL = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-10}
AXES = [None, 0, -1, (0, 2), [1], (), (-1, -3), (2, 0, 1)]


def values(dtype, shape, rng, lo=-3, hi=3):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(max(lo, 0) if dtype.startswith("u") else lo, hi,
                            size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def close(got, want, exact_dtype=True):
    got, want = np.asarray(got), np.asarray(want)
    if exact_dtype:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        tol = TOL.get(str(got.dtype), 1e-10)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


# -- values ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_values_match_numpy(dtype, keepdims, rng):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    v = values(dtype, (2, 3, 4), rng, lo=1 if dtype.startswith("i") else -3)
    for axis in AXES:
        outs = [T.sum(x, axis, keepdims=keepdims), T.prod(x, axis, keepdims=keepdims),
                T.max(x, axis, keepdims=keepdims), T.min(x, axis, keepdims=keepdims),
                T.mean(x, axis, keepdims=keepdims), T.var(x, axis, keepdims=keepdims),
                T.std(x, axis, keepdims=keepdims), T.all(x, axis, keepdims=keepdims),
                T.any(x, axis, keepdims=keepdims)]
        got = symgraph.function([x], outs)(v)
        a = np_axis(axis)
        want = [np.sum(v, a, keepdims=keepdims), np.prod(v, a, keepdims=keepdims),
                np.max(v, a, keepdims=keepdims), np.min(v, a, keepdims=keepdims),
                np.mean(v, a, keepdims=keepdims), np.var(v, a, keepdims=keepdims),
                np.std(v, a, keepdims=keepdims), np.all(v, a, keepdims=keepdims),
                np.any(v, a, keepdims=keepdims)]
        for g, w, o in zip(got, want, outs):
            assert o.dtype == w.dtype
            close(g, w)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_argmax_argmin(dtype, rng):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    v = values(dtype, (3, 4, 5), rng, hi=1000)
    for axis in [None, 0, 1, -1]:
        for keepdims in (False, True):
            got = symgraph.function([x], [T.argmax(x, axis, keepdims=keepdims),
                                          T.argmin(x, axis, keepdims=keepdims)])(v)
            close(got[0], np.argmax(v, axis, keepdims=keepdims))
            close(got[1], np.argmin(v, axis, keepdims=keepdims))
    # Several axes: the index into those axes flattened in C order.
    got = symgraph.function([x], T.argmax(x, (0, 2)))(v)
    close(got, np.argmax(v.transpose(1, 0, 2).reshape(4, -1), axis=1))
    mx, amx = symgraph.function([x], R.max_and_argmax(x, 1))(v)
    close(mx, v.max(1))
    close(amx, v.argmax(1))
    # No axes: every element its own group.
    close(symgraph.function([x], T.argmax(x, ()))(v), np.zeros(v.shape, "int64"))


def test_bool_inputs(rng):
    b = T.tensor("bool", shape=(None, None), name="b")
    v = rng.random((3, 4)) < 0.5
    got = symgraph.function([b], [T.sum(b), T.sum(b, 0), T.all(b, 1), T.any(b, 1),
                                  T.mean(b), T.max(b, 1)])(v)
    want = [np.sum(v), np.sum(v, 0), v.all(1), v.any(1), v.mean(), v.max(1)]
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "uint32", "bool"])
def test_int_sums_widen(dtype, rng):
    x = T.tensor(dtype, shape=(None,), name="x")
    expect = "uint64" if dtype.startswith("u") else "int64"
    assert T.sum(x).dtype == expect and T.prod(x).dtype == expect
    assert T.mean(x).dtype == "float64"
    v = np.full(300, 100 if dtype != "bool" else True, dtype=dtype)
    got = symgraph.function([x], T.sum(x))(v)
    assert got == 300 * (100 if dtype != "bool" else 1)  # no overflow in the accumulator


def test_float_dtypes(rng):
    h = T.tensor("float16", shape=(None,), name="h")
    assert T.sum(h).dtype == "float16" and T.sum(h).owner.op.acc_dtype == "float32"
    assert T.mean(h).dtype == "float16"
    v = np.full(10000, 0.1, dtype="float16")
    # A float16 accumulator would stall at 256; float32 gets it right.
    np.testing.assert_allclose(symgraph.function([h], T.sum(h))(v), 999.5, rtol=1e-3)
    np.testing.assert_allclose(symgraph.function([h], T.mean(h))(v), 0.0999, rtol=1e-3)
    f = T.fvector("f")
    assert T.sum(f).owner.op.acc_dtype == "float32"
    assert T.sum(f, acc_dtype="float64").owner.op.acc_dtype == "float64"
    assert T.sum(f, dtype="float64").dtype == "float64"
    assert T.sum(T.ivector(), dtype="float32").dtype == "float32"
    assert T.mean(f).dtype == "float32"
    assert T.mean(T.ivector(), dtype="float32").dtype == "float32"


def test_dtype_errors():
    with pytest.raises(TypeError, match="sum.*float64.*float32"):
        T.sum(T.dvector(), dtype="float32")
    with pytest.raises(TypeError, match="prod"):
        T.prod(T.lvector(), dtype="int8")
    with pytest.raises(TypeError, match="accumulate"):
        T.sum(T.dvector(), acc_dtype="float32")


def test_axis_errors():
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match="sum: axis 2 is out of range"):
        T.sum(x, 2)
    with pytest.raises(ValueError, match="max: axis -3"):
        T.max(x, -3)
    with pytest.raises(ValueError, match="appears twice"):
        T.mean(x, (1, -1))
    with pytest.raises(TypeError, match="axis must be"):
        T.sum(x, 1.5)
    with pytest.raises(TypeError, match="known when the graph is built"):
        T.sum(x, T.lscalar())
    assert T.sum(x, T.constant(1)).owner.op.axis == (1,)
    assert T.sum(x, np.int64(-1)).owner.op.axis == (1,)


def test_scalar_input():
    s = T.dscalar("s")
    got = symgraph.function([s], [T.sum(s), T.max(s), T.mean(s), T.argmax(s), T.prod(s)])(2.5)
    assert [float(g) for g in got] == [2.5, 2.5, 2.5, 0.0, 2.5]
    with pytest.raises(ValueError):
        T.sum(s, 0)


# -- layouts and edge sizes --------------------------------------------------------

def test_non_contiguous_and_negative_strides(rng):
    x = T.dtensor3("x")
    base = rng.normal(size=(4, 6, 5))
    f = symgraph.function([x], [T.sum(x, 1), T.max(x, (0, 2)), T.argmin(x, -1),
                                T.prod(x, 0), T.var(x, 2)])
    for v in (base[::2, ::-1, 1:], base.transpose(2, 0, 1), base[::-1, :, ::-2]):
        got = f(v)
        want = [v.sum(1), v.max((0, 2)), v.argmin(-1), v.prod(0), v.var(2)]
        for g, w in zip(got, want):
            close(g, w)


def test_size_zero(rng):
    x = T.dmatrix("x")
    v = np.zeros((0, 3))
    got = symgraph.function([x], [T.sum(x, 0), T.prod(x, 0), T.all(x, 0), T.any(x, 0),
                                  T.sum(x, 1), T.max(x, 1), T.argmax(x, 1)])(v)
    want = [v.sum(0), v.prod(0), v.all(0), v.any(0), v.sum(1), v.max(1), v.argmax(1)]
    for g, w in zip(got, want):
        close(g, w)
    with np.errstate(all="ignore"):
        assert np.isnan(symgraph.function([x], T.mean(x, 0))(v)).all()
    for fn, name in [(T.max, "Max"), (T.min, "Min"), (T.argmax, "Argmax"),
                     (T.argmin, "Argmin")]:
        f = symgraph.function([x], fn(x, 0))
        with pytest.raises(ValueError, match=f"{name}.*empty"):
            f(v)
        f = symgraph.function([x], fn(x))
        with pytest.raises(ValueError, match=f"{name}.*empty"):
            f(v)


def test_size_one_dims(rng):
    x = T.tensor("float64", shape=(1, None, 1), name="x")
    y = T.dtensor3("y")
    v = rng.normal(size=(1, 4, 1))
    for var in (x, y):
        outs = [T.sum(var, 0), T.max(var, (0, 2), keepdims=True), T.mean(var, -1),
                T.argmax(var, 1), T.prod(var, None, keepdims=True)]
        got = symgraph.function([var], outs)(v)
        want = [v.sum(0), v.max((0, 2), keepdims=True), v.mean(-1), v.argmax(1),
                v.prod(keepdims=True)]
        for g, w in zip(got, want):
            close(g, w)
    assert T.sum(x, 1).type.shape == (1, 1)
    assert T.sum(x, 1, keepdims=True).type.shape == (1, 1, 1)


def test_var_ddof_and_corrected(rng):
    x = T.dmatrix("x")
    v = rng.normal(loc=1e4, size=(5, 7))
    outs = [T.var(x, 0, ddof=1), T.std(x, 1, ddof=2, keepdims=True),
            T.var(x, corrected=True), T.var(x, (0, 1), ddof=1, corrected=True)]
    got = symgraph.function([x], outs)(v)
    want = [v.var(0, ddof=1), v.std(1, ddof=2, keepdims=True), v.var(), v.var(ddof=1)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9)
    with pytest.raises(TypeError, match="ddof"):
        T.var(x, ddof=0.5)
    assert T.var(T.imatrix()).dtype == "float64"
    assert T.std(T.fmatrix()).dtype == "float32"
    assert T.var(T.tensor("float16", shape=(None,))).dtype == "float16"


def test_outputs_do_not_alias_inputs(rng):
    x = T.dmatrix("x")
    v = rng.normal(size=(2, 3))
    for out in symgraph.function([x], [T.sum(x, ()), T.max(x, ())])(v):
        assert not np.shares_memory(out, v)


def test_method_forms(rng):
    x = T.dmatrix("x")
    v = rng.normal(size=(3, 4))
    outs = [x.sum(0), x.prod(1), x.mean(), x.var(0), x.std(), x.max(1), x.min(0),
            x.argmax(1), x.argmin(), x.all(), x.any(1)]
    want = [v.sum(0), v.prod(1), v.mean(), v.var(0), v.std(), v.max(1), v.min(0),
            v.argmax(1), v.argmin(), v.all(), v.any(1)]
    for g, w in zip(symgraph.function([x], outs)(v), want):
        close(g, w)


def test_ops_are_values():
    assert R.Sum((0,), "float64", "float64") == R.Sum((0,), "float64", "float64")
    assert R.Max((0, 1)) != R.Max((0,))
    assert hash(R.Argmax(None)) == hash(R.Argmax(None))
    assert str(R.Max((1,))) == "Max{axis=(1,)}"
    x = T.dmatrix()
    assert T.sum(x, 1).owner.op == T.sum(x, -1).owner.op
    v = np.arange(6.0).reshape(2, 3)
    generic = R.CAReduce(sb.Maximum(), (1,))
    assert np.array_equal(symgraph.function([x], generic(x))(v), v.max(1))
    generic = R.CAReduce(sb.Add(), None)
    assert symgraph.function([x], generic(x))(v) == v.sum()


# -- gradients ---------------------------------------------------------------------

def verify_grad(fn, vals):
    from symgraph.gradient import verify_grad as vg

    vg(fn, vals, rng=np.random.default_rng(0))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), ()])
def test_grad_sum_mean_var_std(axis, rng):
    v = rng.normal(size=(2, 3, 4))
    verify_grad(lambda x: T.sum(x, axis), [v])
    verify_grad(lambda x: T.mean(x, axis, keepdims=True), [v])
    if axis != ():
        verify_grad(lambda x: T.var(x, axis), [v])
        verify_grad(lambda x: T.std(x, axis, ddof=1), [v])
        verify_grad(lambda x: T.var(x, axis, corrected=True), [v])


@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_grad_prod(axis, rng):
    v = rng.uniform(0.5, 1.5, size=(2, 3, 4)) * rng.choice([-1, 1], size=(2, 3, 4))
    verify_grad(lambda x: T.prod(x, axis), [v])
    one_zero = v.copy()
    one_zero[1, 1, 1] = 0.0
    verify_grad(lambda x: T.prod(x, axis), [one_zero])
    two_zeros = one_zero.copy()
    two_zeros[1, 2, 1] = 0.0
    two_zeros[1, 1, 3] = 0.0
    two_zeros[0, 0, 0] = 0.0
    verify_grad(lambda x: T.prod(x, axis), [two_zeros])


def test_grad_prod_exact_values():
    x = T.dvector("x")
    g = symgraph.function([x], symgraph.grad(T.prod(x), x))
    np.testing.assert_allclose(g(np.array([2.0, 3.0, 4.0])), [12.0, 8.0, 6.0])
    np.testing.assert_allclose(g(np.array([2.0, 0.0, 4.0])), [0.0, 8.0, 0.0])
    np.testing.assert_allclose(g(np.array([0.0, 0.0, 4.0])), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(g(np.array([5.0])), [1.0])


@pytest.mark.parametrize("fn", [T.max, T.min])
@pytest.mark.parametrize("axis", [None, 0, (1, 2)])
def test_grad_max_min(fn, axis, rng):
    v = rng.permutation(24).reshape(2, 3, 4) / 7.0  # distinct values: no ties
    verify_grad(lambda x: fn(x, axis), [v])


def test_grad_max_ties_all_get_it():
    x = T.dmatrix("x")
    g = symgraph.function([x], symgraph.grad(T.sum(T.max(x, 1) * [1.0, 2.0]), x))
    v = np.array([[3.0, 1.0, 3.0], [0.0, 5.0, 2.0]])
    np.testing.assert_array_equal(g(v), [[1.0, 0.0, 1.0], [0.0, 2.0, 0.0]])


def test_grad_float32_keeps_dtype(rng):
    x = T.fmatrix("x")
    for out in (T.sum(x, 0), T.prod(x, 1), T.max(x), T.mean(x), T.std(x, 0)):
        g = symgraph.grad(T.sum(out), x)
        assert g.dtype == "float32"
        assert symgraph.function([x], g)(rng.normal(size=(2, 3)).astype("float32")).shape == \
            (2, 3)


def test_grad_through_discrete_reductions(rng):
    x = T.dmatrix("x")
    cost = T.sum(x) + T.sum(T.argmax(x, 0)) + T.sum(T.argmin(x))
    g = symgraph.function([x], symgraph.grad(cost, x))
    np.testing.assert_array_equal(g(rng.normal(size=(2, 3))), np.ones((2, 3)))
    cost = T.sum(x * T.cast(T.all(x > 0), "float64")) + T.sum(T.cast(T.any(x > 1, 0), "float64"))
    g = symgraph.function([x], symgraph.grad(cost, x))
    np.testing.assert_array_equal(g(np.ones((2, 3))), np.ones((2, 3)))
    with pytest.raises(Exception, match="[Dd]isconnected"):
        symgraph.grad(T.sum(T.cast(T.any(x, 0), "float64")), x)


# -- shapes and R_op ---------------------------------------------------------------------

def test_infer_shape(rng):
    x = T.dtensor3("x")
    v = rng.normal(size=(2, 3, 4))
    outs = [T.sum(x, 1), T.prod(x, (0, 2)), T.max(x, -1, keepdims=True), T.min(x),
            T.all(x, 0), T.any(x, (1,)), T.argmax(x, 2), T.argmin(x, (0, 1)),
            T.argmax(x, keepdims=True), T.mean(x, 0), T.var(x, (1, 2)), T.std(x, 1),
            T.sum(x, ())]
    check_infer_shape(outs, [x], [v])
    check_infer_shape([T.sum(x, 0), T.argmax(x, 1)], [x], [np.zeros((0, 2, 3))])


def test_rop_sum_and_max(rng):
    from symgraph.gradient import Rop

    x, ev = T.dmatrix("x"), T.dmatrix("ev")
    v, e = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    for out, want in [(T.sum(x, 1), e.sum(1)), (T.sum(x), e.sum()),
                      (T.max(x, 0), e[v.argmax(0), np.arange(4)]),
                      (T.prod(x, 1), (np.prod(v, 1, keepdims=True) / v * e).sum(1))]:
        got = symgraph.function([x, ev], Rop(out, x, ev), on_unused_input="ignore")(v, e)
        np.testing.assert_allclose(got, want, rtol=1e-10)
