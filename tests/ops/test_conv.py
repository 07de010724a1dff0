"""The abstract convolution ops and their user functions (conv2d, conv3d and
their gradients): values against scipy.signal and the NumPy reference over odd
geometries, the adjoint identities of the gradients, verify_grad (and of the
gradient ops themselves), R_op, shapes, dtypes, Theano's names, and errors.

Most tests compile with the fast_run rewrites and the Python linker (MODE):
the abstract ops, or the concrete ops the ``conv_dnn`` rewrites put in their
place, run their NumPy ``perform``, with no C compile.  ``test_default_mode``
(slow: a cold cache compiles the convolution kernels) runs the same checks
with the default mode, that is the native algorithms."""

import warnings

import numpy as np
import pytest
from scipy import signal

import symgraph
import symgraph.tensor as T
from symgraph.gradient import Rop
from symgraph.ops import conv as conv_ops
from symgraph.ops import conv_reference as ref
from symgraph.tensor.nnet import abstract_conv as ac
from tests.helpers import check_infer_shape

RNG = np.random.default_rng(42)
MODE = symgraph.Mode(linker="py", optimizer="fast_run")
TOL = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-10}


def ttype(ndim, dtype="float64", name=None):
    return T.tensor(dtype, shape=(None,) * ndim, name=name)


def compile_(inputs, outputs, mode=MODE):
    return symgraph.function(inputs, outputs, mode=mode, on_unused_input="ignore")


def verify_grad(fn, values):
    symgraph.gradient.verify_grad(fn, values, rng=np.random.default_rng(0), mode=MODE)


def rand(shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def assert_close(got, want, dtype):
    """Relative to the magnitude of the result: sums of many products."""
    want = np.asarray(want, dtype="float64")
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, "float64"), want, rtol=TOL[dtype],
                               atol=TOL[dtype] * scale)


# -- an independent reference: scipy.signal over explicit loops ------------------------

def dilate(w, dil):
    """Filters with ``dil - 1`` zeros between taps."""
    spatial = tuple((k - 1) * d + 1 for k, d in zip(w.shape[2:], dil))
    out = np.zeros(w.shape[:2] + spatial)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dil)] = w
    return out


def scipy_conv(x, w, pads, stride, dil, groups, flip):
    """``conv2d``/``conv3d`` through scipy.signal.convolve/correlate per channel."""
    x = np.pad(np.asarray(x, "float64"), [(0, 0), (0, 0)] + [(p, p) for p in pads])
    w = np.asarray(w, "float64")
    # Flipping then dilating is dilating then flipping: the zeros sit between taps.
    wd = dilate(w, dil)
    fn = signal.convolve if flip else signal.correlate
    n, k = x.shape[0], w.shape[0]
    cg, kg = w.shape[1], k // groups
    rows = []
    for i in range(n):
        per_filter = []
        for j in range(k):
            g = j // kg
            acc = sum(fn(x[i, g * cg + c], wd[j, c], mode="valid") for c in range(cg))
            per_filter.append(acc[tuple(slice(None, None, s) for s in stride)])
        rows.append(per_filter)
    return np.array(rows)


def pads_of(border, w_shape, dil):
    nd = len(w_shape) - 2
    mode = (border,) * nd if isinstance(border, int) else border
    return ref.resolve_pads(mode, w_shape[2:], dil)


