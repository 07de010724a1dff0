"""Element-wise fusion: regions of Elemwise nodes become one Elemwise(Composite).

A region is a set of Elemwise nodes that

* all have native code for their dtypes (a fused node must not drop to
  Python because one member cannot be compiled) and overwrite nothing;
* all have outputs with the same broadcastable pattern and are joined by
  producer-consumer edges, so they all have the same shape at run time
  (their inputs may broadcast);
* is convex: no path leaves the region and comes back (else the fused node
  would depend on itself).

Each region of two or more nodes becomes one ``Elemwise(Composite)`` node:
one loop, no temporaries.  Values computed inside that are used outside
become extra outputs.  Scalar constants (one element, broadcastable in every
dimension, possibly behind a DimShuffle) are written into the code as C
literals instead of being inputs.

The search (``find_regions``) takes the nodes from the last to the first in
topological order; an unassigned node starts a region, which grows towards
producers in decreasing topological index.  Reachability is kept as bitsets
(Python ints) of ancestors and descendants, so the convexity test of a
candidate ``p`` is one expression: ``desc[p] & anc(region) & ~region`` must be
empty (a node reachable from ``p`` that reaches the region from outside it).
Taking candidates in decreasing index means a rejected candidate stays
rejected: every node between it and the region was decided before it.  Once
a region is chosen it is treated as one node: the ancestors of the region
see all its descendants and the reverse, so that two regions never depend on
each other (which would make a cycle once both are fused).  Time is
O(nodes x nodes / 64) word operations, a few milliseconds for thousands of
nodes.
"""

import heapq

from symgraph.graph.basic import Constant
from symgraph.opt.driver import replace_validated
from symgraph.opt.fusion_support import can_fuse_elemwise
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter

__all__ = ["elemwise_fusion", "find_regions", "fuse_region", "is_fusable"]

def is_fusable(node):
    """Whether ``node`` may join a fused region (see the module docstring)."""
    from symgraph.ops.elemwise import Elemwise

    op = node.op
    if not isinstance(op, Elemwise) or op.inplace_pattern:
        return False
    return can_fuse_elemwise(op.scalar_op, tuple(str(v.dtype) for v in node.inputs))


def _pattern(node):
    return tuple(node.outputs[0].type.broadcastable)


def scalar_literal(var):
    """``(value, dtype)`` when ``var`` is a one-element constant broadcastable in
    every dimension (directly or through a DimShuffle), else None."""
    from symgraph.ops.elemwise import DimShuffle

    if not all(getattr(var.type, "broadcastable", (False,))):
        return None
    const = var
    if var.owner is not None and isinstance(var.owner.op, DimShuffle):
        const = var.owner.inputs[0]
    if not isinstance(const, Constant):
        return None
    data = getattr(const, "data", None)
    if data is None or getattr(data, "size", 0) != 1:
        return None
    return data.reshape(()).item(), str(var.dtype)


def _bits(x):
    """The indices of the set bits of ``x``."""
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


def find_regions(fgraph, order=None):
    """The regions to fuse: lists of nodes in topological order, each of two or
    more nodes, listed by increasing position of their last node."""
    order = order if order is not None else fgraph.toposort()
    n = len(order)
    index = {node: i for i, node in enumerate(order)}
    fusable = [is_fusable(node) for node in order]
    anc = [0] * n
    for i, node in enumerate(order):
        bits = 0
        for var in node.inputs:
            owner = var.owner
            if owner is not None and owner in index:
                j = index[owner]
                bits |= anc[j] | (1 << j)
        anc[i] = bits
    desc = [0] * n
    for i in range(n - 1, -1, -1):
        bits = 0
        for var in order[i].outputs:
            for client, _ in fgraph.clients.get(var, ()):
                if client != "output":
                    j = index[client]
                    bits |= desc[j] | (1 << j)
        desc[i] = bits
    candidates = 0  # unassigned fusable nodes
    for i in range(n):
        if fusable[i]:
            candidates |= 1 << i

    regions = []
    for sink in range(n - 1, -1, -1):
        if not (candidates >> sink) & 1:
            continue
        candidates &= ~(1 << sink)
        pattern = _pattern(order[sink])
        members = [sink]
        mask = 1 << sink
        anc_region = anc[sink]
        heap = []
        seen = {sink}

        def push(i):
            for var in order[i].inputs:
                owner = var.owner
                j = index.get(owner) if owner is not None else None
                if j is not None and j not in seen and (candidates >> j) & 1:
                    seen.add(j)
                    heapq.heappush(heap, -j)

        push(sink)
        while heap:
            j = -heapq.heappop(heap)
            if _pattern(order[j]) != pattern or desc[j] & anc_region & ~mask:
                continue
            members.append(j)
            mask |= 1 << j
            anc_region |= anc[j]
            candidates &= ~(1 << j)
            push(j)
        if len(members) < 2:
            continue
        regions.append(sorted(members))
        # The region acts as one node from now on (see the module docstring).
        anc_out = anc_region & ~mask
        desc_out = 0
        for m in members:
            desc_out |= desc[m]
        desc_out &= ~mask
        for x in _bits(anc_out & candidates):
            desc[x] |= desc_out | mask
        for y in _bits(desc_out & candidates):
            anc[y] |= anc_out | mask
    regions.reverse()
    return [[order[i] for i in region] for region in regions]


def fuse_region(fgraph, nodes, current=lambda v: v):
    """The replacement pairs ``[(old output, new output), ...]`` fusing ``nodes``
    (Elemwise nodes in topological order) into one Elemwise(Composite), or None.

    ``current(var)`` maps a variable to what replaced it (regions fused
    earlier in the same pass).
    """
    from symgraph.ops.composite import composite_from_nodes
    from symgraph.ops.elemwise import Elemwise

    inside = set(nodes)
    inputs, literals, seen = [], {}, set()
    for node in nodes:
        for var in node.inputs:
            if var.owner in inside or var in seen:
                continue
            seen.add(var)
            literal = scalar_literal(var)
            if literal is not None:
                literals[var] = literal
            else:
                inputs.append(var)
    if not inputs:  # constants only: keep them as inputs, so the shape is known
        inputs, literals = list(literals), {}
    outputs = []
    for node in nodes:
        for out in node.outputs:
            if any(client == "output" or client not in inside
                   for client, _ in fgraph.clients.get(out, ())):
                outputs.append(out)
    if not outputs:
        return None
    composite = composite_from_nodes(nodes, inputs, outputs, literals)
    new_node = Elemwise(composite).make_node(*[current(v) for v in inputs])
    return list(zip(outputs, new_node.outputs))


@graph_rewriter
def elemwise_fusion(fgraph, verbose=False):
    """Fuse every convex region of two or more Elemwise nodes (one loop each)."""
    regions = find_regions(fgraph)
    replaced = {}

    def current(var):
        return replaced.get(var, var)

    fused = 0
    for nodes in regions:
        pairs = fuse_region(fgraph, nodes, current)
        if pairs and replace_validated(fgraph, pairs, "elemwise_fusion", verbose):
            replaced.update(pairs)
            fused += 1
    return fused


register(elemwise_fusion, "fast_run", "fusion", phase="fusion")
