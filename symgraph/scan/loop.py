"""The loop that runs a Scan node: buffers allocated once, one inner call per step.

``run_scan`` is the body of ``Scan.perform``.  The step graph was compiled once
into a symgraph function (``inner``); each step gathers its arguments (views
into the sequences and into the recurrent buffers, the states, the
non-sequences), calls it and writes its results into the output buffers:

* a recurrent output whose whole history is returned lives in one array of
  ``lag + n_steps`` entries (the initial entries first), which is also where its
  taps are read from;
* a recurrent output of which only the last entries are used (``rec_keep``)
  lives in a ring of ``max(keep, lag)`` entries: exactly what its taps need;
* a mapped output gets its ``(n_steps,) + shape`` array after step 0, when its
  shape is known (a ring of ``keep`` entries when only its last steps are read).

Errors say which step failed, which argument of ``scan`` is at fault and where
the scan was built.
"""

import time

import numpy as np


class ScanProfile:
    """Timing of a profiled scan node (``scan(..., profile=True)``), kept in
    ``node.tag.scan_profile``: calls, steps, the time in the loop and in the
    step function, hence the per-step overhead; ``summary()`` adds the step
    function's own per-op profile."""

    def __init__(self, op, inner):
        self.op, self.inner = op, inner
        self.calls = self.steps = 0
        self.loop_time = self.step_time = 0.0
        self.native = False

    def run(self, node, inputs, output_storage, loop=None):
        """Run the node, timed: through ``loop`` (a NativeScan, whose runtime
        Loop times the step's kernels itself) when given, else the Python loop."""
        if loop is not None:
            start = time.perf_counter()
            ran = loop.run(node, inputs, output_storage)   # None: the Python loop's work
            if ran is not None:
                self.loop_time += time.perf_counter() - start
                self.calls += 1
                self.native = True
                self.steps += ran[0]
                self.step_time += ran[1]
                return

        def timed(*args):
            start = time.perf_counter()
            try:
                return self.inner(*args)
            finally:
                self.step_time += time.perf_counter() - start
                self.steps += 1

        start = time.perf_counter()
        try:
            run_scan(self.op, node, inputs, output_storage, timed)
        finally:
            self.loop_time += time.perf_counter() - start
            self.calls += 1

    def overhead_per_step(self):
        """Seconds per step spent outside the step function (the loop's own cost;
        for the native loop, outside its kernels)."""
        return (self.loop_time - self.step_time) / self.steps if self.steps else 0.0

    def summary(self, file=None):
        """Print (or return with file='str') the loop's timing and the step's profile."""
        how = "in C (native loop)" if self.native else "in Python around the step function"
        lines = [f"Scan profile: {self.op.where()}, looping {how}",
                 f"  calls: {self.calls}, steps: {self.steps}, time in the loop: "
                 f"{self.loop_time:.6f}s, in the step function: {self.step_time:.6f}s",
                 f"  overhead per step: {self.overhead_per_step() * 1e6:.2f} us"]
        if self.inner.profile is not None:
            lines.append(self.inner.profile.summary(file="str"))
        text = "\n".join(lines)
        if file == "str":
            return text
        print(text, file=file)
        return None


