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
(``vm.update_guard``) predicts from shapes and indices whether any later node
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

import time
import warnings

import numpy as np

from symgraph.compile.errors import (InputError, MissingInputError, UnusedInputError,
                                     reraise_with_node)
from symgraph.compile.io import In, Out
from symgraph.compile.mode import DebugMode, NanGuardMode, get_mode
from symgraph.compile.shared import SharedVariable
from symgraph.compile.vm import (VM, ProfileStats, check_steps, debug_check, nan_guard_check,
                                 update_guard)
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

    ``inputs``: Variables or In(); ``outputs``: a Variable, Out() or a list of
    them (a list gives a list of results); ``updates``: pairs (or a dict) of
    shared variable and new value expression; ``givens``: pairs of variable
    and the expression to substitute for it; ``mode``: a Mode or its name.
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
                 profile=None, on_unused_input=None, trust_input=False, defined_at=None):
        from symgraph.tensor.basic import as_tensor_variable

        self.args = dict(inputs=inputs, outputs=outputs, mode=mode, updates=updates,
                         givens=givens, no_default_updates=no_default_updates, name=name,
                         allow_input_downcast=allow_input_downcast, profile=profile,
                         on_unused_input=on_unused_input, trust_input=trust_input)
        self.name = name
        self.defined_at = defined_at
        self.mode = get_mode(mode)
        self.trust_input = trust_input
        self.in_specs = [i if isinstance(i, In) else In(i) for i in inputs]
        self._check_inputs()

        self.unpack_single = outputs is not None and not isinstance(outputs, (list, tuple))
        out_list = [] if outputs is None else ([outputs] if self.unpack_single else list(outputs))
        self.out_specs = [o if isinstance(o, Out) else Out(_as_output(o)) for o in out_list]
        output_vars = [o.variable for o in self.out_specs]

        update_pairs = self._collect_updates(updates, output_vars, no_default_updates)
        self.update_pairs = update_pairs
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
        to_clone = output_vars + [u for _, u in update_pairs]
        if replace:
            to_clone = clone_replace(to_clone, replace)
        explicit = [cut_map.get(v, v) for v in explicit]
        cloned_outputs = to_clone[:len(output_vars)]
        cloned_updates = to_clone[len(output_vars):]

        self._check_unused(explicit, cloned_outputs + cloned_updates, on_unused_input)
        shared_used = [v for v in graph_inputs(cloned_outputs + cloned_updates)
                       if isinstance(v, SharedVariable) and v not in explicit]
        updated_shared = [s for s, _ in update_pairs]
        for s in updated_shared:
            if s not in shared_used and s not in explicit:
                shared_used.append(s)
        self._check_missing(explicit + shared_used, cloned_outputs + cloned_updates)

        self.shared_inputs = shared_used
        all_inputs = explicit + shared_used
        all_outputs = cloned_outputs + cloned_updates
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
        self.timings = {"clone": time.perf_counter() - start}

        start = time.perf_counter()
        if self.mode.optimizer is not None:
            from symgraph.opt import optimize

            optimize(fgraph, optimizer=self.mode.optimizer,
                     including=self.mode.including_tags(),
                     excluding=self.mode.excluding_tags())
        self.timings["rewriting"] = time.perf_counter() - start
        self.fgraph = fgraph
        self.profile = ProfileStats(name) if (profile or config.profile) else None
        if self.profile is not None:
            self.profile.compile_time.update(self.timings)

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
        for spec in self.in_specs:
            if spec.update is not None:
                raise NotImplementedError("In(update=...) is not supported; use a shared "
                                          "variable with updates=")
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

    def create(self):
        """The Function object for this graph."""
        start = time.perf_counter()
        fgraph = self.fgraph
        order = fgraph.toposort()
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
        if self.profile is not None:
            self.profile.compile_time.update(self.timings)
            self.profile.native = native
        function = Function(self, vm, storage, native=native)
        if isinstance(self.mode, DebugMode):
            function.reference = self._reference_function()
        return function

    def _native_program(self, order, checks, guard=None):
        """The runtime Program for linker c or c|py (None for linker py)."""
        linker = self.mode.linker
        if linker not in ("c", "c|py"):
            return None
        from symgraph.compile.native.compiler import CompileError
        from symgraph.compile.native.linker import (NoNativeCodeError, build_program,
                                                    native_available, python_only_chosen,
                                                    warn_no_compiler)

        extra = _with_guard(check_steps(checks) if checks else None, guard)
        if native_available():
            native = build_program(self.fgraph, order, linker, self.timings, extra)
        elif python_only_chosen():
            if linker == "c":
                raise NoNativeCodeError("linker=c needs a C compiler, and the flag cxx is "
                                        "empty (a Python-only configuration)")
            return None
        else:
            # The compiler is missing: what the cache holds still runs natively.
            warn_no_compiler()
            try:
                native = build_program(self.fgraph, order, linker, self.timings, extra,
                                       compile=False)
            except CompileError as exc:
                if linker == "c":
                    raise NoNativeCodeError(f"linker=c needs a C compiler: {exc}") from None
                return None
        if self.profile is not None:
            native.program.set_profile(True)
        return native

    def _reference_function(self):
        """DebugMode's unoptimized twin: the outputs and update values, no updates."""
        from symgraph.compile.mode import Mode

        outs = [o.variable for o in self.out_specs] + [e for _, e in self.update_pairs]
        args = dict(self.args, outputs=outs, updates=None, no_default_updates=True,
                    mode=Mode(optimizer=None), on_unused_input="ignore", profile=False)
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
        converted = shared_var.type.convert_variable(expr)
        if converted is not None:
            return converted
    raise TypeError(
        f"the update of shared variable {shared_var} has type {expr.type}, but the variable "
        f"has type {shared_var.type}; cast the expression (for example with "
        f"T.cast(expr, '{getattr(shared_var.type, 'dtype', '?')}'))")


