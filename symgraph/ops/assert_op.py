"""``Assert``: pass a value through unchanged once conditions hold (Theano's
``tensor.opt.Assert`` / ``assert_op``).

``assert_op(x, *conditions)`` is ``x`` (a view of it), computed only after
every condition (a scalar or an array, true when all its entries are) has been
checked; a false one raises ``AssertionError`` with the op's message.  The
gradient goes to ``x`` unchanged; the conditions are not differentiated.
No native code yet: the check runs in NumPy.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["Assert", "assert_op"]


class Assert(Op):
    """``Assert(msg)(x, *conditions)``: ``x``, after checking the conditions."""

    __props__ = ("msg",)
    view_map = {0: [0]}

    def __init__(self, msg="Theano Assert failed!"):
        self.msg = str(msg)

    def make_node(self, x, *conditions):
        x = as_tensor_variable(x)
        conditions = [as_tensor_variable(c) for c in conditions]
        return Apply(self, [x] + conditions, [x.type()])

    def perform(self, node, inputs, output_storage):
        for cond in inputs[1:]:
            if not np.all(cond):
                raise AssertionError(self.msg)
        output_storage[0][0] = inputs[0]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [output_grads[0]] + [disconnected_grad_for(c) for c in inputs[1:]]

    def R_op(self, inputs, eval_points):
        return [eval_points[0]]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def do_constant_folding(self, fgraph, node):
        return False


def assert_op(x, *conditions, msg="Theano Assert failed!"):
    """``x``, once every condition holds (an ``AssertionError`` with ``msg``
    otherwise)."""
    return Assert(msg)(x, *conditions)
