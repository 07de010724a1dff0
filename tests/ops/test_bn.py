"""Batch normalization: ``symgraph.tensor.nnet.bn`` and the ops of ``ops/bn.py``.

Values against NumPy formulas (per-activation, spatial, custom axes; float16,
float32, float64), running averages over several training steps, gradients
of every differentiable input (the second derivative too), inferred shapes,
errors, and the C kernels against the Python ``perform`` over layouts, odd
shapes and data far from zero.
"""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops import bn as bn_ops
from symgraph.tensor.nnet import bn
from tests.native.kernel_harness import KernelError, run_kernel, run_python
from tests.ops.op_checks import check_shapes, verify_grad
from symgraph.backends.cpu.lowerings import cpu_kernel

TOL = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def _axes(axes, ndim):
    if axes == "per-activation":
        return (0,)
    if axes == "spatial":
        return (0,) + tuple(range(2, ndim))
    return tuple(axes)


def ref_train(x, gamma, beta, axes, eps=1e-4):
    """NumPy in float64: out, mean, invstd (mean and invstd keep the axes as 1s)."""
    x = x.astype("float64")
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    invstd = 1 / np.sqrt(var + eps)
    return (x - mean) * invstd * gamma + beta, mean, invstd, var


def _params(rng, x_shape, axes, dtype, short, n=2):
    """``n`` random parameters: the kept dimensions only (short) or the full rank."""
    full = tuple(1 if d in axes else s for d, s in enumerate(x_shape))
    kept = tuple(s for d, s in enumerate(x_shape) if d not in axes)
    return [rng.standard_normal(kept if short else full).astype(dtype) for _ in range(n)], full


def _var(value, name):
    return T.tensor(str(value.dtype), shape=tuple(1 if s == 1 else None for s in value.shape),
                    name=name)


def _close(got, want, dtype, scale=1.0):
    np.testing.assert_allclose(np.asarray(got, "float64"), want, rtol=TOL[dtype],
                               atol=TOL[dtype] * scale)


# -- values ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("axes,shape", [("per-activation", (6, 5)),
                                        ("per-activation", (4, 3, 5, 2)),
                                        ("spatial", (4, 3, 5, 6)),
                                        ("spatial", (5, 2, 7)),
                                        ((1, 3), (2, 4, 3, 5)),
                                        ((0, 1, 2), (3, 4, 5)),
                                        ((2,), (3, 4, 5))])
