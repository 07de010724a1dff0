"""function(): compile a graph into a callable.

The user's graph is cloned (with ``givens`` substituted) into a FunctionGraph
whose inputs are the explicit inputs followed by the shared variables it uses
and whose outputs are the requested outputs followed by the update
expressions.  The graph is rewritten, scheduled and run by the VM.  Updates
are written to the shared variables only after every output was computed, so
a call that raises changes no state.

In-place updates are the exception to "written after": an update rewritten to
work in place (``w <- w - lr * g`` as one in-place node) writes into the
shared variable's own buffer while the call runs.  Those nodes run last
(``opt/inplace.py``), and before the first of them writes, an update guard
(``update_guard.py``) predicts from shapes and indices whether any later node
fails: a second in-place update given a shape that does not broadcast, an
index out of bounds, operands of an in-place Gemm that do not fit.  It then
raises that node's own error before anything is written.  So bad input (of a
type-compatible but wrong shape, or an index out of range) never changes a
shared variable.  The guard covers Elemwise, IncSubtensor,
AdvancedIncSubtensor and the in-place BLAS updates; a failure it cannot
predict (another op after the first in-place write, or an error that depends
on the data, such as an integer division by zero) can still leave earlier
in-place updates written.
"""

import functools
import time
import warnings

import numpy as np

from symgraph.compile.errors import MissingInputError, UnusedInputError
from symgraph.compile.io import In, Out
from symgraph.compile.mode import DebugMode, NanGuardMode, get_mode
# The native CPU backend registers its lowerings and fusion support on import:
# the rewrites that run before any kernel is built ask it what can be fused.
from symgraph.backends.cpu import backend as _cpu_backend  # noqa: F401  (registers it)
from symgraph.compile.shared import SharedVariable
from symgraph.compile.debug_checks import check_steps, debug_check
from symgraph.compile.nan_guard import nan_guard_check
from symgraph.compile.profiling import ProfileStats
from symgraph.compile.update_guard import update_guard
from symgraph.compile.vm import VM
from symgraph.compile.warm_start import WarmStart
from symgraph.config import config
from symgraph.graph.basic import Constant, Variable, ancestors, clone_replace, graph_inputs
from symgraph.graph.destroy import DestroyHandler
from symgraph.graph.fg import FunctionGraph, History
from symgraph.graph.trace import user_line


def function(inputs, outputs=None, mode=None, updates=None, givens=None,
             no_default_updates=False, accept_inplace=False, name=None,
             rebuild_strict=True, allow_input_downcast=None, profile=None,
             on_unused_input=None, trust_input=False):
    """Compile ``outputs`` as a function of ``inputs``.

    ``inputs``: Variables, In() or Theano's tuple shortcuts (``(x, value)``,
    ``((x, update), value)``, ``(name, x)``, ``(name, x, value)``,
    ``(name, (x, update), value)``); ``outputs``: a Variable, Out() or a list
    of them (a list gives a list of results); ``updates``: pairs (or a dict)
    of shared variable and new value expression; ``givens``: pairs of
    variable and the expression to substitute for it; ``mode``: a Mode or its
    name.
    """
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("function() takes a list of inputs (wrap a single input in [...])")
    maker = FunctionMaker(
        inputs, outputs, mode=mode, updates=updates, givens=givens,
        no_default_updates=no_default_updates, name=name,
        allow_input_downcast=allow_input_downcast, profile=profile,
        on_unused_input=on_unused_input, trust_input=trust_input, defined_at=user_line())
    return maker.create()


def _as_pairs(mapping, what):
    if mapping is None:
        return []
    if isinstance(mapping, dict):
        return list(mapping.items())
    pairs = list(mapping)
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"{what} must be a dict or a list of (variable, expression) "
                            f"pairs; got {pair!r}")
    return [tuple(p) for p in pairs]


