"""The inplace phase on Gemm, Gemv and Ger: SGD updates written into the weights.

``w <- w - lr * dot(x.T, g)`` becomes ``Gemm{inplace}`` on w's buffer when w
is an updated shared variable (or a mutable input), and never when z is a
value the caller still owns or that another node needs afterwards.  Values
are checked against optimizer=None, and DebugMode checks that the declared
destroy maps match what the kernels do.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph import In, Mode, function, shared
from symgraph.compile.mode import DebugMode
from symgraph.ops.gemm import Gemm, Gemv, Ger

FAST_RUN = Mode(optimizer="fast_run")
NO_INPLACE = Mode(optimizer="fast_run", excluding=["inplace"])
PYTHON = Mode(optimizer="fast_run", linker="py")
REFERENCE = Mode(optimizer=None)
DEBUG = DebugMode(optimizer="fast_run")


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def blas_nodes(f, cls=(Gemm, Gemv, Ger)):
    """The BLAS update nodes of ``f``'s optimized graph."""
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, cls)]


def _mlp_step(rng, mode, dtype="float32"):
    """A two-layer MLP training step with SGD updates of shared weights."""
    cast = lambda a: a.astype(dtype)  # noqa: E731
    params = [shared(cast(rng.standard_normal(s) * 0.3), name=n) for n, s in
              (("w1", (6, 5)), ("b1", (5,)), ("w2", (5, 3)), ("b2", (3,)))]
    w1, b1, w2, b2 = params
    x, t = T.matrix("x", dtype=dtype), T.matrix("t", dtype=dtype)
    h = T.tanh(T.dot(x, w1) + b1)
    loss = T.mean(T.sqr(T.dot(h, w2) + b2 - t))
    grads = symgraph.grad(loss, params)
    lr = np.asarray(0.05, dtype=dtype)
    f = function([x, t], loss, updates=[(p, p - lr * g) for p, g in zip(params, grads)],
                 mode=mode)
    return f, params


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mlp_step_updates_the_weights_in_place(rng, dtype):
    data = [rng.standard_normal((8, 6)).astype(dtype), rng.standard_normal((8, 3)).astype(dtype)]
    f, params = _mlp_step(np.random.default_rng(7), FAST_RUN, dtype)
    ref, ref_params = _mlp_step(np.random.default_rng(7), REFERENCE, dtype)
    gemms = blas_nodes(f, Gemm)
    assert len(gemms) == 2 and all(n.op.inplace for n in gemms)
    assert {n.inputs[0].name for n in gemms} == {"w1", "w2"}
    buffers = [p.get_value(borrow=True) for p in params]
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for _ in range(4):
        np.testing.assert_allclose(f(*data), ref(*data), rtol=rtol)
        for p, r in zip(params, ref_params):
            np.testing.assert_allclose(p.get_value(), r.get_value(), rtol=rtol, atol=rtol)
    # No new arrays: every update was written into the shared value's buffer.
    assert all(p.get_value(borrow=True) is b for p, b in zip(params, buffers))


def test_debug_mode_accepts_the_in_place_updates(rng):
    """DebugMode compares each native result with perform and checks that only
    declared inputs change: the in-place kernels must match their destroy_map."""
    data = [_f32(rng, 8, 6), _f32(rng, 8, 3)]
    f, params = _mlp_step(np.random.default_rng(3), DEBUG)
    ref, ref_params = _mlp_step(np.random.default_rng(3), REFERENCE)
    assert all(n.op.inplace for n in blas_nodes(f, Gemm))
    for _ in range(2):
        np.testing.assert_allclose(f(*data), ref(*data), rtol=1e-5)
    for p, r in zip(params, ref_params):
        np.testing.assert_allclose(p.get_value(), r.get_value(), rtol=1e-5, atol=1e-6)


def test_python_linker_perform_updates_in_place(rng):
    data = [_f32(rng, 8, 6), _f32(rng, 8, 3)]
    f, params = _mlp_step(np.random.default_rng(5), PYTHON)
    ref, ref_params = _mlp_step(np.random.default_rng(5), REFERENCE)
    buf = params[0].get_value(borrow=True)
    for _ in range(3):
        np.testing.assert_allclose(f(*data), ref(*data), rtol=1e-5)
    assert params[0].get_value(borrow=True) is buf
    np.testing.assert_allclose(buf, ref_params[0].get_value(), rtol=1e-5, atol=1e-6)


def test_excluding_the_inplace_tag_keeps_the_copy(rng):
    f, _ = _mlp_step(rng, NO_INPLACE)
    assert blas_nodes(f, Gemm) and not any(n.op.inplace for n in blas_nodes(f))


