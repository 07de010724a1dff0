"""Building Scan nodes from a step graph (shared by ``scan()`` and the gradient).

``build_scan`` takes the step graph with its inputs already sorted into roles
(sequence slices, recurrent taps, states, non-sequences) and

1. closes it: every other variable the step uses (a shared variable, an outer
   expression) becomes a non-sequence, fed once from outside;
2. moves loop-invariant work out: an inner subexpression that depends only on
   non-sequences is computed once before the loop, and the step receives its
   value as a non-sequence (so ``W.T`` or the forward part of an inner
   gradient is not recomputed at every step);
3. computes the work that depends only on the sequences for all steps at once
   (``scan/pushout.py``: ``dot(x_t, W)`` becomes one ``dot(X, W)``);
4. drops the non-sequences nothing uses any more, and applies a new Scan op.
"""

from collections import namedtuple

from symgraph.graph.basic import Constant, clone_replace, graph_inputs, io_toposort
from symgraph.scan.info import ScanInfo
from symgraph.scan.op import Scan, describe_scan

Sequence = namedtuple("Sequence", "outer placeholder reverse label")
Recurrence = namedtuple("Recurrence", "outer taps placeholders output keep label")
Mapped = namedtuple("Mapped", "output reverse label keep", defaults=(0,))
State = namedtuple("State", "outer placeholder output label")
NonSequence = namedtuple("NonSequence", "outer placeholder label")

ScanResult = namedtuple("ScanResult", "rec nitsot states state_traces node")


def build_scan(n_steps, sequences=(), recurrences=(), mapped=(), states=(), nonseqs=(),
               cond=None, truncate_gradient=-1, name=None, mode=None, profile=False,
               defined_at=None, hoist=True, on_implicit=None):
    """Apply a new Scan op; returns a ScanResult of outer outputs by role.

    ``on_implicit(var)`` is called for each free variable of the step graph
    that becomes a non-sequence (``scan(strict=True)`` refuses them there).
    """
    sequences, recurrences = list(sequences), list(recurrences)
    mapped, states, nonseqs = list(mapped), list(states), list(nonseqs)
    outputs = [r.output for r in recurrences] + [m.output for m in mapped] + \
        [s.output for s in states] + ([cond] if cond is not None else [])

    placeholders = [s.placeholder for s in sequences]
    for r in recurrences:
        placeholders.extend(r.placeholders)
    placeholders.extend(s.placeholder for s in states)
    placeholders.extend(n.placeholder for n in nonseqs)

    variant = set(placeholders[:len(placeholders) - len(nonseqs)])
    outputs, nonseqs = _close(outputs, placeholders, nonseqs, on_implicit)
    if hoist:
        outputs, nonseqs = _hoist(outputs, variant, nonseqs)
        if cond is None:
            from symgraph.scan.pushout import push_out_sequence_work

            outputs, more = push_out_sequence_work(
                outputs, sequences, nonseqs, n_steps,
                lambda outer, ph, rev: Sequence(outer, ph, rev, "a step value computed for "
                                                "all steps before the loop"),
                describe_scan(name, defined_at))
            sequences.extend(more)
    nonseqs = _used_nonseqs(outputs, nonseqs)

    inner_inputs = [s.placeholder for s in sequences]
    for r in recurrences:
        inner_inputs.extend(r.placeholders)
    inner_inputs.extend(s.placeholder for s in states)
    inner_inputs.extend(n.placeholder for n in nonseqs)

    info = ScanInfo(seq_reverse=[s.reverse for s in sequences],
                    rec_taps=[r.taps for r in recurrences],
                    rec_keep=[r.keep for r in recurrences],
                    nitsot_reverse=[m.reverse for m in mapped],
                    nitsot_keep=[m.keep for m in mapped],
                    n_states=len(states), n_nonseqs=len(nonseqs),
                    as_while=cond is not None, truncate_gradient=truncate_gradient)
    labels = {"seq": [s.label for s in sequences], "rec": [r.label for r in recurrences],
              "nitsot": [m.label for m in mapped], "state": [s.label for s in states],
              "nonseq": [n.label for n in nonseqs]}
    op = Scan(inner_inputs, outputs, info, name=name, mode=mode, profile=profile,
              labels=labels, defined_at=defined_at)
    outer = [n_steps] + [s.outer for s in sequences] + [r.outer for r in recurrences] + \
        [s.outer for s in states] + [n.outer for n in nonseqs]
    node = op.make_node(*outer)
    if defined_at is not None:
        node.tag.trace = defined_at
    outs = node.outputs
    n_rec, n_map, n_st = len(recurrences), len(mapped), len(states)
    return ScanResult(outs[:n_rec], outs[n_rec:n_rec + n_map],
                      outs[n_rec + n_map:n_rec + n_map + n_st],
                      outs[n_rec + n_map + n_st:], node)


