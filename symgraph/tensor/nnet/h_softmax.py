"""Theano's two-level hierarchical softmax, ``h_softmax``: a softmax over
classes of outputs, times a softmax over the outputs of each class."""

from symgraph.ops import math as _m
from symgraph.ops.alloc import arange
from symgraph.ops.blas import batched_dot
from symgraph.ops.nnet import softmax
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["h_softmax"]


def h_softmax(x, batch_size, n_outputs, n_classes, n_outputs_per_class, W1, b1, W2, b2,
              target=None):
    """The two-level softmax of the (batch_size, n_hidden) matrix ``x``:
    ``W1`` (n_hidden, n_classes) and ``b1`` (n_classes,) give the class
    probabilities; ``W2`` (n_classes, n_hidden, n_outputs_per_class) and
    ``b2`` (n_classes, n_outputs_per_class) the outputs' within each class.
    Without ``target``: the (batch_size, n_outputs) matrix of every output's
    probability.  With the integer vector ``target``: the probability of each
    row's target only (a vector), which costs one class's outputs per row."""
    x = as_tensor_variable(x)
    class_probs = softmax(_m.dot(x, W1) + b1)
    if target is None:
        # activations[b, c, o] = sum_h x[b, h] * W2[c, h, o] + b2[c, o]
        w2 = as_tensor_variable(W2)
        flat_w2 = w2.dimshuffle(1, 0, 2).reshape((w2.shape[1], n_classes * n_outputs_per_class),
                                                 ndim=2)
        act = _m.dot(x, flat_w2).reshape((batch_size, n_classes, n_outputs_per_class),
                                         ndim=3) + b2
        out_probs = softmax(act.reshape((batch_size * n_classes, n_outputs_per_class), ndim=2))
        out_probs = out_probs.reshape((batch_size, n_classes, n_outputs_per_class), ndim=3)
        probs = class_probs.dimshuffle(0, 1, "x") * out_probs
        return probs.reshape((batch_size, n_classes * n_outputs_per_class), ndim=2)[:, :n_outputs]
    target = as_tensor_variable(target)
    target_classes = _m.int_div(target, n_outputs_per_class)
    target_in_class = _m.mod(target, n_outputs_per_class)
    w2 = as_tensor_variable(W2)[target_classes]          # (batch, n_hidden, n_out_per_class)
    act = batched_dot(x, w2) + as_tensor_variable(b2)[target_classes]
    out_probs = softmax(act)
    rows = arange(batch_size)
    return class_probs[rows, target_classes] * out_probs[rows, target_in_class]