@pytest.mark.parametrize("short", [True, False])
def test_train_values(axes, shape, dtype, short, rng):
    ax = _axes(axes, len(shape))
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    (gamma, beta), full = _params(rng, shape, ax, dtype, short)
    xs, gs, bs = _var(x, "x"), _var(gamma, "gamma"), _var(beta, "beta")
    outs = bn.batch_normalization_train(xs, gs, bs, axes)
    assert [o.dtype for o in outs] == [dtype] * 3
    got = symgraph.function([xs, gs, bs], list(outs))(x, gamma, beta)
    want = ref_train(x, gamma.reshape(full), beta.reshape(full), ax)
    form = (lambda a: a.reshape(gamma.shape)) if short else (lambda a: a)
    assert got[1].shape == gamma.shape and got[2].shape == gamma.shape
    _close(got[0], want[0], dtype, 4)
    _close(got[1], form(want[1]), dtype, 4)
    _close(got[2], form(want[2]), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("axes,shape", [("per-activation", (6, 5)), ("spatial", (4, 3, 5, 6)),
                                        ((1, 3), (2, 4, 3, 5))])
def test_inference_values(axes, shape, dtype, rng):
    ax = _axes(axes, len(shape))
    x = rng.standard_normal(shape).astype(dtype)
    (gamma, beta, mean), full = _params(rng, shape, ax, dtype, True, 3)
    var = (rng.random(gamma.shape) + 0.5).astype(dtype)
    inputs = [_var(v, n) for v, n in zip((x, gamma, beta, mean, var), "xgbmv")]
    out = bn.batch_normalization_test(*inputs, axes=axes, epsilon=1e-3)
    got = symgraph.function(inputs, out)(x, gamma, beta, mean, var)
    r = [a.astype("float64").reshape(full) for a in (gamma, beta, mean, var)]
    want = (x - r[2]) * r[0] / np.sqrt(r[3] + 1e-3) + r[1]
    _close(got, want, dtype, 4)


def test_full_and_short_parameters_agree(rng):
    x = rng.standard_normal((4, 3, 2, 2))
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    xs, gs, bs = T.dtensor4("x"), T.dvector("g"), T.dvector("b")
    short = bn.batch_normalization_train(xs, gs, bs, "spatial")
    gf = T.TensorType("float64", shape=(1, None, 1, 1))("gf")
    bf = T.TensorType("float64", shape=(1, None, 1, 1))("bf")
    full = bn.batch_normalization_train(xs, gf, bf, "spatial")
    assert full[1].broadcastable == (True, False, True, True)
    a = symgraph.function([xs, gs, bs], list(short))(x, gamma, beta)
    b = symgraph.function([xs, gf, bf], list(full))(x, gamma.reshape(1, 3, 1, 1),
                                                    beta.reshape(1, 3, 1, 1))
    for u, v in zip(a, b):
        np.testing.assert_allclose(u.reshape(v.shape), v, rtol=1e-14)


def test_data_far_from_zero_keeps_its_variance(rng):
    # A one-pass sum of squares would lose every digit of this variance.
    x = (1e4 + rng.standard_normal((64, 3, 9, 9))).astype("float32")
    xs, gs, bs = T.ftensor4("x"), T.fvector("g"), T.fvector("b")
    _, mean, invstd = bn.batch_normalization_train(xs, gs, bs, "spatial")
    got = symgraph.function([xs, gs, bs], [mean, invstd])(x, np.ones(3, "f4"), np.zeros(3, "f4"))
    _, want_mean, want_invstd, _ = ref_train(x, 1, 0, (0, 2, 3))
    np.testing.assert_allclose(got[0], want_mean.ravel(), rtol=1e-6)
    np.testing.assert_allclose(got[1], want_invstd.ravel(), rtol=1e-3)


def test_running_averages_over_steps(rng):
    shape, factor = (5, 3, 4, 4), 0.3
    xs = T.dtensor4("x")
    gamma = symgraph.shared(rng.standard_normal(3), name="gamma")
    beta = symgraph.shared(rng.standard_normal(3), name="beta")
    rmean = symgraph.shared(np.zeros(3), name="running_mean")
    rvar = symgraph.shared(np.ones(3), name="running_var")
    out, mean, invstd, new_mean, new_var = bn.batch_normalization_train(
        xs, gamma, beta, "spatial", epsilon=1e-3, running_average_factor=factor,
        running_mean=rmean, running_var=rvar)
    step = symgraph.function([xs], [out, mean], updates=[(rmean, new_mean), (rvar, new_var)])
    want_mean, want_var = np.zeros(3), np.ones(3)
    m = 5 * 4 * 4
    for _ in range(4):
        x = rng.standard_normal(shape) * 3 + 2
        got_out, got_mean = step(x)
        want_mean = want_mean * (1 - factor) + x.mean((0, 2, 3)) * factor
        want_var = want_var * (1 - factor) + x.var((0, 2, 3)) * m / (m - 1) * factor
        np.testing.assert_allclose(rmean.get_value(), want_mean, rtol=1e-12)
        np.testing.assert_allclose(rvar.get_value(), want_var, rtol=1e-12)
        ref = ref_train(x, gamma.get_value().reshape(1, 3, 1, 1),
                        beta.get_value().reshape(1, 3, 1, 1), (0, 2, 3), 1e-3)
        np.testing.assert_allclose(got_out, ref[0], rtol=1e-12, atol=1e-12)
    # The test form with the running averages normalizes as they say.
    test_out = bn.batch_normalization_test(xs, gamma, beta, rmean, rvar, "spatial", 1e-3)
    x = rng.standard_normal(shape)
    s = (None, slice(None), None, None)
    want = (x - want_mean[s]) / np.sqrt(want_var[s] + 1e-3) * gamma.get_value()[s] + \
        beta.get_value()[s]
    np.testing.assert_allclose(symgraph.function([xs], test_out)(x), want, rtol=1e-12)


def test_running_averages_keep_the_type_of_full_parameters(rng):
    xs = T.fmatrix("x")
    g = symgraph.shared(np.ones((1, 4), "f4"), name="g")
    rmean = symgraph.shared(np.zeros((1, 4), "f4"), name="rm")
    rvar = symgraph.shared(np.ones((1, 4), "f4"), name="rv")
    outs = bn.batch_normalization_train(xs, g, g, running_mean=rmean, running_var=rvar)
    assert outs[3].type == rmean.type and outs[4].type == rvar.type
    step = symgraph.function([xs], [], updates=[(rmean, outs[3]), (rvar, outs[4])])
    x = rng.standard_normal((6, 4)).astype("f4")
    step(x)
    np.testing.assert_allclose(rmean.get_value(), 0.1 * x.mean(0, keepdims=True), rtol=1e-5)


def test_one_element_per_channel_has_nan_running_variance():
    x = T.dmatrix("x")
    outs = bn.batch_normalization_train(x, np.ones(3), np.zeros(3),
                                        running_mean=np.zeros(3), running_var=np.ones(3))
    got = symgraph.function([x], list(outs))(np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(got[0], 0.0)
    assert np.isnan(got[4]).all()


def test_batch_normalization_elementwise(rng):
    x, g, b, m, s = (rng.standard_normal((4, 5)) for _ in range(5))
    s = np.abs(s) + 0.5
    inputs = T.dmatrices("x", "g", "b", "m", "s")
    want = (x - m) * (g / s) + b
    for mode in ("low_mem", "high_mem"):
        out = bn.batch_normalization(*inputs, mode=mode)
        np.testing.assert_allclose(symgraph.function(inputs, out)(x, g, b, m, s), want,
                                   rtol=1e-14)
    verify_grad(lambda *a: bn.batch_normalization(*a), [x, g, b, m, s])
    with pytest.raises(ValueError, match="low_mem"):
        bn.batch_normalization(*inputs, mode="fast")


# -- gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("axes,shape", [("per-activation", (5, 3)), ("spatial", (3, 2, 3, 2)),
                                        ((1,), (3, 4))])
