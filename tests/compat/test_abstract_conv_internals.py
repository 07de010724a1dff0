"""Theano's ``nnet.abstract_conv`` helpers and bilinear upsampling: values
against NumPy (Theano's own construction, a transposed convolution by the
triangle kernel, written as loops), gradients by finite differences."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.ops.conv import AbstractConvGradInputs, AbstractConvGradWeights
from symgraph.tensor.nnet import abstract_conv as ac


def _triangle(r):
    return np.concatenate([np.arange(1, r + 1), np.arange(r - 1, 0, -1)]) / r


def _theano_upsample_1d(v, r):
    """Theano's integer-ratio construction along one axis: the edges repeated
    once, then a transposed convolution (stride r) by the triangle kernel."""
    top = np.concatenate([v[:1], v, v[-1:]])
    kern = _triangle(r)
    pad = 2 * r - (r - 1) // 2 - 1
    out = np.zeros(len(v) * r)
    for o, t in enumerate(top):
        for k, w in enumerate(kern):
            i = o * r + k - pad
            if 0 <= i < len(out):
                out[i] += t * w
    return out


def _theano_frac_1d(v, p, q):
    """Theano's fractional construction along one axis: the padded triangle
    correlated with the flipped, edge-repeated input dilated by p, stride q."""
    top = np.concatenate([v[:1], v, v[-1:]])[::-1]
    double_pad = (2 * len(v) - 1) * p + 1
    pad = double_pad // 2
    kern = np.concatenate([np.zeros(pad), _triangle(p), np.zeros(double_pad - pad)])
    span = (len(top) - 1) * p + 1
    n_out = (len(kern) - span) // q + 1
    return np.array([sum(kern[o * q + j * p] * top[j] for j in range(len(top)))
                     for o in range(n_out)])


def _separable(x, fn_rows, fn_cols):
    rows = np.apply_along_axis(fn_rows, 2, x)
    return np.apply_along_axis(fn_cols, 3, rows)


def test_bilinear_kernels():
    np.testing.assert_allclose(ac.bilinear_kernel_1D(3).eval(), _triangle(3))
    np.testing.assert_allclose(ac.bilinear_kernel_1D(2, normalize=False).eval(), [1, 2, 1])
    np.testing.assert_allclose(ac.bilinear_kernel_2D((2, 3)).eval(),
                               np.outer(_triangle(2), _triangle(3)))
    r = T.iscalar()
    np.testing.assert_allclose(symgraph.function([r], ac.bilinear_kernel_1D(r))(4),
                               _triangle(4))


@pytest.mark.parametrize("ratio, use_1D_kernel", [(1, True), (2, True), (2, False),
                                                   (3, False), (4, True)])
def test_bilinear_upsampling_matches_theanos_construction(ratio, use_1D_kernel):
    rng = np.random.default_rng(ratio)
    xv = rng.normal(size=(2, 3, 4, 5))
    x = T.tensor4(dtype="float64")
    out = symgraph.function([x], ac.bilinear_upsampling(x, ratio, batch_size=2,
                                                        num_input_channels=3,
                                                        use_1D_kernel=use_1D_kernel))(xv)
    expected = _separable(xv, lambda v: _theano_upsample_1d(v, ratio),
                          lambda v: _theano_upsample_1d(v, ratio))
    assert out.shape == (2, 3, 4 * ratio, 5 * ratio)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_bilinear_upsampling_symbolic_ratio():
    x, r = T.tensor4(dtype="float64"), T.iscalar()
    xv = np.random.default_rng(0).normal(size=(1, 2, 3, 3))
    out = symgraph.function([x, r], ac.bilinear_upsampling(x, r))(xv, 3)
    expected = _separable(xv, lambda v: _theano_upsample_1d(v, 3),
                          lambda v: _theano_upsample_1d(v, 3))
    np.testing.assert_allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize("frac_ratio", [(3, 2), (5, 2), (4, 2), ((5, 3), (2, 1))])
def test_frac_bilinear_upsampling_matches_theanos_construction(frac_ratio):
    xv = np.random.default_rng(5).normal(size=(2, 2, 4, 3))
    x = T.tensor4(dtype="float64")
    out = symgraph.function([x], ac.bilinear_upsampling(x, frac_ratio=frac_ratio,
                                                        use_1D_kernel=False))(xv)
    (p0, q0), (p1, q1) = frac_ratio if isinstance(frac_ratio[0], tuple) else (frac_ratio,) * 2
    g0, g1 = np.gcd(p0, q0), np.gcd(p1, q1)
    expected = _separable(xv, lambda v: _theano_frac_1d(v, p0 // g0, q0 // g0),
                          lambda v: _theano_frac_1d(v, p1 // g1, q1 // g1))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_bilinear_upsampling_gradient():
    xv = np.random.default_rng(1).normal(size=(1, 2, 3, 2))
    verify_grad(lambda x: ac.bilinear_upsampling(x, 2), [xv], rng=0)
    verify_grad(lambda x: ac.frac_bilinear_upsampling(x, (3, 2)), [xv], rng=0)


def test_bilinear_upsampling_errors():
    x = T.tensor4()
    with pytest.raises(ValueError, match="ratio and frac_ratio together"):
        ac.bilinear_upsampling(x, 2, frac_ratio=(3, 2))
    with pytest.raises(ValueError, match="No ratio|no ratio"):
        ac.bilinear_upsampling(x)
    with pytest.raises(ValueError, match="use_1D_kernel=False"):
        ac.bilinear_upsampling(x, frac_ratio=(3, 2))
    with pytest.raises(TypeError, match="4D tensor"):
        ac.bilinear_upsampling(T.matrix(), 2)
    with pytest.raises(ValueError, match="frac_ratio must be a tuple"):
        ac.frac_bilinear_upsampling(x, 2)
    with pytest.raises(ValueError, match="positive ints"):
        ac.frac_bilinear_upsampling(x, (3, 0))


@pytest.mark.parametrize("mode", ["valid", "full", "half", 2, (1, 3)])
@pytest.mark.parametrize("dilation", [1, 2])
def test_gradients_shape_helpers_invert_the_output_size(mode, dilation):
    for image, kernel in [(9, 3), (10, 4), (7, 1)]:
        top = ac.get_conv_shape_1axis(image, kernel, mode, 1, dilation)
        assert ac.get_conv_gradinputs_shape_1axis(kernel, top, mode, 1, dilation) == image
        found = ac.get_conv_gradweights_shape_1axis(image, top, mode, 1, dilation)
        assert found == (None if mode == "half" else kernel)
    assert ac.get_conv_gradinputs_shape_1axis(3, 4, "valid", 2, 1) is None
    assert ac.get_conv_gradweights_shape_1axis(9, 4, "valid", 2, 1) is None
    assert ac.get_conv_gradweights_shape_1axis(None, 4, "valid", 1, 1) is None


def test_gradweights_shape_1axis_rejects_impossible_sizes():
    with pytest.raises(ValueError, match="no kernel gives an output"):
        ac.get_conv_gradweights_shape_1axis(4, 6, "valid", 1, 1)


def test_check_conv_gradinputs_shape():
    assert ac.check_conv_gradinputs_shape((2, 3, 9, 9), (4, 3, 3, 3), (2, 4, 7, 7), "valid",
                                          (1, 1))
    assert not ac.check_conv_gradinputs_shape((2, 3, 9, 10), (4, 3, 3, 3), (2, 4, 7, 7),
                                              "valid", (1, 1))
    # With a stride, 9 and 10 both give 4; unknown entries agree.
    assert ac.check_conv_gradinputs_shape((2, 3, 10, None), (4, 3, 3, 3), (2, 4, 4, 4),
                                          "valid", (2, 2))
    assert ac.check_conv_gradinputs_shape((2, 3, T.iscalar(), 9), (4, 3, 3, 3),
                                          (None, 4, 7, 7), "valid", (1, 1))
    with pytest.raises(ValueError, match="same length"):
        ac.check_conv_gradinputs_shape((2, 3, 9), (4, 3, 3, 3), (2, 4, 7, 7), "valid", (1,))


def test_assert_conv_shape():
    assert ac.assert_conv_shape((2, 0, 3, 4)) == (2, 0, 3, 4)
    with pytest.raises(ValueError, match=r"dim\[2\]: 0 <= 0"):
        ac.assert_conv_shape((2, 3, 0, 4))
    with pytest.raises(ValueError, match=r"dim\[0\]: -1 < 0"):
        ac.assert_conv_shape((-1, 3, 2, 4))
    n = T.lscalar()
    checked = ac.assert_conv_shape((2, 3, n, 4))
    f = symgraph.function([n], checked[2])
    assert f(5) == 5
    with pytest.raises(AssertionError, match=r"dim\[2\] <= 0"):
        f(0)


def test_assert_shape():
    x = T.dmatrix()
    # Off by default (the conv.assert_shape flag), as in Theano.
    assert ac.assert_shape(x, (None, 3)) is x
    with symgraph.change_flags(**{"conv.assert_shape": True}):
        checked = ac.assert_shape(x, (None, 3), "bad shape of x")
        with pytest.raises(ValueError, match="2 dimensions"):
            ac.assert_shape(x, (1, 2, 3))
    f = symgraph.function([x], checked * 2)
    np.testing.assert_array_equal(f(np.ones((2, 3))), 2 * np.ones((2, 3)))
    with pytest.raises(AssertionError, match="bad shape of x"):
        f(np.ones((2, 4)))


def test_border_mode_to_pad():
    assert ac.border_mode_to_pad("valid", 2, (3, 5)) == ((0, 0), (0, 0))
    assert ac.border_mode_to_pad("full", 2, (3, 5)) == ((2, 2), (4, 4))
    assert ac.border_mode_to_pad("half", 2, (3, 4)) == ((1, 1), (2, 2))
    assert ac.border_mode_to_pad(1, 3, (3, 3, 3)) == ((1, 1),) * 3
    assert ac.border_mode_to_pad((1, (2, 3)), 2, (3, 3)) == ((1, 1), (2, 3))
    with pytest.raises(ValueError, match="invalid border mode"):
        ac.border_mode_to_pad("same", 2, (3, 3))
    with pytest.raises(ValueError, match="non-negative"):
        ac.border_mode_to_pad((1, -1), 2, (3, 3))
    with pytest.raises(ValueError, match="tuple of 2 entries"):
        ac.border_mode_to_pad((1, 1, 1), 2, (3, 3))


def test_theano_class_names_are_symgraphs_ops():
    assert ac.AbstractConv_gradWeights is AbstractConvGradWeights
    assert ac.AbstractConv_gradInputs is AbstractConvGradInputs
    assert issubclass(AbstractConvGradInputs, ac.BaseAbstractConv)
    # Theano's calling convention: convdim first, then (kern, topgrad, shape).
    kern, top = T.tensor4(dtype="float64"), T.tensor4(dtype="float64")
    img = ac.AbstractConv_gradInputs(2, border_mode="valid")(kern, top, (5, 5))
    kv = np.random.default_rng(0).normal(size=(2, 3, 2, 2))
    tv = np.random.default_rng(1).normal(size=(1, 2, 4, 4))
    out = symgraph.function([kern, top], img)(kv, tv)
    expected = symgraph.function([kern, top], ac.conv2d_grad_wrt_inputs(
        top, kern, (1, 3, 5, 5)))(kv, tv)
    np.testing.assert_allclose(out, expected)
    img_v = T.tensor4(dtype="float64")
    w = ac.AbstractConv_gradWeights(2)(img_v, top, (2, 2))
    assert w.type.ndim == 4
