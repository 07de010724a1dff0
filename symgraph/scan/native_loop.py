"""A Scan node's loop run in C, when its step function is all native.

``Scan.perform`` runs the loop through the runtime's ``Loop`` (``c_src/runtime.c``)
when the compiled step function is a native program without Python steps: the
step's kernels are called one after the other for every step in C, reading
their inputs in place (a sequence's entry, a recurrent output's tap, a
non-sequence), computing into buffers allocated once, and writing each
output at its place in the result.  Python only prepares the result arrays
before the loop and cuts them after it, as the Python loop (``scan/loop.py``)
does, so both give the same outputs and errors.

A step made only of scalar element-wise arithmetic (``x = a * x + 1``) is
compiled further into one C function for the whole loop
(``backends/cpu/scan/scalar_loop.py``), which the Loop calls instead of the
step's kernels (except while profiling, which times each kernel).

The Python loop stays for everything else: a step with a node that has no
native code, a step with device values, random generators carried from step
to step, DebugMode and
NanGuardMode (whose checks are Python steps), the Python linker.
"""

import numpy as np

from symgraph.scan.loop import _RecBuffer, loop_inputs, mapped_shape_error, step_error, \
    store_results

__all__ = ["enabled", "native_loop", "NativeScan"]

#: Run all-native steps in C (False: always the Python loop, to compare both).
enabled = True

# The roles of the step's inputs and outputs (runtime.c's LOOP_* values).
_SEQ, _TAP, _NONSEQ = 0, 1, 2
_REC, _MAPPED, _COND = 0, 1, 2


def native_loop(op, inner):
    """A NativeScan running ``inner`` (the compiled step function of ``op``)
    through a runtime ``Loop``, or None when the step needs Python (see the
    module docstring)."""
    native = getattr(inner, "native", None)
    info = op.info
    if native is None or native.python_nodes or len(native.step_nodes) != len(native.order):
        return None
    fgraph = inner.maker.fgraph
    if info.n_states or len(fgraph.inputs) != info.n_inner_inputs or \
            len(fgraph.outputs) != info.n_inner_outputs:
        return None
    if not all(_is_array(v) for v in list(fgraph.inputs) + list(fgraph.outputs)):
        return None
    # The Loop keeps its buffers and constants in host memory and describes
    # them as ndarrays: a step with device values (device=cuda) runs through
    # the Python loop, whose steps allocate with their device's allocator.
    if not all(_is_array(v) for node in native.order for v in node.inputs + node.outputs):
        return None
    roles = [None] * info.n_inner_inputs
    for i in range(info.n_seqs):
        roles[info.inner_seq(i)] = (_SEQ, i, 0)
    for k in range(info.n_rec):
        lag = info.lag(k)
        for tap, index in zip(info.rec_taps[k], info.inner_taps(k)):
            roles[index] = (_TAP, k, lag + tap)
    for m in range(info.n_nonseqs):
        roles[info.inner_nonseq(m)] = (_NONSEQ, m, 0)
    outputs = [(_REC, k) for k in range(info.n_rec)]
    outputs += [(_MAPPED, j) for j in range(info.n_nitsot)]
    if info.as_while:
        outputs.append((_COND, 0))
    statics = tuple(all(_static(v) for v in node.inputs + node.outputs)
                    for node in native.step_nodes)
    from symgraph.backends.cpu.scan.scalar_loop import scalar_loop_kernel
    from symgraph.backends.native.linker import resolve_function
    from symgraph.backends.native.runtime import load_runtime

    loop = load_runtime().Loop(native.program, tuple(roles), tuple(outputs), statics)
    # A step of scalar arithmetic runs as one compiled C loop (no kernel calls).
    kernel = scalar_loop_kernel(info, fgraph, native.order)
    found = resolve_function(kernel, "loop") if kernel is not None else None
    if found is not None:
        loop.set_compiled(*found)
    scan = NativeScan(op, loop, inner)
    scan.compiled = found is not None
    return scan


def _is_array(var):
    return var.type.__class__.__name__ == "TensorType"


def _static(var):
    """True when ``var``'s shape is known when the graph is built."""
    shape = getattr(var.type, "shape", None)
    return shape is not None and all(s is not None for s in shape)


