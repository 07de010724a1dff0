"""Reverse mode through a Scan node: backpropagation through time as another scan.

The gradient is a second loop that visits the forward steps from the last to
the first (only the last ``truncate_gradient`` of them when set).  At forward
step ``t`` it recomputes the step from the stored values (the step's slices of
the sequences, the recurrent buffers' entries that its taps read, the states'
values before the step) and takes the vector-Jacobian product of the step
with the adjoint of its outputs.  What it carries from step to step:

* per fed-back output with ``lag`` steps back, a ``(lag,) + shape`` window of
  pending adjoints: the contributions that later steps' taps sent to the
  entries that step ``t`` and the ``lag - 1`` steps before it wrote.  At step
  ``t`` the last entry of the window is complete (it gets the output's own
  gradient added) and the window shifts by one;
* per non-sequence, the sum of its gradient over the steps so far.

Both are kept as rings of one entry, so the gradient's memory is the stored
forward values plus one window per output, not a history of adjoints.  The
sequences' gradients are mapped outputs of the backward loop, written in the
order of the windows of the sequences it reads.  After the loop, the window
left over holds the adjoints of the initial values.
"""

import numpy as np

from symgraph.graph.basic import clone_replace
from symgraph.scan.builder import Mapped, NonSequence, Recurrence, Sequence, build_scan
from symgraph.scan.op import scan_apply


def scan_grad(op, inputs, outputs, output_grads):
    """``Scan.L_op``: one gradient term per outer input."""
    from symgraph.gradient import disconnected_grad_for

    info = op.info
    g_rec = [_real_grad(g, o) for g, o in zip(output_grads[:info.n_rec], outputs)]
    g_nit = [_real_grad(output_grads[info.out_nitsot(j)], outputs[info.out_nitsot(j)])
             for j in range(info.n_nitsot)]
    result = [disconnected_grad_for(x) for x in inputs]
    plan = _Plan(op, g_rec, g_nit)
    if not plan.outputs:
        return result

    if any(info.rec_keep) or any(info.nitsot_keep):
        # A ring keeps only the last entries; the gradient reads every step.
        full = scan_apply(op.with_info(rec_keep=(0,) * info.n_rec,
                                       nitsot_keep=(0,) * info.n_nitsot), inputs)
        g_rec = [None if g is None else _embed_last(g, full[info.out_rec(k)])
                 for k, g in enumerate(g_rec)]
        g_nit = [None if g is None else _embed_last(g, full[info.out_nitsot(j)])
                 for j, g in enumerate(g_nit)]
        outputs = full
    n = _steps_done(op, inputs, outputs)
    window = _Window(n, info.truncate_gradient)
    backward = _BackwardStep(op, plan, inputs, outputs, g_rec, g_nit, window)
    res = backward.build()
    grads, null = res if res is not None else ({"seq": {}, "rec": {}, "nonseq": {}}, None)
    if null is not None:
        return [null if not _is_int(x) and plan.connected_input(p) else result[p]
                for p, x in enumerate(inputs)]

    for i, g in grads["seq"].items():
        result[info.outer_seq(i)] = _embed_seq(inputs[info.outer_seq(i)], g, n, window,
                                               info.seq_reverse[i])
    for k in range(info.n_rec):
        lag, adj = info.lag(k), None
        if k in grads["rec"]:
            adj = window.initial_adjoint(grads["rec"][k], lag)
        if g_rec[k] is not None:
            # The buffer's first entries are the initial value itself (a
            # gradient of a gradient reads them through its tap windows).
            adj = g_rec[k][:lag] if adj is None else adj + g_rec[k][:lag]
        if adj is not None:
            result[info.outer_rec(k)] = _embed_init(inputs[info.outer_rec(k)], adj, lag)
    for m, total in grads["nonseq"].items():
        result[info.outer_nonseq(m)] = total
    return result


def _is_int(x):
    from symgraph.gradient import _is_discrete

    return not hasattr(x.type, "dtype") or _is_discrete(x)


