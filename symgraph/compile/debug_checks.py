"""DebugMode's checks around every node: declared types, destroy and view maps,
and (on a native schedule) each node's native result against its ``perform``."""

import numpy as np


class DebugModeError(Exception):
    """What DebugMode raises when a check fails (Theano's base class)."""


class BadThunkOutput(DebugModeError, AssertionError):
    """A node's native result differs from its Python ``perform``'s."""


class BadOptimization(DebugModeError, AssertionError):
    """The optimized graph's result differs from the unoptimized graph's."""


class BadDestroyMap(DebugModeError, AssertionError):
    """A node changed an input that its op does not declare in ``destroy_map``."""


class BadViewMap(DebugModeError, AssertionError):
    """A node's output shares memory with an input without a ``view_map`` or
    ``destroy_map`` entry."""


class StochasticOrder(DebugModeError, AssertionError):
    """Theano's error for results that depend on the order of equal nodes.

    symgraph schedules deterministically (a topological order fixed by the
    graph), so DebugMode never raises it; the class exists for programs that
    catch it."""


class InvalidValueError(DebugModeError, TypeError):
    """A node's output does not fit its declared type (dtype, rank, static shape)."""


def debug_check(node, inputs, outputs, vm=None):
    """DebugMode: outputs fit their declared types; inputs that the op does not
    declare it destroys are unchanged; outputs that alias an input are declared
    as views or destroyers."""
    from symgraph.compile.errors import node_origin

    for i, (var, value) in enumerate(zip(node.outputs, outputs)):
        try:
            var.type.filter(value, strict=True)
        except TypeError as exc:
            raise InvalidValueError(f"DebugMode: output {i} of {node} does not match its type "
                            f"{var.type}: {exc}" + node_origin(node)) from None
    destroyed = {i for ins in (node.op.destroy_map or {}).values() for i in ins}
    viewed = {i for ins in (node.op.view_map or {}).values() for i in ins} | destroyed
    for i, (before, after) in enumerate(zip(vm.input_copies, inputs)):
        if i in destroyed or not isinstance(after, np.ndarray):
            continue
        if not np.array_equal(before, after, equal_nan=after.dtype.kind in "fc"):
            raise BadDestroyMap(f"DebugMode: {node} changed its input {i} without "
                                 f"declaring it in destroy_map" + node_origin(node))
    for o, out in enumerate(outputs):
        for i, inp in enumerate(inputs):
            if isinstance(out, np.ndarray) and isinstance(inp, np.ndarray) and \
                    i not in viewed and out.size and np.shares_memory(out, inp):
                raise BadViewMap(f"DebugMode: output {o} of {node} aliases input {i} "
                                     f"without a view_map or destroy_map" + node_origin(node))


debug_check.needs_input_copies = True


def _copy(value):
    """A copy of an array value (host or device), so that a node that
    overwrites its input in place cannot change what ``perform`` reads."""
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    from symgraph.tensor.gpu_type import is_device_array

    return value.copy() if is_device_array(value) else value


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
            holder.input_copies = [_copy(v) for v in inputs]
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
    node.op.perform(node, [_copy(v) for v in input_copies], storage)
    for k, (var, cell, got) in enumerate(zip(node.outputs, storage, outputs)):
        if not var.type.values_eq_approx(cell[0], got):
            from symgraph.compile.errors import node_origin

            raise BadThunkOutput(f"DebugMode: output {k} of {node}: native code gives "
                                 f"{got!r}, Python perform gives {cell[0]!r}" + node_origin(node))
