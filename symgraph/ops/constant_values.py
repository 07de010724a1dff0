"""Reading constants through the graph: what ops' gradients and the rewrites
both ask (is this input a known zero? which constant is this?)."""

from symgraph.graph.basic import Constant


def is_elemwise(node, *scalar_classes):
    """True when ``node`` is an Elemwise around an instance of ``scalar_classes``."""
    from symgraph.ops.elemwise import Elemwise

    return node is not None and isinstance(node.op, Elemwise) and \
        isinstance(node.op.scalar_op, scalar_classes)


def scalar_constant_value(var, max_depth=16):
    """The value of every element of ``var`` when it is a constant whose
    elements are all equal, else None.

    Looks through broadcasting (DimShuffle) and ``fill``/``second(model,
    value)``: ``x + 1`` holds its 1 as ``DimShuffle{x}(1)`` until constant
    folding runs.
    """
    from symgraph.ops.elemwise import DimShuffle
    from symgraph.ops.scalar_basic import Second

    for _ in range(max_depth):
        if isinstance(var, Constant):
            unique = getattr(var, "unique_value", None)
            return unique() if unique is not None else None
        node = var.owner
        if node is None:
            return None
        if isinstance(node.op, DimShuffle):
            var = node.inputs[0]
        elif is_elemwise(node, Second):
            var = node.inputs[1]
        else:
            return None
    return None


def is_constant_value(var, value):
    """True when every element of ``var`` is the constant ``value``."""
    found = scalar_constant_value(var)
    return found is not None and found == value