# x shape, w shape, border_mode, subsample, dilation, groups
CASES_2D = [
    ((2, 3, 7, 8), (4, 3, 3, 3), "valid", (1, 1), (1, 1), 1),
    ((2, 3, 5, 5), (2, 3, 1, 1), "full", (1, 1), (1, 1), 1),        # 1x1 filters
    ((1, 2, 6, 9), (3, 2, 2, 4), "half", (1, 1), (1, 1), 1),        # non-square, even
    ((2, 2, 9, 8), (2, 2, 2, 2), "valid", (3, 4), (1, 1), 1),       # stride > filter
    ((1, 1, 4, 5), (2, 1, 2, 3), (3, 4), (2, 1), (1, 1), 1),        # pad > filter
    ((2, 6, 6, 6), (4, 3, 3, 3), 1, (1, 1), (1, 1), 2),             # groups
    ((1, 4, 5, 5), (4, 1, 3, 3), "half", (2, 2), (1, 1), 4),        # depthwise
    ((2, 2, 9, 9), (3, 2, 3, 2), "valid", (1, 1), (2, 3), 1),       # dilation
    ((1, 2, 8, 8), (2, 2, 4, 2), "half", (1, 1), (2, 2), 1),        # half, even, dilated
    ((1, 1, 6, 6), (1, 1, 3, 3), "full", (2, 2), (1, 1), 1),        # batch 1, channel 1
    ((3, 2, 5, 7), (2, 1, 2, 3), (0, 2), (1, 2), (2, 1), 2),
]
CASES_3D = [
    ((2, 2, 5, 6, 4), (3, 2, 3, 2, 2), "valid", (1, 1, 1), (1, 1, 1), 1),
    ((1, 2, 4, 5, 6), (2, 1, 2, 3, 1), (1, 0, 2), (2, 1, 1), (1, 2, 1), 2),
    ((1, 1, 3, 4, 3), (2, 1, 2, 2, 2), "full", (1, 1, 1), (1, 1, 1), 1),
    ((2, 3, 5, 4, 5), (2, 3, 3, 1, 2), "half", (1, 2, 1), (2, 1, 1), 1),
]
CASES = CASES_2D + CASES_3D


def case_id(case):
    xs, ws, border, stride, dil, groups = case
    return f"{len(xs) - 2}d-{border}-s{stride}-d{dil}-g{groups}-k{ws[2:]}"


def conv_fn(nd):
    return ac.conv2d if nd == 2 else ac.conv3d


def build_conv(case, dtype="float64", flip=True):
    xs, ws, border, stride, dil, groups = case
    x, w = ttype(len(xs), dtype, "x"), ttype(len(ws), dtype, "w")
    y = conv_fn(len(xs) - 2)(x, w, border_mode=border, subsample=stride, filter_flip=flip,
                             filter_dilation=dil, num_groups=groups)
    return x, w, y


# -- forward values ---------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("flip", [True, False], ids=["conv", "corr"])
def test_forward_matches_scipy(case, flip):
    xs, ws, border, stride, dil, groups = case
    xv, wv = rand(xs), rand(ws)
    want = scipy_conv(xv, wv, pads_of(border, ws, dil), stride, dil, groups, flip)
    for dtype in ("float64", "float32"):
        x, w, y = build_conv(case, dtype, flip)
        got = compile_([x, w], y)(xv.astype(dtype), wv.astype(dtype))
        assert got.dtype == dtype
        assert_close(got, want, dtype)


@pytest.mark.parametrize("case", [CASES_2D[0], CASES_2D[5], CASES_3D[1]], ids=case_id)
def test_forward_float16(case):
    xs, ws, border, stride, dil, groups = case
    xv, wv = rand(xs, "float16"), rand(ws, "float16")
    x, w, y = build_conv(case, "float16")
    got = compile_([x, w], y)(xv, wv)
    assert got.dtype == "float16"
    want = scipy_conv(xv, wv, pads_of(border, ws, dil), stride, dil, groups, True)
    assert_close(got, want, "float16")


