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
    run after each node (NanGuardMode and DebugMode add theirs).
    """

    def __init__(self, fgraph, order, storage, checks=(), profile=None):
        self.fgraph = fgraph
        self.order = order
        self.storage = storage
        self.checks = list(checks)
        self.profile = profile
        self.steps = [(node.op.perform, node, [storage[v] for v in node.inputs],
                       [storage[v] for v in node.outputs]) for node in order]
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
                reraise_with_node(node, values, exc)

    def _run_checked(self):
        keep_copies = any(getattr(check, "needs_input_copies", False) for check in self.checks)
        for perform, node, in_cells, out_cells in self.steps:
            values = [c[0] for c in in_cells]
            if keep_copies:
                self.input_copies = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                                     for v in values]
            start = time.perf_counter()
            try:
                perform(node, values, out_cells)
            except Exception as exc:
                reraise_with_node(node, values, exc)
            if self.profile is not None:
                self.profile.record(node, time.perf_counter() - start)
            for check in self.checks:
                check(node, values, [c[0] for c in out_cells], vm=self)

    def clear_temporaries(self):
        for cell in self.temporaries:
            cell[0] = None


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
