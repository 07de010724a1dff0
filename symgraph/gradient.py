"""Automatic differentiation (reverse and forward mode) and gradient checks."""

from symgraph.graph.basic import Variable
from symgraph.graph.null_type import DisconnectedType, NullType


def disconnected_grad_for(x):
    """The placeholder for 'the output does not depend on x'."""
    return DisconnectedType()()


def is_disconnected(var):
    return isinstance(var, Variable) and isinstance(var.type, DisconnectedType)


def grad_not_implemented(op, index, x, comment=""):
    """A NullType placeholder: the gradient of ``op`` wrt input ``index`` is not implemented."""
    return NullType(f"the gradient of {op} with respect to its input {index} is not "
                    f"implemented{': ' + comment if comment else ''}")()


def grad_undefined(op, index, x, comment=""):
    """A NullType placeholder: the gradient is mathematically undefined."""
    return NullType(f"the gradient of {op} with respect to its input {index} is "
                    f"undefined{': ' + comment if comment else ''}")()