def test_odd_memory_layouts():
    case = CASES_2D[3]
    x, w, y = build_conv(case)
    f = compile_([x, w], y)
    xv, wv = rand(case[0]), rand(case[1])
    want = f(xv, wv)
    np.testing.assert_allclose(f(np.asfortranarray(xv), wv[:, :, ::-1].copy()[:, :, ::-1]),
                               want, rtol=1e-12)
    np.testing.assert_allclose(f(xv[::-1].copy()[::-1], np.asfortranarray(wv)), want,
                               rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("case", [CASES_2D[5], CASES_2D[8], CASES_3D[1]], ids=case_id)
def test_default_mode(case):
    """The default mode (native kernels once the conv_dnn rewrites apply):
    forward and both gradients, float64 and float32."""
    xs, ws, border, stride, dil, groups = case
    pads = pads_of(border, ws, dil)
    xv, wv = rand(xs), rand(ws)
    dyv = rand(ref.conv_output_shape(xs, ws, pads, stride, dil))
    want = [scipy_conv(xv, wv, pads, stride, dil, groups, True),
            ref.conv_backward_data(dyv, wv, xs[2:], pads, stride, dil, groups),
            ref.conv_backward_filter(xv, dyv, ws[2:], pads, stride, dil, groups)]
    for dtype in ("float64", "float32"):
        x, w, y = build_conv(case, dtype)
        dy = ttype(y.ndim, dtype, "dy")
        gx, gw = symgraph.grad(None, [x, w], known_grads={y: dy})
        got = symgraph.function([x, w, dy], [y, gx, gw])(
            xv.astype(dtype), wv.astype(dtype), dyv.astype(dtype))
        for g, r in zip(got, want):
            assert g.dtype == dtype
            assert_close(g, r, dtype)


# -- the gradient ops: values and the adjoint identities --------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradient_ops_match_reference(case):
    xs, ws, border, stride, dil, groups = case
    nd = len(xs) - 2
    pads = pads_of(border, ws, dil)
    xv, wv = rand(xs), rand(ws)
    ys = ref.conv_output_shape(xs, ws, pads, stride, dil)
    dyv = rand(ys)
    for dtype, flip in (("float64", True), ("float32", False)):
        x, w, dy = ttype(nd + 2, dtype), ttype(nd + 2, dtype), ttype(nd + 2, dtype)
        kw = dict(border_mode=border, subsample=stride, filter_flip=flip,
                  filter_dilation=dil, num_groups=groups)
        grad_i = getattr(ac, f"conv{nd}d_grad_wrt_inputs")(dy, w, xs, **kw)
        grad_w = getattr(ac, f"conv{nd}d_grad_wrt_weights")(x, dy, ws, **kw)
        gi, gw = compile_([x, w, dy], [grad_i, grad_w])(
            xv.astype(dtype), wv.astype(dtype), dyv.astype(dtype))
        assert gi.dtype == gw.dtype == dtype
        assert_close(gi, ref.conv_backward_data(dyv, wv, xs[2:], pads, stride, dil, groups,
                                                flip), dtype)
        assert_close(gw, ref.conv_backward_filter(xv, dyv, ws[2:], pads, stride, dil,
                                                  groups, flip), dtype)


@pytest.mark.parametrize("case", [CASES_2D[3], CASES_2D[6], CASES_2D[8], CASES_3D[3]],
                         ids=case_id)
def test_gradients_are_adjoints(case):
    """<conv(x, w), dy> = <x, grad_x> = <w, grad_w>, with the graph's own gradients."""
    x, w, y = build_conv(case, flip=False)
    dy = ttype(y.ndim, name="dy")
    cost = (y * dy).sum()
    gx, gw = symgraph.grad(cost, [x, w])
    xv, wv = rand(case[0]), rand(case[1])
    f = compile_([x, w, dy], [y, gx, gw])
    yv = f(xv, wv, np.zeros(ref.conv_output_shape(
        case[0], case[1], pads_of(case[2], case[1], case[4]), case[3], case[4])))[0]
    dyv = rand(yv.shape)
    _, gxv, gwv = f(xv, wv, dyv)
    inner = np.sum(yv * dyv)
    np.testing.assert_allclose(np.sum(xv * gxv), inner, rtol=1e-10)
    np.testing.assert_allclose(np.sum(wv * gwv), inner, rtol=1e-10)


# -- verify_grad -------------------------------------------------------------------------

GRAD_CASES = [
    ((2, 2, 5, 4), (3, 2, 3, 2), "valid", (1, 1), (1, 1), 1),
    ((1, 4, 5, 5), (2, 2, 2, 3), 1, (2, 1), (1, 1), 2),
    ((1, 1, 6, 5), (2, 1, 2, 2), "half", (1, 2), (2, 1), 1),
    ((2, 1, 3, 4, 3), (2, 1, 2, 2, 2), "full", (2, 1, 1), (1, 1, 1), 1),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_id)
def test_verify_grad_conv(case):
    xs, ws, border, stride, dil, groups = case
    conv = conv_fn(len(xs) - 2)
    flip = len(xs) == 4
    verify_grad(lambda x, w: conv(x, w, border_mode=border, subsample=stride,
                                  filter_flip=flip, filter_dilation=dil, num_groups=groups),
                [rand(xs), rand(ws)])


@pytest.mark.parametrize("case", GRAD_CASES[1:3] + GRAD_CASES[3:], ids=case_id)
def test_verify_grad_of_gradient_ops(case):
    xs, ws, border, stride, dil, groups = case
    nd = len(xs) - 2
    kw = dict(border_mode=border, subsample=stride, filter_dilation=dil, num_groups=groups)
    ys = ref.conv_output_shape(xs, ws, pads_of(border, ws, dil), stride, dil)
    grad_i = getattr(ac, f"conv{nd}d_grad_wrt_inputs")
    grad_w = getattr(ac, f"conv{nd}d_grad_wrt_weights")
    verify_grad(lambda w, dy: grad_i(dy, w, xs, **kw), [rand(ws), rand(ys)])
    verify_grad(lambda x, dy: grad_w(x, dy, ws, **kw), [rand(xs), rand(ys)])


def test_second_derivative_through_conv():
    """The gradient of a cost built from conv's gradient (a Hessian-vector
    product) matches finite differences."""
    xs, ws = (1, 2, 5, 5), (2, 2, 3, 3)

    def grad_norm(x, w):
        y = ac.conv2d(x, w, border_mode=1, subsample=(2, 1))
        gx = symgraph.grad((y ** 2).sum(), x)
        return (gx ** 2).sum()

    verify_grad(grad_norm, [rand(xs), rand(ws)])


def test_rop_matches_sum_of_partial_convs():
    case = CASES_2D[5]
    x, w, y = build_conv(case)
    ex, ew = ttype(4, name="ex"), ttype(4, name="ew")
    r = Rop(y, [x, w], [ex, ew])
    xv, wv, exv, ewv = rand(case[0]), rand(case[1]), rand(case[0]), rand(case[1])
    got = compile_([x, w, ex, ew], r)(xv, wv, exv, ewv)
    conv = compile_([x, w], y)
    np.testing.assert_allclose(got, conv(exv, wv) + conv(xv, ewv), rtol=1e-10, atol=1e-10)


def test_rop_of_gradient_ops():
    xs, ws = (2, 2, 5, 4), (3, 2, 2, 2)
    x, w, dy = ttype(4), ttype(4), ttype(4)
    ex, ew, edy = ttype(4), ttype(4), ttype(4)
    gi = ac.conv2d_grad_wrt_inputs(dy, w, xs, subsample=(2, 1))
    gw = ac.conv2d_grad_wrt_weights(x, dy, ws, subsample=(2, 1))
    ri, rw = Rop(gi, [w, dy], [ew, edy]), Rop(gw, [x, dy], [ex, edy])
    ys = ref.conv_output_shape(xs, ws, (0, 0), (2, 1), (1, 1))
    xv, wv, dyv, exv, ewv, edyv = (rand(xs), rand(ws), rand(ys), rand(xs), rand(ws),
                                   rand(ys))
    got_i, got_w = compile_([x, w, dy, ex, ew, edy], [ri, rw])(
        xv, wv, dyv, exv, ewv, edyv)
    f = compile_([x, w, dy], [gi, gw])
    np.testing.assert_allclose(got_i, f(xv, ewv, dyv)[0] + f(xv, wv, edyv)[0], rtol=1e-10)
    np.testing.assert_allclose(got_w, f(exv, wv, dyv)[1] + f(xv, wv, edyv)[1], rtol=1e-10)


# -- shapes -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [CASES_2D[2], CASES_2D[4], CASES_2D[6], CASES_3D[1]],
                         ids=case_id)
