"""Theano's ``tensor.fft`` path: ``rfft`` and ``irfft`` (``symgraph.ops.fft``)."""

from symgraph.ops.fft import IRFFTOp, RFFTOp, irfft, irfft_op, rfft, rfft_op  # noqa: F401

__all__ = ["rfft", "irfft", "RFFTOp", "IRFFTOp", "rfft_op", "irfft_op"]
