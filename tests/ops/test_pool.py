"""Pooling (``symgraph.tensor.signal.pool``): values against loop references,
output sizes, gradients (``verify_grad``, every mode, the gradient of the
gradient of max), infer_shape, R-op and errors.  These run the Python
``perform`` (``linker=py``); tests/native/test_pool_c.py checks the C kernels.
"""

import itertools
import warnings

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import ancestors
from symgraph.ops.pool import Pool, pool_out_size
from symgraph.ops.pool_grad import (AveragePoolGrad, DownsampleFactorMaxGradGrad,
                                    MaxPoolGrad)
from symgraph.tensor.signal.pool import max_pool_2d_same_size, pool_2d, pool_3d
from tests.ops.op_checks import check_shapes, verify_grad

PY = symgraph.Mode(linker="py")
MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


def ref_pool(x, ws, stride, pad, ignore_border, mode):
    """Pooling by the definition: pad with NaN markers, loop over every window."""
    nd = len(ws)
    img = x.shape[-nd:]
    out_shape = [pool_out_size(s, w, st, p, ignore_border)
                 for s, w, st, p in zip(img, ws, stride, pad)]
    out = np.zeros(x.shape[:-nd] + tuple(out_shape), dtype="float64")
    for index in itertools.product(*[range(n) for n in out_shape]):
        lo = [j * st - p for j, st, p in zip(index, stride, pad)]
        # the padded window, clipped to the padded image's end
        hi = [min(a + w, s + p) for a, w, s, p in zip(lo, ws, img, pad)]
        real = tuple(slice(max(a, 0), min(b, s)) for a, b, s in zip(lo, hi, img))
        region = x[(Ellipsis,) + real].astype("float64")
        region = region.reshape(region.shape[:-nd] + (-1,))
        if mode == "max":
            value = region.max(axis=-1)
        elif mode == "sum":
            value = region.sum(axis=-1)
        elif mode == "average_exc_pad":
            value = region.sum(axis=-1) / region.shape[-1]
        else:
            value = region.sum(axis=-1) / np.prod([b - a for a, b in zip(lo, hi)])
        out[(Ellipsis,) + index] = value
    return out


def run_py(inputs, output, *values):
    return symgraph.function(inputs, output, mode=PY, on_unused_input="ignore")(*values)


CASES_2D = [
    # shape, ws, stride, pad, ignore_border
    ((2, 3, 6, 6), (2, 2), None, (0, 0), True),
    ((2, 3, 5, 7), (2, 2), None, (0, 0), False),
    ((2, 3, 5, 7), (2, 2), None, (0, 0), True),
    ((1, 1, 7, 5), (3, 2), (1, 2), (0, 0), False),    # stride != ws (overlap)
    ((2, 1, 7, 8), (2, 3), (3, 4), (0, 0), False),    # stride > ws (gaps)
    ((2, 1, 7, 8), (2, 3), (3, 4), (0, 0), True),
    ((2, 2, 5, 6), (3, 3), (2, 2), (1, 2), True),     # padding
    ((1, 2, 4, 4), (3, 2), (1, 1), (2, 1), True),     # padding with overlap
    ((1, 1, 1, 1), (2, 2), None, (0, 0), False),      # window larger than the image
    ((1, 1, 3, 3), (1, 1), None, (0, 0), True),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,ws,stride,pad,ignore_border", CASES_2D)
def test_pool_2d_values(shape, ws, stride, pad, ignore_border, mode):
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(shape)
    x = T.dtensor4("x")
    y = pool_2d(x, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode=mode)
    want = ref_pool(xv, ws, stride or ws, pad, ignore_border, mode)
    got = run_py([x], y, xv)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_pool_3d_values_and_rank_5(mode):
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, 2, 5, 6, 7))
    x = T.dtensor5("x")
    for ws, stride, pad, ib in [((2, 2, 2), None, (0, 0, 0), False),
                                ((3, 2, 2), (2, 1, 3), (1, 0, 1), True)]:
        y = pool_3d(x, ws, ignore_border=ib, stride=stride, pad=pad, mode=mode)
        want = ref_pool(xv, ws, stride or ws, pad, ib, mode)
        np.testing.assert_allclose(run_py([x], y, xv), want, rtol=1e-12)


