"""Rewrites of Scan nodes.

``scan_remove_unused_outputs``: outputs that nothing reads are dropped with
the step's work that only they needed.

``scan_mapped_sequence``: a mapped output that is a sequence's slice is that
sequence (a map whose work was all computed before the loop needs no loop).

``scan_merge``: independent loops of the same number of steps run as one.

``scan_keep_last``: an output of which only the last entries are read
(``result[-1]`` of Theano's ``A**k`` example, the updates of shared variables,
``reduce``) is kept in a ring of exactly the entries its taps and its readers
need, instead of one entry per step.  The memory of such a loop no longer
grows with the number of steps.
"""

from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter, node_rewriter
from symgraph.scan.op import Scan


def _negative_index(node):
    """``c`` when ``node`` is ``x[c]`` for a constant ``c < 0``, else None."""
    from symgraph.ops.subtensor import Subtensor

    if not isinstance(node.op, Subtensor) or len(node.inputs) != 1:
        return None
    idx = node.op.idx_list
    if len(idx) == 1 and isinstance(idx[0], int) and not isinstance(idx[0], bool) and idx[0] < 0:
        return idx[0]
    return None


def _drops_initial(node, lag):
    """True when ``node`` is ``x[lag:]`` (how scan() hands out a recurrence)."""
    from symgraph.ops.subtensor import SliceSpec, Subtensor

    if lag is None or not isinstance(node.op, Subtensor) or len(node.inputs) != 1:
        return False
    idx = node.op.idx_list
    return len(idx) == 1 and idx[0] == SliceSpec(lag, None, None)


def _last_entry_readers(fgraph, var, lag):
    """``[(reader output, c)]`` when every use of ``var`` reads one of its last
    entries ``var[c]`` (directly or through ``var[lag:]``), else None."""
    readers = []
    for client, _ in fgraph.clients.get(var, []):
        if client == "output":
            return None
        c = _negative_index(client)
        if c is not None:
            readers.append((client.outputs[0], c))
            continue
        if not _drops_initial(client, lag):
            return None
        for inner_client, _ in fgraph.clients.get(client.outputs[0], []):
            c = None if inner_client == "output" else _negative_index(inner_client)
            if c is None:
                return None
            readers.append((inner_client.outputs[0], c))
    return readers or None


@node_rewriter([Scan])
def scan_keep_last(fgraph, node):
    """Keep only the last entries of outputs that are read only there."""
    op, info = node.op, node.op.info
    keep = list(info.rec_keep)
    keep_nitsot = list(info.nitsot_keep)
    readers = {}     # output index -> [(reader, c)]
    for k in range(info.n_rec):
        if keep[k]:
            continue
        found = _last_entry_readers(fgraph, node.outputs[info.out_rec(k)], info.lag(k))
        if found is not None:
            readers[info.out_rec(k)] = found
            keep[k] = max(-c for _, c in found)
    for j in range(info.n_nitsot):
        if keep_nitsot[j] or info.nitsot_reverse[j]:
            continue
        # lag None: a mapped output has no initial entries to drop.
        found = _last_entry_readers(fgraph, node.outputs[info.out_nitsot(j)], None)
        if found is not None:
            readers[info.out_nitsot(j)] = found
            keep_nitsot[j] = max(-c for _, c in found)
    if not readers:
        return None
    new = op.with_info(rec_keep=tuple(keep), nitsot_keep=tuple(keep_nitsot)).make_node(
        *node.inputs)
    new.tag.trace = node.tag.trace
    changes = {old: out for i, (old, out) in enumerate(zip(node.outputs, new.outputs))
               if i not in readers}
    for i, found in readers.items():
        for reader, c in found:
            changes[reader] = new.outputs[i][c]
    return changes


