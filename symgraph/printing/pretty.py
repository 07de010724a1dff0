"""pp: a graph as a readable infix expression, ``((x * 2.0) + exp(y))``.

Element-wise arithmetic and comparisons print as operators (every binary
operation parenthesized, so precedence never needs guessing), other
element-wise functions as ``name(args)``, DimShuffle compactly, Subtensor as
Python indexing where its props allow, and any other op as ``op(args)``.
Modules that define ops may teach the printer a better form with
``pp.assign(condition, printer)``.
"""

import numpy as np

from symgraph.graph.basic import Constant, Variable
from symgraph.printing._graphs import constant_value_text, graph_view

# Scalar op class names (lower-cased, underscores dropped) -> infix operator.
_BINARY = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "intdiv": "//",
    "floordiv": "//", "mod": "%", "pow": "**",
    "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "eq": "==", "neq": "!=",
    "and": "&", "or": "|", "xor": "^",
}
_UNARY = {"neg": "-", "invert": "~", "not": "~"}


def _scalar_key(scalar_op):
    return type(scalar_op).__name__.lower().replace("_", "")


class PPrinter:
    """The pretty printer behind ``pp`` (Theano's ``pprint``).

    ``pp(var)`` returns the expression text of ``var``; a list, a
    FunctionGraph or a compiled function gives one line per output.
    """

    def __init__(self):
        self._custom = []
        self._memo = {}

    def assign(self, condition, printer):
        """Print the nodes for which ``condition(node)`` holds (or whose op is
        an instance of ``condition`` when it is a class) with
        ``printer(pp, node, var) -> str``; later assignments win."""
        if isinstance(condition, type):
            cls = condition
            condition = lambda node: isinstance(node.op, cls)  # noqa: E731
        self._custom.insert(0, (condition, printer))

    def __call__(self, obj):
        outputs = [obj] if isinstance(obj, Variable) else graph_view(obj, "pp").outputs
        # A subexpression used many times is rendered once per call (a graph
        # with much sharing would otherwise take exponential time).
        self._memo = {}
        try:
            return "\n".join(self.process(out) for out in outputs)
        finally:
            self._memo = {}

    def process(self, var, parent=None):
        """The text of ``var``; ``parent`` is the Apply node that uses it."""
        key = (var, parent is not None and type(parent.op).__name__ == "Elemwise")
        if key not in self._memo:
            self._memo[key] = self._render(var, parent)
        return self._memo[key]

    def _render(self, var, parent):
        node = var.owner
        if node is None:
            return _leaf_text(var)
        for condition, printer in self._custom:
            if condition(node):
                return printer(self, node, var)
        op = node.op
        scalar_op = getattr(op, "scalar_op", None)
        if scalar_op is not None and type(op).__name__ == "Elemwise":
            return self._elemwise(node, scalar_op)
        if type(op).__name__ == "DimShuffle":
            return self._dimshuffle(node, parent)
        # Rewrites turn the user's x.shape[i] into Shape_i: print it as written.
        if type(op).__name__ == "Shape_i":
            return f"{self.process(node.inputs[0], node)}.shape[{op.i}]"
        if type(op).__name__ == "Shape":
            return f"{self.process(node.inputs[0], node)}.shape"
        if hasattr(op, "idx_list"):
            text = self._subtensor(node)
            if text is not None:
                return text
        return self._generic(node, var)

    def _args(self, node):
        return [self.process(i, node) for i in node.inputs]

    def _elemwise(self, node, scalar_op):
        key = _scalar_key(scalar_op)
        args = self._args(node)
        if key in _BINARY and len(args) >= 2:
            return "(" + f" {_BINARY[key]} ".join(args) + ")"
        if key in _UNARY and len(args) == 1:
            return f"({_UNARY[key]}{args[0]})"
        return f"{scalar_op}({', '.join(args)})"

    def _dimshuffle(self, node, parent):
        order = tuple(node.op.new_order)
        (arg,) = self._args(node)
        ndim = node.inputs[0].ndim
        padding = len(order) - ndim
        # Left padding that only feeds an element-wise op is NumPy-style
        # broadcasting: the reader does not need to see it.
        if padding >= 0 and order == ("x",) * padding + tuple(range(ndim)) and \
                parent is not None and type(parent.op).__name__ == "Elemwise":
            return arg
        if ndim == 2 and order == (1, 0):
            return f"{arg}.T"
        return f"{arg}.dimshuffle({', '.join(repr(d) for d in order)})"

    def _subtensor(self, node):
        """``x[1:, ::2]`` for an op with Theano's ``idx_list`` (entries are
        ints, None, slices whose parts are ints or None, or placeholders taken
        in order from the node's index inputs); ``set_subtensor(x[i], y)`` /
        ``inc_subtensor(x[i], y)`` for the ops that also have
        ``set_instead_of_inc``.  None when the props do not read that way."""
        op = node.op
        updating = hasattr(op, "set_instead_of_inc")
        index_inputs = node.inputs[2:] if updating else node.inputs[1:]
        try:
            index = self._index_text(op.idx_list, index_inputs, node)
        except Exception:  # an unfamiliar idx_list: fall back to op(args)
            return None
        if index is None:
            return None
        text = f"{self.process(node.inputs[0], node)}[{index}]"
        if updating:
            name = "set_subtensor" if op.set_instead_of_inc else "inc_subtensor"
            return f"{name}({text}, {self.process(node.inputs[1], node)})"
        return text

    def _index_text(self, idx_list, index_inputs, node):
        rest = iter(index_inputs)

        def entry(e):
            if e is None:
                return ""
            if isinstance(e, (int, np.integer)):
                return str(int(e))
            return self.process(next(rest), node)  # a placeholder

        parts = []
        for item in idx_list:
            if all(hasattr(item, a) for a in ("start", "stop", "step")):  # a slice
                text = f"{entry(item.start)}:{entry(item.stop)}"
                if item.step is not None:
                    text += f":{entry(item.step)}"
                parts.append(text)
            else:
                parts.append(entry(item))
        if next(rest, None) is not None:
            return None  # inputs left over: not the layout assumed here
        return ", ".join(parts)

    def _generic(self, node, var):
        text = f"{node.op}({', '.join(self._args(node))})"
        if len(node.outputs) > 1:
            text += f"[{var.index}]"
        return text


def _leaf_text(var):
    if var.name is not None:
        return var.name
    if isinstance(var, Constant):
        return constant_value_text(var)
    return f"<{var.type}>"


pp = PPrinter()
pprint = pp
