"""Theano's ``tensor.fft``: real FFTs over all dimensions but the first (a batch).

``rfft(x)`` of a real ``(batch, d1, ..., dn)`` array is NumPy's
``rfftn`` over the last n axes, with the complex result stored as a trailing
dimension of 2 (real, imaginary): ``(batch, d1, ..., dn // 2 + 1, 2)``.
``irfft`` inverts it (``is_odd`` says whether the last signal size was odd).
``norm``: None (``rfft`` unscaled, ``irfft`` divided by the signal size: NumPy's
pair), ``'ortho'`` (both divided by its square root) or ``'no_norm'`` (both
unscaled).  Both have gradients (each is the other's transpose, with the
frequencies that a real signal's half spectrum counts twice weighted so).
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, TensorType

__all__ = ["RFFTOp", "IRFFTOp", "rfft_op", "irfft_op", "rfft", "irfft"]


def _sizes(s, op):
    s = as_tensor_variable(s)
    if s.ndim != 1 or not s.dtype.startswith("int"):
        raise TypeError(f"{op}: the signal sizes must be an int vector, got {s.type}")
    return s


def _middle(g, s):
    """The index of the frequencies 1 .. ceil(n/2)-1 of the last signal axis
    (each stands for itself and its mirror in a real signal's spectrum)."""
    last = s[-1]
    return (slice(None),) * (g.ndim - 2) + (slice(1, last // 2 + last % 2), slice(None))


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


class RFFTOp(Op):
    """Unscaled ``rfftn`` over all axes but the first; output ``(..., 2)``."""

    __props__ = ()

    def make_node(self, a, s):
        a = as_tensor_variable(a)
        if a.ndim < 2 or a.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: the input must be a float array of at least 2 "
                            f"dimensions (the first one the batch), got {a.type}")
        return Apply(self, [a, _sizes(s, self)], [TensorType(a.dtype, shape=(None,) * (a.ndim + 1))()])

    def perform(self, node, inputs, output_storage):
        a, s = inputs
        spectrum = np.fft.rfftn(a, s=tuple(int(n) for n in s),
                                axes=tuple(range(1, a.ndim)))
        out = np.empty(spectrum.shape + (2,), dtype=node.outputs[0].dtype)
        out[..., 0], out[..., 1] = spectrum.real, spectrum.imag
        output_storage[0][0] = out

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        from symgraph.ops.subtensor import set_subtensor

        (g,), s = output_grads, inputs[1]
        idx = _middle(g, s)
        g = set_subtensor(g[idx], g[idx] * 0.5)
        return [irfft_op(g, s), _disconnected(s)]


class IRFFTOp(Op):
    """Unscaled ``irfftn`` (``n`` times NumPy's) of a ``(..., 2)`` half spectrum,
    to signal sizes ``s``."""

    __props__ = ()

    def make_node(self, a, s):
        a = as_tensor_variable(a)
        if a.ndim < 3 or a.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: the input must be a float array of at least 3 "
                            f"dimensions (batch, ..., 2), got {a.type}")
        return Apply(self, [a, _sizes(s, self)], [TensorType(a.dtype, shape=(None,) * (a.ndim - 1))()])

    def perform(self, node, inputs, output_storage):
        a, s = inputs
        if a.shape[-1] != 2:
            raise ValueError(f"{self}: the last dimension holds (real, imaginary) and must "
                             f"have size 2, got shape {a.shape}")
        sizes = tuple(int(n) for n in s)
        out = np.fft.irfftn(a[..., 0] + 1j * a[..., 1], s=sizes,
                            axes=tuple(range(1, a.ndim - 1)))
        output_storage[0][0] = (out * np.prod(sizes)).astype(node.outputs[0].dtype)

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        from symgraph.ops.subtensor import set_subtensor

        (g,), s = output_grads, inputs[1]
        spectrum = rfft_op(g, s)
        idx = _middle(spectrum, s)
        spectrum = set_subtensor(spectrum[idx], spectrum[idx] * 2)
        return [spectrum, _disconnected(s)]


rfft_op = RFFTOp()
irfft_op = IRFFTOp()


def _check_norm(norm):
    if norm not in (None, "ortho", "no_norm"):
        raise ValueError(f"invalid norm {norm!r}: use None, 'ortho' or 'no_norm'")


def _count(s, dtype):
    from symgraph.ops.math import cast
    from symgraph.ops.reduce import prod

    return cast(prod(s), dtype)


def rfft(inp, norm=None):
    """The half spectrum of the real ``inp`` (first axis: the batch), as
    ``(batch, ..., n // 2 + 1, 2)``; see the module docstring for ``norm``."""
    from symgraph.ops.math import sqrt
    from symgraph.ops.shape import shape

    _check_norm(norm)
    inp = as_tensor_variable(inp)
    s = shape(inp)[1:]
    out = rfft_op(inp, s)
    return out / sqrt(_count(s, inp.dtype)) if norm == "ortho" else out


def irfft(inp, norm=None, is_odd=False):
    """The real signal whose half spectrum is ``inp`` (``(batch, ..., m, 2)``);
    its last size is ``2 * (m - 1)``, or ``2 * m - 1`` with ``is_odd``."""
    from symgraph.ops.math import sqrt
    from symgraph.ops.shape import shape
    from symgraph.ops.subtensor import set_subtensor

    if is_odd not in (True, False):
        raise ValueError(f"irfft: is_odd must be True or False, got {is_odd!r}")
    _check_norm(norm)
    inp = as_tensor_variable(inp)
    s = shape(inp)[1:-1]
    s = set_subtensor(s[-1], (s[-1] - 1) * 2 + (1 if is_odd else 0))
    out = irfft_op(inp, s)
    if norm is None:
        return out / _count(s, inp.dtype)
    if norm == "ortho":
        return out / sqrt(_count(s, inp.dtype))
    return out