def test_infer_shape(case):
    xs, ws, border, stride, dil, groups = case
    nd = len(xs) - 2
    x, w, y = build_conv(case)
    dy = ttype(nd + 2)
    kw = dict(border_mode=border, subsample=stride, filter_dilation=dil, num_groups=groups)
    gi = getattr(ac, f"conv{nd}d_grad_wrt_inputs")(dy, w, x.shape, **kw)
    gw = getattr(ac, f"conv{nd}d_grad_wrt_weights")(x, dy, w.shape, **kw)
    ys = ref.conv_output_shape(xs, ws, pads_of(border, ws, dil), stride, dil)
    values = [rand(xs), rand(ws), rand(ys)]
    reals = compile_([x, w, dy], [y, gi, gw])(*values)
    assert [r.shape for r in reals] == [ys, xs, ws]
    for out, real in zip([y, gi, gw], reals):
        # Each node's own infer_shape, then through the shape rewrites.
        node = out.owner
        in_shapes = [tuple(i.shape[d] for d in range(i.ndim)) for i in node.inputs]
        shape = node.op.infer_shape(None, node, in_shapes)[0]
        assert tuple(int(s) for s in compile_([x, w, dy], list(shape))(*values)) == real.shape
    check_infer_shape([y, gi, gw], [x, w, dy], values, mode=MODE)


