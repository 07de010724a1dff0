"""Theano's ``tensor.nnet`` path: neural-network functions.

The element-wise ones are here now; convolution, softmax and batch
normalization arrive with the neural-network ops.
"""

from symgraph.ops.math import sigmoid, softplus  # noqa: F401
from symgraph.ops.nnet import log_softmax, logsoftmax, softmax  # noqa: F401

__all__ = ["sigmoid", "softplus", "relu", "ultra_fast_sigmoid", "hard_sigmoid",
           "softmax", "logsoftmax", "log_softmax"]


def relu(x, alpha=0):
    """Rectified linear unit: max(x, 0), or a leaky slope ``alpha`` below zero."""
    from symgraph.ops.math import maximum, switch

    if alpha == 0:
        return maximum(x, 0)
    return switch(x > 0, x, alpha * x)


def ultra_fast_sigmoid(x):
    """Theano's name; here the exact (and stable) sigmoid."""
    return sigmoid(x)


def hard_sigmoid(x):
    """A piecewise-linear sigmoid: clip(0.2 * x + 0.5, 0, 1)."""
    from symgraph.ops.math import clip

    return clip(0.2 * x + 0.5, 0.0, 1.0)
