"""Theano's ``tensor.nnet.ctc``: the connectionist temporal classification loss.

Theano wrapped Baidu's warp-ctc library; symgraph computes the loss itself, in
NumPy, with the forward-backward recursions in log space (so long sequences
do not underflow).  The conventions are warp-ctc's, as Theano exposed them:

- ``activations`` ``(time, batch, alphabet)``: the network's outputs *before*
  the softmax (the op applies a softmax over the last axis);
- ``labels`` ``(batch, max_label_length)``, integers; negative entries are
  padding and are skipped; the blank is symbol 0, so labels lie in
  ``[1, alphabet)``;
- ``input_lengths`` ``(batch,)``: the number of time steps of each sequence
  (the later steps are ignored and get a zero gradient).

The result is the vector of the costs ``-log p(labels | activations)``, one
per sequence.  A sequence too short for its labels (each repeated label needs
a blank between its copies) has probability 0: its cost is ``inf`` and its
gradient zero.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["ctc", "ConnectionistTemporalClassification", "ctc_available"]


def ctc_available():
    """Always True: symgraph's CTC needs no external library (Theano's
    answered whether warp-ctc was found)."""
    return True


def _logsumexp(a, axis=None):
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


def _log_softmax(x):
    return x - _logsumexp(x, axis=-1)[..., None]


def ctc_one(acts, label):
    """The cost and its gradient with respect to ``acts`` for one sequence:
    ``acts`` ``(time, alphabet)`` activations before the softmax, ``label``
    the symbols (no padding, no blanks).  NumPy in, NumPy out (float64)."""
    acts = np.asarray(acts, dtype=np.float64)
    steps, _ = acts.shape
    logy = _log_softmax(acts)
    # The label with a blank before, between and after its symbols.
    ext = np.zeros(2 * len(label) + 1, dtype=np.int64)
    ext[1::2] = label
    width = len(ext)
    if steps == 0:
        cost = 0.0 if len(label) == 0 else np.inf
        return cost, np.zeros_like(acts)
    # A state may be skipped (s-2 -> s) when it is a symbol that differs from
    # the symbol two states back: the blank between them is optional.
    skip = np.zeros(width, dtype=bool)
    skip[2:] = (ext[2:] != 0) & (ext[2:] != ext[:-2])
    neg_inf = -np.inf

    def step(prev):
        out = prev.copy()
        out[1:] = np.logaddexp(out[1:], prev[:-1])
        out[2:] = np.where(skip[2:], np.logaddexp(out[2:], prev[:-2]), out[2:])
        return out

    log_alpha = np.full((steps, width), neg_inf)
    log_alpha[0, 0] = logy[0, ext[0]]
    if width > 1:
        log_alpha[0, 1] = logy[0, ext[1]]
    for t in range(1, steps):
        log_alpha[t] = step(log_alpha[t - 1]) + logy[t, ext]

    # log_beta[t, s]: the log-probability of finishing from state s at step t,
    # counting the steps after t only.
    log_beta = np.full((steps, width), neg_inf)
    log_beta[-1, -1] = 0.0
    if width > 1:
        log_beta[-1, -2] = 0.0
    skip_back = np.zeros(width, dtype=bool)
    skip_back[:-2] = skip[2:]
    for t in range(steps - 2, -1, -1):
        nxt = log_beta[t + 1] + logy[t + 1, ext]
        cur = nxt.copy()
        cur[:-1] = np.logaddexp(cur[:-1], nxt[1:])
        cur[:-2] = np.where(skip_back[:-2], np.logaddexp(cur[:-2], nxt[2:]), cur[:-2])
        log_beta[t] = cur

    log_p = _logsumexp(log_alpha[-1, -2:]) if width > 1 else log_alpha[-1, -1]
    if not np.isfinite(log_p):
        return np.inf, np.zeros_like(acts)
    # The posterior of each symbol at each step (summing the states that emit
    # it); d(-log p)/d(acts) is the softmax minus that posterior.
    occupancy = log_alpha + log_beta - log_p
    posterior = np.zeros_like(acts)
    for k in np.unique(ext):
        posterior[:, k] = np.exp(_logsumexp(occupancy[:, ext == k], axis=1))
    return -float(log_p), np.exp(logy) - posterior


class ConnectionistTemporalClassification(Op):
    """The CTC op: inputs ``(activations, labels, input_lengths)`` (see the
    module's docstring), outputs ``(costs, gradients)``.  ``costs`` (the
    default output) has one entry per sequence; ``gradients`` has the shape of
    ``activations``: each cost's derivative with respect to its sequence's
    activations.

    ``compute_grad=False`` drops the second output (and the gradient).
    ``openmp`` is accepted for Theano's signature and has no effect.
    """

    __props__ = ("compute_grad",)
    default_output = 0

    def __init__(self, compute_grad=True, openmp=None):
        self.compute_grad = bool(compute_grad)

    def make_node(self, activations, labels, input_lengths):
        who = "ConnectionistTemporalClassification"
        acts = as_tensor_variable(activations)
        labels = as_tensor_variable(labels)
        lengths = as_tensor_variable(input_lengths)
        if acts.ndim != 3 or acts.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{who}: activations must be a 3-d float tensor (time, batch, "
                            f"alphabet), got {acts} of type {acts.type}")
        if labels.ndim != 2 or labels.dtype not in INT_DTYPES:
            raise TypeError(f"{who}: labels must be an integer matrix (batch, label "
                            f"length), got {labels} of type {labels.type}")
        if lengths.ndim != 1 or lengths.dtype not in INT_DTYPES:
            raise TypeError(f"{who}: input_lengths must be an integer vector (batch,), got "
                            f"{lengths} of type {lengths.type}")
        outputs = [TensorType(acts.dtype, shape=(acts.type.shape[1],))()]
        if self.compute_grad:
            outputs.append(acts.type())
        return Apply(self, [acts, labels, lengths], outputs)

    def perform(self, node, inputs, output_storage):
        acts, labels, lengths = inputs
        who = "ConnectionistTemporalClassification"
        steps, batch, alphabet = acts.shape
        if labels.shape[0] != batch or lengths.shape[0] != batch:
            raise ValueError(f"{who}: activations have a batch of {batch} but labels have "
                             f"{labels.shape[0]} rows and input_lengths {lengths.shape[0]} "
                             f"entries")
        costs = np.empty(batch, dtype=acts.dtype)
        grads = np.zeros_like(acts)
        for b in range(batch):
            length = int(lengths[b])
            if not 0 <= length <= steps:
                raise ValueError(f"{who}: input_lengths[{b}] = {length} is outside "
                                 f"[0, {steps}] (the activations' time steps)")
            label = labels[b][labels[b] >= 0]
            if np.any(label == 0) or np.any(label >= alphabet):
                raise ValueError(f"{who}: labels[{b}] = {labels[b].tolist()} has symbols "
                                 f"outside [1, {alphabet}) (0 is the blank; negative "
                                 f"entries are padding)")
            cost, grad = ctc_one(acts[:length, b, :], label)
            costs[b] = cost
            grads[:length, b, :] = grad
        output_storage[0][0] = costs
        if self.compute_grad:
            output_storage[1][0] = grads

    def infer_shape(self, fgraph, node, input_shapes):
        shapes = [(input_shapes[0][1],)]
        if self.compute_grad:
            shapes.append(input_shapes[0])
        return shapes

    def connection_pattern(self, node):
        pattern = [[True] * len(node.outputs)]
        return pattern + [[False] * len(node.outputs) for _ in node.inputs[1:]]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import (disconnected_grad_for,
                                                     grad_not_implemented, grad_undefined)

        acts = inputs[0]
        if not self.compute_grad:
            return [grad_undefined(self, 0, acts, "built with compute_grad=False"),
                    disconnected_grad_for(inputs[1]), disconnected_grad_for(inputs[2])]
        if len(output_grads) > 1 and not _is_disconnected(output_grads[1]):
            return [grad_not_implemented(self, 0, acts, "second derivatives of CTC"),
                    disconnected_grad_for(inputs[1]), disconnected_grad_for(inputs[2])]
        g_cost = output_grads[0]
        if _is_disconnected(g_cost):
            return [disconnected_grad_for(x) for x in inputs]
        return [outputs[1] * g_cost.dimshuffle("x", 0, "x"),
                disconnected_grad_for(inputs[1]), disconnected_grad_for(inputs[2])]


def _is_disconnected(var):
    from symgraph.graph.gradient_markers import is_disconnected
    from symgraph.ops.constant_values import is_constant_value

    # The gradient machinery passes zeros for an output the cost ignores.
    return var is None or is_disconnected(var) or is_constant_value(var, 0)


def ctc(activations, labels, input_lengths):
    """The CTC cost of each sequence of a batch (Theano's ``ctc``).

    ``activations`` ``(time, batch, alphabet)`` before the softmax; ``labels``
    ``(batch, n)`` integers in ``[1, alphabet)``, negative entries being
    padding (symbol 0 is the blank); ``input_lengths`` ``(batch,)``.  Returns
    a ``(batch,)`` vector of ``-log p(labels | activations)``, differentiable
    with respect to ``activations``.
    """
    return ConnectionistTemporalClassification()(activations, labels, input_lengths)
