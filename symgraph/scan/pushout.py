"""Work that depends only on the sequences, done for all steps at once.

In an RNN step ``tanh(dot(x_t, W_in) + dot(h, W))`` the product ``dot(x_t,
W_in)`` needs no earlier step: it is one matrix product over the whole
sequence (``dot(X, W_in)``), computed before the loop, and the step reads its
slice like any sequence.  That replaces many small products by one large one,
and the gradient of that product is one large product too instead of a sum
accumulated step by step.

``push_out_sequence_work`` finds the step's nodes whose inputs are sequence
slices, non-sequences or constants, for ops that have a batched form here
(Elemwise, DimShuffle, Dot with one sequence operand), builds the batched
expressions outside and feeds the step the values it uses as new sequences.
Loops with a stop condition are left alone: they may run fewer steps than the
sequences hold.
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, clone_replace, io_toposort


class SequenceSteps(Op):
    """The entries of a sequence that ``n`` steps read: ``seq[:n]``, or
    ``seq[len - n:]`` for a sequence read from its end; a ValueError (the loop's
    own message, ``label``) when the sequence is shorter.  The batched work
    computed before the loop starts from these, so a sequence shorter than
    ``n_steps`` is an error even when no loop is left."""

    __props__ = ("reverse", "label")
    view_map = {0: [0]}

    def __init__(self, reverse, label):
        self.reverse = bool(reverse)
        self.label = str(label)

    def __str__(self):
        return f"SequenceSteps{{{'from the end' if self.reverse else 'from the start'}}}"

    def make_node(self, seq, n):
        from symgraph.tensor.basic import as_tensor_variable
        from symgraph.tensor.type import TensorType

        seq, n = as_tensor_variable(seq), as_tensor_variable(n)
        out = TensorType(seq.type.dtype, shape=(None,) + seq.type.shape[1:])()
        return Apply(self, [seq, n], [out])

    def perform(self, node, inputs, output_storage):
        seq, n = inputs[0], int(np.asarray(inputs[1]))
        if len(seq) < n:
            raise ValueError(f"{self.label} has {len(seq)} entries, but the loop runs {n} "
                             f"steps (n_steps); give a longer sequence or fewer steps")
        output_storage[0][0] = seq[len(seq) - n:] if self.reverse else seq[:n]

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[1],) + tuple(input_shapes[0][1:])]

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        from symgraph.gradient import disconnected_grad_for
        from symgraph.ops.subtensor import inc_subtensor, zeros_like_shape

        seq, n = inputs
        zeros = zeros_like_shape(seq)
        part = zeros[seq.shape[0] - n:] if self.reverse else zeros[:n]
        return [inc_subtensor(part, output_grads[0]), disconnected_grad_for(n)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else self(eval_points[0], inputs[1])]


def push_out_sequence_work(outputs, sequences, nonseqs, n_steps, make_sequence, where):
    """``(outputs, new sequences)``: ``outputs`` rewritten to read the pushed-out
    values from new sequence placeholders, made by ``make_sequence(outer,
    placeholder, reverse)``.  ``where`` names the loop in errors."""
    from symgraph.ops.math import cast
    from symgraph.tensor.type import TensorType

    n = cast(n_steps, "int64")
    batched, reverse = {}, {}
    for s in sequences:
        if not isinstance(s.outer.type, TensorType):
            continue   # a random generator's trace: nothing to batch
        batched[s.placeholder] = SequenceSteps(s.reverse, f"{where}: {s.label}")(s.outer, n)
        reverse[s.placeholder] = s.reverse
    outer_of = {ns.placeholder: ns.outer for ns in nonseqs}
    pushed = set()
    for node in io_toposort(list(batched) + list(outer_of), outputs):
        seq_inputs = [i for i in node.inputs if i in batched]
        if not seq_inputs:
            continue
        flags = {reverse[i] for i in seq_inputs}
        if len(flags) != 1:
            continue
        if not all(i in batched or i in outer_of or isinstance(i, Constant)
                   for i in node.inputs):
            continue
        outs = _batched(node, [batched.get(i) for i in node.inputs],
                        [outer_of.get(i, i) for i in node.inputs])
        if outs is None:
            continue
        flag = flags.pop()
        for old, new in zip(node.outputs, outs):
            batched[old] = new
            reverse[old] = flag
        pushed.add(node)
    if not pushed:
        return outputs, []
    frontier = []
    seen = set()
    for node in io_toposort(list(batched) + list(outer_of), outputs):
        if node in pushed:
            continue
        for i in node.inputs:
            if i.owner in pushed and i not in seen:
                seen.add(i)
                frontier.append(i)
    for out in outputs:
        if out.owner in pushed and out not in seen:
            seen.add(out)
            frontier.append(out)
    replace, new_sequences = {}, []
    for var in frontier:
        placeholder = var.type()
        placeholder.name = var.name
        replace[var] = placeholder
        new_sequences.append(make_sequence(batched[var], placeholder, reverse[var]))
    return clone_replace(outputs, replace), new_sequences


def _batched(node, seqs, others):
    """The batched outputs of ``node`` (a leading steps dimension), or None when
    its op has no batched form here.  ``seqs[i]`` is the batched value of input
    ``i`` when it comes from the sequences, else None; ``others[i]`` is its
    outer value otherwise."""
    from symgraph.ops.blas import Dot
    from symgraph.ops.elemwise import DimShuffle, Elemwise

    op = node.op
    if isinstance(op, Elemwise) and not op.inplace_pattern and type(op) is Elemwise:
        from symgraph.ops.shape import shape_padleft

        args = [s if s is not None else shape_padleft(o) for s, o in zip(seqs, others)]
        out = op(*args)
        return out if isinstance(out, list) else [out]
    if isinstance(op, DimShuffle):
        order = (0,) + tuple("x" if d == "x" else d + 1 for d in op.new_order)
        return [DimShuffle(op.input_ndim + 1, order)(seqs[0])]
    if isinstance(op, Dot):
        return _batched_dot(node, seqs, others)
    return None


def _batched_dot(node, seqs, others):
    from symgraph.ops.blas import dot

    (a, b), (xa, xb) = seqs, others
    if a is not None and b is not None:
        return None      # a product of two sequences is a batched product: not here
    if a is not None:
        # dot(x_t, W) for every t: dot(X, W) contracts X's last axis.
        return [dot(a, xb)]
    left = node.inputs[0]
    step_b = node.inputs[1]
    if step_b.ndim == 1:
        # dot(W, x_t) for every t: rows of dot(X, W.T).
        return [dot(b, xa.T) if left.ndim == 2 else dot(b, xa)]
    if left.ndim == 2:
        # dot(W, x_t) with x_t a matrix: dot(W, X) is (rows, steps, cols).
        return [dot(xa, b).dimshuffle(1, 0, 2)]
    return [dot(xa, b)]
