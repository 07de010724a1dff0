"""``placement_report(f)``: where a compiled function's nodes run.

Under ``device=cuda`` the ``gpu`` rewrites move every node the CUDA backend
can run; this lists the array nodes left on the CPU with the reason (no CUDA
lowering, a dtype, a flag) and the transfers between host and device, and
between two devices' contexts, with their sizes (from the static shapes; '?'
where a size is known only at run time).
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["placement_report", "PlacementReport"]


@dataclass
class PlacementReport:
    """What ``placement_report`` found: ``device`` (the contexts used, comma
    separated), ``device_nodes`` (str of each node on a device), ``cpu_nodes``
    ((node, reason) pairs) and ``transfers`` ((direction, variable, bytes or
    None) triples; direction 'to', 'from', or 'peer' between two contexts,
    whose variable is the copy on the destination's)."""

    device: str
    device_nodes: list = field(default_factory=list)
    cpu_nodes: list = field(default_factory=list)
    transfers: list = field(default_factory=list)

    def __str__(self):
        lines = [f"{self.device}: {len(self.device_nodes)} node(s) on the device, "
                 f"{len(self.cpu_nodes)} on the CPU, {len(self.transfers)} transfer(s)"]
        for node, reason in self.cpu_nodes:
            lines.append(f"  CPU   {node.op}: {reason}")
        for direction, var, size in self.transfers:
            shown = "? bytes" if size is None else f"{size} bytes"
            if direction == "peer":
                source = var.owner.inputs[0].type.context_name
                lines.append(f"  peer  {source} -> {var.type} ({shown})")
            else:
                lines.append(f"  {direction:5s} {var.type} ({shown})")
        return "\n".join(lines)


def _bytes(var):
    shape = getattr(var.type, "shape", None)
    if shape is None or any(s is None for s in shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(var.type.dtype).itemsize


def placement_report(function):
    """A :class:`PlacementReport` of the compiled ``function`` (print it)."""
    from symgraph.ops.device_op import OnDevice
    from symgraph.ops.transfer import GpuFromHost, GpuToGpu, HostFromGpu
    from symgraph.opt.gpu_placement import cpu_nodes

    fgraph = function.maker.fgraph
    contexts = {getattr(v.type, "context_name", None) for n in fgraph.apply_nodes
                for v in n.inputs + n.outputs} - {None}
    report = PlacementReport(device=", ".join(sorted(contexts)) or "cpu")
    for node in fgraph.toposort():
        if isinstance(node.op, OnDevice):
            report.device_nodes.append(str(node.op))
        elif isinstance(node.op, GpuFromHost):
            report.transfers.append(("to", node.outputs[0], _bytes(node.outputs[0])))
        elif isinstance(node.op, HostFromGpu):
            report.transfers.append(("from", node.outputs[0], _bytes(node.outputs[0])))
        elif isinstance(node.op, GpuToGpu):
            report.transfers.append(("peer", node.outputs[0], _bytes(node.outputs[0])))
    report.cpu_nodes = cpu_nodes(fgraph)
    return report