def _close(outputs, placeholders, nonseqs, on_implicit):
    """Make every free variable of the step graph a non-sequence."""
    known = set(placeholders)
    free = [v for v in graph_inputs(outputs)
            if v not in known and not isinstance(v, Constant)]
    if not free:
        return outputs, nonseqs
    replace = {}
    nonseqs = list(nonseqs)
    for var in free:
        if on_implicit is not None:
            on_implicit(var)
        placeholder = _placeholder_for(var)
        replace[var] = placeholder
        nonseqs.append(NonSequence(var, placeholder, _name_of(var)))
    return clone_replace(outputs, replace), nonseqs


def _placeholder_for(var, name=None):
    new = var.type()
    new.name = name if name is not None else var.name
    return new


def _name_of(var):
    return f"non-sequence {var.name!r}" if var.name else f"non-sequence {var}"


def _no_hoist(node):
    """Ops whose effect depends on running at every step (printing)."""
    return type(node.op).__name__ in ("Print",) or getattr(node.op, "scan_keep_inside", False)


def _hoist(outputs, variant, nonseqs):
    """Move the loop-invariant subexpressions of the step out of the loop."""
    nonseq_inputs = [n.placeholder for n in nonseqs]
    order = io_toposort(list(variant) + nonseq_inputs, outputs)
    variant = set(variant)
    for node in order:
        if _no_hoist(node) or any(i in variant for i in node.inputs):
            variant.update(node.outputs)
    candidates = []
    seen = set()

    nonseq_set = set(nonseq_inputs)

    def consider(var):
        if var in variant or var.owner is None or isinstance(var, Constant) or var in seen:
            return
        seen.add(var)
        # Work on constants alone stays inside, where constant folding removes it.
        if any(v in nonseq_set for v in graph_inputs([var])):
            candidates.append(var)

    for node in order:
        if node.outputs[0] in variant:
            for inp in node.inputs:
                consider(inp)
    for out in outputs:
        consider(out)
    if not candidates:
        return outputs, nonseqs
    to_outer = {n.placeholder: n.outer for n in nonseqs}
    outer_exprs = clone_replace(candidates, to_outer) if to_outer else list(candidates)
    replace, nonseqs = {}, list(nonseqs)
    for var, expr in zip(candidates, outer_exprs):
        placeholder = _placeholder_for(var)
        replace[var] = placeholder
        nonseqs.append(NonSequence(expr, placeholder, "a loop-invariant value computed "
                                   "before the loop"))
    return clone_replace(outputs, replace), nonseqs


def _used_nonseqs(outputs, nonseqs):
    used = set(graph_inputs(outputs))
    return [n for n in nonseqs if n.placeholder in used]


ScanEntries = namedtuple("ScanEntries", "sequences recurrences mapped states nonseqs cond")


def scan_entries(node, keep_rec=None, keep_nitsot=None):
    """A Scan node's inputs and outputs by role, as ``build_scan`` takes them
    (only the recurrences ``keep_rec`` and mapped outputs ``keep_nitsot`` when
    given)."""
    op, info = node.op, node.op.info
    ins, outs = op.inner_inputs, op.inner_outputs
    keep_rec = range(info.n_rec) if keep_rec is None else keep_rec
    keep_nitsot = range(info.n_nitsot) if keep_nitsot is None else keep_nitsot
    return ScanEntries(
        [Sequence(node.inputs[info.outer_seq(i)], ins[info.inner_seq(i)], info.seq_reverse[i],
                  op.label("seq", i)) for i in range(info.n_seqs)],
        [Recurrence(node.inputs[info.outer_rec(k)], info.rec_taps[k],
                    [ins[i] for i in info.inner_taps(k)], outs[info.inner_out_rec(k)],
                    info.rec_keep[k], op.label("rec", k)) for k in keep_rec],
        [Mapped(outs[info.inner_out_nitsot(j)], info.nitsot_reverse[j], op.label("nitsot", j),
                info.nitsot_keep[j]) for j in keep_nitsot],
        [State(node.inputs[info.outer_state(s)], ins[info.inner_state(s)],
               outs[info.inner_out_state(s)], op.label("state", s))
         for s in range(info.n_states)],
        [NonSequence(node.inputs[info.outer_nonseq(m)], ins[info.inner_nonseq(m)],
                     op.label("nonseq", m)) for m in range(info.n_nonseqs)],
        outs[info.inner_out_cond] if info.as_while else None)


