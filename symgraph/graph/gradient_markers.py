"""Placeholders that ops' ``grad`` methods return for gradients that do not
exist: a ``DisconnectedType`` variable ("does not depend on") or a ``NullType``
one ("undefined / not implemented", with the reason).

They sit in the graph layer, below the ops, so that an op's ``grad`` needs no
import of ``symgraph.gradient`` (which re-exports them for users).
"""

from symgraph.graph.basic import Variable
from symgraph.graph.null_type import DisconnectedType, NullType

__all__ = ["disconnected_grad_for", "is_disconnected", "is_null", "grad_not_implemented",
           "grad_undefined"]



def disconnected_grad_for(x):
    """The placeholder for 'the output does not depend on x'."""
    return DisconnectedType()()


def is_disconnected(var):
    """True when ``var`` is a 'does not depend on' placeholder."""
    return isinstance(var, Variable) and isinstance(var.type, DisconnectedType)


def is_null(var):
    """True when ``var`` is an 'undefined / not implemented' placeholder."""
    return isinstance(var, Variable) and isinstance(var.type, NullType)


def grad_not_implemented(op, index, x, comment=""):
    """A NullType placeholder: the gradient of ``op`` wrt input ``index`` is not implemented."""
    return NullType(f"the gradient of {op} with respect to its input {index} is not "
                    f"implemented{': ' + comment if comment else ''}")()


def grad_undefined(op, index, x, comment=""):
    """A NullType placeholder: the gradient is mathematically undefined."""
    return NullType(f"the gradient of {op} with respect to its input {index} is "
                    f"undefined{': ' + comment if comment else ''}")()