def test_train_gradient_of_out(axes, shape, rng):
    ax = _axes(axes, len(shape))
    x = rng.standard_normal(shape)
    (gamma, beta), _ = _params(rng, shape, ax, "float64", True)

    def out(x, g, b):
        return bn.batch_normalization_train(x, g, b, axes)[0]

    verify_grad(out, [x, gamma, beta])


def test_train_gradient_of_every_output(rng):
    x = rng.standard_normal((4, 3))
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
    for k in range(5):
        def output(x, g, b, rm, rv, k=k):
            return bn.batch_normalization_train(x, g, b, epsilon=1e-2, running_average_factor=0.3,
                                                running_mean=rm, running_var=rv)[k]
        verify_grad(output, [x, gamma, beta, rm, rv])


def test_train_gradient_of_epsilon_and_factor(rng):
    x = rng.standard_normal((5, 2, 3))
    gamma, beta = rng.standard_normal((1, 2, 1)), rng.standard_normal((1, 2, 1))
    rm, rv = rng.standard_normal((1, 2, 1)), rng.random((1, 2, 1)) + 0.5
    op = bn_ops.AbstractBatchNormTrain((0, 2))

    def all_outputs(x, eps, factor):
        outs = op(x, gamma, beta, eps, factor, rm, rv)
        return sum(o.sum() * w for o, w in zip(outs, (0.3, 1.0, 2.0, -1.5, 0.7)))

    verify_grad(all_outputs, [x, np.array(0.05), np.array(0.2)])


def test_inference_gradient_of_every_input(rng):
    x = rng.standard_normal((4, 3, 2))
    params = [rng.standard_normal((1, 3, 1)) for _ in range(3)]
    var = rng.random((1, 3, 1)) + 0.5
    op = bn_ops.AbstractBatchNormInference((0, 2))
    verify_grad(lambda *a: op(*a), [x] + params + [var, np.array(0.01)])
    verify_grad(lambda x, g, b, m, v: bn.batch_normalization_test(x, g, b, m, v, "spatial"),
                [rng.standard_normal((2, 3, 2, 2))] + [rng.standard_normal(3) for _ in range(3)]
                + [rng.random(3) + 0.5])


