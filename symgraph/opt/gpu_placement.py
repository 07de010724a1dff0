"""The ``gpu`` phase: move every node a device backend can run to the device.

With ``device=cuda`` (or ``cuda0``, ``cuda1``...), each node whose op the
CUDA backend lowers becomes ``OnDevice(op)`` on device copies of its inputs,
and its outputs come back through ``HostFromGpu``.  Consecutive device nodes
then meet as ``GpuFromHost(HostFromGpu(x))``, which collapses to ``x``, so
transfers stay only at the edges of the device part of the graph.  Nodes left
on the host keep the reason in ``node.tag.cpu_reason`` (``placement_report``).

Several devices (the flag ``contexts``): a node runs on the context of its
inputs, Theano's rule.  Its first input that lives on a device decides;
an input on another context is copied there by an explicit ``GpuToGpu``
(Theano's ``as_gpuarray_variable``), which ``debugprint`` and
``placement_report`` show.  A node with no input on a device goes to the
default context (the flag ``device``), or stays on the host with
``device=cpu``.

The phase runs after fusion, so a fused element-wise composite moves as one
kernel.  ``gpu.emulate`` does not change what it produces.
"""

import warnings

from symgraph.opt.driver import replace_validated
from symgraph.opt.placement_support import device_support, host_inputs
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter, node_rewriter

__all__ = ["device_context", "uses_devices", "gpu_placement", "check_placement", "cpu_nodes",
           "CpuOpWarning"]


class CpuOpWarning(UserWarning):
    """Nodes stayed on the CPU under ``device=cuda`` (flag ``assert_no_cpu_op``)."""


def device_context():
    """The device context the ``device`` flag names ('cuda0' for 'cuda'), or None."""
    from symgraph.tensor.gpu_contexts import default_context

    return default_context()


def uses_devices():
    """True when the flags put anything on a device: ``device=cuda``, or
    contexts named by the flag ``contexts`` (with ``device=cpu``, what the
    graph puts there)."""
    from symgraph.tensor.gpu_contexts import context_map

    return device_context() is not None or bool(context_map())


def _transfer_nodes():
    from symgraph.ops.transfer import GpuFromHost, HostFromGpu

    return GpuFromHost, HostFromGpu


def _to_device(var, context):
    """``var`` on the device: the device value a HostFromGpu came from, a copy
    of it from another context's device (GpuToGpu), or a new copy from the host."""
    from symgraph.ops.transfer import gpu_from_host, gpu_to_gpu

    GpuFromHost, HostFromGpu = _transfer_nodes()
    owner = var.owner
    if owner is not None and isinstance(owner.op, HostFromGpu):
        device_value = owner.inputs[0]
        if device_value.type.context_name == context:
            return device_value
        return gpu_to_gpu(device_value, context)
    return gpu_from_host(var, context)


def _input_context(node):
    """The context of ``node``'s first input that lives on a device (comes
    from a HostFromGpu), or None."""
    _, HostFromGpu = _transfer_nodes()
    for var in node.inputs:
        if var.owner is not None and isinstance(var.owner.op, HostFromGpu):
            return var.owner.inputs[0].type.context_name
    return None


def _is_trivial(node):
    # Shape bookkeeping that never touches array data stays on the host freely.
    return type(node.op).__name__ in ("Shape", "Shape_i", "MakeVector") or \
        _host_bookkeeping(node)


#: Why integer work on host values stays there (placement_report).
BOOKKEEPING = "integer bookkeeping of host values (sizes, indices): stays on the host"


def _host_bookkeeping(node):
    """Scalars and vectors computed from integer scalars and vectors of the
    host only (sizes, index vectors, a mean's divisor): their consumers read
    them on the host, so moving them would cost transfers both ways and a
    launch for a few numbers."""
    _, HostFromGpu = _transfer_nodes()
    if any(v.owner is not None and isinstance(v.owner.op, HostFromGpu) for v in node.inputs):
        return False
    small = all(getattr(v.type, "ndim", 2) <= 1 for v in node.inputs + node.outputs)
    return small and all(str(getattr(v.type, "dtype", "float")).startswith(("int", "uint", "bool"))
                         for v in node.inputs)