@pytest.mark.parametrize("ndim,shape", [(2, (7, 5)), (2, (3, 7, 5)), (2, (2, 2, 2, 5, 4)),
                                        (3, (4, 5, 3))])
def test_any_rank(ndim, shape):
    rng = np.random.default_rng(2)
    xv = rng.standard_normal(shape)
    x = T.tensor("float64", shape=(None,) * len(shape))
    fn = pool_2d if ndim == 2 else pool_3d
    y = fn(x, (2,) * ndim, ignore_border=False, mode="average_exc_pad")
    want = ref_pool(xv, (2,) * ndim, (2,) * ndim, (0,) * ndim, False, "average_exc_pad")
    np.testing.assert_allclose(run_py([x], y, xv), want, rtol=1e-12)


def test_out_shape_matches_theano_formula():
    # Theano's Pool.out_shape examples: (5, 5) with ws (2, 2) gives (2, 2) or (3, 3)
    assert Pool.out_shape((1, 1, 5, 5), (2, 2), True) == [1, 1, 2, 2]
    assert Pool.out_shape((1, 1, 5, 5), (2, 2), False) == [1, 1, 3, 3]
    assert pool_out_size(10, 3, 2, 0, False) == 5   # stride < ws: max(0, (9-3)//2+1)+1
    assert pool_out_size(4, 3, 2, 0, False) == 2
    assert pool_out_size(5, 3, 1, 1, True) == 5
    assert pool_out_size(2, 3, 1, 0, True) == 0
    assert pool_out_size(0, 3, 1, 0, False) == 0    # empty dimension: empty output


def test_static_and_inferred_shapes():
    x = T.tensor("float64", shape=(2, None, 7, 9))
    y = pool_2d(x, (3, 2), ignore_border=False, stride=(2, 1))
    assert y.type.shape == (2, None, 3, 8)
    rng = np.random.default_rng(3)
    for mode in MODES:
        xs = T.dtensor4("xs")
        for ws, st, pad, ib in [((3, 2), (2, 1), (0, 0), False), ((2, 2), None, (1, 1), True),
                                ((3, 3), (1, 1), (0, 0), True)]:
            out = pool_2d(xs, ws, ignore_border=ib, stride=st, pad=pad, mode=mode)
            check_shapes(out, [xs], [rng.standard_normal((2, 1, 7, 9))])


def test_inferred_shape_of_empty_dimension():
    xs = T.dtensor4("xs")
    out = pool_2d(xs, (3, 3), ignore_border=False, stride=(1, 1))
    check_shapes(out, [xs], [np.zeros((2, 1, 0, 4))])


def test_grad_shapes():
    rng = np.random.default_rng(4)
    x = T.dtensor4("x")
    xv = rng.standard_normal((2, 1, 5, 6))
    op = Pool(ignore_border=False, ws=(2, 3), stride=(1, 2))
    out = op(x)
    gz = T.dtensor4("gz")
    gzv = rng.standard_normal((2, 1, 4, 3))
    check_shapes(MaxPoolGrad(**op.params())(x, out, gz), [x, gz], [xv, gzv])
    check_shapes(AveragePoolGrad(mode="sum", **op.params())(x, gz), [x, gz], [xv, gzv])
    check_shapes(DownsampleFactorMaxGradGrad(**op.params())(x, out, x), [x], [xv])


def test_nan_propagates_and_grad_goes_to_the_nan():
    x = T.dmatrix("x")
    y = pool_2d(x, (2, 2), ignore_border=True)
    xv = np.array([[1.0, np.nan, 5.0, 2.0], [3.0, 4.0, 1.0, 0.0]])
    got = run_py([x], y, xv)
    assert np.isnan(got[0, 0]) and got[0, 1] == 5.0
    g = run_py([x], symgraph.grad(y.sum(), x), xv)
    np.testing.assert_array_equal(g, [[0, 1, 1, 0], [0, 0, 0, 0]])


def test_ties_route_to_the_first_maximum():
    x = T.dtensor3("x")
    y = pool_2d(x, (2, 2), ignore_border=True, stride=(1, 1))
    xv = np.array([[[2.0, 2.0, 1.0], [2.0, 0.0, 2.0]]])
    g = run_py([x], symgraph.grad(y.sum(), x), xv)
    # windows [[2, 2], [2, 0]] and [[2, 1], [0, 2]]: the first 2 of each
    np.testing.assert_array_equal(g, [[[1, 1, 0], [0, 0, 0]]])