def run_scan(op, node, inputs, output_storage, inner):
    """Run ``node`` (a Scan) on ``inputs``, writing ``output_storage``."""
    info = op.info
    n_steps, seqs = loop_inputs(op, inputs)
    recs = [_RecBuffer(op, k, inputs[info.outer_rec(k)], n_steps) for k in range(info.n_rec)]
    states = [inputs[info.outer_state(s)] for s in range(info.n_states)]
    traces = [[] for _ in range(info.n_states)]
    nonseqs = [inputs[info.outer_nonseq(m)] for m in range(info.n_nonseqs)]
    mapped = [None] * info.n_nitsot
    # One getter per sequence slice and tap, built once: the loop body below
    # is the per-step overhead.
    getters = [_reader(seq, rev) for seq, rev in zip(seqs, info.seq_reverse)]
    for rec in recs:
        getters.extend(rec.tap_readers())
    writers = [rec.write for rec in recs]
    n_rec, n_nitsot, n_states = info.n_rec, info.n_nitsot, info.n_states
    cond_at = info.inner_out_cond

    done = n_steps
    for t in range(n_steps):
        args = [get(t) for get in getters]
        if n_states:
            args.extend(states)
        args.extend(nonseqs)
        try:
            outs = inner(*args)
        except Exception as exc:  # noqa: BLE001 - re-raised as its own class
            raise step_error(op, t, n_steps, exc) from exc
        for k, write in enumerate(writers):
            write(t, outs[k])
        for j in range(n_nitsot):
            value = outs[n_rec + j]
            if mapped[j] is None:
                mapped[j] = _new_mapped(op, j, value, n_steps)
            _write_mapped(op, j, mapped[j], t, n_steps, value, info.nitsot_reverse[j],
                          info.nitsot_keep[j])
        for s in range(n_states):
            traces[s].append(states[s])
            states[s] = outs[n_rec + n_nitsot + s]
        if cond_at is not None and outs[cond_at]:
            done = t + 1
            break

    store_results(op, node, output_storage, recs, mapped, done, n_steps)
    for s in range(n_states):
        output_storage[info.out_state(s)][0] = states[s]
        output_storage[info.out_state_trace(s)][0] = traces[s]


def loop_inputs(op, inputs):
    """``(n_steps, sequences)`` of a call, checked: no negative step count, no
    sequence shorter than the loop."""
    info = op.info
    n_steps = _n_steps(op, inputs[0])
    seqs = [inputs[info.outer_seq(i)] for i in range(info.n_seqs)]
    for i, seq in enumerate(seqs):
        if len(seq) < n_steps:
            raise ValueError(
                f"{op.where()}: {op.label('seq', i)} has {len(seq)} entries, but the loop "
                f"runs {n_steps} steps (n_steps); give a longer sequence or fewer steps")
    return n_steps, seqs


def store_results(op, node, output_storage, recs, mapped, done, n_steps):
    """The recurrent and mapped outputs of a loop that ran ``done`` steps of
    ``n_steps``: histories cut to the steps run, rings' entries in step order."""
    info = op.info
    for k, rec in enumerate(recs):
        output_storage[info.out_rec(k)][0] = rec.result(done)
    for j in range(info.n_nitsot):
        out, keep = mapped[j], info.nitsot_keep[j]
        if out is None:
            out = _empty_mapped(node.outputs[info.out_nitsot(j)])
        elif keep:
            # The ring's entries in step order: the last min(keep, done) steps.
            out = out[[t % len(out) for t in range(max(done - keep, 0), done)]]
        elif done < n_steps:
            out = out[:done].copy()
        output_storage[info.out_nitsot(j)][0] = out


def _n_steps(op, value):
    n = int(np.asarray(value))
    if n < 0:
        # Theano 1.0 refuses negative step counts too (older versions went backwards).
        raise IndexError(f"{op.where()}: asked to run {n} steps; n_steps must be >= 0 "
                         f"(use go_backwards=True to walk the sequences from their end)")
    return n


def _reader(seq, reverse):
    """A function of ``t`` giving the step's slice (a view, 0-d included)."""
    if isinstance(seq, list):   # a state trace: the values a generator took
        last = len(seq) - 1
        return (lambda t: seq[last - t]) if reverse else (lambda t: seq[t])
    if reverse:
        last = len(seq) - 1
        return lambda t: seq[last - t, ...]
    return lambda t: seq[t, ...]


