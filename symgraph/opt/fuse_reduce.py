"""A reduction fused with the element-wise work that feeds it.

``sum(exp(x))`` as two nodes writes ``exp(x)`` to a temporary and reads it
back; ``ReduceOfElemwise`` computes it in one pass: its native kernel
evaluates the element-wise function per element inside the reduction loop
(``compile.native.reduce_lowering.fused_kernel``), so ``x`` is read once and
nothing is allocated but the result.

The rewrite ``local_reduce_of_elemwise`` turns ``R(Elemwise(f)(a, b, ...))``
(R one of Sum, Prod, Max, Min, All, Any) into ``ReduceOfElemwise(R, f)(a, b,
...)`` when the Elemwise's output is used by that reduction only (otherwise
the temporary is needed anyway).  It runs in the ``fusion`` phase, after
gradients are built (the fused op has no gradient) and after element-wise
fusion has made ``f`` a Composite of the whole element-wise region.

Broadcasting inside the element-wise op is kept: inputs of the Elemwise may
be broadcastable (statically size 1) in some dimensions, as the softmax
piece ``sum(exp(x - max(x, axis=1, keepdims=True)), axis=1)`` has; an input
broadcast over every reduced axis is loaded once per output element.
"""

from symgraph.graph.basic import Apply, Op
from symgraph.ops import reduce as R
from symgraph.ops.elemwise import Elemwise
from symgraph.opt.fusion_support import can_fuse_reduction
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["ReduceOfElemwise", "local_reduce_of_elemwise"]

#: The reductions that fuse (argmax/argmin do not: their index needs C order).
FUSABLE = (R.Sum, R.Prod, R.Max, R.Min, R.All, R.Any)


class ReduceOfElemwise(Op):
    """``reduce_op(Elemwise(pre)(*inputs))`` in one pass.

    ``reduce_op``: a Sum, Prod, Max, Min, All or Any op (its axes, dtype and
    accumulator dtype are kept); ``pre``: a single-output ScalarOp (usually
    a Composite).  The inputs are those of the Elemwise (all of one rank).
    The Python ``perform`` (the reference) runs the two ops one after the
    other, so values and errors are exactly the unfused graph's.
    """

    __props__ = ("reduce_op", "pre")

    def __init__(self, reduce_op, pre):
        if not isinstance(reduce_op, FUSABLE):
            raise TypeError(f"ReduceOfElemwise: cannot fuse {reduce_op}; use one of "
                            f"{', '.join(c.__name__ for c in FUSABLE)}")
        if pre.nout != 1:
            raise TypeError(f"ReduceOfElemwise: {pre} has {pre.nout} outputs; need one")
        self.reduce_op = reduce_op
        self.pre = pre

    def __str__(self):
        return f"ReduceOfElemwise{{{self.reduce_op}, {self.pre}}}"

    __repr__ = __str__

    def _reference_nodes(self, inputs):
        """The unfused (Elemwise node, reduction node) on fresh variables of the
        types of ``inputs``."""
        enode = Elemwise(self.pre).make_node(*[v.type() for v in inputs])
        return enode, self.reduce_op.make_node(enode.outputs[0])

    def make_node(self, *inputs):
        inputs = [as_tensor_variable(i) for i in inputs]
        if len(inputs) != self.pre.nin:
            raise TypeError(f"{self} takes {self.pre.nin} inputs, got {len(inputs)}")
        if len({i.ndim for i in inputs}) > 1:
            raise TypeError(f"{self}: the inputs must have one rank (as an Elemwise "
                            f"node's have), got {[i.ndim for i in inputs]}")
        _, rnode = self._reference_nodes(inputs)
        return Apply(self, inputs, [rnode.outputs[0].type()])

    def perform(self, node, inputs, output_storage):
        refs = getattr(node.tag, "reference_nodes", None)
        if refs is None:
            refs = node.tag.reference_nodes = self._reference_nodes(node.inputs)
        enode, rnode = refs
        middle = [[None]]
        enode.op.perform(enode, inputs, middle)
        self.reduce_op.perform(rnode, [middle[0][0]], output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        enode, rnode = self._reference_nodes(node.inputs)
        (shape,) = enode.op.infer_shape(fgraph, enode, input_shapes)[:1]
        return rnode.op.infer_shape(fgraph, rnode, [shape])


def _will_be_fused_into(fgraph, var, consumer):
    """True when element-wise fusion (``opt.fusion``, same phase) would merge
    ``var``'s producer into ``consumer``: an Elemwise with C code, the same
    output pattern, and ``consumer`` its only client."""
    from symgraph.opt.fusion import is_fusable

    node = var.owner
    return (node is not None and is_fusable(node) and len(node.outputs) == 1
            and node.outputs[0].type.broadcastable == consumer.outputs[0].type.broadcastable
            and [c for c, _ in fgraph.clients.get(var, [])] == [consumer])


@node_rewriter(list(FUSABLE))
def local_reduce_of_elemwise(fgraph, node):
    """``R(Elemwise(f)(...))`` -> ``ReduceOfElemwise(R, f)(...)`` when the
    element-wise result feeds nothing else and ``f`` has C code."""
    (x,) = node.inputs
    producer = x.owner
    if producer is None or not isinstance(producer.op, Elemwise):
        return None
    if producer.op.inplace_pattern or len(producer.outputs) != 1:
        return None
    if [c for c, _ in fgraph.clients.get(x, [])] != [node]:
        return None  # used elsewhere (or a graph output): the temporary stays
    dtypes = [str(i.dtype) for i in producer.inputs]
    if not can_fuse_reduction(producer.op.scalar_op, dtypes):
        return None
    # Element-wise fusion (same phase) merges the producer's own element-wise
    # inputs into it first; fusing now would strand them as a temporary.
    if any(_will_be_fused_into(fgraph, i, producer) for i in producer.inputs):
        return None
    fused = ReduceOfElemwise(node.op, producer.op.scalar_op)
    return [fused.make_node(*producer.inputs).outputs[0]]


register(local_reduce_of_elemwise, "fast_run", "fusion", phase="fusion")