#: Why a draw of NumPy's generators stays on the host.
NUMPY_RANDOM = ("draws from a NumPy generator, whose state lives on the host: its numbers "
                "are NumPy's (MRG_RandomStreams draws on the device)")


def _non_array_reason(node, tensor_type):
    """Why ``node``, which has a value that is not a tensor, stays on the host."""
    others = sorted({str(v.type) for v in node.inputs + node.outputs
                     if not isinstance(v.type, tensor_type)})
    if any("Random" in name for name in others):
        return NUMPY_RANDOM
    return f"not an array op: it takes or makes {', '.join(others)}"


def _placement(node, default):
    """(the context ``node`` goes to, None) or (None, why it stays on the host)."""
    from symgraph.tensor.gpu_type import context_kind
    from symgraph.tensor.type import TensorType

    # Theano's rule: the node goes where its inputs are
    context = _input_context(node) or default
    if context is None:
        return None, "device=cpu, and no input on a device"
    if not all(isinstance(v.type, TensorType) for v in node.inputs + node.outputs):
        return None, _non_array_reason(node, TensorType)
    reason = BOOKKEEPING if _host_bookkeeping(node) else \
        device_support(context_kind(context), node)
    return (None, reason) if reason is not None else (context, None)


@graph_rewriter
def gpu_placement(fgraph, verbose=False):
    """Move the nodes the device backend can run; transfers at the edges."""
    default = device_context()
    if not uses_devices():
        return 0
    from symgraph.ops.device_op import OnDevice
    from symgraph.ops.transfer import GpuToGpu, host_from_gpu
    from symgraph.tensor.gpu_type import context_kind

    GpuFromHost, HostFromGpu = _transfer_nodes()
    moved = 0
    for node in list(fgraph.toposort()):
        if node not in fgraph.apply_nodes or isinstance(node.op, (OnDevice, GpuFromHost,
                                                                  HostFromGpu, GpuToGpu)):
            continue
        context, reason = _placement(node, default)
        if reason is not None:
            node.tag.cpu_reason = reason
            continue
        on_host = host_inputs(context_kind(context), node)
        device_node = OnDevice(node.op, context, on_host).make_node(
            *[var if i in on_host else _to_device(var, context)
              for i, var in enumerate(node.inputs)])
        device_node.tag.trace = getattr(node.tag, "trace", None)
        pairs = [(old, host_from_gpu(new)) for old, new in zip(node.outputs,
                                                               device_node.outputs)]
        if replace_validated(fgraph, pairs, "gpu_placement", verbose):
            moved += 1
    return moved


def check_placement(fgraph):
    """After the rewrites: apply ``warn_float64`` to float64 device nodes and
    ``assert_no_cpu_op`` to the nodes left on the CPU (called by function(),
    so that the user gets the warning or error itself, not a rewrite failure)."""
    if not uses_devices():
        return
    _check_float64(fgraph)
    if device_context() is not None:
        # with device=cpu the host is where nodes belong: nothing to report
        _report_cpu_nodes(fgraph)


def _check_float64(fgraph):
    from symgraph.config import config
    from symgraph.ops.device_op import OnDevice

    if config.warn_float64 == "ignore":
        return
    # (under "raise" no float64 variable exists: making one raised already)
    wide = [n for n in fgraph.apply_nodes if isinstance(n.op, OnDevice)
            and any(getattr(v.type, "dtype", "") == "float64" for v in n.outputs)]
    if not wide:
        return
    message = (f"{len(wide)} node(s) compute float64 on the GPU (e.g. {wide[0].op}), "
               "where float64 runs at a fraction of float32's speed; set floatX=float32 "
               "and cast, or set warn_float64=ignore")
    warnings.warn(message, UserWarning, stacklevel=3)


