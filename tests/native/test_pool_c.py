"""The C kernels of Pool, MaxPoolGrad, AveragePoolGrad and
DownsampleFactorMaxGradGrad against their Python ``perform``.

Kernels run through ``kernel_harness`` (compiled once per op and dtype) over
window geometries (tiled, overlapping, gaps, padding, partial windows),
layouts (negative strides, strided last dimension, transposed), dtypes,
ties and NaN; then through ``symgraph.function`` in DebugMode, whose pool
nodes must run natively.
"""

import functools

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native.linker import node_kernel
from symgraph.ops.pool import Pool
from symgraph.ops.pool_grad import (AveragePoolGrad, DownsampleFactorMaxGradGrad,
                                    MaxPoolGrad)
from symgraph.tensor.signal.pool import pool_2d
from tests.native.kernel_harness import KernelError, run_kernel, run_python

MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}

GEOMETRIES = {
    # name: (ndim, ws, stride, pad, ignore_border, image shape)
    "tiled": (2, (2, 2), None, None, True, (6, 8)),
    "tiled_rest": (2, (2, 3), None, None, True, (7, 8)),       # rows and cols left over
    # 2x2 vector rows (float32): 17 windows a row, a row and a column left over
    "tiled_wide": (2, (2, 2), None, None, True, (5, 35)),
    "partial": (2, (3, 2), None, None, False, (7, 5)),         # partial windows kept
    "overlap": (2, (3, 2), (1, 1), None, False, (5, 6)),
    "gaps": (2, (2, 2), (3, 4), None, False, (8, 9)),
    "pad_tiled": (2, (3, 3), (3, 3), (2, 1), True, (7, 8)),
    "pad_overlap": (2, (3, 2), (2, 1), (1, 1), True, (6, 5)),
    "3d_tiled": (3, (2, 2, 2), None, (1, 0, 1), True, (5, 4, 6)),
    "3d_overlap": (3, (2, 3, 2), (1, 2, 1), None, False, (3, 5, 4)),
}


@functools.lru_cache(maxsize=None)
def _nodes(geometry, mode, dtype, rank):
    """(forward node, gradient nodes) for the geometry, mode, dtype and rank."""
    nd, ws, stride, pad, ib, _ = GEOMETRIES[geometry]
    op = Pool(ndim=nd, ignore_border=ib, mode=mode, ws=ws, stride=stride, pad=pad)
    x = T.tensor(dtype, shape=(None,) * rank)
    other = T.tensor(dtype, shape=(None,) * rank)
    fwd = op(x).owner
    if mode == "max":
        grads = (MaxPoolGrad(**op.params())(x, other, other).owner,
                 DownsampleFactorMaxGradGrad(**op.params())(x, other, other).owner)
    else:
        grads = (AveragePoolGrad(mode=mode, **op.params())(x, other).owner,)
    return fwd, grads


def _same(node, inputs, dtype):
    (got,) = run_kernel(node, inputs)
    (want,) = run_python(node, inputs)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


def _layouts(array):
    """The same values contiguous, with negative strides, with a strided last
    dimension, and with transposed memory."""
    yield array
    yield array[::-1, ..., ::-1].copy()[::-1, ..., ::-1]
    wide = np.zeros(array.shape[:-1] + (2 * array.shape[-1],), dtype=array.dtype)
    wide[..., ::2] = array
    yield wide[..., ::2]
    yield np.ascontiguousarray(np.swapaxes(array, -1, -2)).swapaxes(-1, -2)


def _check_all(geometry, mode, dtype, x, rng):
    """Forward and gradients, C against Python, for the input x in every layout."""
    fwd, grads = _nodes(geometry, mode, dtype, x.ndim)
    for xl in _layouts(x):
        _same(fwd, [xl], dtype)
    (out,) = run_python(fwd, [x])
    gz = rng.standard_normal(out.shape).astype(dtype)
    for node in grads:
        if isinstance(node.op, MaxPoolGrad):
            for xl, gl in zip(_layouts(x), _layouts(gz)):
                _same(node, [xl, out, gl], dtype)
        elif isinstance(node.op, DownsampleFactorMaxGradGrad):
            ggx = rng.standard_normal(x.shape).astype(dtype)
            for xl, gl in zip(_layouts(x), _layouts(ggx)):
                _same(node, [xl, out, gl], dtype)
        else:
            for gl in _layouts(gz):
                _same(node, [x, gl], dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_c_matches_python_float64(geometry, mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3) + GEOMETRIES[geometry][5])
    _check_all(geometry, mode, "float64", x, rng)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,geometry", [("float32", "pad_overlap"), ("float16", "tiled_rest"),
                                            ("float32", "tiled_wide")])