def test_train_grad_op_second_derivative(rng):
    x, dy = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    scale, mean = rng.standard_normal((1, 3)), rng.standard_normal((1, 3)) * 0.1
    invstd = rng.random((1, 3)) + 0.5
    op = bn_ops.AbstractBatchNormTrainGrad((0,))
    for k in range(3):
        verify_grad(lambda *a, k=k: op(*a)[k], [x, dy, scale, mean, invstd])


def test_gradient_of_a_gradient_through_the_user_function(rng):
    x = T.dmatrix("x")
    g = T.dvector("g")
    out = bn.batch_normalization_train(x, g, T.zeros_like(g))[0]
    cost = (out ** 3).sum()
    gx = symgraph.grad(cost, x)
    hess_vec = symgraph.grad((gx * gx).sum(), g)
    xv, gv = rng.standard_normal((5, 3)), rng.standard_normal(3)
    f = symgraph.function([x, g], hess_vec)

    def numeric(gv, h=1e-6):
        gfun = symgraph.function([x, g], gx)
        base = np.zeros(3)
        for i in range(3):
            e = np.zeros(3)
            e[i] = h
            base[i] = ((gfun(xv, gv + e) ** 2).sum() - (gfun(xv, gv - e) ** 2).sum()) / (2 * h)
        return base

    np.testing.assert_allclose(f(xv, gv), numeric(gv), rtol=1e-5)


def test_gradient_of_out_alone_builds_no_statistics_terms():
    x, g, b = T.dmatrix("x"), T.dvector("g"), T.dvector("b")
    out = bn.batch_normalization_train(x, g, b)[0]
    grads = symgraph.grad(out.sum(), [x, g, b])
    f = symgraph.function([x, g, b], grads)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert ops.count("AbstractBatchNormTrainGrad") == 1
    assert ops.count("AbstractBatchNormTrain") == 1


# -- shapes ------------------------------------------------------------------------------

def test_infer_shape(rng):
    x = rng.standard_normal((4, 3, 2, 5))
    p = [rng.standard_normal((1, 3, 1, 5)) for _ in range(4)]
    p[3] = np.abs(p[3])
    xs = T.dtensor4("x")
    ps = [T.TensorType("float64", shape=(1, None, 1, None))(f"p{i}") for i in range(4)]
    axes = (0, 2)
    train = bn_ops.AbstractBatchNormTrain(axes)(xs, ps[0], ps[1], 1e-4, 0.1, ps[2], ps[3])
    check_shapes(list(train), [xs] + ps, [x] + p)
    grad = bn_ops.AbstractBatchNormTrainGrad(axes)(xs, xs * 2, ps[0], ps[1], ps[3])
    check_shapes(list(grad), [xs] + ps, [x] + p)
    infer = bn_ops.AbstractBatchNormInference(axes)(xs, *ps)
    check_shapes(infer, [xs] + ps, [x] + p)


# -- errors ------------------------------------------------------------------------------

def test_bad_axes():
    x, g = T.dtensor4("x"), T.dvector("g")
    for axes, match in [("channel", "per-activation"), ((0, 4), "range"), ((), "at least one"),
                        ((0, 0), "repeat"), ((0.5,), "ints"), (3, "per-activation")]:
        with pytest.raises(ValueError, match=match):
            bn.batch_normalization_train(x, g, g, axes)
        with pytest.raises(ValueError, match=match):
            bn.batch_normalization_test(x, g, g, g, g, axes)
    with pytest.raises(ValueError, match="at least one"):
        bn_ops.AbstractBatchNormTrain(())
    with pytest.raises(ValueError, match=r"range\(0, 2\)"):
        bn_ops.AbstractBatchNormTrain((2,))(T.dmatrix(), T.dmatrix(), T.dmatrix())