def cpu_nodes(fgraph):
    """(node, reason) of the array nodes left on the host (transfers excluded)."""
    from symgraph.ops.device_op import OnDevice
    from symgraph.ops.transfer import GpuToGpu

    GpuFromHost, HostFromGpu = _transfer_nodes()
    out = []
    for node in fgraph.toposort():
        if isinstance(node.op, (OnDevice, GpuFromHost, HostFromGpu, GpuToGpu)) or \
                _is_trivial(node):
            continue
        # a node the rewrites made after placement, or a graph restored by the
        # warm start, has no tag: its reason is worked out again
        reason = getattr(node.tag, "cpu_reason", None) or \
            _placement(node, device_context())[1] or "not placed"
        out.append((node, reason))
    return out


def _report_cpu_nodes(fgraph):
    from symgraph.config import config

    policy = config.assert_no_cpu_op
    if policy == "ignore":
        return
    left = cpu_nodes(fgraph)
    if not left:
        return
    lines = "; ".join(f"{node.op} ({reason})" for node, reason in left[:8])
    more = f" and {len(left) - 8} more" if len(left) > 8 else ""
    message = f"{len(left)} node(s) stay on the CPU under device={config.device}: {lines}{more}"
    if policy == "raise":
        raise AssertionError(message)
    warnings.warn(message, CpuOpWarning, stacklevel=3)


register(gpu_placement, "fast_run", "fast_compile", "gpu", phase="gpu")


@node_rewriter(["symgraph.ops.transfer:GpuFromHost"])
def local_cut_transfer_pair(fgraph, node):
    """``GpuFromHost(HostFromGpu(x)) -> x`` on one device: a value that went to
    the host and straight back (a device shared variable's update, the gradient
    of a transfer) never leaves the device; between two contexts it becomes
    ``GpuToGpu(x)``, a copy that skips the host."""
    from symgraph.ops.transfer import gpu_to_gpu

    GpuFromHost, HostFromGpu = _transfer_nodes()
    source = node.inputs[0].owner
    if source is None or not isinstance(source.op, HostFromGpu):
        return None
    device_value = source.inputs[0]
    if device_value.type.context_name != node.op.context_name:
        moved = gpu_to_gpu(device_value, node.op.context_name)
        return [moved] if moved.type == node.outputs[0].type else None
    return [device_value] if device_value.type == node.outputs[0].type else None


register(local_cut_transfer_pair, "fast_run", "fast_compile", "gpu", phase="gpu")


@node_rewriter(["symgraph.ops.transfer:HostFromGpu"])
def local_cut_host_round_trip(fgraph, node):
    """``HostFromGpu(GpuFromHost(x)) -> x``: a host value sent to a device and
    straight back, as the user's graph holds it where a device shared
    variable's gradient (a ``GpuFromHost`` of a host expression) meets host
    arithmetic (``w - lr * g``).  Cut in canonicalize, so that the CPU graph
    rewrites see the expression whole: ``w - lr * dot(x.T, d)`` becomes one
    Gemm before the ``gpu`` phase moves it, as on the CPU.  Only a round trip
    through the default device (the flag ``device``): a transfer to another
    context is where the user placed the work (Theano's rule, a node runs on
    its inputs' context), which the cut would lose."""
    GpuFromHost, _ = _transfer_nodes()
    source = node.inputs[0].owner
    if source is None or not isinstance(source.op, GpuFromHost) or \
            source.op.context_name != device_context():
        return None
    host_value = source.inputs[0]
    return [host_value] if host_value.type == node.outputs[0].type else None


register(local_cut_host_round_trip, "fast_run", "fast_compile", "gpu", phase="canonicalize")


@node_rewriter(["symgraph.ops.transfer:GpuFromHost"])
def local_device_constant(fgraph, node):
    """``GpuFromHost(constant) -> device constant``: a constant is copied to the
    device once, when the function is compiled, not at every call."""
    from symgraph.graph.basic import Constant
    from symgraph.tensor.gpu_type import to_device

    (value,) = node.inputs
    if not isinstance(value, Constant):
        return None
    out_type = node.outputs[0].type
    try:
        data = to_device(value.data, out_type.context_name)
    except RuntimeError:
        return None                    # no device arrays registered (cross-compile only)
    return [Constant(out_type, data, name=value.name)]


register(local_device_constant, "fast_run", "fast_compile", "gpu", phase="gpu")
