"""The CUDA backend's lowering table, and its answers to the ``gpu`` rewrites.

Device nodes are ``OnDevice(op)``: the table is keyed by the wrapped op's
class (looked up through its hierarchy, as the CPU's), so a second table of
GPU op classes is never needed.  ``device_reason(node)`` tells the placement
rewrite whether a host node can move, and why not.
"""

from symgraph.backends.lowering import lowering_rule, register_lowering
from symgraph.ops import elemwise, transfer
from symgraph.opt.placement_support import register_device_support

__all__ = ["BACKEND", "device_reason"]

#: The name this backend registers under.
BACKEND = "cuda"

_G = "symgraph.backends.cuda."

_TABLE = [
    (elemwise.Elemwise, "elemwise:elemwise_lowering"),
    (transfer.GpuFromHost, "transfer:gpu_from_host_lowering"),
    (transfer.HostFromGpu, "transfer:host_from_gpu_lowering"),
]

for _cls, _rule in _TABLE:
    register_lowering(_cls, _G + _rule, backend=BACKEND)


def device_reason(node):
    """None when the host node ``node`` can run on the device, else the reason."""
    if lowering_rule(node.op, BACKEND) is None:
        return f"no CUDA lowering for {type(node.op).__name__}"
    if isinstance(node.op, elemwise.Elemwise):
        from symgraph.backends.cuda.elemwise import elemwise_reason

        return elemwise_reason(node)
    return None


register_device_support(BACKEND, device_reason)