def test_bad_parameter_shapes(rng):
    x = T.dtensor4("x")
    with pytest.raises(ValueError, match="gamma .* must have one dimension per axis"):
        bn.batch_normalization_train(x, T.dmatrix("gamma"), T.dvector("beta"), "spatial")
    with pytest.raises(ValueError, match="running_var"):
        bn.batch_normalization_train(x, T.dvector(), T.dvector(), "spatial",
                                     running_mean=T.dvector())
    with pytest.raises(ValueError, match="size 1 along the normalized axes"):
        bn_ops.AbstractBatchNormTrain((0,))(T.dmatrix(), np.ones((2, 3)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="epsilon must be positive"):
        bn.batch_normalization_train(x, T.dvector(), T.dvector(), "spatial", epsilon=0)
    # A size that differs at run time: the same message from C and Python.
    g, b = T.dvector("g"), T.dvector("b")
    out = bn.batch_normalization_train(x, g, b, "spatial")[0]
    xv = rng.standard_normal((2, 3, 2, 2))
    for mode in (None, symgraph.Mode(linker="py")):
        f = symgraph.function([x, g, b], out, mode=mode)
        with pytest.raises(ValueError, match=r"scale has shape \(1, 4, 1, 1\), but x of shape "
                                             r"\(2, 3, 2, 2\)"):
            f(xv, np.ones(4), np.ones(3))


def test_epsilon_below_cudnn_bound_is_accepted(rng):
    x = rng.standard_normal((5, 2)) * 1e-3
    xs = T.dmatrix("x")
    out = bn.batch_normalization_train(xs, np.ones(2), np.zeros(2), epsilon=1e-8)[0]
    got = symgraph.function([xs], out)(x)
    want = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-8)
    np.testing.assert_allclose(got, want, rtol=1e-9)


# -- C kernels against perform -----------------------------------------------------------

def _node(kind, dtype, ndim, axes, running=True):
    x = T.tensor(dtype, shape=(None,) * ndim)
    pt = T.TensorType(dtype, shape=tuple(1 if d in axes else None for d in range(ndim)))
    if kind == "train":
        extra = (pt(), pt()) if running else ()
        return bn_ops.AbstractBatchNormTrain(axes)(x, pt(), pt(), 1e-4, 0.1, *extra)[0].owner
    if kind == "grad":
        return bn_ops.AbstractBatchNormTrainGrad(axes)(x, x.type(), pt(), pt(), pt())[0].owner
    return bn_ops.AbstractBatchNormInference(axes)(x, pt(), pt(), pt(), pt()).owner


def _values(kind, x, axes, rng):
    """The node's inputs for data ``x`` (any layout): parameters of the reduced
    shape (the statistics of x for the gradient)."""
    dtype = str(x.dtype)
    work = bn_ops.work_dtype(dtype)
    red = tuple(1 if d in axes else s for d, s in enumerate(x.shape))

    def p():
        return rng.standard_normal(red).astype(dtype)

    eps = np.array(1e-4, work)
    if kind == "train":
        return [x, p(), p(), eps, np.array(0.1, work), p(), (rng.random(red) + 0.5).astype(dtype)]
    with np.errstate(all="ignore"):
        mean = x.astype("float64").mean(axes, keepdims=True) if x.size else np.zeros(red)
    if kind == "grad":
        dy = rng.standard_normal(x.shape).astype(dtype)
        return [x, dy, p(), mean.astype(dtype), (rng.random(red) + 0.5).astype(dtype), eps]
    return [x, p(), p(), mean.astype(dtype), (rng.random(red) + 0.5).astype(dtype), eps]


def _check_c(node, values):
    got, want = run_kernel(node, values), run_python(node, values)
    dtype = str(node.outputs[0].dtype)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        scale = max(1.0, float(np.nanmax(np.abs(w.astype("float64")), initial=0)))
        rtol = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}[dtype]
        np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=rtol,
                                   atol=rtol * scale)


def _layouts(shape, dtype, rng):
    """The same kind of data contiguous, Fortran-ordered, reversed (negative
    strides), every other element, and with the batch axis innermost."""
    base = (rng.standard_normal(shape) * 2).astype(dtype)
    big = (rng.standard_normal([2 * s for s in shape]) * 2).astype(dtype)
    yield base
    yield np.asfortranarray(base)
    yield base[::-1, ..., ::-1]
    yield big[tuple(slice(None, None, 2) for _ in shape)]
    yield np.moveaxis(np.ascontiguousarray(np.moveaxis(base, 0, -1)), -1, 0)


