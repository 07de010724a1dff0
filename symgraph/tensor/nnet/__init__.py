"""Theano's ``tensor.nnet`` path: neural-network functions.

Activations (element-wise graphs, so that fusion compiles them and their
gradients follow), softmax and log-softmax (``ops/nnet.py``), the losses and
one-hot (``ops/nnet_loss.py``), dropout through a ``RandomStream``, and, once
their modules exist, convolution (``abstract_conv``) and batch normalization
(``bn``).
"""

import numpy as np

from symgraph.ops.math import sigmoid, softplus  # noqa: F401
from symgraph.ops.nnet import log_softmax, logsoftmax, softmax  # noqa: F401
from symgraph.ops.nnet_loss import (binary_crossentropy, categorical_crossentropy,  # noqa: F401
                                    crossentropy_categorical_1hot,
                                    crossentropy_softmax_1hot, one_hot,
                                    sigmoid_binary_crossentropy, to_one_hot)

__all__ = ["sigmoid", "softplus", "relu", "elu", "selu", "softsign", "ultra_fast_sigmoid",
           "hard_sigmoid", "softmax", "logsoftmax", "log_softmax",
           "categorical_crossentropy", "crossentropy_categorical_1hot",
           "crossentropy_softmax_1hot", "binary_crossentropy", "sigmoid_binary_crossentropy",
           "to_one_hot", "one_hot", "dropout"]

#: SELU's constants (Klambauer et al., 2017), as Theano's ``selu``.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def relu(x, alpha=0):
    """Rectified linear unit: max(x, 0), or a leaky slope ``alpha`` below zero."""
    from symgraph.ops.math import maximum, switch

    if alpha == 0:
        return maximum(x, 0)
    return switch(x > 0, x, alpha * x)


def elu(x, alpha=1):
    """Exponential linear unit: ``x`` above zero, ``alpha * (exp(x) - 1)`` below."""
    from symgraph.ops.math import expm1, switch

    return switch(x > 0, x, alpha * expm1(x))


def selu(x):
    """Scaled exponential linear unit: ``scale * elu(x, alpha)`` with the
    self-normalizing constants ``SELU_ALPHA`` and ``SELU_SCALE``."""
    return SELU_SCALE * elu(x, SELU_ALPHA)


def softsign(x):
    """``x / (1 + |x|)``."""
    from symgraph.ops.math import abs_

    return x / (1 + abs_(x))


def ultra_fast_sigmoid(x):
    """Theano's name; here the exact (and stable) sigmoid."""
    return sigmoid(x)


def hard_sigmoid(x):
    """A piecewise-linear sigmoid: clip(0.2 * x + 0.5, 0, 1)."""
    from symgraph.ops.math import clip

    return clip(0.2 * x + 0.5, 0.0, 1.0)


def dropout(x, p, rng=None, rescale=True):
    """``x`` with each element zeroed with probability ``p`` (a new mask on
    every call of the compiled function).

    ``p``: the drop probability, a number in ``[0, 1)`` or a symbolic scalar.
    ``rng``: a ``symgraph.tensor.random.RandomStreams`` or a
    ``symgraph.sandbox.rng_mrg.MRG_RandomStreams`` (Theano's ``srng``), or an
    int seed for a new RandomStreams; None draws a fresh seed.  The same seed gives the
    same masks.  ``rescale``: divide the kept elements by ``1 - p`` so that the
    expected value is ``x`` (inverted dropout); at test time use ``x`` itself.

    The mask is a binomial draw of the stream (its state advances through the
    compiled function's default updates); the gradient with respect to ``x`` is
    the same mask (times ``1 / (1 - p)``).
    """
    from symgraph.ops.math import cast
    from symgraph.tensor.basic import as_tensor_variable
    from symgraph.tensor.random import RandomStream

    x = as_tensor_variable(x)
    if not x.dtype.startswith("float"):
        raise TypeError(f"dropout: the input {x} must be a float tensor, got {x.dtype}")
    if isinstance(p, (int, float, np.number)) and not 0 <= p < 1:
        raise ValueError(f"dropout: the drop probability p must be in [0, 1), got {p}")
    if rng is None or isinstance(rng, (int, np.integer)):
        rng = RandomStream(None if rng is None else int(rng))
    elif not isinstance(rng, RandomStream) and type(rng).__name__ != "MRG_RandomStreams":
        raise TypeError(f"dropout: rng must be a RandomStreams, an MRG_RandomStreams, an "
                        f"int seed or None, got {type(rng).__name__}")
    keep = 1 - p
    mask = rng.binomial(n=1, p=keep, size=x.shape, ndim=x.ndim, dtype="int8")
    out = x * cast(mask, x.dtype)
    return out / cast(keep, x.dtype) if rescale else out



# Theano's module paths for convolution and batch normalization.
from symgraph.tensor.nnet.abstract_conv import (conv2d, conv2d_grad_wrt_inputs,  # noqa: E402,F401
                                                conv2d_grad_wrt_weights, conv2d_transpose,
                                                conv3d,
                                                conv3d_grad_wrt_inputs, conv3d_grad_wrt_weights)
from symgraph.tensor.nnet import bn  # noqa: E402,F401

__all__ += ["conv2d", "conv3d", "conv2d_grad_wrt_inputs", "conv2d_grad_wrt_weights",
            "conv3d_grad_wrt_inputs", "conv3d_grad_wrt_weights", "bn"]
from symgraph.tensor.nnet import neighbours  # noqa: E402,F401
from symgraph.tensor.nnet.h_softmax import h_softmax  # noqa: E402,F401
from symgraph.tensor.nnet.neighbours import images2neibs, neibs2images  # noqa: E402,F401

__all__ += ["neighbours", "h_softmax", "images2neibs", "neibs2images"]
