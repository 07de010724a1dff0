"""Time per node and per op of a compiled function (``f.profile``)."""

class ProfileStats:
    """Time per node and per op of a compiled function (``f.profile``)."""

    def __init__(self, name=None):
        self.name = name
        self.calls = 0
        self.node_time = {}
        self.node_calls = {}
        self.call_time = 0.0
        self.compile_time = {}
        self.first_call_done = False
        self._native_base = None  # the runtime's step times when the first call ended

    native = None  # a NativeProgram whose runtime timed its steps
    fgraph = None  # the profiled function's optimized graph (profiling.debugprint)

    def end_first_call(self):
        """Called once the function's first call returned.  With the flag
        ``profiling.ignore_first_call``, that call's times are dropped: it pays for
        one-time work (loading kernels, choosing algorithms) that later calls do not."""
        from symgraph.config import config

        self.first_call_done = True
        if not config.get("profiling.ignore_first_call"):
            return
        self.calls, self.call_time = 0, 0.0
        self.node_time, self.node_calls = {}, {}
        if self.native is not None:
            self._native_base = list(self.native.program.step_times())

    def _sync_native(self):
        if self.native is None:
            return
        self.node_time, self.node_calls = {}, {}
        times = list(self.native.program.step_times())
        base = self._native_base or [(0.0, 0)] * len(times)
        for node, (seconds, calls), (seconds0, calls0) in zip(self.native.step_nodes,
                                                               times, base):
            self.node_time[node] = self.node_time.get(node, 0.0) + seconds - seconds0
            self.node_calls[node] = max(self.node_calls.get(node, 0), calls - calls0)

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

    def summary(self, file=None, n_ops_to_print=None, n_apply_to_print=None):
        """Print (or return with file='str') the per-op and per-node tables.

        ``file`` defaults to the flag ``profiling.destination`` (``stderr``, ``stdout``
        or a path, appended to); the tables keep their ``n_ops_to_print`` and
        ``n_apply_to_print`` longest rows (default: the flags ``profiling.n_ops`` and
        ``profiling.n_apply``), and with ``profiling.debugprint`` the function's
        optimized graph follows them.
        """
        from symgraph.config import config

        n_ops = config.get("profiling.n_ops") if n_ops_to_print is None else n_ops_to_print
        n_apply = config.get("profiling.n_apply") if n_apply_to_print is None \
            else n_apply_to_print
        self._sync_native()
        total = sum(self.node_time.values()) or 1e-12
        lines = [f"Function profile: {self.name or '<unnamed>'}",
                 f"  calls: {self.calls}, total time in calls: {self.call_time:.6f}s",
                 f"  compile time by phase: " + ", ".join(
                     f"{k} {v:.4f}s" for k, v in self.compile_time.items()),
                 "  time per op (share, seconds, op):"]
        ops = sorted(self.op_time().items(), key=lambda kv: -kv[1])
        for op, t in ops[:n_ops]:
            lines.append(f"    {100 * t / total:5.1f}%  {t:.6f}s  {op}")
        if len(ops) > n_ops:
            lines.append(f"    ... {len(ops) - n_ops} more ops (profiling.n_ops)")
        lines.append("  time per node (share, seconds, calls, node):")
        nodes = sorted(self.node_time.items(), key=lambda kv: -kv[1])
        for node, t in nodes[:n_apply]:
            lines.append(f"    {100 * t / total:5.1f}%  {t:.6f}s  {self.node_calls[node]}  {node}")
        if len(nodes) > n_apply:
            lines.append(f"    ... {len(nodes) - n_apply} more nodes (profiling.n_apply)")
        if config.get("profiling.debugprint") and self.fgraph is not None:
            from symgraph.printing import debugprint

            lines.append("  optimized graph:")
            lines.append(debugprint(self.fgraph.outputs, file="str"))
        text = "\n".join(lines)
        if file == "str":
            return text
        if file is None:
            _print_to_destination(text, config.get("profiling.destination"))
        else:
            print(text, file=file)
        return None


def _print_to_destination(text, destination):
    """Print ``text`` where the flag ``profiling.destination`` says."""
    import sys

    if destination in ("stderr", "stdout"):
        print(text, file=getattr(sys, destination))
        return
    with open(destination, "a", encoding="utf-8") as handle:
        print(text, file=handle)