@pytest.mark.parametrize("kind", ["train", "grad", "infer"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [(0,), (0, 2, 3), (1, 3), (3,), (0, 1, 2, 3)])
def test_c_against_perform(kind, dtype, axes, rng):
    node = _node(kind, dtype, 4, axes)
    for x in _layouts((4, 3, 5, 6), dtype, rng):
        _check_c(node, _values(kind, x, axes, rng))


@pytest.mark.parametrize("kind", ["train", "grad", "infer"])
@pytest.mark.parametrize("axes", [(0,), (0, 2, 3)])
def test_c_float16_is_computed_in_float32(kind, axes, rng):
    node = _node(kind, "float16", 4, axes)
    for x in _layouts((4, 3, 5, 6), "float16", rng):
        _check_c(node, _values(kind, x, axes, rng))


@pytest.mark.parametrize("kind", ["train", "grad", "infer"])
@pytest.mark.parametrize("shape", [(0, 3, 2), (3, 0, 2), (1, 3, 2), (3, 1, 1), (1, 1, 1)])
def test_c_sizes_zero_and_one(kind, shape, rng):
    for axes in [(0,), (0, 2)]:
        node = _node(kind, "float64", 3, axes)
        x = rng.standard_normal(shape)
        _check_c(node, _values(kind, x, axes, rng))


LONG = [((2, 3, 70, 70), (0, 2, 3)), ((3, 5000), (0,)), ((9000, 2), (1,))]


@pytest.mark.parametrize("kind", ["train", "grad"])
def test_c_long_rows(kind, rng):
    # Rows longer than a chunk: of one channel, then of many channels.
    for shape, axes in LONG:
        node = _node(kind, "float32", len(shape), axes)
        _check_c(node, _values(kind, rng.standard_normal(shape).astype("float32"), axes, rng))


@pytest.mark.parametrize("kind", ["train", "grad"])
def test_c_data_far_from_zero(kind, rng):
    # float32 data around 1e3: the kernels accumulate in double, so they are
    # checked against the float64 perform (the float32 one loses 3 digits).
    for shape, axes in LONG:
        node = _node(kind, "float32", len(shape), axes)
        node64 = _node(kind, "float64", len(shape), axes)
        x = (rng.standard_normal(shape) + 1e3).astype("float32")
        values = _values(kind, x, axes, rng)
        got = run_kernel(node, values)
        want = run_python(node64, [v.astype("float64") for v in values])
        # The statistics and the parameter gradients to float32 rounding; the
        # elements of out and dx hold x - mean, rounded in float32 near 1e3.
        for k, (g, w) in enumerate(zip(got, want)):
            tol = 1e-3 if k == 0 else 1e-5
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())


def test_c_train_without_running_averages_and_nonfinite(rng):
    node = _node("train", "float64", 2, (0,), running=False)
    x = rng.standard_normal((5, 4))
    x[2, 1] = np.nan
    x[:, 3] = 7.0   # zero variance
    values = _values("train", x, (0,), rng)[:5]
    _check_c(node, values)
    assert cpu_kernel(node) is not None


def test_c_bad_sizes_raise(rng):
    node = _node("grad", "float64", 2, (0,))
    values = _values("grad", rng.standard_normal((4, 3)), (0,), rng)
    values[1] = rng.standard_normal((4, 2))
    with pytest.raises(KernelError, match=r"dy has shape \(4, 2\), but x has shape \(4, 3\)"):
        run_kernel(node, values)
    node = _node("infer", "float32", 2, (0,))
    values = _values("infer", rng.standard_normal((4, 3)).astype("f4"), (0,), rng)
    values[4] = values[4][:, :2]
    with pytest.raises(KernelError, match="estimated_variance has shape"):
        run_kernel(node, values)


def test_debug_mode_training_step(rng):
    x = T.ftensor4("x")
    g = symgraph.shared(np.ones(3, "f4"), name="g")
    b = symgraph.shared(np.zeros(3, "f4"), name="b")
    out = bn.batch_normalization_train(x, g, b, "spatial")[0]
    cost = (out * out * out).mean()
    grads = symgraph.grad(cost, [g, b])
    f = symgraph.function([x], [cost] + grads, mode="DebugMode")
    f(rng.standard_normal((3, 3, 4, 4)).astype("f4"))
