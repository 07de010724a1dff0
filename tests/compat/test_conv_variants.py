"""Theano's separable_conv2d/3d and causal_conv1d against NumPy loops, with
gradients by finite differences."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor.nnet import abstract_conv


def _conv_nd(x, w, flip=True):
    """Valid convolution: x (B, C, *S), w (O, C, *K) -> (B, O, *out)."""
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]
    k = w.shape[2:]
    out_shape = tuple(s - kk + 1 for s, kk in zip(x.shape[2:], k))
    out = np.zeros((x.shape[0], w.shape[0]) + out_shape)
    for pos in np.ndindex(*out_shape):
        window = x[(slice(None), slice(None)) + tuple(slice(p, p + kk) for p, kk in zip(pos, k))]
        out[(slice(None), slice(None)) + pos] = np.tensordot(window, w, axes=(
            list(range(1, w.ndim)), list(range(1, w.ndim))))
    return out


def _depthwise(x, w, channels):
    mult = w.shape[0] // channels
    return np.concatenate([_conv_nd(x[:, c:c + 1], w[c * mult:(c + 1) * mult])
                           for c in range(channels)], axis=1)


@pytest.mark.parametrize("ndim", [2, 3])
def test_separable_convolution(ndim):
    rng = np.random.default_rng(0)
    channels, mult, out_c = 3, 2, 4
    spatial = (6, 5) if ndim == 2 else (4, 5, 4)
    kernel = (3, 2) if ndim == 2 else (2, 3, 2)
    xv = rng.normal(size=(2, channels) + spatial)
    dw = rng.normal(size=(channels * mult, 1) + kernel)
    pw = rng.normal(size=(out_c, channels * mult) + (1,) * ndim)
    ttype = T.dtensor4 if ndim == 2 else T.dtensor5
    x, d, p = ttype("x"), ttype("d"), ttype("p")
    fn = abstract_conv.separable_conv2d if ndim == 2 else abstract_conv.separable_conv3d
    got = symgraph.function([x, d, p], fn(x, d, p, num_channels=channels))(xv, dw, pw)
    expected = _conv_nd(_depthwise(xv, dw, channels), pw)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    if ndim == 2:
        verify_grad(lambda a, b, c: fn(a, b, c, num_channels=channels),
                    [xv[:1, :, :4, :4], dw, pw], rng=np.random.RandomState(0))


@pytest.mark.parametrize("dilation", [1, 2])
def test_causal_conv1d(dilation):
    rng = np.random.default_rng(1)
    xv, wv = rng.normal(size=(2, 3, 7)), rng.normal(size=(4, 3, 3))
    x, w = T.dtensor3("x"), T.dtensor3("w")
    out = abstract_conv.causal_conv1d(x, w, filter_shape=wv.shape, filter_dilation=dilation)
    got = symgraph.function([x, w], out)(xv, wv)
    assert got.shape == (2, 4, 7)
    # out[b, o, t] = sum_{c, k} x[b, c, t - dilation * k] * w[o, c, k] (zero before t = 0)
    expected = np.zeros((2, 4, 7))
    for t in range(7):
        for k in range(3):
            if t - dilation * k >= 0:
                expected[:, :, t] += xv[:, :, t - dilation * k] @ wv[:, :, k].T
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    # Causal: changing the future does not change the past.
    later = xv.copy()
    later[:, :, 5:] += 1.0
    np.testing.assert_allclose(symgraph.function([x, w], out)(later, wv)[:, :, :5],
                               got[:, :, :5])
    verify_grad(lambda a, b: abstract_conv.causal_conv1d(a, b, filter_shape=wv.shape,
                                                         filter_dilation=dilation),
                [xv, wv], rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="3-d"):
        abstract_conv.causal_conv1d(T.dmatrix(), w, filter_shape=wv.shape)