class FunctionMaker:
    """Builds the optimized graph and the VM of a function; ``maker.fgraph``."""

    def __init__(self, inputs, outputs, mode=None, updates=None, givens=None,
                 no_default_updates=False, name=None, allow_input_downcast=None,
                 profile=None, on_unused_input=None, trust_input=False, defined_at=None,
                 swap=None):
        from symgraph.tensor.basic import as_tensor_variable

        self.args = dict(inputs=inputs, outputs=outputs, mode=mode, updates=updates,
                         givens=givens, no_default_updates=no_default_updates, name=name,
                         allow_input_downcast=allow_input_downcast, profile=profile,
                         on_unused_input=on_unused_input, trust_input=trust_input,
                         swap=swap)
        self.name = name
        self.defined_at = defined_at
        self.mode = get_mode(mode)
        self.trust_input = trust_input
        self.in_specs = [_as_in(i) for i in inputs]
        self._check_inputs()

        self.unpack_single = outputs is not None and not isinstance(outputs, (list, tuple))
        out_list = [] if outputs is None else ([outputs] if self.unpack_single else list(outputs))
        self.out_specs = [o if isinstance(o, Out) else Out(_as_output(o)) for o in out_list]
        output_vars = [o.variable for o in self.out_specs]

        update_pairs = self._collect_updates(updates, output_vars, no_default_updates)
        self.update_pairs = update_pairs
        # Inputs with In(update=...): the function keeps their value (Theano's state).
        self.state_pairs = [(pos, _conform_update(spec.variable, _as_output(spec.update)))
                            for pos, spec in enumerate(self.in_specs)
                            if spec.update is not None]
        state_exprs = [e for _, e in self.state_pairs]
        givens = _as_pairs(givens, "givens")
        for var, repl in givens:
            if not isinstance(var, Variable):
                raise TypeError(f"givens keys must be variables, got {var!r}")
        givens = [(v, _conform_given(v, as_tensor_variable(r) if not isinstance(r, Variable)
                                     else r)) for v, r in givens]

        # Inputs that are computed by other nodes cut the graph there.
        explicit = [spec.variable for spec in self.in_specs]
        cut = [(v, v.type()) for v in explicit if v.owner is not None]
        cut_map = dict(cut)
        replace = dict(givens)
        replace.update(cut_map)
        to_clone = output_vars + [u for _, u in update_pairs] + state_exprs
        if replace:
            to_clone = clone_replace(to_clone, replace)
        explicit = [cut_map.get(v, v) for v in explicit]
        cloned_outputs = to_clone[:len(output_vars)]
        cloned_updates = to_clone[len(output_vars):len(to_clone) - len(state_exprs)]
        cloned_states = to_clone[len(to_clone) - len(state_exprs):]
        computed = cloned_outputs + cloned_updates + cloned_states

        self._check_unused(explicit, computed, on_unused_input)
        shared_used = [v for v in graph_inputs(computed)
                       if isinstance(v, SharedVariable) and v not in explicit]
        updated_shared = [s for s, _ in update_pairs]
        for s in updated_shared:
            if s not in shared_used and s not in explicit:
                shared_used.append(s)
        self._check_missing(explicit + shared_used, computed)

        # copy(swap=...): the compiled graph reads and updates other shared variables
        self.original_shared = shared_used
        self.shared_inputs = _swapped(shared_used, swap)
        all_inputs = explicit + shared_used
        all_outputs = computed
        start = time.perf_counter()
        fgraph = FunctionGraph(all_inputs, all_outputs, clone=True)
        self.original_inputs = all_inputs
        update_index = {all_inputs.index(s): len(cloned_outputs) + k
                        for k, s in enumerate(updated_shared)}
        fgraph.update_mapping = {out: inp for inp, out in update_index.items()}
        destroyable = [fgraph.inputs[i] for i in update_index] + \
            [fgraph.inputs[i] for i, spec in enumerate(self.in_specs) if spec.mutable]
        fgraph.attach_feature(History())
        fgraph.attach_feature(DestroyHandler(destroyable))
        self.update_index = update_index
        self.n_outputs = len(cloned_outputs)
        first_state = len(cloned_outputs) + len(cloned_updates)
        self.state_index = {pos: first_state + k for k, (pos, _) in enumerate(self.state_pairs)}
        self.timings = {"clone": time.perf_counter() - start}

        start = time.perf_counter()
        self.backends = _backends()
        # The optimized graph of a function compiled before (warm_start.py):
        # found, no rewrite runs.
        self.warm = WarmStart(self, fgraph)
        self.timings["warm_start"] = time.perf_counter() - start
        start = time.perf_counter()
        if self.warm.restored:
            fgraph = self.warm.optimized_graph(
                fgraph, list(update_index) + [i for i, spec in enumerate(self.in_specs)
                                              if spec.mutable])
        elif self.mode.optimizer is not None:
            from symgraph.opt import optimize

            from symgraph.compile.stack_check import check_stack_traces, user_traces

            traces = user_traces(fgraph) if config.check_stack_trace != "off" else None
            # Theano's compute_test_value_opt: rewrites build nodes under it
            with config.change_flags(compute_test_value=config.compute_test_value_opt):
                optimize(fgraph, optimizer=self.mode.optimizer,
                         including=self.mode.including_tags(),
                         excluding=self.mode.excluding_tags())
            if traces is not None:
                check_stack_traces(fgraph, traces)
        if self.warm.restored or self.mode.optimizer is not None:
            from symgraph.opt.gpu_placement import check_placement

            # a restored graph too: the warnings and errors of the flags
            # assert_no_cpu_op and warn_float64 do not depend on the cache
            check_placement(fgraph)
        if not self.warm.restored:
            self.timings["rewriting"] = time.perf_counter() - start
        self.fgraph = fgraph
        self.profile = ProfileStats(name) if (profile or config.profile) else None
        if self.profile is not None:
            self.profile.compile_time.update(self.timings)
            self.profile.fgraph = fgraph

    # -- checks done once, at compile time ---------------------------------

    def _check_inputs(self):
        seen = set()
        for pos, spec in enumerate(self.in_specs):
            var = spec.variable
            if isinstance(var, Constant):
                raise TypeError(f"input {pos} ({var}) is a constant; a function input "
                                f"must be a symbolic variable")
            if var in seen:
                raise ValueError(f"input {pos} ({var}) is given twice in the inputs")
            seen.add(var)

    def _collect_updates(self, updates, outputs, no_default_updates):
        from symgraph.tensor.basic import as_tensor_variable

        pairs = []
        for shared_var, expr in _as_pairs(updates, "updates"):
            if not isinstance(shared_var, SharedVariable):
                raise TypeError(f"updates can only change shared variables; {shared_var} "
                                f"is not one (make it with symgraph.shared)")
            if not isinstance(expr, Variable):
                expr = as_tensor_variable(expr)
            expr = _conform_update(shared_var, expr)
            if any(s is shared_var for s, _ in pairs):
                raise ValueError(f"shared variable {shared_var} is updated twice")
            pairs.append((shared_var, expr))
        if no_default_updates is True:
            return pairs
        skip = set(no_default_updates or ())
        explicit = {s for s, _ in pairs}
        stack = outputs + [e for _, e in pairs]
        seen = set()
        while stack:  # default updates can pull in further shared variables
            for var in ancestors(stack):
                if var in seen:
                    continue
                seen.add(var)
            stack = []
            for var in list(seen):
                update = getattr(var, "default_update", None)
                if isinstance(var, SharedVariable) and update is not None and \
                        var not in explicit and var not in skip:
                    explicit.add(var)
                    pairs.append((var, update))
                    stack.append(update)
        return pairs

    def _check_unused(self, explicit, outputs, on_unused_input):
        policy = on_unused_input or config.on_unused_input
        used = set(ancestors(outputs))
        for pos, var in enumerate(explicit):
            if var in used:
                continue
            msg = (f"input {pos} ({var}) of function() is not used to compute the outputs; "
                   f"pass on_unused_input='warn' or 'ignore' to allow it")
            if policy == "raise":
                raise UnusedInputError(msg)
            if policy == "warn":
                warnings.warn(msg, stacklevel=4)

    def _check_missing(self, inputs, outputs):
        known = set(inputs)
        for var in graph_inputs(outputs):
            if var in known or isinstance(var, Constant):
                continue
            users = [v.owner for v in ancestors(outputs)
                     if v.owner is not None and var in v.owner.inputs]
            where = ""
            if users and users[0].tag.trace:
                where = f"; it is used by {users[0].op} created at:\n  {users[0].tag.trace}"
            name = f" '{var.name}'" if var.name else ""
            raise MissingInputError(
                f"the graph needs input{name} ({var.type}) that is not in the function's "
                f"inputs{where}\nAdd it to the inputs, or substitute it with givens=.")

    # -- building the callable ---------------------------------------------

    def create(self, containers=None):
        """The Function object for this graph (``containers``: the input
        containers to share, from ``Function.copy(share_memory=True)``)."""
        start = time.perf_counter()
        fgraph = self.fgraph
        order = self.warm.order if self.warm.restored else fgraph.toposort()
        for node in order:
            # Ops with an inner graph (scan) compile it once, in this function's mode.
            prepare = getattr(node.op, "prepare_node", None)
            if prepare is not None:
                prepare(node, self.mode)
        storage = {}
        for var in fgraph.inputs:
            storage[var] = [None]
        for k, var in enumerate(fgraph.inputs[len(self.in_specs):]):
            storage[var] = self.shared_inputs[k].container.storage
        for node in order:
            for var in node.inputs:
                if var not in storage:
                    storage[var] = [var.data if isinstance(var, Constant) else None]
            for var in node.outputs:
                storage[var] = [None]
        for var in fgraph.outputs:
            if var not in storage:
                storage[var] = [var.data if isinstance(var, Constant) else None]
        checks = []
        if isinstance(self.mode, NanGuardMode):
            checks.append(nan_guard_check(self.mode))
        if isinstance(self.mode, DebugMode):
            checks.append(debug_check)
        guard = update_guard(fgraph, order, fgraph.inputs[len(self.in_specs):])
        self.timings["scheduling"] = time.perf_counter() - start
        native = self._native_program(order, checks, guard)
        vm = None if native is not None else \
            VM(fgraph, order, storage, checks=checks, profile=self.profile, guard=guard)
        start = time.perf_counter()
        self.warm.store(fgraph, order, native, self.backends)
        if not self.warm.restored:
            self.timings["warm_store"] = time.perf_counter() - start
        if self.profile is not None:
            self.profile.compile_time.update(self.timings)
            self.profile.native = native
        function = Function(self, vm, storage, native=native, containers=containers)
        if isinstance(self.mode, DebugMode):
            function.reference = self._reference_function()
        return function

    def _native_program(self, order, checks, guard=None):
        """The runtime Program for linker c or c|py (None for linker py)."""
        linker = self.mode.linker
        if linker not in ("c", "c|py"):
            return None
        extra = _with_guard(check_steps(checks) if checks else None, guard)
        # restored: the kernels its entry names, loaded without generating code
        native = self.warm.program(self.fgraph, order, self.timings, extra, self.backends) \
            if self.warm.restored else None
        if native is None:
            native = self._link(order, linker, extra)
        if native is not None and self.profile is not None:
            native.program.set_profile(True)
        return native

    def _link(self, order, linker, extra):
        """Lower, compile (what the cache lacks) and link ``order``; None when
        Python runs it (no compiler, linker c|py)."""
        from symgraph.backends.cpu.compiler import CompileError
        from symgraph.backends.native.linker import (NoNativeCodeError, build_program,
                                                    native_available, python_only_chosen,
                                                    warn_no_compiler)

        if native_available():
            return build_program(self.fgraph, order, linker, self.timings, extra,
                                 backends=self.backends)
        if python_only_chosen():
            if linker == "c":
                raise NoNativeCodeError("linker=c needs a C compiler, and the flag cxx is "
                                        "empty (a Python-only configuration)")
            return None
        # The compiler is missing: what the cache holds still runs natively.
        warn_no_compiler()
        try:
            return build_program(self.fgraph, order, linker, self.timings, extra,
                                 compile=False, backends=self.backends)
        except CompileError as exc:
            if linker == "c":
                raise NoNativeCodeError(f"linker=c needs a C compiler: {exc}") from None
            return None

    def _reference_function(self):
        """DebugMode's unoptimized twin: the outputs and update values, no updates."""
        from symgraph.compile.mode import Mode

        outs = [o.variable for o in self.out_specs] + [e for _, e in self.update_pairs] + \
            [e for _, e in self.state_pairs]
        args = dict(self.args, inputs=without_updates(self.in_specs), outputs=outs,
                    updates=None, no_default_updates=True, mode=Mode(optimizer=None),
                    on_unused_input="ignore", profile=False)
        return FunctionMaker(**args).create()


