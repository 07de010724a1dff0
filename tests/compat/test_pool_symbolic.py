"""pool_2d / pool_3d with a symbolic window, stride or padding (Theano's Pool
took them as inputs), on inputs of any rank."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.ops.pool_dynamic import PoolDynamic
from symgraph.tensor.signal.pool import pool_2d, pool_3d

RNG = np.random.default_rng(7)


def _numpy_max_pool(x, ws):
    """Max over non-overlapping windows, partial windows dropped."""
    rows, cols = x.shape[-2] // ws[0], x.shape[-1] // ws[1]
    cut = x[..., :rows * ws[0], :cols * ws[1]]
    shaped = cut.reshape(x.shape[:-2] + (rows, ws[0], cols, ws[1]))
    return shaped.max(axis=(-3, -1))


def test_symbolic_window_on_a_3d_input_matches_numpy():
    x = T.dtensor3("x")
    ws = T.ivector("ws")
    pooled = pool_2d(x, ws=ws, ignore_border=True)
    assert isinstance(pooled.owner.op, PoolDynamic) and pooled.ndim == 3
    f = symgraph.function([x, ws], pooled)
    data = RNG.normal(size=(3, 7, 9))
    for window in ([2, 2], [3, 2], [1, 4]):
        np.testing.assert_array_equal(f(data, np.array(window, dtype="int32")),
                                      _numpy_max_pool(data, window))


@pytest.mark.parametrize("mode", ["max", "sum", "average_inc_pad", "average_exc_pad"])
@pytest.mark.parametrize("ignore_border", [True, False])
def test_same_values_as_the_static_op(mode, ignore_border):
    x = T.dtensor4("x")
    ws, st = T.lvector("ws"), T.lvector("st")
    pad = (1, 0) if ignore_border else (0, 0)
    dynamic = pool_2d(x, ws=ws, stride=st, pad=pad, mode=mode, ignore_border=ignore_border)
    static = pool_2d(x, ws=(3, 2), stride=(2, 1), pad=pad, mode=mode,
                     ignore_border=ignore_border)
    data = RNG.normal(size=(2, 3, 8, 7))
    got, want = symgraph.function([x, ws, st], [dynamic, static])(
        data, np.array([3, 2]), np.array([2, 1]))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_scalar_entries_and_shape_inference():
    x = T.dmatrix("x")
    n = T.lscalar("n")
    pooled = pool_2d(x, ws=(n, n), mode="average_exc_pad")
    f = symgraph.function([x, n], [pooled, pooled.shape])
    data = np.arange(35.0).reshape(5, 7)
    out, shape = f(data, 3)
    assert out.shape == (2, 3) and tuple(shape) == (2, 3)
    np.testing.assert_allclose(out[0, 0], data[:3, :3].mean())
    np.testing.assert_allclose(out[1, 2], data[3:, 6:].mean())  # a partial window
    from tests.helpers import check_infer_shape

    check_infer_shape(pooled, [x, n], [data, 2])


def test_gradients_match_the_static_op():
    x = T.dtensor3("x")
    ws = T.lvector("ws")
    for mode in ("max", "average_inc_pad"):
        dynamic = pool_2d(x, ws=ws, ignore_border=True, mode=mode)
        static = pool_2d(x, ws=(2, 3), ignore_border=True, mode=mode)
        data = RNG.normal(size=(2, 6, 7))
        weights = RNG.normal(size=(2, 3, 2))
        g_dyn = T.grad((dynamic * weights).sum(), x)
        g_sta = T.grad((static * weights).sum(), x)
        got, want = symgraph.function([x, ws], [g_dyn, g_sta])(data, np.array([2, 3]))
        np.testing.assert_allclose(got, want, rtol=1e-12)
    window = T.constant(np.array([2, 2]))
    verify_grad(lambda v: pool_2d(v, ws=T.stack([window[0] * 1, window[1]]),
                                  ignore_border=True, mode="average_exc_pad"),
                [RNG.normal(size=(3, 4, 4))])


def test_pool_3d_symbolic_stride():
    x = T.dtensor4("x")
    st = T.lvector("st")
    dynamic = pool_3d(x, ws=(2, 2, 2), stride=st, ignore_border=True)
    static = pool_3d(x, ws=(2, 2, 2), stride=(1, 2, 2), ignore_border=True)
    data = RNG.normal(size=(2, 4, 5, 6))
    got, want = symgraph.function([x, st], [dynamic, static])(data, np.array([1, 2, 2]))
    np.testing.assert_array_equal(got, want)


def test_constant_parameters_become_the_static_op():
    x = T.dtensor3("x")
    f = symgraph.function([x], pool_2d(x, ws=T.stack([T.constant(2) + 0, T.constant(2)]),
                                       ignore_border=True))
    names = [type(node.op).__name__ for node in f.maker.fgraph.apply_nodes]
    assert "Pool" in names and "PoolDynamic" not in names
    np.testing.assert_array_equal(f(np.ones((1, 4, 4))), np.ones((1, 2, 2)))


def test_bad_values_get_pools_errors():
    x = T.dmatrix("x")
    ws, pad = T.lvector("ws"), T.lvector("pad")
    f = symgraph.function([x, ws, pad], pool_2d(x, ws=ws, pad=pad, ignore_border=True))
    with pytest.raises(ValueError, match="padding"):
        f(np.ones((4, 4)), np.array([2, 2]), np.array([2, 0]))
    with pytest.raises(ValueError, match="ws"):
        f(np.ones((4, 4)), np.array([0, 2]), np.array([0, 0]))
    with pytest.raises(TypeError, match="integer vector"):
        pool_2d(x, ws=T.dvector())
    with pytest.raises(ValueError, match="2 entries"):
        pool_2d(x, ws=(T.lscalar(), 2, 2))
