"""Ops that are the identity going forward and change the gradient going back.

``zero_grad``: the gradient through it is zero; ``disconnected_grad``: the
output does not depend on the input for differentiation; ``undefined_grad``:
the gradient is undefined (NullType); ``grad_clip``: the gradient is clipped to
``[lower, upper]``; ``grad_scale``: the gradient is multiplied.

Each output is a view of the input (``view_map``), so running one costs nothing.
"""

import numbers

from symgraph.graph.basic import Apply, Op

__all__ = ["ZeroGrad", "DisconnectedGrad", "UndefinedGrad", "GradClip", "GradScale",
           "zero_grad", "disconnected_grad", "undefined_grad", "grad_clip", "grad_scale",
           "seed_identity"]


class GradientShapingOp(Op):
    """The identity on one tensor: subclasses define the gradient."""

    view_map = {0: [0]}

    def make_node(self, x):
        from symgraph.tensor.basic import as_tensor_variable

        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def R_op(self, inputs, eval_points):
        # Forward, the op is the identity: the directional derivative passes through.
        return [eval_points[0]]


class ZeroGrad(GradientShapingOp):
    """Identity whose gradient is zero (the input is a constant for ``grad``)."""

    def grad(self, inputs, output_grads):
        from symgraph.ops.math import zeros_like

        return [zeros_like(output_grads[0])]

    def R_op(self, inputs, eval_points):
        from symgraph.ops.math import zeros_like

        if eval_points[0] is None:
            return [None]
        return [zeros_like(eval_points[0])]


class DisconnectedGrad(GradientShapingOp):
    """Identity that ``grad`` sees as not depending on its input at all."""

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [disconnected_grad_for(inputs[0])]

    def connection_pattern(self, node):
        return [[False]]

    def R_op(self, inputs, eval_points):
        return [None]


class UndefinedGrad(GradientShapingOp):
    """Identity whose gradient is undefined: ``grad`` through it raises."""

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import grad_undefined

        return [grad_undefined(self, 0, inputs[0],
                               "the graph marks it undefined with undefined_grad()")]

    def R_op(self, inputs, eval_points):
        raise NotImplementedError("the derivative through undefined_grad() is undefined")


def _number(value, who, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {what} must be a Python number, got {value!r}")
    return float(value)


class GradClip(GradientShapingOp):
    """Identity whose gradient is clipped to ``[clip_lower_bound, clip_upper_bound]``."""

    __props__ = ("clip_lower_bound", "clip_upper_bound")

    def __init__(self, clip_lower_bound, clip_upper_bound):
        self.clip_lower_bound = _number(clip_lower_bound, "grad_clip", "lower_bound")
        self.clip_upper_bound = _number(clip_upper_bound, "grad_clip", "upper_bound")
        if self.clip_upper_bound < self.clip_lower_bound:
            raise ValueError(f"grad_clip: upper_bound ({clip_upper_bound}) is smaller "
                             f"than lower_bound ({clip_lower_bound})")

    def grad(self, inputs, output_grads):
        from symgraph.ops.math import clip

        return [clip(output_grads[0], self.clip_lower_bound, self.clip_upper_bound)]


class GradScale(GradientShapingOp):
    """Identity whose gradient is multiplied by ``multiplier``."""

    __props__ = ("multiplier",)

    def __init__(self, multiplier):
        self.multiplier = _number(multiplier, "grad_scale", "multiplier")

    def grad(self, inputs, output_grads):
        return [output_grads[0] * self.multiplier]


class SeedIdentity(GradientShapingOp):
    """Plain identity: ``Lop`` attaches each eval point to a fresh one of these.

    Not merged with other nodes by the caller's graph, as it only lives in
    the forward graph that ``Lop`` differentiates.
    """

    def grad(self, inputs, output_grads):
        return [output_grads[0]]


def zero_grad(x):
    """``x``, with a zero gradient: ``grad`` treats it as a constant."""
    return ZeroGrad()(x)


def disconnected_grad(x):
    """``x``, but ``grad`` considers that nothing depends on what computed it
    (``grad`` wrt an input reached only through it is a disconnected input)."""
    return DisconnectedGrad()(x)


def undefined_grad(x):
    """``x``, with an undefined gradient: ``grad`` through it raises NullTypeGradError."""
    return UndefinedGrad()(x)


def grad_clip(x, lower_bound, upper_bound):
    """``x``, with the gradient that flows back through it clipped element-wise
    to ``[lower_bound, upper_bound]`` (Python numbers)."""
    return GradClip(lower_bound, upper_bound)(x)


def grad_scale(x, multiplier):
    """``x``, with the gradient that flows back through it multiplied by
    ``multiplier`` (a Python number; negative reverses it)."""
    return GradScale(multiplier)(x)


def seed_identity(x):
    """A fresh identity of ``x`` (used by ``Lop`` to seed a gradient)."""
    return SeedIdentity()(x)