def _is_float_var(x):
    dtype = getattr(x.type, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind == "f"


def _real_grad(g, out):
    """``g`` unless it is a placeholder or the zeros that ``grad`` sends for an
    output the cost does not use."""
    from symgraph.gradient import is_disconnected, is_null
    from symgraph.ops.elemwise import Elemwise

    if g is None or is_disconnected(g) or is_null(g) or not _is_float_var(out):
        return None
    node = g.owner
    if node is not None and isinstance(node.op, Elemwise) and \
            type(node.op.scalar_op).__name__ == "Second" and node.inputs[0] is out:
        fill = node.inputs[1]
        if getattr(fill, "data", None) is not None and not np.any(fill.data):
            return None
    return g


def _embed_last(g, full):
    """The gradient of a kept ring (the last entries) as one of the whole buffer."""
    from symgraph.ops.subtensor import inc_subtensor
    from symgraph.ops.subtensor import zeros_like_shape

    return inc_subtensor(zeros_like_shape(full)[full.shape[0] - g.shape[0]:], g)


def _steps_done(op, inputs, outputs):
    from symgraph.ops.math import cast

    info = op.info
    if not info.as_while:
        return cast(inputs[0], "int64")
    if info.n_rec:
        return cast(outputs[info.out_rec(0)].shape[0] - info.lag(0), "int64")
    if info.n_nitsot:
        return cast(outputs[info.out_nitsot(0)].shape[0], "int64")
    return cast(inputs[0], "int64")


class _Window:
    """The forward steps the gradient visits: ``[start, n)``, ``count`` of them."""

    def __init__(self, n, truncate):
        from symgraph.ops.math import minimum
        from symgraph.tensor.basic import constant

        self.n = n
        self.truncated = truncate != -1
        self.count = minimum(n, constant(truncate, dtype="int64")) if self.truncated else n
        self.start = n - self.count if self.truncated else constant(0, dtype="int64")

    def initial_adjoint(self, final, lag):
        """The adjoints of a recurrence's ``lag`` initial entries from the window
        the backward loop ended with (which covers entries ``start .. start+lag-1``
        of the buffer: the initial ones when nothing was truncated)."""
        if not self.truncated:
            return final
        from symgraph.ops.join import concatenate
        from symgraph.ops.math import minimum
        from symgraph.ops.alloc import zeros
        from symgraph.tensor.basic import constant

        skip = minimum(self.start, constant(lag, dtype="int64"))
        pad = zeros([skip] + [final.shape[d] for d in range(1, final.ndim)],
                    dtype=final.dtype)
        return concatenate([pad, final[:lag - skip]])


class _Plan:
    """Which outputs carry a gradient and which inner inputs it reaches."""

    def __init__(self, op, g_rec, g_nit):
        info = op.info
        deps = op.inner_dependencies()
        self.op = op
        relevant = {k for k, g in enumerate(g_rec) if g is not None}
        seeds = [info.inner_out_nitsot(j) for j, g in enumerate(g_nit) if g is not None]
        float_rec = {k for k in range(info.n_rec)
                     if _is_float_var(op.inner_inputs[info.inner_taps(k)[0]])}
        changed = True
        while changed:
            changed = False
            outs = seeds + [info.inner_out_rec(k) for k in relevant]
            for o in outs:
                for i in deps[o]:
                    owner = info.tap_owner(i)
                    if owner is not None and owner[0] in float_rec and owner[0] not in relevant:
                        relevant.add(owner[0])
                        changed = True
        self.rec = sorted(relevant & float_rec)
        self.nitsot = [j for j, g in enumerate(g_nit) if g is not None]
        self.outputs = [info.inner_out_rec(k) for k in self.rec] + seeds
        self.needed = set()
        for o in self.outputs:
            self.needed |= deps[o]

    def connected_input(self, outer_pos):
        info = self.op.info
        return any(info.inner_to_outer_input(i) == outer_pos for i in self.needed)


class _BackwardStep:
    """Builds the backward loop (see the module docstring)."""

    def __init__(self, op, plan, inputs, outputs, g_rec, g_nit, window):
        self.op, self.plan, self.inputs, self.outputs = op, plan, inputs, outputs
        self.g_rec, self.g_nit, self.window = g_rec, g_nit, window
        self.sequences, self.recurrences, self.mapped, self.nonseqs = [], [], [], []
        self.fwd_map = {}

    def _window_of(self, seq, reverse):
        """The part of a forward sequence that the visited steps read, and how
        the backward loop reads it (forward step ``n-1`` first)."""
        w = self.window
        if reverse:
            length = seq.shape[0]
            return seq[length - w.n:length - w.start], False
        return seq[w.start:w.n], True

    def build(self):
        from symgraph.ops.alloc import zeros
        from symgraph.ops.shape import shape_padleft
        from symgraph.ops.subtensor import zeros_like_shape
        from symgraph.tensor.type import TensorType

        op, info, plan = self.op, self.op.info, self.plan
        w = self.window
        seq_read = {}
        for i in range(info.n_seqs):
            inner = op.inner_inputs[info.inner_seq(i)]
            if info.inner_seq(i) not in plan.needed:
                continue
            outer, brev = self._window_of(self.inputs[info.outer_seq(i)], info.seq_reverse[i])
            seq_read[i] = brev
            self._sequence(inner, outer, brev, op.label("seq", i))
        for k in range(info.n_rec):
            buf, lag = self.outputs[info.out_rec(k)], info.lag(k)
            for idx, tap in zip(info.inner_taps(k), info.rec_taps[k]):
                if idx in plan.needed:
                    outer = buf[lag + tap + w.start:lag + tap + w.n]
                    self._sequence(op.inner_inputs[idx], outer, True,
                                   f"{op.label('rec', k)} (tap {tap})")
        for s in range(info.n_states):
            idx = info.inner_state(s)
            if idx in plan.needed:
                trace = self.outputs[info.out_state_trace(s)]
                self._sequence(op.inner_inputs[idx], trace, True, op.label("state", s))
        for m in range(info.n_nonseqs):
            idx = info.inner_nonseq(m)
            if idx in plan.needed:
                ph = _fresh(op.inner_inputs[idx])
                self.fwd_map[op.inner_inputs[idx]] = ph
                self.nonseqs.append(NonSequence(self.inputs[info.outer_nonseq(m)], ph,
                                                op.label("nonseq", m)))

        fwd = clone_replace([op.inner_outputs[o] for o in plan.outputs], self.fwd_map)
        fwd = dict(zip(plan.outputs, fwd))
        known = []
        carries = {}
        for k in plan.rec:
            elem = op.inner_inputs[info.inner_taps(k)[0]].type
            lag = info.lag(k)
            carry = TensorType(elem.dtype, shape=(lag,) + elem.shape)(f"pending_adjoint_{k}")
            carries[k] = carry
            adjoint = carry[lag - 1]
            if self.g_rec[k] is not None:
                g_ph = elem()
                self.sequences.append(Sequence(self.g_rec[k][lag + w.start:lag + w.n], g_ph,
                                               True, f"gradient of {op.label('rec', k)}"))
                adjoint = adjoint + g_ph
            known.append((fwd[info.inner_out_rec(k)], adjoint))
        for j in plan.nitsot:
            out = op.inner_outputs[info.inner_out_nitsot(j)]
            g_ph = TensorType(out.type.dtype, shape=out.type.shape)()
            # The gradient of a mapped output is read like a sequence written
            # in the same direction.
            outer, brev = self._window_of(self.g_nit[j], info.nitsot_reverse[j])
            self.sequences.append(Sequence(outer, g_ph, brev,
                                           f"gradient of {op.label('nitsot', j)}"))
            known.append((fwd[info.inner_out_nitsot(j)], g_ph))

        wrt, roles = [], []
        for i in sorted(seq_read):
            ph = self.fwd_map[op.inner_inputs[info.inner_seq(i)]]
            if _is_float_var(ph):
                wrt.append(ph)
                roles.append(("seq", i, None))
        for k in plan.rec:
            for idx, tap in zip(info.inner_taps(k), info.rec_taps[k]):
                if idx in plan.needed:
                    wrt.append(self.fwd_map[op.inner_inputs[idx]])
                    roles.append(("tap", k, tap))
        for m in range(info.n_nonseqs):
            inner = op.inner_inputs[info.inner_nonseq(m)]
            if inner in self.fwd_map and _is_float_var(inner):
                wrt.append(self.fwd_map[inner])
                roles.append(("nonseq", m, None))
        if not wrt:
            return None
        grads = _vjp(known, wrt)
        null = next((g for g in grads if _is_null(g)), None)
        if null is not None:
            return None, null
        grads = self._read_stored_outputs(fwd, grads)

        tap_grads = {}
        seq_out, nonseq_out = {}, {}
        for (role, a, b), g in zip(roles, grads):
            if role == "tap":
                tap_grads.setdefault(a, []).append((b, g))
            elif role == "seq":
                seq_out[a] = len(self.mapped)
                self.mapped.append(Mapped(_cast(g, self.fwd_map[
                    op.inner_inputs[info.inner_seq(a)]]), seq_read[a],
                    f"gradient of {op.label('seq', a)}"))
            else:
                inner = op.inner_inputs[info.inner_nonseq(a)]
                total = inner.type(f"gradient_sum_{a}")
                nonseq_out[a] = len(self.recurrences)
                outer = self.inputs[info.outer_nonseq(a)]
                self.recurrences.append(Recurrence(
                    shape_padleft(zeros_like_shape(outer)), (-1,), [total],
                    _cast(total + g, total), 1, f"gradient of {op.label('nonseq', a)}"))
        rec_out = {}
        for k in plan.rec:
            carry, lag = carries[k], info.lag(k)
            new = _shifted(carry, lag, tap_grads.get(k, []))
            buf = self.outputs[info.out_rec(k)]
            init = zeros([1, lag] + [buf.shape[d] for d in range(1, buf.ndim)],
                         dtype=buf.dtype)
            rec_out[k] = len(self.recurrences)
            self.recurrences.append(Recurrence(init, (-1,), [carry], _cast(new, carry), 1,
                                               f"pending adjoints of {op.label('rec', k)}"))

        res = build_scan(w.count, self.sequences, self.recurrences, self.mapped, (),
                         self.nonseqs, name=f"grad_of_{op.name or 'scan_fn'}", mode=op.mode,
                         defined_at=op.defined_at)
        return {"seq": {i: res.nitsot[j] for i, j in seq_out.items()},
                "rec": {k: res.rec[j][-1] for k, j in rec_out.items()},
                "nonseq": {m: res.rec[j][-1] for m, j in nonseq_out.items()}}, None

    def _read_stored_outputs(self, fwd, grads):
        """Where the step's gradient uses the step's own outputs (tanh's
        derivative uses tanh), read them from the forward loop's results
        instead of recomputing them: the replayed forward work that only fed
        those outputs disappears from the backward step."""
        from symgraph.graph.basic import ancestors

        op, info, w = self.op, self.op.info, self.window
        used = set(ancestors(grads))
        replace = {}
        for k in self.plan.rec:
            out = fwd[info.inner_out_rec(k)]
            if out in used and out.owner is not None:
                buf, lag = self.outputs[info.out_rec(k)], info.lag(k)
                ph = _fresh(out)
                replace[out] = ph
                self.sequences.append(Sequence(buf[lag + w.start:lag + w.n], ph, True,
                                               f"stored {op.label('rec', k)}"))
        for j in self.plan.nitsot:
            out = fwd[info.inner_out_nitsot(j)]
            if out in used and out.owner is not None:
                ph = _fresh(out)
                replace[out] = ph
                outer, brev = self._window_of(self.outputs[info.out_nitsot(j)],
                                              info.nitsot_reverse[j])
                self.sequences.append(Sequence(outer, ph, brev,
                                               f"stored {op.label('nitsot', j)}"))
        return clone_replace(grads, replace) if replace else grads

    def _sequence(self, inner, outer, brev, label):
        ph = _fresh(inner)
        self.fwd_map[inner] = ph
        self.sequences.append(Sequence(outer, ph, brev, label))


def _fresh(var):
    new = var.type()
    new.name = var.name
    return new


def _is_null(g):
    from symgraph.gradient import is_null

    return is_null(g)


def _cast(g, like):
    from symgraph.ops.math import cast

    return g if g.type.dtype == like.type.dtype else cast(g, like.type.dtype)


def _vjp(known, wrt):
    """The step's vector-Jacobian product: adjoints of ``wrt`` given those of
    the outputs (summed where an output appears twice or feeds another)."""
    from symgraph.autodiff.grad_ops import seed_identity
    from symgraph.gradient import grad

    seeds = {}
    for var, adjoint in known:
        seeds[seed_identity(var)] = _cast(adjoint, var) if hasattr(var.type, "dtype") else adjoint
    return grad(None, wrt, known_grads=seeds, disconnected_inputs="ignore",
                return_disconnected="zero", null_gradients="return")


def _shifted(carry, lag, tap_grads):
    """The pending-adjoint window for the step before: entries move one step
    later (the oldest slot is new) and this step's tap adjoints are added."""
    from symgraph.ops.join import concatenate
    from symgraph.ops.shape import shape_padleft
    from symgraph.ops.subtensor import inc_subtensor
    from symgraph.ops.math import zeros_like

    if lag == 1:
        if not tap_grads:
            return zeros_like(carry)
        ((_, g),) = tap_grads
        return shape_padleft(_cast(g, carry))
    new = concatenate([zeros_like(carry[:1]), carry[:-1]])
    for tap, g in tap_grads:
        new = inc_subtensor(new[lag + tap], _cast(g, carry))
    return new


def _embed_seq(seq, g, n, window, reverse):
    """The gradient of a whole outer sequence from that of the part the steps read."""
    from symgraph.ops.subtensor import inc_subtensor, zeros_like_shape

    zeros = zeros_like_shape(seq)
    if reverse:
        length = seq.shape[0]
        return inc_subtensor(zeros[length - n:length - window.start], _cast(g, seq))
    return inc_subtensor(zeros[window.start:n], _cast(g, seq))


def _embed_init(init, adj, lag):
    """The gradient of an initial buffer, of which the loop reads the first ``lag`` entries."""
    from symgraph.ops.subtensor import inc_subtensor, zeros_like_shape

    if init.type.shape[0] == lag:
        return _cast(adj, init)
    return inc_subtensor(zeros_like_shape(init)[:lag], _cast(adj, init))


__all__ = ["scan_grad"]