def test_max_pool_2d_same_size():
    x = T.dtensor4("x")
    xv = np.array([[[[1.0, 3, 2, 1], [0, 2, 5, 4], [7, 1, 1, 1], [3, 3, 3, 3]]]])
    got = run_py([x], max_pool_2d_same_size(x, (2, 2)), xv)
    np.testing.assert_array_equal(got, [[[[0, 3, 0, 0], [0, 0, 5, 0], [7, 0, 0, 0],
                                          [0, 0, 3, 0]]]])


GRAD_CASES = [((3, 2), None, (0, 0), False), ((2, 2), (1, 1), (1, 1), True),
              ((2, 3), (3, 2), (0, 0), False)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ws,stride,pad,ib", GRAD_CASES)
def test_verify_grad(mode, ws, stride, pad, ib):
    rng = np.random.default_rng(5)
    # distinct values: max pooling is differentiable away from ties
    xv = rng.permutation(2 * 5 * 6).reshape(2, 5, 6).astype("float64") * 0.1
    verify_grad(lambda x: pool_2d(x, ws, ignore_border=ib, stride=stride, pad=pad,
                                  mode=mode), [xv])


@pytest.mark.parametrize("mode", MODES)
def test_verify_grad_3d(mode):
    xv = np.random.default_rng(6).permutation(4 * 3 * 5).reshape(1, 4, 3, 5) * 0.1
    verify_grad(lambda x: pool_3d(x, (2, 2, 3), ignore_border=False, stride=(1, 2, 2),
                                  mode=mode), [xv])


def test_grad_of_grad_of_max():
    rng = np.random.default_rng(7)
    xv = rng.permutation(2 * 5 * 5).reshape(2, 5, 5) * 0.1
    op = Pool(ignore_border=False, ws=(2, 2), stride=(1, 2))
    gzv = rng.standard_normal((2, 4, 3))
    ggxv = rng.standard_normal(xv.shape)
    x = T.constant(xv)
    maxout = op(x)
    # MaxPoolGrad is linear in gz: its gradient is DownsampleFactorMaxGradGrad
    verify_grad(lambda gz: MaxPoolGrad(**op.params())(x, maxout, gz), [gzv])
    # and DownsampleFactorMaxGradGrad's is MaxPoolGrad
    verify_grad(lambda ggx: DownsampleFactorMaxGradGrad(**op.params())(x, maxout, ggx),
                [ggxv])
    # through the user's graph: the second derivative, d/dx of <grad, v>
    xs = T.dtensor3("xs")
    gx = symgraph.grad((pool_2d(xs, (2, 2), ignore_border=True) ** 2).sum(), xs)
    verify_grad(lambda xs: symgraph.grad((pool_2d(xs, (2, 2), ignore_border=True) ** 2).sum(),
                                         xs), [xv])
    second = symgraph.grad((gx * T.constant(ggxv)).sum(), xs)
    assert any(v.owner is not None and isinstance(v.owner.op, DownsampleFactorMaxGradGrad)
               for v in ancestors([second]))


def test_grad_of_average_grad_is_pooling():
    rng = np.random.default_rng(8)
    x = T.constant(rng.standard_normal((1, 5, 5)))
    op = AveragePoolGrad(mode="average_inc_pad", ignore_border=True, ws=(3, 3),
                         stride=(2, 2), pad=(1, 1))
    verify_grad(lambda gz: op(x, gz), [rng.standard_normal((1, 3, 3))])


def test_r_op():
    rng = np.random.default_rng(9)
    xv = rng.permutation(30).reshape(1, 5, 6) * 0.1
    vv = rng.standard_normal(xv.shape)
    x, v = T.dtensor3("x"), T.dtensor3("v")
    for mode in MODES:
        y = pool_2d(x, (2, 2), ignore_border=False, mode=mode)
        jv = symgraph.Rop(y, x, v)
        # linear in x away from ties: y(x + e v) - y(x) = e J v
        e = 1e-6
        f = symgraph.function([x], y, mode=PY)
        want = (f(xv + e * vv) - f(xv - e * vv)) / (2 * e)
        np.testing.assert_allclose(run_py([x, v], jv, xv, vv), want, rtol=1e-5, atol=1e-7)


def test_int_max_pooling():
    x = T.tensor("int32", shape=(None, None))
    xv = np.arange(12, dtype="int32").reshape(3, 4)
    got = run_py([x], pool_2d(x, (2, 2), ignore_border=False), xv)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[5, 7], [9, 11]])


