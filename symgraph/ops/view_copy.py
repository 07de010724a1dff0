"""Theano's ``ViewOp`` and ``DeepCopyOp``: the identity as a view, and as a copy.

``view_op(x)`` is ``x`` itself (a view: ``view_map``); canonicalize removes it,
as Theano's optimizer did.  ``deep_copy_op(x)`` is a new array equal to ``x``,
which no rewrite removes (the program asked for a copy).  Both pass gradients
through unchanged.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["ViewOp", "view_op", "DeepCopyOp", "deep_copy_op"]


class _Identity(Op):
    __props__ = ()

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def R_op(self, inputs, eval_points):
        return [eval_points[0]]


class ViewOp(_Identity):
    """Returns its input as a view (the same array)."""

    view_map = {0: [0]}

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]


class DeepCopyOp(_Identity):
    """Returns a copy of its input (never the same memory)."""

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.array(inputs[0], copy=True)


view_op = ViewOp()
deep_copy_op = DeepCopyOp()