@node_rewriter([Scan])
def scan_remove_unused_outputs(fgraph, node):
    """Drop the outputs nobody reads, and the work that only they needed (the
    gradient of a scan computes one term per input; those not asked for go)."""
    from symgraph.scan.builder import rebuild_scan

    op, info = node.op, node.op.info
    deps = op.inner_dependencies()

    def used(var):
        return bool(fgraph.clients.get(var))

    keep_rec = {k for k in range(info.n_rec) if used(node.outputs[info.out_rec(k)])}
    keep_nitsot = [j for j in range(info.n_nitsot) if used(node.outputs[info.out_nitsot(j)])]
    needed = [info.inner_out_nitsot(j) for j in keep_nitsot] + \
        [info.inner_out_state(s) for s in range(info.n_states)] + \
        ([info.inner_out_cond] if info.as_while else [])
    todo = needed + [info.inner_out_rec(k) for k in keep_rec]
    while todo:
        for i in deps[todo.pop()]:
            owner = info.tap_owner(i)
            if owner is not None and owner[0] not in keep_rec:
                keep_rec.add(owner[0])
                todo.append(info.inner_out_rec(owner[0]))
    if len(keep_rec) == info.n_rec and len(keep_nitsot) == info.n_nitsot:
        return None
    _, mapping = rebuild_scan(node, sorted(keep_rec), keep_nitsot)
    return mapping


@node_rewriter([Scan])
def scan_mapped_sequence(fgraph, node):
    """A mapped output whose step value is a sequence's slice is that sequence:
    once the work that depends only on the sequences was computed for all steps
    (``scan/pushout.py``), a map such as ``tanh(dot(v, W) + b)`` over ``X``
    needs no loop at all."""
    op, info = node.op, node.op.info
    if info.as_while:
        return None
    seq_of = {op.inner_inputs[info.inner_seq(i)]: i for i in range(info.n_seqs)}
    n = node.inputs[0]
    changes = {}
    for j in range(info.n_nitsot):
        out = node.outputs[info.out_nitsot(j)]
        i = seq_of.get(op.inner_outputs[info.inner_out_nitsot(j)])
        if i is None or not fgraph.clients.get(out):
            continue
        seq = node.inputs[info.outer_seq(i)]
        # The loop writes entry t (or n-1-t) with the slice it read, t (or len-1-t).
        part = seq[seq.shape[0] - n:] if info.seq_reverse[i] else seq[:n]
        if info.seq_reverse[i] != info.nitsot_reverse[j]:
            part = part[::-1]
        changes[out] = part
    return changes or None


def _independent(a, b):
    """Neither node computes an input of the other (directly or not)."""
    from symgraph.graph.basic import ancestors

    return not any(v.owner is b for v in ancestors(a.inputs)) and \
        not any(v.owner is a for v in ancestors(b.inputs))


@graph_rewriter
def scan_merge(fgraph, verbose=False):
    """Run independent loops of the same number of steps as one loop (one
    per-step overhead, sequences read once)."""
    from symgraph.opt.driver import replace_validated
    from symgraph.scan.builder import merge_scans

    groups = {}
    for node in fgraph.toposort():
        op = node.op
        if isinstance(op, Scan) and not op.info.as_while:
            key = (node.inputs[0], op.info.truncate_gradient, id(op.mode), bool(op.profile))
            groups.setdefault(key, []).append(node)
    merged = 0
    for group in groups.values():
        while len(group) > 1:
            first = group.pop(0)
            partner = next((n for n in group if _independent(first, n)), None)
            if partner is None:
                continue
            new, mapping = merge_scans(first, partner)
            pairs = [(old, out) for old, out in mapping.items() if fgraph.clients.get(old)]
            if replace_validated(fgraph, pairs, "scan_merge", verbose):
                merged += 1
                group.remove(partner)
                group.insert(0, new)
    return merged


register(scan_keep_last, "fast_run", "scan", phase="specialize")
register(scan_merge, "fast_run", "scan", phase="specialize")
register(scan_mapped_sequence, "fast_run", "scan", phase="canonicalize")
register(scan_remove_unused_outputs, "fast_run", "scan", phase="canonicalize")
