"""The Function object that ``symgraph.function`` returns.

A call binds its arguments (positions, keywords, defaults from ``In(value=)``),
runs the native program or the Python VM, copies outputs that alias inputs and
writes the updates: those of shared variables, and those of inputs declared
``In(x, value=..., update=...)``, whose value the function keeps between calls
in a container (Theano's state inputs: ``f[x]`` reads it, ``f[x] = v`` sets
it).  ``copy()`` compiles the same graph again, optionally swapping shared
variables or dropping the updates.
"""

import copy
import time

import numpy as np

from symgraph.compile.errors import InputError, reraise_with_node
from symgraph.compile.mode import DebugMode
from symgraph.configdefaults_theano import numpy_errstate
from symgraph.graph.basic import Constant
from symgraph.graph.destroy import DestroyHandler


class InputContainer:
    """The value a function keeps for one input between calls: the default of
    ``In(x, value=...)``, or the state of ``In(x, value=..., update=...)``.
    Functions made by ``copy(share_memory=True)`` share their containers."""

    def __init__(self, value=None):
        self.storage = [value]

    @property
    def value(self):
        return self.storage[0]

    @value.setter
    def value(self, value):
        self.storage[0] = value


class _InputMap:
    """``f.value`` and ``f.container``: dict-like access to the inputs' kept
    values or containers by position, name or variable."""

    def __init__(self, function, containers):
        self._function, self._containers = function, containers

    def __getitem__(self, key):
        container = self._function.input_containers[self._function._input_position(key)]
        return container if self._containers else container.value

    def __setitem__(self, key, value):
        if self._containers:
            raise TypeError("f.container is read-only; set values through f.value or f[key]")
        self._function[key] = value


