"""scan and its views (map, reduce, foldl, foldr): Theano's looping API.

``scan`` calls the user's step function once, with symbolic stand-ins for a
step's slices of the sequences and earlier outputs (and the non-sequences
themselves), then cuts the graph it returned into a step graph: the
non-sequences, the shared variables updated inside the step and every other
variable it uses from outside become inputs of the step.  ``build_scan``
(``scan/builder.py``) makes the Scan node.  The result is Theano's
``(outputs, updates)``: the outputs without their initial entries, and an
ordered dict from each shared variable updated inside the loop to its value
after the last step (pass it to ``symgraph.function(updates=...)``).
"""

from collections import OrderedDict, namedtuple

from symgraph.compile.shared import SharedVariable
from symgraph.graph.basic import Constant, ancestors, clone_replace
from symgraph.graph.test_value import TestValueError, get_test_value, test_values_enabled
from symgraph.graph.trace import user_line
from symgraph.ops.shape import shape_padleft
from symgraph.scan.builder import Mapped, NonSequence, Recurrence, Sequence, State, build_scan
from symgraph.scan.returns import split_step_return, until
from symgraph.scan.taps import (as_list, as_variable, normalize_n_steps,
                                normalize_outputs_info, normalize_sequences,
                                recurrence_inputs, sequence_slices)

__all__ = ["scan", "map", "reduce", "foldl", "foldr", "until", "OrderedUpdates"]


class OrderedUpdates(OrderedDict):
    """The updates scan returns (Theano's ``OrderedUpdates``): an OrderedDict
    whose keys must be shared variables; ``a + b`` merges two of them and
    refuses a variable updated by both."""

    def __setitem__(self, key, value):
        if not isinstance(key, SharedVariable):
            raise TypeError(f"updates: {key} is not a shared variable (make it with "
                            f"symgraph.shared)")
        super().__setitem__(key, value)

    def __add__(self, other):
        merged = OrderedUpdates(self)
        for key, value in OrderedDict(other).items():
            if key in merged and merged[key] is not value:
                raise KeyError(f"updates: {key} is updated twice")
            merged[key] = value
        return merged