def _with_guard(extra_steps, guard):
    """``extra_steps`` for the native linker, with the update guard as a Python
    step just before its node."""
    if guard is None:
        return extra_steps

    def around(node, slot_of):
        before, after = extra_steps(node, slot_of) if extra_steps else ((), ())
        if node is guard.node:
            before = [(guard, guard.variables)] + list(before)
        return before, after

    return around


def _as_in(item):
    """An element of function()'s inputs as an In (Theano's shortcuts)."""
    if isinstance(item, In):
        return item
    if isinstance(item, Variable):
        return In(item)
    if isinstance(item, tuple) and len(item) in (2, 3):
        name = None
        if isinstance(item[0], str):
            name, item = item[0], item[1:]
            if len(item) == 1:
                return In(_state_variable(item[0]), name=name)
        if len(item) == 2:
            target, value = item
            if isinstance(target, tuple) and len(target) == 2:
                return In(_state_variable(target[0]), name=name, value=value,
                          update=target[1])
            return In(_state_variable(target), name=name, value=value)
    raise TypeError(f"function() inputs are variables, In() or Theano's tuples ((x, value), "
                    f"((x, update), value), (name, x), (name, x, value)); got {item!r}")


def _state_variable(v):
    if not isinstance(v, Variable):
        raise TypeError(f"function() input shortcut: expected a symbolic variable, got {v!r}")
    return v


