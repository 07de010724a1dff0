"""Shape inference for Scan nodes (``Scan.infer_shape``).

Recurrent buffers have ``lag + n_steps`` entries (or the kept ring's length)
of the initial value's step shape.  A mapped output's step shape comes from
the step graph: its static shape where known, else the step graph's own shape
inference with the inner inputs' shapes taken from the outer inputs; it is
used only when it depends on nothing that changes from step to step.  A loop
with a stop condition has lengths known only after it ran (NotImplementedError:
the shapes are then read from the outputs).
"""

from symgraph.graph.basic import clone_replace, graph_inputs


def scan_infer_shape(op, node, input_shapes):
    """One shape tuple per output of ``node`` (None for non-tensor outputs)."""
    from symgraph.ops.math import cast, minimum
    from symgraph.tensor.basic import constant

    info = op.info
    if info.as_while:
        raise NotImplementedError("a loop with a stop condition: lengths known only at run time")
    n = cast(node.inputs[0], "int64")
    shapes = []
    for k in range(info.n_rec):
        init = input_shapes[info.outer_rec(k)]
        lag, keep = info.lag(k), info.rec_keep[k]
        if keep == 0:
            length = n + lag
        elif keep <= lag:
            length = constant(keep, dtype="int64")
        else:
            length = minimum(constant(keep, dtype="int64"), n + lag)
        shapes.append((length,) + tuple(init[1:]))
    inner_shapes = None
    for j in range(info.n_nitsot):
        out = op.inner_outputs[info.inner_out_nitsot(j)]
        if all(s is not None for s in out.type.shape):
            step = tuple(constant(s, dtype="int64") for s in out.type.shape)
        else:
            if inner_shapes is None:
                inner_shapes = _InnerShapes(op, node, input_shapes)
            step = inner_shapes.of(info.inner_out_nitsot(j))
        keep = info.nitsot_keep[j]
        length = minimum(constant(keep, dtype="int64"), n) if keep else n
        shapes.append((length,) + step)
    shapes.extend([None] * (2 * info.n_states))
    return shapes


class _InnerShapes:
    """The step graph's shape inference, seeded with the outer inputs' shapes."""

    def __init__(self, op, node, input_shapes):
        from symgraph.graph.fg import FunctionGraph
        from symgraph.opt.shape_feature import ShapeFeature
        from symgraph.tensor.type import TensorType

        info = op.info
        self.fgraph = FunctionGraph(op.inner_inputs, op.inner_outputs, clone=True)
        self.feature = ShapeFeature()
        self.fgraph.attach_feature(self.feature)
        self.nonseq_outer = {}
        for i, var in enumerate(self.fgraph.inputs):
            if not isinstance(var.type, TensorType):
                continue
            outer = input_shapes[info.inner_to_outer_input(i)]
            if outer is None:
                continue
            if info.n_nonseqs and i >= info.inner_nonseq(0):
                self.nonseq_outer[var] = node.inputs[info.inner_to_outer_input(i)]
                shape = tuple(outer)
            else:
                shape = tuple(outer[1:])
            # Seeding the feature: these inputs' shapes are the outer inputs'.
            self.feature._memo[var] = shape
        self.placeholders = set(self.fgraph.inputs)

    def of(self, out_index):
        shape = list(self.feature.shape_of(self.fgraph.outputs[out_index]))
        shape = clone_replace(shape, self.nonseq_outer) if self.nonseq_outer else shape
        if any(v in self.placeholders for v in graph_inputs(shape)):
            raise NotImplementedError("a mapped output's shape depends on per-step values")
        return tuple(shape)
