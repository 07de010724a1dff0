"""The C kernels of Softmax, LogSoftmax and SoftmaxGrad against their Python ``perform``.

Kernels are run through ``kernel_harness`` (compiled once per source: the
source depends on the op, its axis and the dtype, not on the rank) over axes,
dtypes, layouts (the row path, the column path, the gathered path), sizes 0
and 1, and rows of huge values, -inf, +inf and NaN; then through
``symgraph.function`` for the graphs of a softmax classifier and its gradient,
whose softmax nodes must all run natively.
"""

import functools

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native.linker import node_kernel
from symgraph.backends.cpu.nnet.softmax import BLOCK, COLS, STREAM_BYTES
from symgraph.ops import nnet, nnet_loss
from tests.native.kernel_harness import KernelError, run_kernel, run_python

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RTOL = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}
OPS = ("softmax", "logsoftmax", "grad")


@functools.lru_cache(maxsize=None)
def _node(op, dtype, ndim, axis):
    """The node of ``op`` over ``axis`` of ``ndim``-d ``dtype`` inputs."""
    x = T.tensor(dtype, shape=(None,) * ndim)
    if op == "grad":
        dy = T.tensor(dtype, shape=(None,) * ndim)
        return nnet.SoftmaxGrad(axis)(dy, x).owner
    return getattr(nnet, op)(x, axis=axis).owner


def _inputs(op, x, rng):
    """The node's inputs for the logits ``x``: ``x``, or (dy, softmax of x)."""
    if op != "grad":
        return [x]
    work = x.astype("float64")
    with np.errstate(all="ignore"):
        sm = nnet.Softmax.compute(work, None if x.ndim == 0 else -1).astype(x.dtype) \
            if x.size else x.copy()
    dy = rng.standard_normal(x.shape).astype(x.dtype)
    return [dy, sm]


def _check(node, inputs):
    """C == Python: dtype, shape, NaN positions, and values to float rounding
    (libmvec's exp and the order of the sums differ from NumPy's by a few ulp)."""
    (got,) = run_kernel(node, inputs)
    (want,) = run_python(node, inputs)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    rtol = RTOL[str(want.dtype)]
    op = node.op
    if isinstance(op, nnet.Softmax):
        atol = 1e-35 if want.dtype != np.float16 else 0   # exp's subnormal results
    elif isinstance(op, nnet.LogSoftmax):
        atol = 4 * rtol   # log(sum) near 0: its error is absolute
    else:
        scale = float(np.max(np.abs(inputs[0]), initial=1.0))
        atol = 4 * rtol * scale   # dy*sm - sm*s cancels
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _layouts(shape, dtype, rng, scale=3.0):
    """The same logical values laid out in several ways: contiguous, reversed
    (negative strides), every other element, transposed memory, reversed along
    the last dimension."""
    base = (rng.standard_normal(shape) * scale).astype(dtype)
    out = [base]
    if base.ndim:
        out.append(base[::-1])
        big = (rng.standard_normal([2 * s for s in shape]) * scale).astype(dtype)
        out.append(big[tuple(slice(None, None, 2) for _ in shape)])
        out.append(np.asfortranarray(base))
        out.append(base[..., ::-1])
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2])
@pytest.mark.parametrize("op", OPS)
def test_axes_layouts_dtypes(op, axis, dtype, rng):
    node = _node(op, dtype, 3, axis)
    for x in _layouts((4, 5, 6), dtype, rng):
        _check(node, _inputs(op, x, rng))


@pytest.mark.parametrize("axis", [None, -1, 0])
@pytest.mark.parametrize("op", OPS)
def test_float16_is_computed_in_float32(op, axis, rng):
    node = _node(op, "float16", 2, axis)
    for x in _layouts((5, 7), "float16", rng, scale=2.0):
        _check(node, _inputs(op, x, rng))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0), (1, 5), (5, 1), (1, 1)])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("op", OPS)
def test_size_zero_and_one(op, axis, shape, rng):
    node = _node(op, "float64", 2, axis)
    x = rng.standard_normal(shape)
    _check(node, _inputs(op, x, rng))
    _check(node, _inputs(op, x[::-1, ::-1], rng))


