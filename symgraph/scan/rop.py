"""Forward mode through a Scan node (``Scan.R_op``): the tangent loop.

The directional derivative of a loop is a loop: each fed-back output gets a
tangent that is fed back with the same taps, and the step computes the
outputs and their tangents together (the step graph's own R-operator, with
the tangents of the sequences, of the taps and of the non-sequences as its
directions).  One new Scan node runs both; its tangent outputs are the
R-operator's results.
"""

from symgraph.graph.basic import clone_replace
from symgraph.scan.builder import Mapped, NonSequence, Recurrence, Sequence, State, build_scan


def scan_rop(op, inputs, eval_points):
    """One tangent (or None) per output of the node."""
    from symgraph.gradient import Rop, _float_zeros_like, _is_float_dtype

    info = op.info
    deps = op.inner_dependencies()

    def is_float(var):
        return _is_float_dtype(getattr(var.type, "dtype", None))

    has = {}   # inner input index -> its tangent comes from outside or a recurrence
    for i in range(info.n_seqs):
        if eval_points[info.outer_seq(i)] is not None and is_float(op.inner_inputs[i]):
            has[info.inner_seq(i)] = True
    for m in range(info.n_nonseqs):
        idx = info.inner_nonseq(m)
        if eval_points[info.outer_nonseq(m)] is not None and is_float(op.inner_inputs[idx]):
            has[idx] = True
    tangent_rec = {k for k in range(info.n_rec)
                   if eval_points[info.outer_rec(k)] is not None and
                   is_float(op.inner_inputs[info.inner_taps(k)[0]])}
    changed = True
    while changed:
        changed = False
        for k in range(info.n_rec):
            if k in tangent_rec or not is_float(op.inner_inputs[info.inner_taps(k)[0]]):
                continue
            live = set(has) | {i for r in tangent_rec for i in info.inner_taps(r)}
            if deps[info.inner_out_rec(k)] & live:
                tangent_rec.add(k)
                changed = True
    live = set(has) | {i for r in tangent_rec for i in info.inner_taps(r)}
    tangent_nit = [j for j in range(info.n_nitsot)
                   if deps[info.inner_out_nitsot(j)] & live and
                   is_float(op.inner_outputs[info.inner_out_nitsot(j)])]
    if not tangent_rec and not tangent_nit:
        return [None] * len(op.make_node(*inputs).outputs)

    fresh = {v: _fresh(v) for v in op.inner_inputs}
    inner_out = clone_replace(list(op.inner_outputs), fresh)
    tangent_of = {}
    sequences = [Sequence(inputs[info.outer_seq(i)], fresh[op.inner_inputs[i]],
                          info.seq_reverse[i], op.label("seq", i)) for i in range(info.n_seqs)]
    for i in range(info.n_seqs):
        if i in has:
            ph = _fresh(op.inner_inputs[i])
            tangent_of[fresh[op.inner_inputs[i]]] = ph
            sequences.append(Sequence(eval_points[info.outer_seq(i)], ph, info.seq_reverse[i],
                                      f"tangent of {op.label('seq', i)}"))
    recurrences = []
    for k in range(info.n_rec):
        phs = [fresh[op.inner_inputs[i]] for i in info.inner_taps(k)]
        recurrences.append(Recurrence(inputs[info.outer_rec(k)], info.rec_taps[k], phs,
                                      inner_out[info.inner_out_rec(k)], info.rec_keep[k],
                                      op.label("rec", k)))
    tangent_phs = {}
    for k in sorted(tangent_rec):
        phs = [_fresh(op.inner_inputs[i]) for i in info.inner_taps(k)]
        tangent_phs[k] = phs
        for i, ph in zip(info.inner_taps(k), phs):
            tangent_of[fresh[op.inner_inputs[i]]] = ph
    states = [State(inputs[info.outer_state(s)], fresh[op.inner_inputs[info.inner_state(s)]],
                    inner_out[info.inner_out_state(s)], op.label("state", s))
              for s in range(info.n_states)]
    nonseqs = []
    for m in range(info.n_nonseqs):
        idx = info.inner_nonseq(m)
        nonseqs.append(NonSequence(inputs[info.outer_nonseq(m)], fresh[op.inner_inputs[idx]],
                                   op.label("nonseq", m)))
        if idx in has:
            ph = _fresh(op.inner_inputs[idx])
            tangent_of[fresh[op.inner_inputs[idx]]] = ph
            nonseqs.append(NonSequence(eval_points[info.outer_nonseq(m)], ph,
                                       f"tangent of {op.label('nonseq', m)}"))

    wrt = list(tangent_of)
    points = [tangent_of[w] for w in wrt]
    targets = [inner_out[info.inner_out_rec(k)] for k in sorted(tangent_rec)] + \
        [inner_out[info.inner_out_nitsot(j)] for j in tangent_nit]
    tangents = Rop(targets, wrt, points, disconnected_outputs="ignore",
                   return_disconnected="zero")
    first_tangent_rec = len(recurrences)
    for n, k in enumerate(sorted(tangent_rec)):
        init_point = eval_points[info.outer_rec(k)]
        init = inputs[info.outer_rec(k)]
        recurrences.append(Recurrence(
            _float_zeros_like(init) if init_point is None else init_point, info.rec_taps[k],
            tangent_phs[k], _cast(tangents[n], tangent_phs[k][0]), info.rec_keep[k],
            f"tangent of {op.label('rec', k)}"))
    mapped = [Mapped(inner_out[info.inner_out_nitsot(j)], info.nitsot_reverse[j],
                     op.label("nitsot", j), info.nitsot_keep[j]) for j in range(info.n_nitsot)]
    for n, j in enumerate(tangent_nit):
        mapped.append(Mapped(tangents[len(tangent_rec) + n], info.nitsot_reverse[j],
                             f"tangent of {op.label('nitsot', j)}", info.nitsot_keep[j]))
    cond = inner_out[info.inner_out_cond] if info.as_while else None
    res = build_scan(inputs[0], sequences, recurrences, mapped, states, nonseqs, cond=cond,
                     truncate_gradient=info.truncate_gradient,
                     name=f"rop_of_{op.name or 'scan_fn'}", mode=op.mode,
                     defined_at=op.defined_at)
    results = [None] * info.n_outer_outputs
    for n, k in enumerate(sorted(tangent_rec)):
        results[info.out_rec(k)] = res.rec[first_tangent_rec + n]
    for n, j in enumerate(tangent_nit):
        results[info.out_nitsot(j)] = res.nitsot[info.n_nitsot + n]
    return results


def _fresh(var):
    new = var.type()
    new.name = var.name
    return new


def _cast(g, like):
    from symgraph.ops.math import cast

    return g if g.type.dtype == like.type.dtype else cast(g, like.type.dtype)
