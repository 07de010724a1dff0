"""The update guard: a call that fails changes no shared variable.

Nodes that overwrite a shared variable's storage run last (InputDestroyersLast),
but once the first of them has written, a later node that fails (a second
in-place update given a bad shape or an index out of bounds) would leave a
shared variable changed by a call that raised.  The guard runs just before
that first write and predicts, from shapes and indices only (no data is read
or written), whether any later node would fail; when one would, it runs that
node's ``perform`` on copies, which raises the node's own error.
"""

import numpy as np

from symgraph.compile.errors import reraise_with_node
from symgraph.graph.basic import Constant

def _elemwise_check(node):
    """fails(node, values) for an Elemwise node: True when the inputs' shapes do
    not broadcast as the op's types allow.  The dimensions that must agree are
    found once, here, since the guard runs on every call."""
    groups = []
    for d in range(node.outputs[0].ndim):
        positions = [i for i, var in enumerate(node.inputs) if not var.type.broadcastable[d]]
        if len(positions) > 1:
            groups.append((d, positions[0], tuple(positions[1:])))
    if all(d == k for k, (d, _, _) in enumerate(groups)) and len(groups) == node.outputs[0].ndim \
            and all(len(rest) == len(node.inputs) - 1 for _, _, rest in groups):
        # No input broadcasts anywhere (the usual update, w - lr * g): equal shapes.
        def fails(node, values):
            shape = values[0].shape
            return any(v.shape != shape for v in values)
        return fails

    def fails(node, values):
        for d, first, rest in groups:
            size = values[first].shape[d]
            if any(values[i].shape[d] != size for i in rest):
                return True
        return False
    return fails


def _inc_subtensor_check(node):
    """fails(node, values) for an (Advanced)IncSubtensor node: True when the
    index is out of bounds or the value does not fit x[index].  The imports
    and the op's kind are settled once, here, since the guard runs every call."""
    from symgraph.ops.subtensor import IncSubtensor, check_runtime_value, index_from_pattern

    trailing = (Ellipsis,) if isinstance(node.op, IncSubtensor) else ()

    def fails(node, values):
        x, y = values[0], values[1]
        index = index_from_pattern(node.op.idx_list, values[2:]) + trailing
        try:
            # Zero strides: indexing reads no data and allocates nothing of x's size.
            target = np.broadcast_to(np.zeros((), dtype=np.int8), x.shape)[index].shape
            check_runtime_value(node.op, node, target, y)
        except (IndexError, ValueError, TypeError):
            return True
        return False
    return fails


def _blas_update_fails(node, values):
    """True when a Gemm/Gemv/Ger update's operands do not fit together and z."""
    name = type(node.op).__name__
    if name == "Gemm":
        z, _, x, y, _ = values
        return x.shape[1] != y.shape[0] or z.shape != (x.shape[0], y.shape[1])
    if name == "Gemv":
        z, _, a, x, _ = values
        return a.shape[1] != x.shape[0] or z.shape != (a.shape[0],)
    z, _, x, y = values
    return z.shape != (x.shape[0], y.shape[0])


def _predictor(node):
    """(fails(node, values), positions whose values, not only shapes, it reads),
    or None for an op whose failures the guard cannot predict."""
    from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
    from symgraph.ops.elemwise import Elemwise
    from symgraph.ops.gemm import Gemm, Gemv, Ger
    from symgraph.ops.subtensor import IncSubtensor

    op = node.op
    if isinstance(op, Elemwise):
        return _elemwise_check(node), frozenset()
    if isinstance(op, (IncSubtensor, AdvancedIncSubtensor)):
        return _inc_subtensor_check(node), frozenset(range(2, len(node.inputs)))
    if isinstance(op, (Gemm, Gemv, Ger)):
        return _blas_update_fails, frozenset()
    return None


def _raise_node_error(node, values):
    """Run ``node`` on copies of ``values``: its perform raises the error the
    guard predicted (with the node's own message), named after the node."""
    copies = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values]
    try:
        node.op.perform(node, copies, [[None] for _ in node.outputs])
    except Exception as exc:
        reraise_with_node(node, values, exc)


class UpdateGuard:
    """A step run before the first write into a shared variable: it raises the
    error of any later node whose failure it can predict, so that no shared
    variable is changed by a call that fails there.  ``guard(*values)`` takes
    the values of ``variables`` and returns ()."""

    def __init__(self, node, checks):
        self.node = node              # the first node that writes a shared variable
        variables, where = [], {}
        self.checks = []
        for checked, fails, inputs in checks:
            for var in inputs:
                if var not in where:
                    where[var] = len(variables)
                    variables.append(var)
            self.checks.append((checked, fails, tuple(where[v] for v in inputs)))
        self.variables = tuple(variables)

    def __call__(self, *values):
        for node, fails, positions in self.checks:
            inputs = [values[i] for i in positions]
            if fails(node, inputs):
                _raise_node_error(node, inputs)
        return ()

    def perform(self, node, values, output_storage):
        """The VM's form of the step (the VM calls ``perform(node, values, cells)``)."""
        self(*values)


def _writes_shared(node, handler, shared):
    return any(handler.view_root(node.inputs[i]) in shared
               for ins in (node.op.destroy_map or {}).values() for i in ins)


def _ready_input(var, ready, needs_value):
    """The variable holding ``var``'s shape (or value) before the guard runs:
    itself, or, for a shape only, the array an in-place node overwrote to make
    it (in-place ops keep shapes); None when it is computed later."""
    while var not in ready:
        node = var.owner
        if needs_value or node is None or not node.op.destroy_map:
            return None
        k = node.outputs.index(var)
        if k not in node.op.destroy_map:
            return None
        var = node.inputs[node.op.destroy_map[k][0]]
    return var


def update_guard(fgraph, order, shared_inputs):
    """The UpdateGuard of a schedule, or None when no node after the first
    write into a shared variable has predictable failures."""
    from symgraph.graph.destroy import DestroyHandler

    handler = fgraph.get_feature(DestroyHandler)
    shared = set(shared_inputs)
    if handler is None or not shared:
        return None
    first = next((k for k, node in enumerate(order) if _writes_shared(node, handler, shared)),
                 None)
    if first is None:
        return None
    ready = set(fgraph.inputs)
    for node in order[:first]:
        ready.update(node.outputs)
    checks = []
    for node in order[first + 1:]:
        found = _predictor(node)
        if found is None:
            continue
        fails, value_positions = found
        inputs = [v if isinstance(v, Constant) else _ready_input(v, ready, i in value_positions)
                  for i, v in enumerate(node.inputs)]
        if all(v is not None for v in inputs):
            checks.append((node, fails, inputs))
    return UpdateGuard(order[first], checks) if checks else None
