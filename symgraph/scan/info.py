"""The layout of a Scan node: which input and output is what.

A Scan node's outer inputs are, in order::

    n_steps, sequences..., recurrent initial buffers..., state initial values...,
    non-sequences...

and its outer outputs::

    recurrent buffers..., mapped traces (no feedback)..., final states...,
    state traces...

The inner graph (one step) has the inputs::

    sequence slices..., recurrent taps (every tap of every recurrence)...,
    states..., non-sequences...

and the outputs::

    recurrent values..., mapped values..., next states..., [stop condition]

``ScanInfo`` holds the counts and the per-entry settings; its methods turn a
category and a position into an index of one of these lists, so that no other
module does index arithmetic of its own.
"""

from symgraph.graph.basic import PropsValue


class ScanInfo(PropsValue):
    """The static description of a Scan node (part of the op's identity).

    * ``seq_reverse``: per sequence, whether step ``t`` reads element
      ``len - 1 - t`` instead of ``t`` (the gradient's scans read backwards).
    * ``rec_taps``: per recurrent output, its taps (negative ints, in the order
      the step function receives them).
    * ``rec_keep``: per recurrent output, 0 to return the whole buffer (the
      initial entries followed by one entry per step), or ``k > 0`` to keep only
      a ring of the last ``max(k, lag)`` entries and return the last ``k``.
    * ``nitsot_reverse``: per mapped output (outputs_info None), whether step
      ``t`` writes entry ``n_steps - 1 - t`` instead of ``t``.
    * ``nitsot_keep``: per mapped output, 0 to return every step, or ``k > 0``
      to keep only a ring of the last ``k`` steps (written forwards only).
    * ``n_states``: values carried from step to step without a trace (shared
      variables that are not tensors, such as random generators).
    * ``n_nonseqs``: inputs that every step sees whole.
    * ``as_while``: the step function also returns a stop condition.
    * ``truncate_gradient``: steps that the gradient goes back (-1: all).
    """

    __props__ = ("seq_reverse", "rec_taps", "rec_keep", "nitsot_reverse", "nitsot_keep",
                 "n_states", "n_nonseqs", "as_while", "truncate_gradient")

    def __init__(self, seq_reverse=(), rec_taps=(), rec_keep=None, nitsot_reverse=(),
                 nitsot_keep=None, n_states=0, n_nonseqs=0, as_while=False,
                 truncate_gradient=-1):
        self.seq_reverse = tuple(bool(r) for r in seq_reverse)
        self.rec_taps = tuple(tuple(int(t) for t in taps) for taps in rec_taps)
        if rec_keep is None:
            rec_keep = (0,) * len(self.rec_taps)
        self.rec_keep = tuple(int(k) for k in rec_keep)
        self.nitsot_reverse = tuple(bool(r) for r in nitsot_reverse)
        if nitsot_keep is None:
            nitsot_keep = (0,) * len(self.nitsot_reverse)
        self.nitsot_keep = tuple(int(k) for k in nitsot_keep)
        if len(self.nitsot_keep) != len(self.nitsot_reverse) or any(
                k and r for k, r in zip(self.nitsot_keep, self.nitsot_reverse)):
            raise ValueError("ScanInfo: one nitsot_keep entry per mapped output, and no "
                             "ring for one written backwards")
        self.n_states = int(n_states)
        self.n_nonseqs = int(n_nonseqs)
        self.as_while = bool(as_while)
        self.truncate_gradient = int(truncate_gradient)
        if len(self.rec_keep) != len(self.rec_taps):
            raise ValueError("ScanInfo: one rec_keep entry per recurrent output")
        for taps in self.rec_taps:
            if not taps or any(t >= 0 for t in taps) or len(set(taps)) != len(taps):
                raise ValueError(f"ScanInfo: recurrent taps must be distinct negative ints, "
                                 f"got {taps}")
        if self.as_while and any(self.nitsot_reverse):
            raise ValueError("ScanInfo: a loop with a stop condition cannot write its "
                             "mapped outputs backwards")

    def replace(self, **changes):
        """A copy with some fields changed."""
        fields = self._props_dict()
        fields.update(changes)
        return ScanInfo(**fields)

    # -- counts ------------------------------------------------------------

    @property
    def n_seqs(self):
        return len(self.seq_reverse)

    @property
    def n_rec(self):
        return len(self.rec_taps)

    @property
    def n_nitsot(self):
        return len(self.nitsot_reverse)

    def lag(self, k):
        """How many entries before step 0 recurrent output ``k`` reads."""
        return -min(self.rec_taps[k])

    @property
    def n_taps(self):
        return sum(len(t) for t in self.rec_taps)

    # -- inner inputs --------------------------------------------------------

    def inner_seq(self, i):
        return i

    def inner_taps(self, k):
        """The inner input indices of recurrent output ``k``'s taps, in tap order."""
        start = self.n_seqs + sum(len(t) for t in self.rec_taps[:k])
        return list(range(start, start + len(self.rec_taps[k])))

    def inner_state(self, s):
        return self.n_seqs + self.n_taps + s

    def inner_nonseq(self, m):
        return self.n_seqs + self.n_taps + self.n_states + m

    @property
    def n_inner_inputs(self):
        return self.n_seqs + self.n_taps + self.n_states + self.n_nonseqs

    # -- inner outputs -------------------------------------------------------

    def inner_out_rec(self, k):
        return k

    def inner_out_nitsot(self, j):
        return self.n_rec + j

    def inner_out_state(self, s):
        return self.n_rec + self.n_nitsot + s

    @property
    def inner_out_cond(self):
        return self.n_rec + self.n_nitsot + self.n_states if self.as_while else None

    @property
    def n_inner_outputs(self):
        return self.n_rec + self.n_nitsot + self.n_states + int(self.as_while)

    # -- outer inputs --------------------------------------------------------

    def outer_seq(self, i):
        return 1 + i

    def outer_rec(self, k):
        return 1 + self.n_seqs + k

    def outer_state(self, s):
        return 1 + self.n_seqs + self.n_rec + s

    def outer_nonseq(self, m):
        return 1 + self.n_seqs + self.n_rec + self.n_states + m

    @property
    def n_outer_inputs(self):
        return 1 + self.n_seqs + self.n_rec + self.n_states + self.n_nonseqs

    # -- outer outputs -------------------------------------------------------

    def out_rec(self, k):
        return k

    def out_nitsot(self, j):
        return self.n_rec + j

    def out_state(self, s):
        return self.n_rec + self.n_nitsot + s

    def out_state_trace(self, s):
        return self.n_rec + self.n_nitsot + self.n_states + s

    @property
    def n_outer_outputs(self):
        return self.n_rec + self.n_nitsot + 2 * self.n_states

    def inner_to_outer_input(self, index):
        """The outer input that feeds inner input ``index``."""
        if index < self.n_seqs:
            return self.outer_seq(index)
        index -= self.n_seqs
        for k, taps in enumerate(self.rec_taps):
            if index < len(taps):
                return self.outer_rec(k)
            index -= len(taps)
        if index < self.n_states:
            return self.outer_state(index)
        return self.outer_nonseq(index - self.n_states)

    def tap_owner(self, index):
        """``(k, tap)`` for an inner input that is a recurrent tap, else None."""
        index -= self.n_seqs
        if index < 0:
            return None
        for k, taps in enumerate(self.rec_taps):
            if index < len(taps):
                return k, taps[index]
            index -= len(taps)
        return None
