"""Constant folding: a node whose inputs are all constants becomes a constant.

The node is computed once, at compile time, with its op's ``perform``.
Skipped: ops that say ``do_constant_folding(fgraph, node)`` is False (random
draws, Print, large allocations), results larger than ``MAX_ELEMENTS``
(a constant that big would bloat the graph and the compiled module), and
nodes whose computation raises (the error then happens at run time, where it
can name the user's line and the inputs, instead of breaking compilation).
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.tensor.type import TensorType

#: The largest result (in elements) folded into a constant.
MAX_ELEMENTS = 1_000_000


def _too_big(var):
    shape = getattr(var.type, "shape", None)
    return shape is not None and None not in shape and int(np.prod(shape)) > MAX_ELEMENTS


@node_rewriter(None)
def constant_folding(fgraph, node):
    """Compute a node whose inputs are all constants."""
    if not all(isinstance(i, Constant) for i in node.inputs):
        return None
    if not node.op.do_constant_folding(fgraph, node) or any(_too_big(o) for o in node.outputs):
        return None
    storage = [[None] for _ in node.outputs]
    try:
        node.op.perform(node, [i.data for i in node.inputs], storage)
    except Exception:  # noqa: BLE001 - left to fail at run time, at the user's line
        return None
    replacements = []
    for out, (value,) in zip(node.outputs, storage):
        if isinstance(out.type, TensorType):
            from symgraph.tensor.basic import constant

            value = np.asarray(value)
            if value.size > MAX_ELEMENTS:
                return None
            if value.dtype != out.type.numpy_dtype:
                value = value.astype(out.type.dtype)
            replacements.append(constant(value, dtype=out.type.dtype))
        else:
            replacements.append(out.type.make_constant(value))
    return replacements


register(constant_folding, "fast_run", "fast_compile", phase="constant_folding")