def test_c_matches_python_float32_float16(geometry, mode, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2) + GEOMETRIES[geometry][5]).astype(dtype)
    _check_all(geometry, mode, dtype, x, rng)


@pytest.mark.parametrize("geometry", ["tiled", "tiled_wide", "overlap", "3d_tiled"])
def test_ties_and_nan(geometry):
    """Ties go to the first maximum, NaN wins the window and gets the gradient,
    in the tiled path (first geometry) as in the generic one."""
    rng = np.random.default_rng(2)
    img = GEOMETRIES[geometry][5]
    x = rng.integers(0, 3, size=(2, 2) + img).astype("float32")   # many ties
    x.flat[rng.choice(x.size, size=x.size // 10, replace=False)] = np.nan
    _check_all(geometry, "max", "float32", x, rng)


@pytest.mark.parametrize("rank", [2, 3, 5])
def test_ranks(rank):
    rng = np.random.default_rng(3)
    shape = (2,) * (rank - 2) + (6, 8)
    _check_all("tiled", "max", "float64", rng.standard_normal(shape), rng)
    _check_all("partial", "average_exc_pad", "float64", rng.standard_normal(shape[:-2] + (7, 5)),
               rng)


@pytest.mark.parametrize("shape", [(0, 3, 6, 8), (2, 3, 0, 8), (2, 3, 6, 0), (1, 1, 1, 1)])
def test_empty_and_tiny(shape):
    rng = np.random.default_rng(4)
    for geometry in ("tiled", "partial"):
        _check_all(geometry, "max", "float64", rng.standard_normal(shape), rng)
        _check_all(geometry, "average_inc_pad", "float64", rng.standard_normal(shape), rng)


def test_grad_shape_mismatch_is_an_error():
    fwd, (grad, gradgrad) = _nodes("tiled", "max", "float64", 4)
    x = np.zeros((2, 3, 6, 8))
    with pytest.raises(KernelError, match=r"the output gradient has shape \(2, 3, 3, 3\) but "
                                          r"pooling an input of shape \(2, 3, 6, 8\) gives "
                                          r"\(2, 3, 3, 4\)"):
        run_kernel(grad, [x, np.zeros((2, 3, 3, 4)), np.zeros((2, 3, 3, 3))])
    with pytest.raises(KernelError, match="input-shaped gradient has shape"):
        run_kernel(gradgrad, [x, np.zeros((2, 3, 3, 4)), np.zeros((2, 3, 6, 7))])


def test_debugmode_training_graph_runs_natively():
    """A pool layer's forward and gradients in DebugMode (each node's C against
    its perform), every pooling node with native code."""
    rng = np.random.default_rng(5)
    x = T.ftensor4("x")
    xv = rng.standard_normal((3, 2, 9, 8)).astype("float32")
    for mode in MODES:
        y = pool_2d(x, (2, 3), ignore_border=False, stride=(2, 2), mode=mode)
        cost = (y ** 2).sum()
        g = symgraph.grad(cost, x)
        outs = [y, g]
        if mode == "max":
            outs.append(symgraph.grad((g ** 2).sum(), x))
        f = symgraph.function([x], outs, mode="DebugMode")
        ref = symgraph.function([x], outs, mode=symgraph.Mode(linker="py"))
        for got, want in zip(f(xv), ref(xv)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        pool_nodes = [n for n in f.maker.fgraph.apply_nodes
                      if isinstance(n.op, (Pool, MaxPoolGrad, AveragePoolGrad,
                                           DownsampleFactorMaxGradGrad))]
        assert pool_nodes and all(node_kernel(n) is not None for n in pool_nodes)


def test_no_kernel_for_integers():
    x = T.tensor("int32", shape=(None, None))
    node = pool_2d(x, (2, 2)).owner
    assert node_kernel(node) is None
    xv = np.arange(20, dtype="int32").reshape(4, 5)
    got = symgraph.function([x], pool_2d(x, (2, 2)))(xv)
    np.testing.assert_array_equal(got, [[6, 8, 9], [16, 18, 19]])
