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