def _conform_given(var, repl):
    if repl.type == var.type:
        return repl
    converted = var.type.convert_variable(repl)
    if converted is None:
        raise TypeError(f"givens: {repl} of type {repl.type} cannot replace {var} of "
                        f"type {var.type}")
    return converted


class Function:
    """A compiled function: call it with values for its inputs.

    Positional arguments fill the inputs in order, keywords by input name;
    inputs with a default (``In(x, value=...)``) may be left out.
    ``f.maker.fgraph`` is the optimized graph.
    """

    def __init__(self, maker, vm, storage, native=None):
        self.maker = maker
        self.vm = vm
        self.native = native
        self.name = maker.name
        self.trust_input = maker.trust_input
        fgraph = maker.fgraph
        self.input_cells = [storage[v] for v in fgraph.inputs[:len(maker.in_specs)]]
        self.output_cells = [storage[v] for v in fgraph.outputs]
        self._shared_cells = [s.container.storage for s in maker.shared_inputs]
        self._fast = None
        if native is not None:
            from symgraph.compile.native.runtime import load_runtime

            self._input_mismatch = load_runtime().InputMismatch
        self.input_types = [v.type for v in fgraph.inputs[:len(maker.in_specs)]]
        self.input_names = [spec.name for spec in maker.in_specs]
        self.defaults = [spec.value for spec in maker.in_specs]
        self.has_default = [spec.has_default for spec in maker.in_specs]
        self._copy_output = self._outputs_needing_copy()
        self.profile = maker.profile
        self._updates = [(maker.shared_inputs[i - len(maker.in_specs)].container.storage,
                          self.output_cells[o], fgraph.inputs[i].type)
                         for i, o in maker.update_index.items()]
        # An update written in place into its own shared variable's buffer
        # (inplace phase) needs no copy; one aliasing any other input does.
        # Two updates with one value would leave two shared variables on one
        # buffer, which an in-place update of either would overwrite: copy.
        self._update_copy, seen = [], set()
        for i, o in maker.update_index.items():
            root = fgraph.get_feature(DestroyHandler).view_root(fgraph.outputs[o])
            self._update_copy.append(
                self._aliases_input(fgraph.outputs[o], own=fgraph.inputs[i]) or root in seen)
            seen.add(root)
        # Inputs the graph may overwrite (In(mutable=True)): their arrays are
        # checked on each call (_guard_mutable), so not on the C fast path.
        self._mutable = [k for k, spec in enumerate(maker.in_specs) if spec.mutable]
        if native is not None and self.profile is None and \
                not isinstance(maker.mode, DebugMode) and not self._mutable:
            self._configure_fast_path()

    def _configure_fast_path(self):
        """Positional calls go straight into the runtime (no Python per call)."""
        maker = self.maker
        n_in = len(maker.in_specs)
        updates = tuple((maker.shared_inputs[i - n_in].container.storage, o, bool(copy_it))
                        for (i, o), copy_it in zip(maker.update_index.items(),
                                                   self._update_copy))
        program = self.native.program
        program.configure_call(n_in, tuple(self._shared_cells),
                               tuple(int(c) for c in self._copy_output), updates,
                               bool(maker.unpack_single), not self.trust_input)
        self._fast = program.call

    def _aliases_input(self, var, own=None):
        handler = self.maker.fgraph.get_feature(DestroyHandler)
        root = handler.view_root(var)
        if own is not None and root is own:
            return False
        return root in self.maker.fgraph.inputs or isinstance(root, Constant)

    def _outputs_needing_copy(self):
        fg = self.maker.fgraph
        handler = fg.get_feature(DestroyHandler)
        # An output that is (a view of) an update's value would share its
        # memory with the shared variable, which a later call may overwrite
        # in place.
        update_roots = {handler.view_root(fg.outputs[o])
                        for o in self.maker.update_index.values()}
        flags, seen = [], set()
        for k, spec in enumerate(self.maker.out_specs):
            var = fg.outputs[k]
            copy_it = (not spec.borrow and (self._aliases_input(var) or
                                            handler.view_root(var) in update_roots)) \
                or var in seen
            seen.add(var)
            flags.append(copy_it)
        return flags

    def _guard_mutable(self, values):
        """Copy a mutable input's array when overwriting it would be wrong: it
        is read-only, or another input or a shared value uses its memory."""
        if not self._mutable:
            return values
        values = list(values)
        for k in self._mutable:
            value = values[k]
            if not isinstance(value, np.ndarray):
                continue
            others = [v for j, v in enumerate(values) if j != k] + \
                [c[0] for c in self._shared_cells]
            if not value.flags.writeable or any(
                    isinstance(o, np.ndarray) and np.may_share_memory(value, o)
                    for o in others):
                values[k] = np.array(value, copy=True)
        return values

    reference = None

    def __call__(self, *args, **kwargs):
        if self._fast is not None and not kwargs:
            try:
                return self._fast(*args)
            except self._input_mismatch:
                pass  # Python converts the arguments, or explains what is wrong
            except Exception as exc:
                self._explain_failure(exc)
        if self.native is not None:
            return self._call_native(args, kwargs)
        values = self._guard_mutable(self._bind(args, kwargs))
        expected = self.reference(*values) if self.reference is not None else None
        for cell, value in zip(self.input_cells, values):
            cell[0] = value
        start = time.perf_counter() if self.profile is not None else None
        try:
            self.vm()
            n = self.maker.n_outputs
            results = [self.output_cells[k][0] for k in range(n)]
            results = [np.array(r, copy=True) if c and isinstance(r, np.ndarray) else r
                       for r, c in zip(results, self._copy_output)]
            new_values = [np.array(cell[0], copy=True) if copy_it else cell[0]
                          for (_, cell, _), copy_it in zip(self._updates, self._update_copy)]
            if expected is not None:
                self._compare_with_reference(results + new_values, expected)
            for (target, _, vtype), value in zip(self._updates, new_values):
                target[0] = value
        finally:
            self.vm.clear_temporaries()
            for cell in self.input_cells:
                cell[0] = None
        if start is not None:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - start
        if self.maker.unpack_single:
            return results[0]
        return results

    def _call_native(self, args, kwargs):
        if kwargs or len(args) != len(self.input_cells):
            values, check = self._bind(args, kwargs), False
        else:
            values, check = args, not self.trust_input
        values = self._guard_mutable(values)
        expected = self.reference(*values) if self.reference is not None else None
        start = time.perf_counter()
        outs = self._run_program(values, check)
        if outs is None:
            # The C check takes exact arrays only: convert (or explain) in Python.
            outs = self._run_program(self._guard_mutable(self._bind(args, kwargs)), False)
        n = self.maker.n_outputs
        results = [np.array(r, copy=True) if c and isinstance(r, np.ndarray) else r
                   for r, c in zip(outs[:n], self._copy_output)]
        new_values = [np.array(v, copy=True) if copy_it else v
                      for v, copy_it in zip(outs[n:], self._update_copy)]
        if expected is not None:
            self._compare_with_reference(results + new_values, expected)
        for (target, _, _), value in zip(self._updates, new_values):
            target[0] = value
        if self.profile is not None:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - start
        return results[0] if self.maker.unpack_single else results

    @property
    def storage_map(self):
        """{variable: [value]}: constants, shared values and buffers kept from the last call."""
        if self.native is None:
            return self.vm.storage
        program = self.native.program
        out = {var: [program.slot(slot)] for var, slot in self.native.slot_of.items()}
        shared_vars = self.maker.fgraph.inputs[len(self.input_cells):]
        out.update(zip(shared_vars, self._shared_cells))
        return out

    def _run_program(self, values, check):
        """The runtime's outputs, or None when an input needs Python's conversion."""
        program = self.native.program
        try:
            return program.run(tuple(values) + tuple(c[0] for c in self._shared_cells), check)
        except self._input_mismatch:
            return None
        except Exception as exc:
            self._explain_failure(exc)

    def _explain_failure(self, exc):
        """Raise ``exc`` again naming the node that failed and the user's line."""
        node = self.native.failed_node()
        if node is None:
            raise exc
        if getattr(exc, "__symgraph_node__", None) is not None:
            self.native.program.clear()   # the update guard named its node already
            raise exc
        inputs = self.native.node_input_values(node)
        self.native.program.clear()
        reraise_with_node(node, inputs, exc)

    def _compare_with_reference(self, got, expected):
        fg = self.maker.fgraph
        for k, (a, b) in enumerate(zip(got, expected)):
            var = fg.outputs[k]
            if not _close_where_reference_finite(var.type, a, b):
                what = f"output {k}" if k < self.maker.n_outputs else "an update"
                raise AssertionError(
                    f"DebugMode: {what} of {self._where()} differs between the optimized "
                    f"and the unoptimized graph:\n optimized: {a!r}\n reference: {b!r}")

    def _bind(self, args, kwargs):
        n = len(self.input_cells)
        where = self._where()
        if len(args) > n:
            raise TypeError(f"{where} takes {n} input{'s' if n != 1 else ''} "
                            f"({', '.join(self._input_labels())}), got {len(args)} arguments")
        values = list(args) + [None] * (n - len(args))
        given = [True] * len(args) + [False] * (n - len(args))
        for key, value in kwargs.items():
            if key not in self.input_names:
                raise TypeError(f"{where} has no input named {key!r}; its inputs are "
                                f"{', '.join(self._input_labels())}")
            pos = self.input_names.index(key)
            if given[pos]:
                raise TypeError(f"{where} got input {key!r} twice (by position and keyword)")
            values[pos], given[pos] = value, True
        for pos in range(n):
            if not given[pos]:
                if not self.has_default[pos]:
                    missing = [self._input_labels()[p] for p in range(n)
                               if not given[p] and not self.has_default[p]]
                    raise TypeError(f"{where} is missing input{'s' if len(missing) > 1 else ''} "
                                    f"{', '.join(missing)} (it takes {n}: "
                                    f"{', '.join(self._input_labels())})")
                values[pos] = self.defaults[pos]
        if self.trust_input:
            return values
        return [self._filter(pos, v) for pos, v in enumerate(values)]

    def _filter(self, pos, value):
        spec = self.maker.in_specs[pos]
        allow = spec.allow_downcast
        if allow is None:
            allow = self.maker.args["allow_input_downcast"]
        try:
            return self.input_types[pos].filter(value, strict=spec.strict, allow_downcast=allow)
        except (TypeError, ValueError) as exc:
            label = self._input_labels()[pos]
            raise InputError(f"bad argument for input {label} (position {pos}) of "
                             f"{self._where()}: {exc}{self._consumer_text(pos)}") from None

    def _consumer_text(self, pos):
        var = self.maker.fgraph.inputs[pos]
        for node, _ in self.maker.fgraph.clients.get(var, []):
            if node != "output":
                trace = node.tag.trace
                return f"\nIt is used by {node.op}" + \
                    (f", created at:\n  {trace}" if trace else "")
        return ""

    def _input_labels(self):
        return [repr(n) if n else f"<{t}>" for n, t in zip(self.input_names, self.input_types)]

    def _where(self):
        name = f"function {self.name!r}" if self.name else "the function"
        at = self.maker.defined_at
        return f"{name} (compiled at {at.filename}:{at.lineno})" if at else name

    def copy(self):
        """A new function with the same graph (compiled again)."""
        return FunctionMaker(**self.maker.args).create()

    def __reduce__(self):
        return (_rebuild_function, (self.maker.args,))

    def __repr__(self):
        return f"<symgraph.Function {self.name or ''} of {len(self.input_cells)} inputs>"


def _rebuild_function(args):
    return FunctionMaker(**args).create()


def _close_where_reference_finite(vtype, got, expected):
    """DebugMode's comparison: stabilizing rewrites may give a finite value where
    the unoptimized graph overflowed to Inf or NaN (Theano's
    values_eq_approx_remove_inf_nan), so only the reference's finite entries are
    compared."""
    if not (isinstance(expected, np.ndarray) and expected.dtype.kind in "fc"):
        return vtype.values_eq_approx(got, expected)
    got = np.asarray(got)
    if got.shape != expected.shape:
        return False
    finite = np.isfinite(expected)
    return vtype.values_eq_approx(got[finite], expected[finite])
