"""IfElse in the native runtime: a select step, and lazy branches.

An IfElse on arrays is not a Python call: the runtime's select step
(``c_src/runtime.c``) hands out the chosen branch's values.  The nodes that
only one branch needs (``symgraph.ops.ifelse.branch_guards``) get guards:
the runtime runs such a step only when the condition says its branch is
taken, so the branch not taken costs nothing.
"""

__all__ = ["is_select", "set_branch_guards"]


def is_select(node):
    """True for an IfElse on arrays, which the runtime runs itself (a select step)."""
    from symgraph.backends.c_family.c_types import has_c_type
    from symgraph.ops.ifelse import IfElse

    return isinstance(node.op, IfElse) and all(
        var.type.__class__.__name__ == "TensorType" and has_c_type(var.type.dtype)
        for var in node.inputs + node.outputs)


def set_branch_guards(program, fgraph, order, step_nodes, slot_of):
    """Lazy ifelse: each step of a node that only a branch needs (and the check
    steps around it) runs only when that branch is taken."""
    from symgraph.ops.ifelse import branch_guards

    guards = branch_guards(fgraph.outputs, order)
    for index, node in enumerate(step_nodes):
        if node in guards:
            program.set_guards(index, tuple((slot_of[cond], truth)
                                            for cond, truth in guards[node]))
