"""Print: an identity op that prints its input's value when the function runs."""

from symgraph.graph.basic import Apply, Op, Variable


def _print_attrs(op, value):
    """The default action: ``message attr = value`` for each requested attribute
    (a method such as ``sum`` is called)."""
    for attr in op.attrs:
        found = getattr(value, attr)
        shown = found() if callable(found) else found
        print(op.message, attr, "=", shown)


class Print(Op):
    """``Print(message, attrs=('__str__',))(x)`` is ``x``, printing on each run.

    When the compiled function computes it, it prints one line per attribute:
    ``message __str__ = [1. 2.]``, ``message shape = (2,)``, ``message sum = 3.0``.
    The output is the input itself (a view), the gradient passes through,
    and the node is never constant-folded, so the print happens at run time.
    ``global_fn(op, value)`` replaces the printing (for logging elsewhere).
    Two Prints with equal message and attrs on the same input merge.
    """

    __props__ = ("message", "attrs", "global_fn")
    view_map = {0: [0]}

    def __init__(self, message="", attrs=("__str__",), global_fn=_print_attrs):
        if isinstance(attrs, str):
            attrs = (attrs,)
        self.message = str(message)
        self.attrs = tuple(attrs)
        self.global_fn = global_fn

    def __str__(self):
        return f"Print{{message={self.message!r}, attrs={self.attrs!r}}}"

    __repr__ = __str__

    def make_node(self, x):
        if not isinstance(x, Variable):
            from symgraph.tensor.basic import as_tensor_variable

            x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        (value,) = inputs
        output_storage[0][0] = value
        self.global_fn(self, value)

    def grad(self, inputs, output_grads):
        return [output_grads[0]]

    def R_op(self, inputs, eval_points):
        return [eval_points[0]]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True]]

    def do_constant_folding(self, fgraph, node):
        # Folding would print once at compile time and never again.
        return False


__all__ = ["Print"]