def scan(fn, sequences=None, outputs_info=None, non_sequences=None, n_steps=None,
         truncate_gradient=-1, go_backwards=False, mode=None, name=None, profile=False,
         allow_gc=None, strict=False, return_list=False):
    """Loop ``fn`` over sequences and earlier outputs (Theano's ``scan``).

    ``fn`` receives, in order: every tap of every sequence, every tap of every
    fed-back output, then the non-sequences; it returns the step's outputs,
    optionally a dict of shared-variable updates and, last, ``until(cond)``.

    * ``sequences``: variables or ``dict(input=x, taps=[...])`` (taps of any
      sign; default ``[0]``).  Without ``n_steps`` the loop runs as many steps
      as the shortest sequence allows.
    * ``outputs_info``: one entry per output of ``fn``: ``None`` (not fed
      back), an initial value (tap -1), or ``dict(initial=x0, taps=[-k...])``.
    * ``non_sequences``: values every step sees whole (variables the step
      uses without listing them, shared variables included, are found too).
    * ``n_steps``: an int or integer scalar (the maximum with ``until``).
    * ``truncate_gradient``: steps the gradient goes back (-1: all).
    * ``go_backwards``: walk the sequences from their end.
    * ``mode``: the inner function's mode (None: the compiling function's).
    * ``strict``: refuse variables the step uses without them being in
      ``non_sequences`` (shared variables updated in the step excepted).
    * ``return_list``: always return a list of outputs.
    * ``profile``: profile the inner function; ``allow_gc``: accepted, no effect.

    Returns ``(outputs, updates)``: one output per entry of ``outputs_info``
    (each ``(n_steps,) + step shape``), a single variable when there is one
    (unless ``return_list``), None when there is none; ``updates`` is an
    OrderedDict for ``symgraph.function(updates=...)``.
    """
    defined_at = user_line()
    where = _where(name, defined_at)
    if not callable(fn):
        raise TypeError(f"{where}: fn must be callable (the step function), got {fn!r}")
    if isinstance(truncate_gradient, bool) or not isinstance(truncate_gradient, int) or \
            truncate_gradient < -1 or truncate_gradient == 0:
        raise ValueError(f"{where}: truncate_gradient must be -1 (no truncation) or a "
                         f"positive number of steps, got {truncate_gradient!r}")

    seq_specs = normalize_sequences(sequences, where)
    out_specs = normalize_outputs_info(outputs_info, where)
    explicit = [as_variable(v, f"non_sequences[{i}]", where)
                for i, v in enumerate(as_list(non_sequences))]
    n_steps = normalize_n_steps(n_steps, where)

    seq_entries = []
    for spec in seq_specs:
        for outer, placeholder, label in sequence_slices(spec, go_backwards):
            seq_entries.append(Sequence(outer, placeholder, False, label))
    if n_steps is None:
        if not seq_entries:
            raise ValueError(f"{where}: no sequences and no n_steps: give n_steps (the "
                             f"number of steps) or a sequence to iterate over")
        n_steps = _shortest(seq_entries)

    rec_inputs = {}
    for pos, spec in enumerate(out_specs):
        if spec.kind == "rec":
            rec_inputs[pos] = recurrence_inputs(spec)
    args = [e.placeholder for e in seq_entries]
    for pos in sorted(rec_inputs):
        args.extend(rec_inputs[pos][1])
    args.extend(explicit)
    if test_values_enabled() is not None:
        _first_step_test_values(seq_entries, rec_inputs, out_specs)

    outputs, update_pairs, cond = split_step_return(fn(*args), where)
    outputs = [as_variable(o, f"output {i} of the step function", where)
               for i, o in enumerate(outputs)]
    if not out_specs:
        out_specs = normalize_outputs_info([None] * len(outputs), where)
    elif len(out_specs) != len(outputs):
        raise ValueError(f"{where}: outputs_info has {len(out_specs)} entries but the step "
                         f"function returns {len(outputs)} outputs; give one entry per "
                         f"output (None for an output that is not fed back)")
    for pos, (spec, out) in enumerate(zip(out_specs, outputs)):
        if spec.kind == "rec":
            _check_recurrent(spec, out, rec_inputs[pos][1][0], where)
        elif not hasattr(out.type, "ndim"):
            raise TypeError(f"{where}: output {pos} of the step function is {out} of type "
                            f"{out.type}, not a tensor")

    updates, defaults = _all_updates(update_pairs, outputs, cond, explicit, where)
    _retire_inner_defaults(defaults, args[:len(args) - len(explicit)])
    step = _cut_step_graph(outputs, updates, cond, explicit)

    recurrences, mapped, order = [], [], []
    for pos, (spec, out) in enumerate(zip(out_specs, step.outputs)):
        if spec.kind == "rec":
            outer, placeholders = rec_inputs[pos]
            order.append(("rec", len(recurrences), -min(spec.taps)))
            recurrences.append(Recurrence(outer, spec.taps, placeholders, out, 0, spec.label))
        else:
            order.append(("map", len(mapped), 0))
            mapped.append(Mapped(out, False, f"output {pos} (outputs_info None)"))
    first_shared_rec = len(recurrences)
    # A tensor shared variable is a recurrence (tap -1, its history kept only
    # when read); other values (random generators) are carried as states.
    recurrences.extend(Recurrence(shape_padleft(var), (-1,), [ph], step.new_values[var], 0,
                                  f"the update of shared variable {var}")
                       for var, ph in step.shared_recs)
    states = [State(var, ph, step.new_values[var], f"the update of {var}")
              for var, ph in step.shared_states]

    def on_implicit(var):
        if strict:
            raise ValueError(
                f"{where}: strict=True, but the step function uses {_describe(var)}, which "
                f"is not in non_sequences; add it to non_sequences (or use strict=False)")

    result = build_scan(n_steps, seq_entries, recurrences, mapped, states, step.nonseqs,
                        cond=step.cond, truncate_gradient=truncate_gradient, name=name,
                        mode=mode, profile=profile, defined_at=defined_at,
                        on_implicit=on_implicit)

    # The loop's buffers start with the initial entries; Theano's outputs do not.
    user_outputs = [result.rec[index][lag:] if kind == "rec" else result.nitsot[index]
                    for kind, index, lag in order]
    scan_updates = OrderedUpdates()
    for n, (var, _) in enumerate(step.shared_recs):
        scan_updates[var] = result.rec[first_shared_rec + n][-1]
    for n, (var, _) in enumerate(step.shared_states):
        scan_updates[var] = result.states[n]
    if return_list:
        return user_outputs, scan_updates
    if not user_outputs:
        return None, scan_updates
    return (user_outputs[0] if len(user_outputs) == 1 else user_outputs), scan_updates