def test_gemv_and_ger_updates_are_in_place(rng):
    w = shared(_f32(rng, 4, 3), name="w")
    v = shared(_f32(rng, 4), name="v")
    a, b = T.fvector("a"), T.fvector("b")
    lr = np.float32(0.1)
    f = function([a, b], [], updates=[(w, w - lr * T.outer(a, b)),
                                       (v, v - lr * T.dot(w, b))])
    kinds = {type(n.op): n.op.inplace for n in blas_nodes(f)}
    assert kinds == {Ger: True, Gemv: True}
    w0, v0 = w.get_value(), v.get_value()
    wbuf, vbuf = w.get_value(borrow=True), v.get_value(borrow=True)
    av, bv = _f32(rng, 4), _f32(rng, 3)
    f(av, bv)
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * np.outer(av, bv), rtol=1e-5)
    # Both updates read the OLD w: the Gemv runs before the Ger overwrites it.
    np.testing.assert_allclose(v.get_value(), v0 - 0.1 * w0 @ bv, rtol=1e-5, atol=1e-6)
    assert w.get_value(borrow=True) is wbuf and v.get_value(borrow=True) is vbuf


def test_plain_input_is_never_overwritten(rng):
    z, x, y = T.fmatrix("z"), T.fmatrix("x"), T.fmatrix("y")
    f = function([z, x, y], z - np.float32(0.5) * T.dot(x, y))
    assert blas_nodes(f, Gemm) and not any(n.op.inplace for n in blas_nodes(f))
    zv, xv, yv = _f32(rng, 3, 4), _f32(rng, 3, 2), _f32(rng, 2, 4)
    keep = zv.copy()
    np.testing.assert_allclose(f(zv, xv, yv), keep - 0.5 * xv @ yv, rtol=1e-5)
    np.testing.assert_array_equal(zv, keep)


def test_mutable_input_may_be_overwritten(rng):
    z, x, y = T.fmatrix("z"), T.fmatrix("x"), T.fmatrix("y")
    f = function([In(z, mutable=True), x, y], z - np.float32(0.5) * T.dot(x, y))
    assert [n.op.inplace for n in blas_nodes(f, Gemm)] == [True]
    zv, xv, yv = _f32(rng, 3, 4), _f32(rng, 3, 2), _f32(rng, 2, 4)
    expected = zv - 0.5 * xv @ yv
    out = f(zv, xv, yv)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    np.testing.assert_allclose(zv, expected, rtol=1e-5)   # the caller allowed it


def test_weights_read_after_the_update_keep_their_old_value(rng):
    """The cost is computed from the old w; the update may not clobber it first."""
    w = shared(_f32(rng, 3, 3), name="w")
    x = T.fmatrix("x")
    new_w = w - np.float32(0.1) * T.dot(x.T, x)
    f = function([x], T.sum(T.dot(x, w)), updates=[(w, new_w)])
    xv = _f32(rng, 4, 3)
    w0 = w.get_value()
    np.testing.assert_allclose(f(xv), np.sum(xv @ w0), rtol=1e-5)
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * xv.T @ xv, rtol=1e-5, atol=1e-6)


def test_weights_returned_as_an_output_are_not_overwritten(rng):
    w = shared(_f32(rng, 3, 3), name="w")
    x = T.fmatrix("x")
    f = function([x], w, updates=[(w, w - np.float32(0.1) * T.dot(x.T, x))])
    assert not any(n.op.inplace for n in blas_nodes(f))
    xv = _f32(rng, 4, 3)
    w0 = w.get_value()
    np.testing.assert_allclose(f(xv), w0)
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * xv.T @ xv, rtol=1e-5, atol=1e-6)


def test_failing_call_leaves_the_weights_alone(rng):
    """A shape error before the update raises with w unchanged (destroyers last)."""
    w = shared(_f32(rng, 3, 3), name="w")
    x, y = T.fmatrix("x"), T.fmatrix("y")
    f = function([x, y], T.sum(x + y), updates=[(w, w - np.float32(0.1) * T.dot(x.T, x))])
    assert [n.op.inplace for n in blas_nodes(f, Gemm)] == [True]
    w0 = w.get_value()
    with pytest.raises(ValueError):
        f(_f32(rng, 4, 3), _f32(rng, 5, 3))
    np.testing.assert_array_equal(w.get_value(), w0)


def test_wrong_z_shape_raises_without_writing(rng):
    """The in-place kernel checks shapes itself (no shape function call)."""
    w = shared(_f32(rng, 3, 3), name="w")
    x, y = T.fmatrix("x"), T.fmatrix("y")
    f = function([x, y], [], updates=[(w, w - np.float32(0.1) * T.dot(x, y))])
    assert [n.op.inplace for n in blas_nodes(f, Gemm)] == [True]
    w0 = w.get_value()
    with pytest.raises(ValueError, match="z has shape"):
        f(_f32(rng, 2, 4), _f32(rng, 4, 3))
    np.testing.assert_array_equal(w.get_value(), w0)


def test_update_reading_the_weights_twice_is_right(rng):
    """``w - lr * dot(w.T, w)``: x and y are views of z, so writing z early
    would corrupt them; the rewrite must leave it out of place (or be right)."""
    w = shared(_f32(rng, 3, 3), name="w")
    f = function([], [], updates=[(w, w - np.float32(0.1) * T.dot(w.T, w))])
    gemms = blas_nodes(f, Gemm)
    assert gemms and not any(n.op.inplace for n in gemms)
    w0 = w.get_value()
    f()
    np.testing.assert_allclose(w.get_value(), w0 - 0.1 * w0.T @ w0, rtol=1e-5, atol=1e-6)