def without_updates(specs):
    """``specs`` with their In(update=...) dropped (the values kept)."""
    return [In(s.variable, name=s.name, value=s.value, mutable=s.mutable, borrow=s.borrow,
               allow_downcast=s.allow_downcast, implicit=s.implicit, strict=s.strict)
            if s.update is not None else s for s in specs]


def _swapped(shared, swap):
    """The shared variables a copy(swap=...) reads instead of ``shared``."""
    if not swap:
        return list(shared)
    swap = dict(swap)
    for old, new in swap.items():
        if not any(old is s for s in shared):
            raise ValueError(f"copy(swap=...): {old} is not a shared variable that this "
                             f"function uses")
        if not isinstance(new, SharedVariable) or new.type != old.type:
            raise TypeError(f"copy(swap=...): {old} (type {old.type}) can only be swapped "
                            f"for a shared variable of the same type, got {new!r}"
                            f"{' of type ' + str(new.type) if hasattr(new, 'type') else ''}")
    return [swap.get(s, s) for s in shared]


def _as_output(o):
    from symgraph.tensor.basic import as_tensor_variable

    if isinstance(o, Variable):
        return o
    return as_tensor_variable(o)


def _conform_update(shared_var, expr):
    if expr.type == shared_var.type:
        return expr
    from symgraph.tensor.type import TensorType

    if isinstance(shared_var.type, TensorType) and isinstance(expr.type, TensorType):
        if expr.ndim == shared_var.ndim and np.can_cast(expr.dtype, shared_var.dtype, "same_kind") \
                and expr.dtype != shared_var.dtype and np.can_cast(expr.dtype, shared_var.dtype):
            from symgraph.ops.math import cast

            expr = cast(expr, shared_var.dtype)
    # (a device shared variable takes a host expression through a transfer)
    converted = shared_var.type.convert_variable(expr)
    if converted is not None:
        return converted
    raise TypeError(
        f"the update of {_kind(shared_var)} {shared_var} has type {expr.type}, but the "
        f"variable has type {shared_var.type}; cast the expression (for example with "
        f"T.cast(expr, '{getattr(shared_var.type, 'dtype', '?')}'))")


