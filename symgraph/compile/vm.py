"""The Python VM: runs a scheduled FunctionGraph node by node.

Every variable has one storage cell (a one-element list).  Each step calls
the op's ``perform`` with its input values and its output cells.  Native code
(a later backend) plugs in by giving a node another thunk with the same
signature, so every graph runs whatever has native code.
"""

import time

import numpy as np

from symgraph.compile.errors import reraise_with_node
from symgraph.graph.basic import Constant


class VM:
    """Executes ``order`` (a list of Apply nodes) over ``storage`` cells.

    ``checks`` is a list of callables ``check(node, input_values, output_values)``
    run after each node (NanGuardMode and DebugMode add theirs).  ``guard``
    (an UpdateGuard, see ``update_guard``) runs just before its node.
    """

    def __init__(self, fgraph, order, storage, checks=(), profile=None, guard=None):
        self.fgraph = fgraph
        self.order = order
        self.storage = storage
        self.checks = list(checks)
        self.profile = profile
        self.steps = []
        for node in order:
            if guard is not None and node is guard.node:
                self.steps.append((guard.perform, node, [storage[v] for v in guard.variables],
                                   None))
            self.steps.append((node.op.perform, node, [storage[v] for v in node.inputs],
                               [storage[v] for v in node.outputs]))
        keep = set(fgraph.inputs) | {v for v in storage if isinstance(v, Constant)}
        # Intermediate cells are emptied after a call so that memory is freed
        # and no returned array is ever reused as an op's output buffer.
        self.temporaries = [cell for v, cell in storage.items() if v not in keep]

    def __call__(self):
        if self.checks or self.profile is not None:
            return self._run_checked()
        for perform, node, in_cells, out_cells in self.steps:
            values = [c[0] for c in in_cells]
            try:
                perform(node, values, out_cells)
            except Exception as exc:
                _reraise(node, values, exc)

    def _run_checked(self):
        keep_copies = any(getattr(check, "needs_input_copies", False) for check in self.checks)
        for perform, node, in_cells, out_cells in self.steps:
            values = [c[0] for c in in_cells]
            if out_cells is None:  # the update guard: no node of its own to check
                perform(node, values, out_cells)
                continue
            if keep_copies:
                self.input_copies = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                                     for v in values]
            start = time.perf_counter()
            try:
                perform(node, values, out_cells)
            except Exception as exc:
                _reraise(node, values, exc)
            if self.profile is not None:
                self.profile.record(node, time.perf_counter() - start)
            for check in self.checks:
                check(node, values, [c[0] for c in out_cells], vm=self)

    def clear_temporaries(self):
        for cell in self.temporaries:
            cell[0] = None


def _reraise(node, values, exc):
    """``exc`` named after ``node``, unless it already names its node (the
    update guard raises the error of a later node)."""
    if getattr(exc, "__symgraph_node__", None) is not None:
        raise exc
    reraise_with_node(node, values, exc)


