"""scan_checkpoints: a loop whose gradient recomputes instead of storing every step.

The steps are cut into chunks of ``save_every_N``.  An outer scan runs one
chunk per step with an inner scan and keeps only each chunk's last values;
the gradient of the outer scan replays each chunk (its inner scan) from the
stored chunk start and differentiates through it, so the memory of the
gradient is one value per chunk plus one chunk's history, for one extra
forward pass.
"""

from symgraph.scan.api import scan
from symgraph.scan.taps import as_list


def scan_checkpoints(fn, sequences=(), outputs_info=None, non_sequences=(),
                     name="checkpointscan_fn", n_steps=None, save_every_N=10, padding=True):
    """A scan that stores one value every ``save_every_N`` steps (Theano's
    ``scan_checkpoints``).

    Restrictions, as in Theano: sequences are plain variables of one length
    (``n_steps``, when given, is that length); outputs are fed back with tap
    -1 only or not at all; the result holds each output's value at the end of
    every chunk of ``save_every_N`` steps (its last entry is the last step's).
    ``padding=True`` pads the sequences with zeros to a whole number of
    chunks (the padding steps are not run); with ``padding=False`` their
    length must already be a multiple of ``save_every_N``.
    Returns ``(outputs, updates)`` as ``scan``.
    """
    from symgraph.ops.alloc import alloc, zeros
    from symgraph.ops.join import concatenate
    from symgraph.ops.math import cast, eq, switch
    from symgraph.ops.subtensor import set_subtensor
    from symgraph.tensor.basic import as_tensor_variable, constant

    if isinstance(save_every_N, bool) or not isinstance(save_every_N, int) or save_every_N < 1:
        raise ValueError(f"scan_checkpoints: save_every_N must be a positive int, got "
                         f"{save_every_N!r}")
    if any(isinstance(s, dict) for s in as_list(sequences)):
        raise ValueError("scan_checkpoints: sequences cannot have taps")
    sequences = [as_tensor_variable(s) for s in as_list(sequences)]
    infos = as_list(outputs_info)
    for i, entry in enumerate(infos):
        if isinstance(entry, dict) and entry.get("taps", [-1]) not in ([-1], None):
            raise ValueError(f"scan_checkpoints: outputs_info[{i}] has taps "
                             f"{entry['taps']}; only tap -1 (or no feedback) is supported")
    non_sequences = as_list(non_sequences)
    if n_steps is None:
        if not sequences:
            raise ValueError("scan_checkpoints: give n_steps or a sequence")
        n_steps = sequences[0].shape[0]
    n_steps = cast(as_tensor_variable(n_steps), "int64")
    size = constant(save_every_N, dtype="int64")
    n_chunks = (n_steps + size - 1) // size
    last = n_steps - (n_chunks - 1) * size
    chunk_steps = set_subtensor(alloc(size, n_chunks)[-1], switch(eq(last, 0), size, last))

    chunked = []
    for s in sequences:
        if padding:
            missing = n_chunks * size - s.shape[0]
            pad = zeros([missing] + [s.shape[d] for d in range(1, s.ndim)], dtype=s.dtype)
            s = concatenate([s, pad])
        shape = [n_chunks, size] + [s.shape[d] for d in range(1, s.ndim)]
        chunked.append(s.reshape(shape, ndim=s.ndim + 1))
    n_seq, n_nonseq = len(chunked), len(non_sequences)
    inner_infos = [None if (e is None or (isinstance(e, dict) and e.get("initial") is None))
                   else (e["initial"] if isinstance(e, dict) else e) for e in infos]

    def outer_step(*args):
        seqs = list(args[:n_seq])
        steps = args[n_seq]
        rest = list(args[n_seq + 1:])
        prev = rest[:len(rest) - n_nonseq]
        nonseqs = rest[len(rest) - n_nonseq:]
        it = iter(prev)
        feed = [None if e is None else next(it) for e in inner_infos]
        outs, updates = scan(fn, sequences=seqs, outputs_info=feed or None,
                             non_sequences=nonseqs, n_steps=steps, name=f"{name}_chunk",
                             return_list=True)
        return [o[-1] for o in outs], updates

    return scan(outer_step, sequences=chunked + [chunk_steps],
                outputs_info=inner_infos or None, non_sequences=non_sequences, n_steps=n_chunks,
                name=name)
