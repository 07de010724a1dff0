"""Merge: one variable for equal constants, one node for equal computations.

Two constants are equal when their signatures (type and data) are; two nodes
are equal when their ops are equal and their inputs are the same variables.
Walking the nodes in topological order and looking each one up in a table
keyed by ``(op, input ids)`` reaches the fixed point in one walk: by the time
a node is visited its inputs are already merged.

Nodes that destroy an input are never merged (each must keep its own input).
"""

from symgraph.graph.basic import Constant
from symgraph.opt.driver import replace_validated
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter


def _constants_in_order(fgraph, order):
    seen = set()
    for node in order:
        for var in node.inputs:
            if isinstance(var, Constant) and id(var) not in seen:
                seen.add(id(var))
                yield var
    for var in fgraph.outputs:
        if isinstance(var, Constant) and id(var) not in seen:
            seen.add(id(var))
            yield var


def merge_constants(fgraph, order, verbose=False):
    """Replace each constant by the first equal one; returns the number merged."""
    by_signature = {}
    merged = 0
    for const in list(_constants_in_order(fgraph, order)):
        try:
            key = const.signature()
            hash(key)
        except TypeError:
            continue
        candidates = by_signature.setdefault(key, [])
        # The signature hashes the data; equals() rules out a hash collision.
        twin = next((c for c in candidates if c.equals(const)), None)
        if twin is None:
            candidates.append(const)
        elif replace_validated(fgraph, [(const, twin)], "merge", verbose):
            merged += 1
    return merged


def merge_nodes(fgraph, order, verbose=False):
    """Replace each node's outputs by those of the first equal node."""
    table = {}
    merged = 0
    for node in order:
        if node not in fgraph.apply_nodes or getattr(node.op, "destroy_map", None):
            continue
        try:
            key = (node.op, tuple(id(i) for i in node.inputs))
            hash(key)
        except TypeError:  # an op whose props do not hash: never merged
            continue
        twin = table.get(key)
        if twin is None or twin not in fgraph.apply_nodes:
            table[key] = node
            continue
        if replace_validated(fgraph, list(zip(node.outputs, twin.outputs)), "merge",
                             verbose):
            merged += 1
    return merged


@graph_rewriter
def merge(fgraph, verbose=False):
    """Merge equal constants, then common subexpressions (one topological walk)."""
    order = fgraph.toposort()
    merged = merge_constants(fgraph, order, verbose)
    if merged:
        order = fgraph.toposort()
    return merged + merge_nodes(fgraph, order, verbose)


register(merge, "fast_run", "fast_compile", phase="merge")