class Function:
    """A compiled function: call it with values for its inputs.

    Positional arguments fill the inputs in order, keywords by input name;
    inputs with a default (``In(x, value=...)``) may be left out.  An input
    ``In(x, value=..., update=...)`` keeps its value between calls: a call that
    leaves it out uses the kept value, and after every call the update's
    value is kept.  ``f[x]`` (``x`` a variable, name or position) reads a kept
    value and ``f[x] = v`` sets it; ``f.value`` and ``f.container`` are
    Theano's dict-like views.  ``f.maker.fgraph`` is the optimized graph.
    """

    def __init__(self, maker, vm, storage, native=None, containers=None):
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
            from symgraph.backends.native.runtime import load_runtime

            self._input_mismatch = load_runtime().InputMismatch
        self.input_types = [v.type for v in fgraph.inputs[:len(maker.in_specs)]]
        self.input_names = [spec.name for spec in maker.in_specs]
        self.input_containers = containers or [
            InputContainer(self._initial_value(pos, spec))
            for pos, spec in enumerate(maker.in_specs)]
        self._states = [(self.input_containers[pos], self.output_cells[o])
                        for pos, o in maker.state_index.items()]
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
        # The runtime checks arrays of host tensor types only; values of other
        # types (device arrays, objects) are filtered in Python on every call,
        # so a host array never reaches a device kernel.
        self._unchecked = any(type(t).__name__ != "TensorType" for t in self.input_types)
        # State inputs are written back in Python, so not on the fast path either.
        if native is not None and self.profile is None and not self._states and \
                not isinstance(maker.mode, DebugMode) and not self._mutable and \
                not self._unchecked:
            self._configure_fast_path()

    def _initial_value(self, pos, spec):
        """A default as its type's value when it converts (else as given, for
        the call to convert or explain)."""
        if spec.value is None:
            return None
        try:
            return self.input_types[pos].filter(spec.value, allow_downcast=spec.allow_downcast)
        except (TypeError, ValueError):
            return spec.value

    # -- kept values (Theano's f[x], f.value, f.container) --------------------

    def _input_position(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            if not -len(self.input_containers) <= key < len(self.input_containers):
                raise IndexError(f"{self._where()} has {len(self.input_containers)} inputs, "
                                 f"not an input {key}")
            return key % len(self.input_containers)
        for pos, spec in enumerate(self.maker.in_specs):
            if key is spec.variable or (isinstance(key, str) and key == spec.name):
                return pos
        raise KeyError(f"{key!r} is not an input of {self._where()}; its inputs are "
                       f"{', '.join(self._input_labels())}")

    def __getitem__(self, key):
        return self.input_containers[self._input_position(key)].value

    def __setitem__(self, key, value):
        pos = self._input_position(key)
        self.input_containers[pos].value = self._filter(pos, value)

    @property
    def value(self):
        """Dict-like: the kept value of each input (by position, name or variable)."""
        return _InputMap(self, containers=False)

    @property
    def container(self):
        """Dict-like and read-only: each input's :class:`InputContainer`."""
        return _InputMap(self, containers=True)

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
            # Native code only (no profile on this path): NumPy's error state,
            # which the numpy.seterr_* flags set, has nothing to act on, and
            # element-wise perform reads those flags itself.
            try:
                return self._fast(*args)
            except self._input_mismatch:
                pass  # Python converts the arguments, or explains what is wrong
            except Exception as exc:
                self._explain_failure(exc)
        errstate = numpy_errstate()
        if errstate is None:
            results = self._call(args, kwargs)
        else:  # Theano's numpy.seterr_* flags hold around the call only
            with np.errstate(**errstate):
                results = self._call(args, kwargs)
        if self.profile is not None and not self.profile.first_call_done:
            self.profile.end_first_call()
        return results

    def _call(self, args, kwargs):
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
            states = [_copy_state(cell[0]) for _, cell in self._states]
            if expected is not None:
                self._compare_with_reference(results + new_values + states, expected)
            for (target, _, vtype), value in zip(self._updates, new_values):
                target[0] = value
            self._keep_states(states)
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
        if kwargs or len(args) != len(self.input_cells) or \
                (self._unchecked and not self.trust_input):
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
        # a state is kept past this call: never an array that an output, an
        # input or the runtime's buffers also hold
        states = [_copy_state(outs[o]) for o in self.maker.state_index.values()]
        if expected is not None:
            self._compare_with_reference(results + new_values + states, expected)
        for (target, _, _), value in zip(self._updates, new_values):
            target[0] = value
        self._keep_states(states)
        if self.profile is not None:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - start
        return results[0] if self.maker.unpack_single else results

    def _keep_states(self, values):
        for (container, _), value in zip(self._states, values):
            container.storage[0] = value

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
                from symgraph.compile.debug_checks import BadOptimization

                # BadOptimization is an AssertionError too, as before
                raise BadOptimization(
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
        kept = [c.value for c in self.input_containers]
        for pos in range(n):
            if not given[pos]:
                if kept[pos] is None:
                    missing = [self._input_labels()[p] for p in range(n)
                               if not given[p] and kept[p] is None]
                    raise TypeError(f"{where} is missing input{'s' if len(missing) > 1 else ''} "
                                    f"{', '.join(missing)} (it takes {n}: "
                                    f"{', '.join(self._input_labels())})")
                values[pos] = kept[pos]
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

    def copy(self, share_memory=False, swap=None, delete_updates=False, name=None,
             profile=None):
        """A new function with this one's graph, compiled again (Theano's ``copy``).

        ``share_memory``: the copy shares this function's input containers (its
        defaults and the states of ``In(update=...)`` inputs); otherwise it
        starts from copies of their current values.  ``swap``: ``{shared
        variable this function uses: another of the same type}``; the copy reads
        and updates the new ones.  ``delete_updates``: the copy updates nothing
        (neither shared variables nor state inputs).  ``name``, ``profile``:
        the copy's, by default this function's.
        """
        from symgraph.compile.function import FunctionMaker, without_updates

        args = dict(self.maker.args)
        if name is not None:
            args["name"] = name
        if profile is not None:
            args["profile"] = profile
        if swap:
            args["swap"] = self._composed_swap(dict(swap))
        if delete_updates:
            args.update(updates=None, no_default_updates=True,
                        inputs=without_updates(self.maker.in_specs))
        containers = self.input_containers if share_memory else \
            [InputContainer(copy.deepcopy(c.value)) for c in self.input_containers]
        maker = FunctionMaker(**args, defined_at=self.maker.defined_at)
        return maker.create(containers=containers)

    def _composed_swap(self, swap):
        """``swap`` (keys: the shared variables this function uses) as a map
        from the graph's own shared variables, through an earlier swap."""
        current = self.maker.shared_inputs
        for old in swap:
            if not any(old is c for c in current):
                raise ValueError(f"copy(swap=...): {old} is not a shared variable that "
                                 f"this function uses")
        return {orig: swap.get(cur, cur)
                for orig, cur in zip(self.maker.original_shared, current)
                if swap.get(cur, cur) is not orig}

    def __reduce__(self):
        return (_rebuild_function, (self.maker.args,))

    def __repr__(self):
        return f"<symgraph.Function {self.name or ''} of {len(self.input_cells)} inputs>"


def _rebuild_function(args):
    from symgraph.compile.function import FunctionMaker

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


def _copy_state(value):
    """A state input's next value, kept past the call: arrays are copied; other
    values (a random generator state) are new objects made by their op, and
    np.array would wrap them in an object array."""
    return np.array(value, copy=True) if isinstance(value, (np.ndarray, np.generic)) else value