def test_static_output_shapes():
    x = T.tensor("float32", shape=(8, 3, 32, 30))
    w = T.tensor("float32", shape=(16, 3, 3, 5))
    assert ac.conv2d(x, w).type.shape == (8, 16, 30, 26)
    assert ac.conv2d(x, w, border_mode="full", subsample=(2, 3)).type.shape == (8, 16, 17, 12)
    assert ac.conv2d(x, w, border_mode="half", filter_dilation=(2, 1)).type.shape == \
        (8, 16, 32, 30)
    # Hints fill in what the types do not say.
    xu, wu = ttype(4, "float32"), ttype(4, "float32")
    y = ac.conv2d(xu, wu, input_shape=(None, 3, 10, 10), filter_shape=(4, 3, 3, 3))
    assert y.type.shape == (None, 4, 8, 8)
    dy = T.tensor("float32", shape=(8, 16, 30, 26))
    assert ac.conv2d_grad_wrt_inputs(dy, w, (8, 3, 32, 30)).type.shape == (8, 3, 32, 30)
    assert ac.conv2d_grad_wrt_weights(x, dy, (16, 3, 3, 5)).type.shape == (16, 3, 3, 5)
    gi = ac.conv2d_grad_wrt_inputs(dy, w, x.shape)
    assert gi.type.shape == (8, 3, 32, 30)


def test_shape_helpers():
    assert ac.get_conv_shape_1axis(10, 3, "valid", 1) == 8
    assert ac.get_conv_shape_1axis(10, 3, "full", 2) == 6
    assert ac.get_conv_shape_1axis(10, 4, "half", 1, 2) == 10 + 6 - 7 + 1
    assert ac.get_conv_shape_1axis(10, 3, (1, 2), 1) == 11
    assert ac.get_conv_shape_1axis(None, 3, "valid", 1) is None
    assert ac.get_conv_output_shape((2, 3, 10, 9), (4, 3, 3, 2), (1, 0), (1, 2)) == \
        (2, 4, 10, 4)
    assert ac.get_conv_output_shape((2, 3, 10, 9), (4, 3, 3, 2), "valid", (1, 1),
                                    (2, 2)) == (2, 4, 6, 7)
    assert ac.get_conv_gradweights_shape((2, 3, 10, 9), (2, 4, 8, 8), "valid", (1, 1)) == \
        (4, 3, 3, 2)
    assert ac.get_conv_gradinputs_shape((4, 3, 3, 2), (2, 4, 8, 8), "valid", (1, 1)) == \
        (2, 3, 10, 9)
    assert ac.get_conv_gradinputs_shape((4, 3, 3, 2), (2, 4, 8, 8), "valid", (2, 1))[2] \
        is None
    with pytest.raises(ValueError, match="negative pad"):
        ac.get_conv_shape_1axis(10, 3, -1, 1)


def test_symbolic_shape_helpers():
    x = ttype(4)
    size = ac.get_conv_shape_1axis(x.shape[2], 3, "half", 2, 2)
    assert int(size.eval({x: np.zeros((1, 1, 9, 1))})) == (9 + 4 - 5) // 2 + 1