_StepGraph = namedtuple("_StepGraph", "outputs new_values cond nonseqs shared_recs shared_states")


def _cut_step_graph(outputs, updates, cond, explicit):
    """The step graph with the explicit non-sequences and the shared variables
    it updates replaced by inputs of the step (the placeholders)."""
    replace, nonseqs = {}, []
    for i, var in enumerate(explicit):
        if isinstance(var, Constant) or var in updates or var in replace:
            continue   # constants stay in the step graph, where they fold
        replace[var] = _placeholder(var)
        nonseqs.append(NonSequence(var, replace[var], f"non_sequences[{i}]"))
    shared_recs, shared_states = [], []
    for var in updates:
        replace[var] = _placeholder(var)
        (shared_recs if hasattr(var.type, "ndim") else shared_states).append((var, replace[var]))
    everything = outputs + list(updates.values()) + ([cond] if cond is not None else [])
    cloned = clone_replace(everything, replace) if replace else everything
    n_out, n_up = len(outputs), len(updates)
    return _StepGraph(cloned[:n_out], dict(zip(updates, cloned[n_out:n_out + n_up])),
                      cloned[-1] if cond is not None else None, nonseqs, shared_recs,
                      shared_states)


def _first_step_test_values(seq_entries, rec_inputs, out_specs):
    """compute_test_value: the step's inputs get the values they take at step 0
    (as Theano's scan gave them), so the step function's nodes get test values too."""
    for entry in seq_entries:  # outer is aligned: step t reads outer[t]
        _set_from(entry.placeholder, entry.outer, 0)
    for pos, (outer, placeholders) in rec_inputs.items():
        taps = list(out_specs[pos].taps)
        lag = -min(taps)  # outer[0] is step -lag
        for tap, placeholder in zip(taps, placeholders):
            _set_from(placeholder, outer, lag + tap)


def _set_from(placeholder, outer, index):
    try:
        value = get_test_value(outer)[index]
    except (TestValueError, IndexError):
        return  # no value to give: the step's nodes act as compute_test_value says
    placeholder.tag.test_value = value


def _placeholder(var):
    new = var.type()
    new.name = var.name
    return new


def _where(name, defined_at):
    text = f"scan {name!r}" if name else "scan"
    if defined_at is not None:
        text += f" (called at {defined_at.filename}:{defined_at.lineno})"
    return text


def _describe(var):
    kind = "shared variable" if isinstance(var, SharedVariable) else "variable"
    return f"{kind} {var.name!r}" if var.name else f"{kind} {var} of type {var.type}"


def _shortest(entries):
    from symgraph.ops.math import cast, minimum

    n = entries[0].outer.shape[0]
    for e in entries[1:]:
        n = minimum(n, e.outer.shape[0])
    return cast(n, "int64")