class _RecBuffer:
    """The storage of one recurrent output: whole history or ring."""

    def __init__(self, op, k, init, n_steps):
        info = op.info
        self.op, self.k = op, k
        self.taps = info.rec_taps[k]
        self.lag = lag = info.lag(k)
        init = np.asarray(init)
        if init.shape[0] < lag:
            raise ValueError(
                f"{op.where()}: {op.label('rec', k)} reaches {lag} step(s) back (taps "
                f"{list(self.taps)}), but its initial value has only {init.shape[0]} "
                f"entr{'y' if init.shape[0] == 1 else 'ies'} along its first axis; the "
                f"initial value must have shape ({lag}, ...) (entry 0 is step -{lag})")
        self.elem_shape = init.shape[1:]
        keep = info.rec_keep[k]
        self.keep = keep
        self.size = lag + n_steps if keep == 0 else max(keep, lag)
        self.ring = keep != 0
        self.buf = np.empty((self.size,) + self.elem_shape, dtype=init.dtype)
        # The initial entries sit at positions 0..lag-1, which a ring of
        # size >= lag holds at the same indices.
        self.buf[:lag] = init[:lag]

    def tap_readers(self):
        """One function of ``t`` per tap, giving a view of the entry it reads."""
        buf, size = self.buf, self.size
        offsets = [self.lag + tap for tap in self.taps]
        if self.ring:
            return [lambda t, o=o: buf[(o + t) % size, ...] for o in offsets]
        return [lambda t, o=o: buf[o + t, ...] for o in offsets]

    def write(self, t, value):
        if getattr(value, "shape", None) != self.elem_shape:
            self.bad_shape(t, np.shape(value))
        pos = self.lag + t
        self.buf[pos % self.size if self.ring else pos] = value

    def bad_shape(self, t, shape):
        if shape != self.elem_shape:
            raise ValueError(
                f"{self.op.where()}: at step {t}, the step function returned shape "
                f"{shape} for {self.op.label('rec', self.k)}, but its initial "
                f"value gives each step the shape {self.elem_shape}; the output of the "
                f"step function must keep the initial state's shape")

    def result(self, done):
        end = self.lag + done
        if not self.ring:
            return self.buf if end == self.size else self.buf[:end].copy()
        count = min(self.keep, end)
        order = [(p % self.size) for p in range(end - count, end)]
        return self.buf[order]


def _new_mapped(op, j, value, n_steps):
    value = np.asarray(value)
    keep = op.info.nitsot_keep[j]
    size = min(keep, n_steps) if keep else n_steps
    return np.empty((size,) + value.shape, dtype=value.dtype)


def _write_mapped(op, j, out, t, n_steps, value, reverse, keep):
    value = np.asarray(value)
    if value.shape != out.shape[1:]:
        raise mapped_shape_error(op, j, t, value.shape, out.shape[1:])
    if keep:
        out[t % len(out)] = value
    else:
        out[n_steps - 1 - t if reverse else t] = value


def mapped_shape_error(op, j, t, shape, first):
    """The error for a mapped output whose step ``t`` has another shape than step 0's."""
    return ValueError(
        f"{op.where()}: at step {t}, the step function returned shape {shape} "
        f"for {op.label('nitsot', j)}, but step 0 returned shape {first}; "
        f"every step must return the same shape")


def _empty_mapped(var):
    """A zero-step trace: the step shape is what the graph knows statically
    (an unknown size counts as 0, since there is no step to measure)."""
    shape = (0,) + tuple(0 if s is None else s for s in var.type.shape[1:])
    return np.zeros(shape, dtype=var.type.dtype)


def step_error(op, t, n_steps, exc):
    """``exc`` as its own class, its message saying which step of which scan failed."""
    from symgraph.compile.errors import _rebuilt

    def message(type_name):
        head = f"{type_name}: " if type_name else ""
        return (f"{head}{op.where()} failed at step {t} (of {n_steps}) while running its "
                f"step function:\n{exc}")

    new = _rebuilt(exc, message)
    # Let the outer function add the Scan node's own description.
    new.__dict__.pop("__symgraph_node__", None)
    return new
