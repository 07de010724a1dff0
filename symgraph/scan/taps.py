"""scan()'s arguments in one form: sequences and outputs with their taps.

Theano's conventions, which these functions check and normalize:

* a sequence is a variable (tap 0) or ``dict(input=x, taps=[...])``; taps may
  have any sign, and at step ``t`` tap ``k`` gives ``x[t + k]`` where step 0 is
  placed so that the most negative tap reads ``x[0]``;
* an output is ``None`` or ``{}`` (not fed back: a map), a variable (its
  initial value; tap -1), or ``dict(initial=x0, taps=[-k, ...])`` with
  negative taps, where ``x0`` has one leading entry per step back
  (``x0[0]`` is step ``-lag``).  With taps ``[-1]`` the initial value has the
  output's own shape.
"""

from collections import namedtuple

import numpy as np

from symgraph.graph.basic import Constant, Variable

SequenceSpec = namedtuple("SequenceSpec", "var taps label")
OutputSpec = namedtuple("OutputSpec", "kind init taps label")   # kind: 'rec' or 'map'


def as_list(value):
    """Theano's wrap_into_list: None is empty, a list or tuple stays, anything else is one item."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def as_variable(value, what, where):
    """``value`` as a tensor variable, or a TypeError naming the argument."""
    from symgraph.tensor.basic import as_tensor_variable

    if isinstance(value, Variable):
        return value
    try:
        return as_tensor_variable(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: {what} is a {type(value).__name__} ({value!r:.60}), not a "
                        f"symbolic variable or an array-like value: {exc}") from None


def _taps(raw, what, where):
    taps = as_list(raw)
    for t in taps:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"{where}: the taps of {what} must be ints, got {t!r}")
    taps = [int(t) for t in taps]
    if len(set(taps)) != len(taps):
        raise ValueError(f"{where}: the taps of {what} must be distinct, got {taps}")
    return taps


def normalize_sequences(sequences, where):
    """A SequenceSpec per sequence."""
    specs = []
    for i, seq in enumerate(as_list(sequences)):
        label = f"sequences[{i}]"
        if isinstance(seq, dict):
            if "input" not in seq:
                raise ValueError(f"{where}: {label} is a dict without 'input' (give "
                                 f"dict(input=x, taps=[...]))")
            taps = seq.get("taps")
            taps = [0] if taps is None else _taps(taps, label, where)
            var = seq["input"]
        else:
            taps, var = [0], seq
        var = as_variable(var, label, where)
        if not hasattr(var.type, "ndim") or var.type.ndim < 1:
            raise TypeError(f"{where}: {label} ({var}) has type {var.type}; a sequence "
                            f"needs a first dimension to iterate over")
        if var.name:
            label += f" {var.name!r}"
        if taps:
            specs.append(SequenceSpec(var, taps, label))
    return specs


def normalize_outputs_info(outputs_info, where):
    """An OutputSpec per entry of outputs_info."""
    specs = []
    for i, info in enumerate(as_list(outputs_info)):
        label = f"outputs_info[{i}]"
        if info is None or (isinstance(info, dict) and not info):
            specs.append(OutputSpec("map", None, (), label))
            continue
        if isinstance(info, dict):
            if info.get("return_steps") is not None:
                raise ValueError(f"{where}: {label} uses 'return_steps', which Theano "
                                 f"deprecated; index the result instead (result[-1]): the "
                                 f"loop keeps only the steps that are used")
            init = info.get("initial")
            taps = info.get("taps")
            if init is None:
                if taps is not None:
                    raise ValueError(f"{where}: {label} gives taps {taps} but no 'initial' "
                                     f"value; an output read at earlier steps needs an "
                                     f"initial state")
                specs.append(OutputSpec("map", None, (), label))
                continue
            taps = [-1] if taps is None else _taps(taps, label, where)
            if not taps:
                raise ValueError(f"{where}: {label} has an initial value but no taps")
            if any(t >= 0 for t in taps):
                raise ValueError(f"{where}: the taps of {label} must be negative (an output "
                                 f"can only read earlier steps), got {taps}")
        else:
            init, taps = info, [-1]
        init = as_variable(init, f"the initial value of {label}", where)
        if taps != [-1] and (not hasattr(init.type, "ndim") or init.type.ndim < 1):
            raise TypeError(f"{where}: {label} reads {-min(taps)} steps back (taps {taps}), "
                            f"so its initial value needs a leading dimension of at least "
                            f"{-min(taps)} entries; got {init} of type {init.type}")
        if init.name:
            label += f" {init.name!r}"
        specs.append(OutputSpec("rec", init, tuple(taps), label))
    return specs


def sequence_slices(spec, go_backwards):
    """``[(outer, placeholder, label)]`` for each tap of a sequence: ``outer`` is
    aligned so that step ``t`` reads ``outer[t]``."""
    var, taps = spec.var, spec.taps
    low, high = min(min(taps), 0), max(max(taps), 0)
    out = []
    for k in taps:
        start, stop = k - low, high - k
        if stop:
            outer = var[start:-stop]
        else:
            outer = var[start:] if start else var
        if go_backwards:
            outer = outer[::-1]
        placeholder = _step_variable(var)
        base = var.name or spec.label.split(" ")[0]
        placeholder.name = f"{base}[t{k:+d}]" if k else f"{base}[t]"
        label = spec.label if taps == [0] else f"{spec.label} (tap {k:+d})"
        out.append((outer, placeholder, label))
    return out


def _step_variable(var):
    from symgraph.tensor.type import TensorType

    return TensorType(var.type.dtype, shape=var.type.shape[1:])()


def recurrence_inputs(spec):
    """``(outer initial buffer, [placeholder per tap])`` of a recurrent output."""
    from symgraph.ops.shape import shape_padleft

    init, taps = spec.init, list(spec.taps)
    if taps == [-1]:
        outer = shape_padleft(init)
        elem_type = init.type
    else:
        outer = init
        elem_type = None
    placeholders = []
    for k in taps:
        p = elem_type() if elem_type is not None else _step_variable(init)
        base = init.name or spec.label.split(" ")[0]
        p.name = f"{base}[t{k:+d}]"
        placeholders.append(p)
    return outer, placeholders


def normalize_n_steps(n_steps, where):
    """``n_steps`` as an int64 scalar variable (None stays None)."""
    from symgraph.ops.math import cast
    from symgraph.tensor.basic import as_tensor_variable

    if n_steps is None:
        return None
    if isinstance(n_steps, (bool, np.bool_)):
        raise TypeError(f"{where}: n_steps must be an int, got {n_steps!r}")
    if isinstance(n_steps, (float, np.floating)):
        if not float(n_steps).is_integer():
            raise TypeError(f"{where}: n_steps must be an int, got {n_steps!r}")
        n_steps = int(n_steps)
    var = as_variable(n_steps, "n_steps", where)
    if getattr(var.type, "ndim", None) != 0 or var.type.dtype[:3] not in ("int", "uin"):
        raise TypeError(f"{where}: n_steps must be an integer scalar, got {var} of type "
                        f"{var.type}")
    if isinstance(var, Constant) and int(np.asarray(var.data)) < 0:
        raise ValueError(f"{where}: n_steps is {int(np.asarray(var.data))}; it must be >= 0 "
                         f"(Theano 1.0 refuses negative n_steps too: use go_backwards=True "
                         f"to walk the sequences from their end)")
    return cast(as_tensor_variable(var), "int64")
