"""Types of the placeholder variables that gradients use.

``DisconnectedType``: the gradient of an output with respect to an input it
does not depend on.  ``NullType``: a gradient that is undefined or not
implemented; using it in a graph that gets compiled is an error that says why.
"""

from symgraph.graph.basic import Type, Variable


class DisconnectedType(Type):
    """The type of 'no dependency' gradient placeholders."""

    is_null = False

    def filter(self, value, strict=False, allow_downcast=None):
        raise TypeError("a disconnected gradient has no value")

    variable_class = Variable

    def __str__(self):
        return "DisconnectedType"


class NullType(Type):
    """The type of undefined gradients; ``why_null`` says why."""

    __props__ = ("why_null",)
    is_null = True
    variable_class = Variable

    def __init__(self, why_null="(no explanation given)"):
        self.why_null = why_null

    def filter(self, value, strict=False, allow_downcast=None):
        raise TypeError(f"a null gradient has no value: {self.why_null}")
