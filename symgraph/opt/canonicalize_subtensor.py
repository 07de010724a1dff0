"""Canonicalize views: a chain of basic indexing becomes one, and Theano's
``view_op`` goes (fast_run).

``x[1:][:, 2:][0] -> x[1, 2:]``.  Handled: constant indices and slices whose
start, stop and index are non-negative (or absent) with step 1, where the
merged index selects the same elements *and* fails exactly when the chain
does: an index into ``x[a:]`` is an index ``a + i`` into ``x`` (out of range
for both, or for neither); an index into ``x[a:b]`` with ``b`` given is left
alone (``x[2:3][5]`` fails, ``x[7]`` may not).  Symbolic bounds and negative
values are left as written.
"""

from symgraph.ops.subtensor import FULL_SLICE, SYMBOLIC, SliceSpec, Subtensor
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform


def _plain(spec):
    """``(start, stop)`` of a constant slice with step 1 and parts >= 0, else None."""
    if SYMBOLIC in spec or spec.step not in (None, 1):
        return None
    if any(p is not None and p < 0 for p in (spec.start, spec.stop)):
        return None
    return spec.start or 0, spec.stop


def _compose(inner, outer):
    """The index into x equal to ``x[inner][outer]`` in one dimension, or None."""
    first = _plain(inner)
    if first is None:
        return None
    a, b = first
    if isinstance(outer, int):
        return a + outer if b is None and outer >= 0 else None
    second = _plain(outer)
    if second is None:
        return None
    c, d = second
    stop = b if d is None else (a + d if b is None else min(b, a + d))
    return SliceSpec(a + c or None, stop, None)


@node_rewriter([Subtensor])
def local_subtensor_merge(fgraph, node):
    """``x[i][j] -> x[k]`` for constant basic indices (see the module docstring)."""
    inner = node.inputs[0].owner
    if inner is None or type(inner.op) is not Subtensor or len(node.inputs) != 1 or \
            len(inner.inputs) != 1:
        return None
    x = inner.inputs[0]
    inner_list = list(inner.op.idx_list) + [FULL_SLICE] * (x.ndim - len(inner.op.idx_list))
    mid_ndim = node.inputs[0].ndim
    outer_list = list(node.op.idx_list) + [FULL_SLICE] * (mid_ndim - len(node.op.idx_list))
    merged, pos = [], 0
    for entry in inner_list:
        if not isinstance(entry, SliceSpec):
            merged.append(entry)
            continue
        outer = outer_list[pos]
        pos += 1
        if outer == FULL_SLICE:
            merged.append(entry)
            continue
        if entry == FULL_SLICE:
            merged.append(outer)
            continue
        combined = _compose(entry, outer)
        if combined is None:
            return None
        merged.append(combined)
    while merged and merged[-1] == FULL_SLICE:
        merged.pop()
    new = conform(Subtensor(tuple(merged))(x), node.outputs[0])
    return None if new is None else [new]


register(local_subtensor_merge, "fast_run", phase="canonicalize")


@node_rewriter(["symgraph.ops.view_copy:ViewOp"])
def local_remove_view_op(fgraph, node):
    """``view_op(x) -> x`` (Theano's identity view has no work to do)."""
    return [node.inputs[0]]


register(local_remove_view_op, "fast_run", "fast_compile", phase="canonicalize")