class ProfileStats:
    """Time per node and per op of a compiled function (``f.profile``)."""

    def __init__(self, name=None):
        self.name = name
        self.calls = 0
        self.node_time = {}
        self.node_calls = {}
        self.call_time = 0.0
        self.compile_time = {}

    native = None  # a NativeProgram whose runtime timed its steps

    def _sync_native(self):
        if self.native is None:
            return
        self.node_time, self.node_calls = {}, {}
        times = self.native.program.step_times()
        for node, (seconds, calls) in zip(self.native.step_nodes, times):
            self.node_time[node] = self.node_time.get(node, 0.0) + seconds
            self.node_calls[node] = max(self.node_calls.get(node, 0), calls)

    def record(self, node, seconds):
        self.node_time[node] = self.node_time.get(node, 0.0) + seconds
        self.node_calls[node] = self.node_calls.get(node, 0) + 1

    def op_time(self):
        """{op class name: total seconds}."""
        self._sync_native()
        out = {}
        for node, t in self.node_time.items():
            # An op may name what it ran (a convolution: its chosen algorithm).
            label = getattr(node.op, "profile_label", None)
            key = label(node) if callable(label) else str(node.op)
            out[key] = out.get(key, 0.0) + t
        return out

    def summary(self, file=None):
        """Print (or return with file='str') the per-op and per-node tables."""
        self._sync_native()
        total = sum(self.node_time.values()) or 1e-12
        lines = [f"Function profile: {self.name or '<unnamed>'}",
                 f"  calls: {self.calls}, total time in calls: {self.call_time:.6f}s",
                 f"  compile time by phase: " + ", ".join(
                     f"{k} {v:.4f}s" for k, v in self.compile_time.items()),
                 "  time per op (share, seconds, op):"]
        for op, t in sorted(self.op_time().items(), key=lambda kv: -kv[1]):
            lines.append(f"    {100 * t / total:5.1f}%  {t:.6f}s  {op}")
        lines.append("  time per node (share, seconds, calls, node):")
        for node, t in sorted(self.node_time.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {100 * t / total:5.1f}%  {t:.6f}s  {self.node_calls[node]}  {node}")
        text = "\n".join(lines)
        if file == "str":
            return text
        print(text, file=file)
        return None


def nan_guard_check(mode):
    """A VM check raising FloatingPointError at the first NaN/Inf/huge output."""

    def check(node, inputs, outputs, vm=None):
        for i, value in enumerate(outputs):
            if not isinstance(value, np.ndarray) or value.dtype.kind not in "fc":
                continue
            problem = None
            if mode.nan_is_error and np.isnan(value).any():
                problem = "NaN"
            elif mode.inf_is_error and np.isinf(value).any():
                problem = "Inf"
            elif mode.big_is_error and value.size and np.nanmax(np.abs(value)) > 1e10:
                problem = "a huge value (> 1e10)"
            if problem:
                from symgraph.compile.errors import node_origin

                raise FloatingPointError(
                    f"NanGuardMode: output {i} of {node} contains {problem}" + node_origin(node))

    return check


def debug_check(node, inputs, outputs, vm=None):
    """DebugMode: outputs fit their declared types; inputs that the op does not
    declare it destroys are unchanged; outputs that alias an input are declared
    as views or destroyers."""
    from symgraph.compile.errors import node_origin

    for i, (var, value) in enumerate(zip(node.outputs, outputs)):
        try:
            var.type.filter(value, strict=True)
        except TypeError as exc:
            raise TypeError(f"DebugMode: output {i} of {node} does not match its type "
                            f"{var.type}: {exc}" + node_origin(node)) from None
    destroyed = {i for ins in (node.op.destroy_map or {}).values() for i in ins}
    viewed = {i for ins in (node.op.view_map or {}).values() for i in ins} | destroyed
    for i, (before, after) in enumerate(zip(vm.input_copies, inputs)):
        if i in destroyed or not isinstance(after, np.ndarray):
            continue
        if not np.array_equal(before, after, equal_nan=after.dtype.kind in "fc"):
            raise AssertionError(f"DebugMode: {node} changed its input {i} without "
                                 f"declaring it in destroy_map" + node_origin(node))
    for o, out in enumerate(outputs):
        for i, inp in enumerate(inputs):
            if isinstance(out, np.ndarray) and isinstance(inp, np.ndarray) and \
                    i not in viewed and out.size and np.shares_memory(out, inp):
                raise AssertionError(f"DebugMode: output {o} of {node} aliases input {i} "
                                     f"without a view_map or destroy_map" + node_origin(node))


debug_check.needs_input_copies = True


class _CopiesHolder:
    """What the VM checks read (``input_copies``), for checks run by the runtime."""

    input_copies = ()


def check_steps(checks):
    """Runtime steps around each node that run the VM ``checks`` (DebugMode,
    NanGuardMode) on a native schedule; DebugMode also compares each node's
    native result with its Python ``perform``."""
    needs_copies = any(getattr(c, "needs_input_copies", False) for c in checks)

    def around(node, slot_of):
        holder = _CopiesHolder()
        n_in = len(node.inputs)

        def before(*inputs):
            holder.input_copies = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                                   for v in inputs]
            return ()

        def after(*values):
            inputs, outputs = list(values[:n_in]), list(values[n_in:])
            for check in checks:
                check(node, inputs, outputs, vm=holder)
            if needs_copies:
                compare_with_perform(node, holder.input_copies, outputs)
            return ()

        return ([(before, node.inputs)] if needs_copies else [],
                [(after, node.inputs + node.outputs)])

    return around


def compare_with_perform(node, input_copies, outputs):
    """DebugMode: the node's (native) outputs equal its Python perform's."""
    storage = [[None] for _ in node.outputs]
    node.op.perform(node, [np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                           for v in input_copies], storage)
    for k, (var, cell, got) in enumerate(zip(node.outputs, storage, outputs)):
        if not var.type.values_eq_approx(cell[0], got):
            from symgraph.compile.errors import node_origin

            raise AssertionError(f"DebugMode: output {k} of {node}: native code gives "
                                 f"{got!r}, Python perform gives {cell[0]!r}" + node_origin(node))


# ---------------------------------------------------------------------------
# Atomic updates: every predictable failure before the first shared write
#
# Nodes that overwrite a shared variable's storage run last (InputDestroyersLast),
# but once the first of them has written, a later node that fails (a second
# in-place update given a bad shape or an index out of bounds) would leave a
# shared variable changed by a call that raised.  The guard runs just before
# that first write and predicts, from shapes and indices only (no data is
# read or written), whether any later node would fail; when one would, it
# runs that node's ``perform`` on copies, which raises the node's own error.


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
