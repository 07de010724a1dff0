"""Max pooling that keeps its argmax (``ops/pool_argmax.py``) and the rewrite
that uses it (``opt/pool_rewrites.py``): the ops' ``perform`` against Pool
and MaxPoolGrad (the references of tests/ops/test_pool.py), their C kernels
against ``perform`` (the 2x2 vector path and the generic scans, layouts,
dtypes, ties, NaN), gradients, infer_shape, the rewrite, DebugMode.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.pool import Pool
from symgraph.ops.pool_argmax import (MaxPoolArgmaxGather, MaxPoolGradFromArgmax,
                                      MaxPoolWithArgmax)
from symgraph.ops.pool_grad import MaxPoolGrad
from symgraph.tensor.signal.pool import pool_2d, pool_3d
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.ops.op_checks import check_shapes, verify_grad
from tests.ops.test_pool import ref_pool

PY = symgraph.Mode(linker="py")
TOL = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12}

GEOMETRIES = [
    # ndim, ws, stride, pad, ignore_border, image
    (2, (2, 2), None, None, True, (6, 8)),        # 2x2 vector path, OW < 8
    (2, (2, 2), None, None, True, (5, 35)),       # OW 17: two steps + a moved-back one
    (2, (2, 2), None, None, False, (7, 19)),      # partial last row and column
    (2, (2, 2), None, None, True, (4, 16)),       # OW exactly 8
    (2, (2, 3), None, None, True, (7, 8)),        # tiled, uncovered rest
    (2, (3, 3), (3, 3), (2, 1), True, (7, 8)),    # tiled with padding
    (2, (3, 2), (1, 1), None, False, (5, 6)),     # overlapping
    (2, (2, 3), (3, 4), None, False, (8, 9)),     # gaps
    (3, (2, 2, 2), None, (1, 0, 1), True, (5, 4, 6)),
    (3, (2, 3, 2), (1, 2, 1), None, False, (3, 5, 4)),
]


def _ops(geometry):
    nd, ws, stride, pad, ib, _ = geometry
    params = dict(ndim=nd, ignore_border=ib, ws=ws, stride=stride, pad=pad)
    return (Pool(**params), MaxPoolGrad(**params), MaxPoolWithArgmax(**params),
            MaxPoolGradFromArgmax(**params))


def _nodes(geometry, dtype, rank):
    pool, grad, fwd, bwd = _ops(geometry)
    x = T.tensor(dtype, shape=(None,) * rank)
    g = T.tensor(dtype, shape=(None,) * rank)
    a = T.tensor(fwd(x)[1].dtype, shape=(None,) * rank)
    return pool(x).owner, grad(x, g, g).owner, fwd(x)[0].owner, bwd(x, g, a).owner


def _ties_and_nan(shape, dtype, rng):
    x = rng.integers(0, 3, size=shape).astype(dtype)      # many ties
    x.flat[rng.choice(x.size, size=max(1, x.size // 10), replace=False)] = np.nan
    return x


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_perform_matches_pool_and_max_pool_grad(geometry):
    rng = np.random.default_rng(0)
    x = _ties_and_nan((2, 3) + geometry[5], "float64", rng)
    pool, grad, fwd, bwd = _nodes(geometry, "float64", 4 if geometry[0] == 2 else 5)
    maxout, argmax = run_python(fwd, [x])
    np.testing.assert_array_equal(maxout, run_python(pool, [x])[0])
    nd, ws, stride, pad, ib, _ = geometry
    np.testing.assert_array_equal(maxout, ref_pool(x, ws, stride or ws, pad or (0,) * nd, ib,
                                                   "max"))
    gz = rng.standard_normal(maxout.shape)
    np.testing.assert_array_equal(run_python(bwd, [x, gz, argmax])[0],
                                  run_python(grad, [x, maxout, gz])[0])


def test_argmax_offsets_in_the_full_window():
    # 2x2 windows, padding 1: the first window holds only x[0, 0] (offset 3)
    x = T.dmatrix("x")
    op = MaxPoolWithArgmax(ignore_border=True, ws=(2, 2), pad=(1, 1))
    # windows: [[1]], [[5, 2]], [[7], [7]] (a tie: the first) and [[0, 0], [nan, 4]]
    xv = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 0.0], [7.0, np.nan, 4.0]])
    maxout, argmax = symgraph.function([x], op(x), mode=PY)(xv)
    np.testing.assert_array_equal(argmax, [[3, 2], [1, 2]])
    assert argmax.dtype == np.uint8
    np.testing.assert_array_equal(maxout, [[1.0, 5.0], [7.0, np.nan]])
    assert MaxPoolWithArgmax(ws=(17, 16))(x)[1].dtype == "int32"


# float32 over every geometry (the 2x2 vector path and the scans); float64 and
# float16 (the scans only) over a 2x2 and an overlapping one.
C_CASES = ([("float32", g) for g in GEOMETRIES] +
           [(d, GEOMETRIES[i]) for d in ("float64", "float16") for i in (2, 6)])


@pytest.mark.parametrize("dtype,geometry", C_CASES)
def test_c_matches_python(geometry, dtype):
    rng = np.random.default_rng(1)
    rank = 4 if geometry[0] == 2 else 5
    _, _, fwd, bwd = _nodes(geometry, dtype, rank)
    x = _ties_and_nan((2, 3) + geometry[5], dtype, rng)
    want = run_python(fwd, [x])
    layouts = [x, x[::-1, ..., ::-1].copy()[::-1, ..., ::-1],
               np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)]
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype)
    wide[..., ::2] = x
    layouts.append(wide[..., ::2])
    for xl in layouts:
        for got, ref in zip(run_kernel(fwd, [xl]), want):
            np.testing.assert_array_equal(got, ref)
    gz = rng.standard_normal(want[0].shape).astype(dtype)
    (ref,) = run_python(bwd, [x, gz, want[1]])
    for gl in (gz, gz[::-1].copy()[::-1], np.asfortranarray(gz)):
        for al in (want[1], np.asfortranarray(want[1])):
            (got,) = run_kernel(bwd, [x, gl, al])
            np.testing.assert_allclose(got, ref, rtol=TOL[dtype], atol=TOL[dtype])


def test_backward_writes_every_element_of_a_reused_buffer():
    # The runtime may hand the kernel an old output: garbage must not survive.
    geometry = (2, (2, 2), None, None, True, (7, 19))    # odd: an uncovered row and column
    _, _, fwd, bwd = _nodes(geometry, "float32", 4)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 7, 19)).astype("float32")
    maxout, argmax = run_python(fwd, [x])
    gz = rng.standard_normal(maxout.shape).astype("float32")
    f = symgraph.function([bwd.inputs[0], bwd.inputs[1], bwd.inputs[2]], bwd.outputs[0])
    (ref,) = run_python(bwd, [x, gz, argmax])
    for _ in range(2):
        np.testing.assert_array_equal(f(x, gz, argmax), ref)
        np.testing.assert_array_equal(f(x, np.full_like(gz, np.nan), argmax)[:, :, 6, :], 0)


def test_bad_argmax_is_an_error():
    geometry = GEOMETRIES[0]
    _, _, fwd, bwd = _nodes(geometry, "float32", 4)
    x = np.zeros((1, 1, 6, 8), "float32")
    gz = np.ones((1, 1, 3, 4), "float32")
    argmax = np.zeros((1, 1, 3, 4), "uint8")
    argmax[0, 0, 1, 2] = 4
    with pytest.raises(ValueError, match="offset outside its window"):
        run_python(bwd, [x, gz, argmax])
    with pytest.raises(KernelError, match="offset outside its window"):
        run_kernel(bwd, [x, gz, argmax])
    _, _, _, overlap = _nodes(GEOMETRIES[6], "float32", 4)
    shape = (1, 1) + overlap.op.out_size((5, 6))
    with pytest.raises(KernelError, match="offset outside its window"):
        run_kernel(overlap, [np.zeros((1, 1, 5, 6), "float32"), np.ones(shape, "float32"),
                             np.full(shape, 6, "uint8")])
    with pytest.raises(ValueError, match=r"argmax has shape \(1, 1, 3, 3\)"):
        run_python(bwd, [x, gz, np.zeros((1, 1, 3, 3), "uint8")])


def _pool_ops(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()
            if "Pool" in type(n.op).__name__]


def test_rewrite_fires_and_keeps_values():
    rng = np.random.default_rng(3)
    x = T.ftensor4("x")
    xv = np.maximum(rng.standard_normal((3, 2, 9, 21)), 0).astype("float32")   # ties at 0
    y = pool_2d(x, (2, 2), ignore_border=True)
    g = symgraph.grad((y ** 2).sum(), x)
    f = symgraph.function([x], [y, g])
    assert _pool_ops(f) == ["MaxPoolWithArgmax", "MaxPoolGradFromArgmax"]
    plain = symgraph.function([x], [y, g], mode=symgraph.Mode(optimizer=None, linker="py"))
    for got, want in zip(f(xv), plain(xv)):
        np.testing.assert_array_equal(got, want)
    kept = symgraph.function([x], [y, g], mode=symgraph.Mode(excluding=("pool_argmax",)))
    assert _pool_ops(kept) == ["Pool", "MaxPoolGrad"]


@pytest.mark.parametrize("dtype,ws,stride", [("float64", (2, 2), None),
                                             ("float32", (3, 3), (2, 2)),
                                             ("float32", (2, 2), (1, 1))])
def test_rewrite_only_where_the_argmax_pays(dtype, ws, stride):
    x = T.tensor4("x", dtype=dtype)
    y = pool_2d(x, ws, ignore_border=True, stride=stride)
    f = symgraph.function([x], symgraph.grad(y.sum(), x))
    assert _pool_ops(f) == ["Pool", "MaxPoolGrad"]


def test_rewrite_shares_the_forward_between_gradients():
    x = T.ftensor3("x")
    y = pool_2d(x, (2, 2), ignore_border=True)
    g1 = symgraph.grad(y.sum(), x)
    g2 = symgraph.grad((y ** 2).sum(), x)
    f = symgraph.function([x], [g1, g2])
    assert sorted(_pool_ops(f)) == ["MaxPoolGradFromArgmax"] * 2 + ["MaxPoolWithArgmax"]
    xv = np.random.default_rng(4).standard_normal((2, 4, 6)).astype("float32")
    ref = symgraph.function([x], [g1, g2], mode=symgraph.Mode(optimizer=None, linker="py"))
    for got, want in zip(f(xv), ref(xv)):
        np.testing.assert_array_equal(got, want)


def test_rewrite_needs_the_forward_node():
    x, m, gz = T.ftensor4("x"), T.ftensor4("m"), T.ftensor4("gz")
    f = symgraph.function([x, m, gz], MaxPoolGrad(ignore_border=True, ws=(2, 2))(x, m, gz))
    assert _pool_ops(f) == ["MaxPoolGrad"]
    # a Pool of another variable, or with other parameters, does not count either
    y = T.ftensor4("y")
    other = MaxPoolGrad(ignore_border=True, ws=(2, 2))(x, pool_2d(y, (2, 2), True), gz)
    shifted = MaxPoolGrad(ignore_border=True, ws=(2, 2))(
        x, pool_2d(x, (2, 2), True, stride=(1, 1))[:, :, ::2, ::2], gz)
    f = symgraph.function([x, y, gz], [other, shifted])
    assert "MaxPoolGradFromArgmax" not in _pool_ops(f)


def test_gradients():
    rng = np.random.default_rng(5)
    xv = rng.permutation(2 * 5 * 6).reshape(2, 5, 6) * 0.1
    for params in [dict(ignore_border=False, ws=(2, 2)),
                   dict(ignore_border=True, ws=(3, 2), stride=(1, 2), pad=(1, 1))]:
        verify_grad(lambda x: MaxPoolWithArgmax(**params)(x)[0], [xv])
        xc = T.constant(xv)
        argmax = MaxPoolWithArgmax(**params)(xc)[1]
        shape = Pool(**params).out_size(xv.shape[-2:])
        gzv = rng.standard_normal((2,) + shape)
        verify_grad(lambda gz: MaxPoolGradFromArgmax(**params)(xc, gz, argmax), [gzv])
        verify_grad(lambda ggx: MaxPoolArgmaxGather(**params)(xc, ggx, argmax), [xv])


def test_infer_shape():
    rng = np.random.default_rng(6)
    x, gz = T.dtensor4("x"), T.dtensor4("gz")
    xv = rng.standard_normal((2, 1, 7, 9))
    params = dict(ignore_border=False, ws=(3, 2), stride=(2, 1))
    maxout, argmax = MaxPoolWithArgmax(**params)(x)
    check_shapes([maxout, argmax], [x], [xv])
    gzv = rng.standard_normal((2, 1, 3, 8))
    check_shapes(MaxPoolGradFromArgmax(**params)(x, gz, argmax), [x, gz], [xv, gzv])
    check_shapes(MaxPoolArgmaxGather(**params)(x, x, argmax), [x], [xv])


def test_debugmode():
    """Each node's C against its perform: the training step through the
    rewrite (the 2x2 vector path), and the ops built directly on 3D windows
    (the generic scans)."""
    rng = np.random.default_rng(7)
    x, gz = T.ftensor4("x"), T.ftensor4("gz")
    xv = np.maximum(rng.standard_normal((3, 4, 10, 21)), 0).astype("float32")
    y = pool_2d(x, (2, 2), ignore_border=True)
    g = symgraph.grad((y ** 2).sum(), x)
    params = dict(ndim=3, ignore_border=False, ws=(2, 3, 2), stride=(2, 2, 2))
    y3, argmax = MaxPoolWithArgmax(**params)(x)
    g3 = MaxPoolGradFromArgmax(**params)(x, y3 * 2, argmax)
    outs = [y, g, y3, argmax, g3]
    f = symgraph.function([x], outs, mode="DebugMode")
    assert "MaxPoolGradFromArgmax" in _pool_ops(f) and "MaxPoolGrad" not in _pool_ops(f)
    ref = symgraph.function([x], outs, mode=symgraph.Mode(optimizer=None, linker="py"))
    for got, want in zip(f(xv), ref(xv)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
