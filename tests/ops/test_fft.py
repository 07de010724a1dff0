"""Theano's tensor.fft: rfft/irfft against NumPy, every norm, odd and even
sizes, several signal dimensions, and gradients by finite differences."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor import fft


def _numpy_rfft(v, norm):
    spec = np.fft.rfftn(v, axes=tuple(range(1, v.ndim)))
    if norm == "ortho":
        spec = spec / np.sqrt(np.prod(v.shape[1:]))
    return np.stack([spec.real, spec.imag], axis=-1)


@pytest.mark.parametrize("shape", [(3, 8), (3, 7), (2, 4, 6), (2, 3, 5)])
@pytest.mark.parametrize("norm", [None, "ortho", "no_norm"])
def test_rfft_irfft_against_numpy(shape, norm):
    rng = np.random.default_rng(0)
    v = rng.normal(size=shape)
    x = T.tensor("float64", (False,) * len(shape))
    spec = symgraph.function([x], fft.rfft(x, norm=norm))(v)
    np.testing.assert_allclose(spec, _numpy_rfft(v, norm), atol=1e-12)
    y = T.tensor("float64", (False,) * (len(shape) + 1))
    back = symgraph.function([y], fft.irfft(y, norm=norm, is_odd=shape[-1] % 2 == 1))(spec)
    scale = {None: 1.0, "ortho": 1.0, "no_norm": np.prod(shape[1:])}[norm]
    np.testing.assert_allclose(back, v * scale, atol=1e-10)


@pytest.mark.parametrize("shape", [(2, 6), (2, 5), (2, 3, 4)])
def test_gradients(shape):
    rng = np.random.default_rng(1)
    v = rng.normal(size=shape)
    odd = shape[-1] % 2 == 1
    verify_grad(lambda a: fft.rfft(a), [v], rng=np.random.RandomState(0))
    verify_grad(lambda a: fft.rfft(a, norm="ortho"), [v], rng=np.random.RandomState(0))
    verify_grad(lambda a: fft.irfft(a, is_odd=odd), [_numpy_rfft(v, None)],
                rng=np.random.RandomState(0))


def test_float32_and_errors():
    x = T.fmatrix("x")
    out = symgraph.function([x], fft.rfft(x))(np.ones((2, 4), "float32"))
    assert out.dtype == np.float32 and out.shape == (2, 3, 2)
    with pytest.raises(ValueError, match="norm"):
        fft.rfft(x, norm="unitary")
    with pytest.raises(ValueError, match="is_odd"):
        fft.irfft(T.ftensor3(), is_odd="yes")
    with pytest.raises(TypeError, match="at least 2"):
        fft.rfft(T.fvector())