def _check_recurrent(spec, out, placeholder, where):
    """The step's output for a fed-back entry must have its initial state's type."""
    want = placeholder.type
    if not hasattr(out.type, "ndim"):
        raise TypeError(f"{where}: the step function returns {out} of type {out.type} for "
                        f"{spec.label}, which is fed back as a tensor of type {want}")
    if out.type.dtype != want.dtype:
        raise TypeError(
            f"{where}: the step function returns dtype {out.type.dtype} for {spec.label}, "
            f"but its initial value has dtype {want.dtype}; a fed-back output must keep "
            f"the initial state's dtype (no implicit up- or downcast): cast the initial "
            f"value (T.cast(x0, '{out.type.dtype}')) or the step's result")
    if out.type.ndim != want.ndim:
        raise TypeError(
            f"{where}: the step function returns a {out.type.ndim}-d value for "
            f"{spec.label}, but each step of it is {want.ndim}-d according to its initial "
            f"value ({spec.init.type}{', one entry per step back' if spec.taps != (-1,) else ''})")
    for d, (a, b) in enumerate(zip(out.type.shape, want.shape)):
        if a is not None and b is not None and a != b:
            raise TypeError(
                f"{where}: the step function returns shape {out.type.shape} for "
                f"{spec.label}, but its initial value gives each step the shape "
                f"{want.shape} (dimension {d} differs)")


def _all_updates(pairs, outputs, cond, explicit, where):
    """The step's updates: those it returned, then the default updates of the
    shared variables it uses (random streams), in an ordered dict."""
    from symgraph.compile.function import _conform_update

    updates = OrderedDict()
    for var, expr in pairs:
        if not isinstance(var, SharedVariable):
            raise TypeError(f"{where}: the step function returned an update for {var}, "
                            f"which is not a shared variable")
        if var in updates:
            raise ValueError(f"{where}: the step function updates {var} twice")
        expr = as_variable(expr, f"the update of {var}", where)
        updates[var] = _conform_update(var, expr)
    blockers = [v for v in explicit if not isinstance(v, SharedVariable)]
    todo = list(outputs) + list(updates.values()) + ([cond] if cond is not None else [])
    defaults = []
    while todo:
        found = []
        for var in ancestors(todo, blockers=blockers):
            default = getattr(var, "default_update", None)
            if isinstance(var, SharedVariable) and default is not None and var not in updates:
                updates[var] = _conform_update(var, default)
                defaults.append(var)
                found.append(updates[var])
        todo = found
    return updates, defaults


def _retire_inner_defaults(shared_vars, step_inputs):
    """A random draw made inside the step sets its state's default update to an
    expression of the step's inputs, which means nothing outside the loop;
    the loop's own update (in the returned updates) replaces it.  Without
    those updates a function draws the same numbers at every call, as
    Theano's documentation says."""
    step_inputs = set(step_inputs)
    for var in shared_vars:
        if any(a in step_inputs for a in ancestors([var.default_update])):
            var.default_update = None


def map(fn, sequences, non_sequences=None, truncate_gradient=-1, go_backwards=False,
        mode=None, name=None):
    """``fn`` applied to each step of the sequences (a scan without feedback)."""
    return scan(fn, sequences=sequences, outputs_info=None, non_sequences=non_sequences,
                truncate_gradient=truncate_gradient, go_backwards=go_backwards, mode=mode,
                name=name)


def reduce(fn, sequences, outputs_info, non_sequences=None, go_backwards=False, mode=None,
           name=None):
    """The last step of a scan (Python's ``reduce``): ``(outputs[-1], updates)``.

    Only the last entries of the outputs are kept while the loop runs."""
    outputs, updates = scan(fn, sequences=sequences, outputs_info=outputs_info,
                            non_sequences=non_sequences, go_backwards=go_backwards,
                            mode=mode, name=name)
    if isinstance(outputs, (list, tuple)):
        return [o[-1] for o in outputs], updates
    return outputs[-1], updates


def foldl(fn, sequences, outputs_info, non_sequences=None, mode=None, name=None):
    """``reduce`` from the first step to the last (Haskell's ``foldl``)."""
    return reduce(fn, sequences, outputs_info, non_sequences=non_sequences,
                  go_backwards=False, mode=mode, name=name)


def foldr(fn, sequences, outputs_info, non_sequences=None, mode=None, name=None):
    """``reduce`` from the last step to the first (Haskell's ``foldr``)."""
    return reduce(fn, sequences, outputs_info, non_sequences=non_sequences,
                  go_backwards=True, mode=mode, name=name)

