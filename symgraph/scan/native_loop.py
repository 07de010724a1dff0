"""A Scan node's loop run in C, when its step function is all native.

``Scan.perform`` runs the loop through the runtime's ``Loop`` (``c_src/runtime.c``)
when the compiled step function is a native program without Python steps: the
step's kernels are called one after the other for every step in C, reading
their inputs in place (a sequence's entry, a recurrent output's tap, a
non-sequence), computing into buffers allocated once, and writing each
output at its place in the result.  Python only prepares the result arrays
before the loop and cuts them after it, as the Python loop (``scan/loop.py``)
does, so both give the same outputs and errors.

The Python loop stays for everything else: a step with a node that has no
native code, random generators carried from step to step, DebugMode and
NanGuardMode (whose checks are Python steps), the Python linker.
"""

import numpy as np

from symgraph.scan.loop import _RecBuffer, loop_inputs, mapped_shape_error, step_error, \
    store_results

__all__ = ["enabled", "native_loop", "run_native_scan"]

#: Run all-native steps in C (False: always the Python loop, to compare both).
enabled = True

# The roles of the step's inputs and outputs (runtime.c's LOOP_* values).
_SEQ, _TAP, _NONSEQ = 0, 1, 2
_REC, _MAPPED, _COND = 0, 1, 2


def native_loop(op, inner):
    """A runtime ``Loop`` running ``inner`` (the compiled step function of
    ``op``) in C, or None when the step needs Python (see the module docstring)."""
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
    from symgraph.backends.native.runtime import load_runtime

    return load_runtime().Loop(native.program, tuple(roles), tuple(outputs), statics)


def _is_array(var):
    return var.type.__class__.__name__ == "TensorType"


def _static(var):
    """True when ``var``'s shape is known when the graph is built."""
    shape = getattr(var.type, "shape", None)
    return shape is not None and all(s is not None for s in shape)


def run_native_scan(op, node, inputs, output_storage, loop, inner):
    """Run ``node`` on ``inputs`` through ``loop``; returns the steps run and
    the seconds its kernels took (measured only while the step is profiled)."""
    info = op.info
    n_steps, seqs = loop_inputs(op, inputs)
    seqs = [seq[::-1] if rev else seq for seq, rev in zip(seqs, info.seq_reverse)]
    recs = [_RecBuffer(op, k, inputs[info.outer_rec(k)], n_steps, spare=1)
            for k in range(info.n_rec)]
    nonseqs = tuple(np.asarray(inputs[info.outer_nonseq(m)]) for m in range(info.n_nonseqs))
    rec_args = tuple((rec.buf, rec.size if rec.ring else 0, rec.lag) for rec in recs)
    mapped_args = tuple((info.nitsot_reverse[j], info.nitsot_keep[j])
                        for j in range(info.n_nitsot))
    try:
        done, arrays, seconds = loop.run(n_steps, tuple(seqs), rec_args, nonseqs, mapped_args)
    except Exception as exc:  # noqa: BLE001 - re-raised as the Python loop would
        raise _explain(op, loop, inner, n_steps, recs, exc) from exc
    mapped = list(arrays[info.n_rec:info.n_rec + info.n_nitsot])
    store_results(op, node, output_storage, recs, mapped, done, n_steps)
    return done, seconds


def _explain(op, loop, inner, n_steps, recs, exc):
    """The error the Python loop would raise for ``exc``."""
    from symgraph.backends.native.runtime import load_runtime

    info = op.info
    if isinstance(exc, load_runtime().LoopShapeError):
        t, out, shape, expected = exc.args
        if out < info.n_rec:
            try:
                recs[out].bad_shape(t, shape)
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