def _kind(var):
    return "shared variable" if isinstance(var, SharedVariable) else "input"


def _conform_given(var, repl):
    if repl.type == var.type:
        return repl
    converted = var.type.convert_variable(repl)
    if converted is None:
        raise TypeError(f"givens: {repl} of type {repl.type} cannot replace {var} of "
                        f"type {var.type}")
    return converted


# The Function object lives in function_call (this module was over 600 lines).
from symgraph.compile.function_call import Function  # noqa: E402
# Theano's path for function_dump is compile.function.
from symgraph.compile.function_dump import function_dump  # noqa: E402,F401


def _backends():
    """The backends a function compiled now uses, in the order they are asked:
    with ``device=cuda`` or the flag ``contexts``, the CUDA backend (which
    claims the device nodes) and the CPU's; else the CPU's alone."""
    from symgraph.backends.protocol import get_backend
    from symgraph.opt.gpu_placement import uses_devices

    if not uses_devices():
        if config.init_gpu_device:
            _warn_init_gpu_device()
        return [get_backend("cpu")]
    # imported only with device=cuda: it registers the CUDA lowerings, which the
    # placement rewrite consults
    from symgraph.backends.cuda.backend import CUDA, ensure_device

    if not ensure_device():
        return [get_backend("cpu")]      # force_device=False: no GPU, the CPU instead
    return [CUDA, get_backend("cpu")]


@functools.lru_cache(maxsize=1)
def _warn_init_gpu_device():
    warnings.warn("init_gpu_device has no effect in symgraph: set device=cuda (or cuda<N>) "
                  "to run functions on a GPU", stacklevel=5)