def _outputs_mapping(node, res, keep_rec, keep_nitsot, offsets=(0, 0, 0)):
    info = node.op.info
    rec0, nit0, st0 = offsets
    mapping = {}
    for new_k, k in enumerate(keep_rec):
        mapping[node.outputs[info.out_rec(k)]] = res.rec[rec0 + new_k]
    for new_j, j in enumerate(keep_nitsot):
        mapping[node.outputs[info.out_nitsot(j)]] = res.nitsot[nit0 + new_j]
    for s in range(info.n_states):
        mapping[node.outputs[info.out_state(s)]] = res.states[st0 + s]
        mapping[node.outputs[info.out_state_trace(s)]] = res.state_traces[st0 + s]
    return mapping


def rebuild_scan(node, keep_rec, keep_nitsot):
    """A Scan node like ``node`` with only the recurrences ``keep_rec`` and the
    mapped outputs ``keep_nitsot`` (index lists); returns ``(new node,
    {old output: new output})``.  The recurrences kept must not read the taps of
    those dropped (the caller keeps whatever the kept outputs depend on)."""
    op, info = node.op, node.op.info
    e = scan_entries(node, keep_rec, keep_nitsot)
    res = build_scan(node.inputs[0], e.sequences, e.recurrences, e.mapped, e.states, e.nonseqs,
                     cond=e.cond, truncate_gradient=info.truncate_gradient, name=op.name,
                     mode=op.mode, profile=op.profile, defined_at=op.defined_at, hoist=False)
    res.node.tag.trace = node.tag.trace
    return res.node, _outputs_mapping(node, res, keep_rec, keep_nitsot)


def merge_scans(a, b):
    """One Scan node running the steps of ``a`` and ``b`` (same ``n_steps``, no
    stop condition, neither using the other's outputs) in one loop; returns
    ``(new node, {old output: new output})``.  A sequence or non-sequence both
    read is read once."""
    ea, eb = scan_entries(a), scan_entries(b)
    # Errors name the merged loop by a's line: b's entries say where b was built.
    where_b = f" of {b.op.where()}"
    eb = ScanEntries(*[[e._replace(label=e.label + where_b) for e in group]
                       for group in eb[:5]], eb.cond)
    # b's step graph gets inputs of its own (a and b may share a step graph).
    fresh = {v: _placeholder_for(v) for v in b.op.inner_inputs}
    shared_seq = {(s.outer, s.reverse): s.placeholder for s in ea.sequences}
    shared_ns = {n.outer: n.placeholder for n in ea.nonseqs}
    sequences, nonseqs = list(ea.sequences), list(ea.nonseqs)
    for s in eb.sequences:
        if (s.outer, s.reverse) in shared_seq:
            fresh[s.placeholder] = shared_seq[(s.outer, s.reverse)]
        else:
            sequences.append(s._replace(placeholder=fresh[s.placeholder]))
    for n in eb.nonseqs:
        if n.outer in shared_ns:
            fresh[n.placeholder] = shared_ns[n.outer]
        else:
            nonseqs.append(n._replace(placeholder=fresh[n.placeholder]))
    b_outs = clone_replace([r.output for r in eb.recurrences] + [m.output for m in eb.mapped] +
                           [s.output for s in eb.states], fresh)
    it = iter(b_outs)
    recurrences = ea.recurrences + [r._replace(placeholders=[fresh[p] for p in r.placeholders],
                                               output=next(it)) for r in eb.recurrences]
    mapped = ea.mapped + [m._replace(output=next(it)) for m in eb.mapped]
    states = ea.states + [s._replace(placeholder=fresh[s.placeholder], output=next(it))
                          for s in eb.states]
    names = [op.name or "scan_fn" for op in (a.op, b.op)]
    res = build_scan(a.inputs[0], sequences, recurrences, mapped, states, nonseqs,
                     truncate_gradient=a.op.info.truncate_gradient, name="&".join(names),
                     mode=a.op.mode, profile=a.op.profile, defined_at=a.op.defined_at,
                     hoist=False)
    res.node.tag.trace = a.tag.trace
    ia, ib = a.op.info, b.op.info
    mapping = _outputs_mapping(a, res, range(ia.n_rec), range(ia.n_nitsot))
    mapping.update(_outputs_mapping(b, res, range(ib.n_rec), range(ib.n_nitsot),
                                    (ia.n_rec, ia.n_nitsot, ia.n_states)))
    return res.node, mapping