def test_float16_is_pooled_in_float32():
    x = T.tensor("float16", shape=(None, None))
    xv = np.full((2, 8), 1000.0, dtype="float16")
    got = run_py([x], pool_2d(x, (2, 8), ignore_border=True, mode="sum"), xv)
    assert got.dtype == np.float16 and got[0, 0] == 16000   # float16 sums would round
    got = run_py([x], pool_2d(x, (2, 8), ignore_border=True, mode="average_inc_pad"), xv)
    assert got[0, 0] == 1000


def test_average_alias_and_deprecated_names():
    x = T.dmatrix("x")
    assert pool_2d(x, (2, 2), mode="average").owner.op.mode == "average_inc_pad"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = pool_2d(x, ds=(2, 2), st=(1, 1), ignore_border=True)
    assert [str(w.message).split("'")[1] for w in caught] == ["ds", "st"]
    assert all(w.category is DeprecationWarning for w in caught)
    assert y.owner.op.ws == (2, 2) and y.owner.op.stride == (1, 1)
    with pytest.warns(DeprecationWarning, match="'padding'"):
        y = pool_2d(x, (2, 2), padding=(1, 1), ignore_border=True)
    assert y.owner.op.pad == (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pool_2d(x, (2, 2)).owner.op.ignore_border is False   # no warning


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(ws=(2, 2), ds=(2, 2)), ValueError, "both 'ws' and its deprecated name 'ds'"),
    (dict(), ValueError, "window size ws is required"),
    (dict(ws=(0, 2)), ValueError, "must be >= 1"),
    (dict(ws=(2, -1)), ValueError, "must be >= 1"),
    (dict(ws=(2,)), ValueError, "must have 2 entries"),
    (dict(ws=2), TypeError, "tuple of 2 ints"),
    (dict(ws=(2.0, 2)), TypeError, "must hold ints"),
    (dict(ws=(2, 2), stride=(0, 1)), ValueError, "stride must be >= 1"),
    (dict(ws=(2, 2), pad=(1, 1)), ValueError, "only with ignore_border=True"),
    (dict(ws=(2, 2), pad=(2, 0), ignore_border=True), ValueError, "smaller than the window"),
    (dict(ws=(2, 2), pad=(-1, 0), ignore_border=True), ValueError, "pad must be >= 0"),
    (dict(ws=(2, 2), mode="min"), ValueError, "mode must be one of"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        pool_2d(T.dmatrix("x"), **kwargs)


def test_bad_inputs():
    with pytest.raises(TypeError, match="at least 2 dimensions"):
        pool_2d(T.dvector("v"), (2, 2))
    with pytest.raises(TypeError, match="at least 3 dimensions"):
        pool_3d(T.dmatrix("m"), (2, 2, 2))
    with pytest.raises(TypeError, match="static ints"):
        Pool(ndim=2, ws=T.lvector("w"))  # pool_2d takes it (tests/compat/test_pool_symbolic.py)
    with pytest.raises(TypeError, match="average pooling needs a float input"):
        pool_2d(T.imatrix("m"), (2, 2), mode="average_exc_pad")
    with pytest.raises(TypeError, match="must be a float or integer tensor"):
        pool_2d(T.bmatrix("m") > 0, (2, 2))


def test_grad_op_shape_errors():
    x, m, g = T.dmatrix("x"), T.dmatrix("m"), T.dmatrix("g")
    op_args = dict(ignore_border=True, ws=(2, 2))
    f = symgraph.function([x, m, g], MaxPoolGrad(**op_args)(x, m, g), mode=PY)
    with pytest.raises(ValueError, match=r"pooled maximum has shape \(3, 3\) but pooling an "
                                         r"input of shape \(4, 4\) gives \(2, 2\)"):
        f(np.zeros((4, 4)), np.zeros((3, 3)), np.zeros((2, 2)))
    with pytest.raises(TypeError, match="rank"):
        MaxPoolGrad(**op_args)(x, T.dtensor3("m3"), g)