@pytest.mark.parametrize("op", OPS)
def test_zero_d(op, rng):
    node = _node(op, "float64", 0, None)
    for value in (0.5, -np.inf, np.nan):
        _check(node, _inputs(op, np.array(value), rng))


def _special_rows(dtype, n=37):
    """Rows of huge values, huge spreads, -inf, +inf and NaN (one row each)."""
    rows = [np.full(n, 1000.0), np.linspace(-1000, 1000, n), np.full(n, -1000.0),
            np.full(n, -np.inf), np.r_[np.full(n - 1, -np.inf), 0.0],
            np.r_[np.inf, np.zeros(n - 1)], np.full(n, np.nan), np.r_[np.zeros(n - 1), np.nan],
            np.r_[np.full(n - 1, 1e30), -1e30], np.arange(n) * 0.01]
    return np.array(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_huge_inf_and_nan_rows(op, dtype, rng):
    x = _special_rows(dtype)
    row_node, col_node = _node(op, dtype, 2, -1), _node(op, dtype, 2, 0)
    _check(row_node, _inputs(op, x, rng))
    _check(row_node, _inputs(op, x[:, ::-1], rng))    # gathered rows
    # Along axis 0 (the column path): the same rows as columns.
    xt = np.ascontiguousarray(x.T)
    inputs = _inputs(op, x, rng)
    _check(col_node, [np.ascontiguousarray(a.T) for a in inputs])
    _check(col_node, [np.asfortranarray(a).T[::-1] for a in inputs])
    if op != "grad":
        (got,) = run_kernel(row_node, [x])
        assert np.isnan(got[3]).all() and np.isnan(got[5]).all() and np.isnan(got[6:8]).all()
        assert not np.isnan(got[[0, 1, 2, 4, 8, 9]]).any()   # (-inf in log-softmax)
        (col,) = run_kernel(col_node, [xt])
        np.testing.assert_array_equal(np.isnan(col), np.isnan(got.T))


@pytest.mark.parametrize("op", OPS)
def test_long_rows_and_wide_panels(op, rng):
    """Rows over several blocks with a tail; columns over several panels."""
    node = _node(op, "float32", 2, -1)
    n = 2 * BLOCK + 37
    x = (rng.standard_normal((3, n)) * 4).astype("float32")
    _check(node, _inputs(op, x, rng))
    col = _node(op, "float32", 2, 0)
    x = (rng.standard_normal((9, 2 * COLS + 5)) * 4).astype("float32")
    inputs = _inputs(op, x.T.copy(), rng)
    _check(col, [a.T for a in inputs])                  # axis 0 contiguous: rows
    _check(col, [np.ascontiguousarray(a.T) for a in inputs])   # panels of columns
    x3 = (rng.standard_normal((3, 11, 2 * COLS + 1))).astype("float32")
    _check(_node(op, "float32", 3, 1), _inputs(op, x3, rng))


@pytest.mark.parametrize("dtype,shape", [("float32", (1100, 1024)), ("float64", (520, 1031))])
def test_large_softmax_streamed_rows_keep_their_bits(dtype, shape, rng):
    """Outputs of STREAM_BYTES or more are stored past the cache (the float64
    rows of 1031 elements start off 64-byte boundaries): each row has the bits
    it has in a small output, and the values match perform."""
    assert np.prod(shape) * np.dtype(dtype).itemsize >= STREAM_BYTES
    node = _node("softmax", dtype, 2, -1)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    (big,) = run_kernel(node, [x])
    for rows in (slice(0, 3), slice(shape[0] - 5, shape[0])):
        (small,) = run_kernel(node, [x[rows]])
        np.testing.assert_array_equal(big[rows], small)
    _check(node, [x])


def test_grad_shape_mismatch_message(rng):
    node = _node("grad", "float64", 2, -1)
    dy, sm = np.ones((2, 3)), np.ones((3, 3))
    with pytest.raises(ValueError) as py_err:
        run_python(node, [dy, sm])
    with pytest.raises(KernelError) as c_err:
        run_kernel(node, [dy, sm])
    assert str(c_err.value) == str(py_err.value)
    with pytest.raises(KernelError, match=r"shape \(4,\) but the softmax has shape \(3,\)"):
        run_kernel(_node("grad", "float64", 1, -1), [np.ones(4), np.ones(3)])


# -- through symgraph.function ---------------------------------------------------

# The cross-entropy forms become the fused ops of ops/nnet_loss.py (opt/stabilize_nnet.py).
NNET_OPS = (nnet.Softmax, nnet.LogSoftmax, nnet.SoftmaxGrad, nnet_loss.SoftmaxCrossEntropy1Hot,
            nnet_loss.SoftmaxCrossEntropy1HotGrad)


def _classifier(form, rng):
    """A W4-style step: a dense layer's softmax cross-entropy and its gradients."""
    W = symgraph.shared((rng.standard_normal((20, 10)) * 0.3).astype("float32"), name="W")
    b = symgraph.shared(np.zeros(10, dtype="float32"), name="b")
    x, y = T.matrix("x", dtype="float32"), T.lvector("y")
    logits = T.dot(x, W) + b
    if form == "logsoftmax":
        cost = -T.mean(nnet.logsoftmax(logits)[T.arange(y.shape[0]), y])
    elif form == "log_of_softmax":
        cost = -T.mean(T.log(nnet.softmax(logits))[T.arange(y.shape[0]), y])
    else:   # a softmax output used as such (its gradient is SoftmaxGrad)
        target = T.matrix("t", dtype="float32")
        x_extra = [target]
        cost = T.sum((nnet.softmax(logits) - target) ** 2)
        return [x] + x_extra, cost, [W, b]
    return [x, y], cost, [W, b]


@pytest.mark.parametrize("form", ["logsoftmax", "log_of_softmax", "squared"])
def test_classifier_graphs_run_natively(form, rng):
    inputs, cost, params = _classifier(form, rng)
    outputs = [cost] + symgraph.grad(cost, params)
    f = symgraph.function(inputs, outputs, mode=symgraph.Mode(linker="c|py"))
    ref = symgraph.function(inputs, outputs, mode=symgraph.Mode(linker="py"))
    nodes = [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, NNET_OPS)]
    assert nodes, symgraph.printing.debugprint(f, file="str")
    for node in nodes:
        assert node_kernel(node) is not None, node
    assert f.native is not None
    for node in f.native.step_nodes:
        if isinstance(node.op, NNET_OPS):
            assert node_kernel(node) is not None
    xv = rng.standard_normal((16, 20)).astype("float32")
    second = rng.integers(0, 10, 16) if form != "squared" else \
        rng.random((16, 10)).astype("float32")
    for got, want in zip(f(xv, second), ref(xv, second)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_function_matches_numpy(axis, rng):
    """The compiled library (libmvec's exp, -O3) on a larger matrix."""
    x = T.matrix("x", dtype="float32")
    f = symgraph.function([x], [nnet.softmax(x, axis=axis), nnet.logsoftmax(x, axis=axis)],
                          mode=symgraph.Mode(linker="c|py"))
    xv = (rng.standard_normal((64, 300)) * 3).astype("float32")
    sm, lsm = f(xv)
    np.testing.assert_allclose(sm, nnet.Softmax.compute(xv, axis), rtol=1e-6, atol=1e-35)
    np.testing.assert_allclose(lsm, nnet.LogSoftmax.compute(xv, axis), rtol=1e-6, atol=4e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, axis", [((37, 300), 1), ((37, 300), 0), ((5000, 300), 0),
                                         ((5, 9, 40), 2), ((3, 1, 64), 1)])
def test_openmp_splits_rows_with_the_same_bits(op, shape, axis, rng):
    # Threads split a dimension other than the axis; each row is computed by
    # the same code, so the result is bit for bit the serial one.
    with symgraph.config.change_flags(openmp=True, openmp_softmax_minsize=0):
        node = _node.__wrapped__(op, "float32", len(shape), axis)
        kernel = node_kernel(node)
    assert kernel.openmp and "omp for schedule(dynamic)" in kernel.source
    assert "sg_region_team()" in kernel.source      # one thread while backing off
    x = rng.standard_normal(shape).astype("float32") * 5
    values = _inputs(op, x, rng)
    serial = run_kernel(_node(op, "float32", len(shape), axis), values)
    with symgraph.config.change_flags(openmp=True, openmp_softmax_minsize=0):
        parallel = run_kernel(node, values, kernel=kernel)
    np.testing.assert_array_equal(parallel[0], serial[0])