class NativeScan:
    """A Scan node's loop through a runtime ``Loop``: what each call needs of
    the node's layout, worked out once (the per-call Python work is the loop's
    fixed cost: a loop of 10,000 scalar steps takes about 20 us in C)."""

    def __init__(self, op, loop, inner):
        info = op.info
        self.op, self.loop, self.inner = op, loop, inner
        self.seqs = [(info.outer_seq(i), info.seq_reverse[i]) for i in range(info.n_seqs)]
        self.recs = [(info.outer_rec(k), info.lag(k), info.rec_keep[k], info.out_rec(k))
                     for k in range(info.n_rec)]
        self.nonseqs = [info.outer_nonseq(m) for m in range(info.n_nonseqs)]
        self.mapped = tuple((info.nitsot_reverse[j], info.nitsot_keep[j])
                            for j in range(info.n_nitsot))
        self.mapped_slice = slice(info.n_rec, info.n_rec + info.n_nitsot)
        #: the whole loop is one compiled C function (a scalar step)
        self.compiled = False

    def run(self, node, inputs, output_storage):
        """Run ``node`` on ``inputs``; returns the steps run and the seconds
        its kernels took (measured only while the step function is profiled),
        or None, having run nothing, when a value is not an array the step's
        kernels take as it is (another dtype, unaligned: the Python loop
        converts it)."""
        op = self.op
        n_steps, seqs = loop_inputs(op, inputs)
        seqs = tuple(inputs[i][::-1] if rev else inputs[i] for i, rev in self.seqs)
        rec_args = []
        for k, (index, lag, keep, _) in enumerate(self.recs):
            init = np.asarray(inputs[index])
            if init.shape[0] < lag:
                _RecBuffer(op, k, init, n_steps)   # raises the Python loop's error
            # A ring is one entry longer than the taps: step t writes its entry
            # while it still reads them.
            size = lag + n_steps if keep == 0 else max(keep, lag + 1)
            buf = np.empty((size,) + init.shape[1:], dtype=init.dtype)
            buf[:lag] = init[:lag]
            rec_args.append((buf, size if keep else 0, lag))
        nonseqs = tuple(np.asarray(inputs[i]) for i in self.nonseqs)
        try:
            done, arrays, seconds = self.loop.run(n_steps, seqs, tuple(rec_args), nonseqs,
                                                  self.mapped)
        except TypeError as exc:
            if str(exc).startswith("Loop.run:"):
                return None
            raise _explain(op, self.loop, self.inner, n_steps, inputs, exc) from exc
        except Exception as exc:  # noqa: BLE001 - re-raised as the Python loop would
            raise _explain(op, self.loop, self.inner, n_steps, inputs, exc) from exc
        for (_, lag, keep, out), (buf, size, _) in zip(self.recs, rec_args):
            output_storage[out][0] = _rec_result(buf, lag, keep, size, done)
        if self.mapped:
            store_results(op, node, output_storage, [], list(arrays[self.mapped_slice]), done,
                          n_steps)
        return done, seconds


def _rec_result(buf, lag, keep, size, done):
    """A recurrent output's value: the history up to the last step run, or the
    ring's last ``keep`` entries in step order (slices of ``buf``, which is
    new at every call, when they do not wrap around)."""
    end = lag + done
    if not keep:
        return buf if end == len(buf) else buf[:end].copy()
    count = min(keep, end)
    first = (end - count) % size
    if first + count <= size:
        return buf[first:first + count]
    return buf[[p % size for p in range(end - count, end)]]


def _explain(op, loop, inner, n_steps, inputs, exc):
    """The error the Python loop would raise for ``exc``."""
    from symgraph.backends.native.runtime import load_runtime

    info = op.info
    if isinstance(exc, load_runtime().LoopShapeError):
        t, out, shape, expected = exc.args
        if out < info.n_rec:
            rec = _RecBuffer(op, out, inputs[info.outer_rec(out)], 0)
            try:
                rec.bad_shape(t, shape)
            except ValueError as err:
                return err
        return mapped_shape_error(op, out - info.n_rec, t, shape, expected)
    failed = loop.failed()
    if failed is None:
        return exc
    t, index, values = failed
    node = inner.native.step_nodes[index]
    from symgraph.compile.errors import reraise_with_node

    try:
        reraise_with_node(node, list(values), exc)
    except Exception as named:  # noqa: BLE001 - the inner function's own wording
        return step_error(op, t, n_steps, named)
    return exc