# -- dtypes, props and Theano's names ------------------------------------------------------

def test_dtypes():
    xi = T.tensor("int32", shape=(None,) * 4)
    wi = T.tensor("int64", shape=(None,) * 4)
    assert ac.conv2d(xi, wi).dtype == symgraph.config.floatX
    assert ac.conv2d(xi, ttype(4, "float32")).dtype == "float32"
    assert ac.conv2d(ttype(4, "float32"), ttype(4, "float64")).dtype == "float64"
    with pytest.raises(TypeError, match="must be real"):
        ac.conv2d(T.tensor("complex64", shape=(None,) * 4), ttype(4))
    xv = RNG.integers(-3, 4, size=(1, 2, 4, 4)).astype("int32")
    wv = RNG.integers(-3, 4, size=(2, 2, 2, 2)).astype("int64")
    got = compile_([xi, wi], ac.conv2d(xi, wi))(xv, wv)
    np.testing.assert_array_equal(got, scipy_conv(xv, wv, (0, 0), (1, 1), (1, 1), 1, True))


def test_props_normalized_and_merged():
    a = ac.AbstractConv2d(border_mode=2, subsample=[1, 1])
    b = conv_ops.AbstractConv(2, border_mode=(2, 2), subsample=(1, 1),
                              imshp=(None,) * 4)
    assert a == b and hash(a) == hash(b) and type(a) is conv_ops.AbstractConv
    assert a.border_mode == (2, 2) and a.imshp is None and a.pads((3, 3)) == (2, 2)
    assert conv_ops.AbstractConv(2, border_mode=((1, 1), (2, 2))).border_mode == (1, 2)
    assert conv_ops.AbstractConv(2, border_mode="half", filter_dilation=(2, 1)).pads(
        (4, 3)) == (3, 1)
    assert isinstance(a, ac.AbstractConv2d) and not isinstance(a, ac.AbstractConv3d)
    assert not isinstance(a, ac.AbstractConv2d_gradInputs)
    gi = ac.AbstractConv3d_gradInputs(num_groups=2)
    assert isinstance(gi, conv_ops.AbstractConvGradInputs) and gi.convdim == 3
    assert isinstance(gi, ac.AbstractConv3d_gradInputs)
    gw = ac.AbstractConv2d_gradWeights()
    assert isinstance(gw, ac.AbstractConv2d_gradWeights) and gw.convdim == 2
    assert str(a) == ("AbstractConv2d{border_mode=(2, 2), subsample=(1, 1), "
                      "filter_flip=True, filter_dilation=(1, 1), num_groups=1}")
    x, w = ttype(4), ttype(4)
    f = compile_([x, w], [ac.conv2d(x, w, border_mode=2), a(x, w)],
                 mode=symgraph.Mode(linker="py", optimizer="merge"))
    convs = [n for n in f.maker.fgraph.apply_nodes
             if isinstance(n.op, conv_ops.AbstractConv)]
    assert len(convs) == 1


def test_nnet_conv_module_path():
    from symgraph.tensor.nnet import conv

    assert conv.conv2d is ac.conv2d and conv.conv3d is ac.conv3d
    x, w = ttype(4), ttype(4)
    # Theano's old positional order: input, filters, image_shape, filter_shape.
    y = conv.conv2d(x, w, (2, 1, 5, 5), (3, 1, 2, 2), "full")
    assert y.type.shape == (2, 3, 6, 6)


def test_image_shape_alias():
    x, w = ttype(4), ttype(4)
    with pytest.warns(DeprecationWarning, match="input_shape"):
        y = ac.conv2d(x, w, image_shape=(2, 1, 5, 5))
    assert y.type.shape[0] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match="not both"):
            ac.conv2d(x, w, input_shape=(2, 1, 5, 5), image_shape=(2, 1, 5, 5))


