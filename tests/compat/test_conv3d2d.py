"""Theano's nnet.conv3d2d.conv3d against a NumPy loop (the full 3D convolution
in the (batch, time, channels, rows, cols) layout), with gradients."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor.nnet import conv3d2d


def _reference(s, f, full):
    """out[b, t, o, r, c] = sum s[b, t+k, i, r+p, c+q] * flipped f[o, k, i, p, q]."""
    if full:
        fr, fc = f.shape[3] - 1, f.shape[4] - 1
        s = np.pad(s, ((0, 0), (0, 0), (0, 0), (fr, fr), (fc, fc)))
    f = f[:, ::-1, :, ::-1, ::-1]
    B, Ts, C, H, W = s.shape
    O, Tf, _, Hf, Wf = f.shape
    out = np.zeros((B, Ts - Tf + 1, O, H - Hf + 1, W - Wf + 1))
    for t in range(out.shape[1]):
        for r in range(out.shape[3]):
            for c in range(out.shape[4]):
                patch = s[:, t:t + Tf, :, r:r + Hf, c:c + Wf]
                out[:, t, :, r, c] = np.einsum("bkipq,okipq->bo", patch, f)
    return out


@pytest.mark.parametrize("mode", ["valid", ("valid", "full", "full")])
def test_conv3d2d_matches_numpy(mode):
    rng = np.random.default_rng(0)
    s_val, f_val = rng.normal(size=(2, 5, 3, 6, 5)), rng.normal(size=(4, 2, 3, 3, 2))
    s, f = T.dtensor5("s"), T.dtensor5("f")
    out = conv3d2d.conv3d(s, f, signals_shape=s_val.shape, filters_shape=f_val.shape,
                          border_mode=mode)
    got = symgraph.function([s, f], out)(s_val, f_val)
    np.testing.assert_allclose(got, _reference(s_val, f_val, mode != "valid"), rtol=1e-10,
                               atol=1e-10)


def test_conv3d2d_gradient_and_errors():
    rng = np.random.default_rng(1)
    s_val, f_val = rng.normal(size=(1, 4, 2, 4, 4)), rng.normal(size=(2, 2, 2, 2, 2))
    verify_grad(lambda s, f: conv3d2d.conv3d(s, f), [s_val, f_val],
                rng=np.random.RandomState(0))
    s, f = T.dtensor5("s"), T.dtensor5("f")
    with pytest.raises(NotImplementedError, match="time axis"):
        conv3d2d.conv3d(s, f, border_mode="full")
    with pytest.raises(NotImplementedError, match="share one mode"):
        conv3d2d.conv3d(s, f, border_mode=("valid", "full", "valid"))
    with pytest.raises(NotImplementedError, match="filters_shape"):
        conv3d2d.conv3d(s, f, border_mode=("valid", "full", "full"))
