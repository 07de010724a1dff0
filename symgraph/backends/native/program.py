"""The runtime Program's description of a scheduled graph: a slot per
variable, a step per node (native kernels with their allocators, Python
``perform`` calls, check steps), shared by the linker (which compiles the
kernels) and the warm start (which loads them by record)."""

import numpy as np

from symgraph.backends.native.kernel import COMPUTE, INPLACE, VIEW, VIEW_OR_COPY
from symgraph.graph.basic import Constant

__all__ = ["assign_slots", "assemble_program", "step_allocators", "native_step"]

_KIND_CODES = {COMPUTE: 0, INPLACE: 1, VIEW: 2, VIEW_OR_COPY: 3}
#: The aliasing field of each kind: its outputs' base inputs.
_ALIAS_FIELD = {VIEW: "view_of", VIEW_OR_COPY: "view_of", INPLACE: "inplace_of"}


def assign_slots(fgraph, order):
    """``(slot_of, constants)``: a runtime slot for each variable of the
    program running ``order`` (the graph's inputs first), and its constants."""
    slot_of, constants = {}, []
    for var in fgraph.inputs:
        slot_of[var] = len(slot_of)
    for var in [v for node in order for v in node.inputs + node.outputs] + fgraph.outputs:
        if var not in slot_of:
            slot_of[var] = len(slot_of)
            if isinstance(var, Constant):
                constants.append(var)
    return slot_of, constants


def assemble_program(runtime, fgraph, order, slot_of, constants, extra_steps, node_step):
    """The runtime's Program for ``order``: ``node_step(node, ins, outs) ->
    (step, runs_python)`` describes each node's step, ``extra_steps`` adds
    the check steps around it.  Returns (program, step_nodes, python_nodes)."""
    steps, step_nodes, python_nodes = [], [], []
    for node in order:
        before, after = extra_steps(node, slot_of) if extra_steps else ((), ())
        for callable_, ins in before:
            steps.append((1, callable_, tuple(slot_of[v] for v in ins), ()))
            step_nodes.append(node)
        step, runs_python = node_step(node, tuple(slot_of[v] for v in node.inputs),
                                      tuple(slot_of[v] for v in node.outputs))
        steps.append(step)
        if runs_python:
            python_nodes.append(node)
        step_nodes.append(node)
        for callable_, ins_vars in after:
            steps.append((1, callable_, tuple(slot_of[v] for v in ins_vars), ()))
            step_nodes.append(node)
    inputs = []
    for var in fgraph.inputs:
        dtype = getattr(var.type, "dtype", None)
        if dtype is None or var.type.__class__.__name__ != "TensorType":
            inputs.append((slot_of[var], -1, -1, ()))
            continue
        inputs.append((slot_of[var], np.dtype(dtype).num, var.type.ndim,
                       tuple(-1 if s is None else s for s in var.type.shape)))
    program = runtime.Program(len(slot_of), tuple(inputs), tuple(steps),
                              tuple(slot_of[v] for v in fgraph.outputs))
    for var in constants:
        program.set_constant(slot_of[var], var.data)
    return program, step_nodes, python_nodes


def step_allocators(backend, node, runtime):
    """(allocator, context): the runtime's numbers of the allocator of
    ``node``'s outputs and of the one whose ``enter`` selects its device (0:
    none), as ``backend`` names them.  A context whose device does not exist
    (``x.transfer('cuda7')``) is reported here, where the device is first
    made ready: the error names the node and the user's line that built it."""
    from symgraph.tensor.gpu_contexts import ContextError

    try:
        allocator = backend.output_allocator(node).runtime_number(runtime)
        context = backend.step_context(node)
        return allocator, 0 if context is None else context.runtime_number(runtime)
    except ContextError as exc:
        trace = getattr(node.tag, "trace", None)
        where = f", created at {trace.filename}:{trace.lineno}" if trace else ""
        raise ContextError(f"{exc}\n  (needed by {node}{where})") from None


def native_step(kernel, addresses, node, ins, outs, allocator=0, context=0):
    """The runtime's description of a native step (see ``Program`` in runtime.c);
    ``allocator``: the runtime's number of the allocator of its outputs;
    ``context``: of the allocator whose ``enter`` selects the step's device."""
    run, shape, view = addresses
    alias = getattr(kernel, _ALIAS_FIELD[kernel.kind]) if kernel.kind in _ALIAS_FIELD else ()
    return (0, run, shape, _KIND_CODES[kernel.kind], ins, outs,
            tuple(np.dtype(o.dtype).num for o in node.outputs),
            tuple(o.ndim for o in node.outputs), tuple(alias), view, allocator, context)