# -- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(border_mode="same"), "border_mode must be one of valid, full, half"),
    (dict(border_mode=-1), "pads must be >= 0"),
    (dict(border_mode=(1, 2, 3)), "tuple of 2 ints"),
    (dict(border_mode=((1, 2), (0, 0))), "asymmetric padding"),
    (dict(subsample=(1,)), "subsample must be a tuple of 2 ints"),
    (dict(subsample=(0, 1)), "subsample must be >= 1"),
    (dict(filter_dilation=(1, 1, 1)), "filter_dilation must be a tuple of 2"),
    (dict(num_groups=0), "num_groups must be a positive int"),
    (dict(filter_flip="yes"), "filter_flip must be a bool"),
    (dict(input_shape=(1, 2, 3)), "imshp must be None or a tuple of 4"),
    (dict(filter_shape=(1, -2, 3, 3)), "kshp has a negative size"),
    (dict(input_shape=(1, 4, 5, 5), filter_shape=(2, 3, 3, 3)), "4 channels"),
    (dict(unshared=True), "unshared"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=match) as info:
        ac.conv2d(ttype(4), ttype(4), **kwargs)
    assert "AbstractConv2d" in str(info.value)


def test_static_shape_errors():
    x = T.tensor("float64", shape=(2, 6, 5, 5))
    with pytest.raises(ValueError, match="6 channels but the filters expect 4"):
        ac.conv2d(x, T.tensor("float64", shape=(3, 4, 3, 3)))
    with pytest.raises(ValueError, match="num_groups=4 does not divide"):
        ac.conv2d(x, T.tensor("float64", shape=(4, 1, 3, 3)), num_groups=4)
    with pytest.raises(ValueError, match="5 filters, which num_groups=2"):
        ac.conv2d(x, T.tensor("float64", shape=(5, 3, 3, 3)), num_groups=2)
    with pytest.raises(ValueError, match="larger than the padded image"):
        ac.conv2d(x, T.tensor("float64", shape=(3, 6, 7, 3)))
    with pytest.raises(TypeError, match="the image must be a 4-d tensor"):
        ac.conv2d(ttype(3), ttype(4))
    with pytest.raises(TypeError, match="the filters must be a 5-d tensor"):
        ac.conv3d(ttype(5), ttype(4))
    with pytest.raises(ValueError, match="spatial sizes of input_shape must be given"):
        ac.conv2d_grad_wrt_inputs(ttype(4), ttype(4), (2, 3, None, 5))
    with pytest.raises(ValueError, match="filter_shape must have 4 entries"):
        ac.conv2d_grad_wrt_weights(ttype(4), ttype(4), (2, 3, 5))


def test_run_time_errors():
    x, w = ttype(4, name="x"), ttype(4, name="w")
    f = compile_([x, w], ac.conv2d(x, w, num_groups=2))
    with pytest.raises(Exception, match="channels"):
        f(rand((1, 4, 5, 5)), rand((2, 3, 3, 3)))
    with pytest.raises(Exception, match="num_groups=2 does not divide"):
        f(rand((1, 4, 5, 5)), rand((3, 2, 3, 3)))
    with pytest.raises(Exception, match="larger than the padded image"):
        f(rand((1, 4, 2, 5)), rand((2, 2, 3, 3)))
    # The hints are checked against the real shapes.
    g = compile_([x, w], ac.conv2d(x, w, input_shape=(2, 1, None, None)))
    with pytest.raises(Exception, match=r"specified to have shape \(2, 1, (?s:.*)conv2d"):
        g(rand((3, 1, 5, 5)), rand((2, 1, 3, 3)))
    # The output gradient must have the forward output's shape.
    dy = ttype(4, name="dy")
    h = compile_([w, dy], ac.conv2d_grad_wrt_inputs(dy, w, (1, 1, 6, 6)))
    with pytest.raises(Exception, match="output gradient has (spatial )?shape"):
        h(rand((2, 1, 3, 3)), rand((1, 2, 3, 4)))
    k = compile_([x, dy], ac.conv2d_grad_wrt_weights(x, dy, (2, 1, 3, 3)))
    with pytest.raises(Exception, match="output gradient has (spatial )?shape"):
        k(rand((1, 1, 6, 6)), rand((1, 2, 5, 4)))
