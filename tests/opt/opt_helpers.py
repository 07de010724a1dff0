"""Shared checks for the rewrite tests: compile with and without rewrites,
look for ops in the optimized graph, compare values."""

import numpy as np

import symgraph
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.scalar import ScalarOp


def has_op(fgraph, kind):
    """True when a node of ``fgraph`` is an instance of ``kind`` (an Op class, or a
    ScalarOp class for Elemwise nodes)."""
    return count_op(fgraph, kind) > 0


def count_op(fgraph, kind):
    """How many nodes of ``fgraph`` match ``kind`` (see has_op); the members of a
    fused Elemwise(Composite) count as nodes."""
    from symgraph.ops.composite import Composite

    n = 0
    for node in fgraph.apply_nodes:
        if issubclass(kind, ScalarOp):
            if not isinstance(node.op, Elemwise):
                continue
            scalar_op = node.op.scalar_op
            members = [op for op, _ in scalar_op.nodes] if isinstance(scalar_op, Composite) \
                else [scalar_op]
            n += sum(isinstance(op, kind) for op in members)
        else:
            n += isinstance(node.op, kind)
    return n


def compile_pair(inputs, outputs, mode=None):
    """(unoptimized function, optimized function)."""
    ref = symgraph.function(inputs, outputs, mode=symgraph.Mode(optimizer=None),
                            on_unused_input="ignore")
    opt = symgraph.function(inputs, outputs, mode=mode or symgraph.Mode(optimizer="fast_run"),
                            on_unused_input="ignore")
    return ref, opt


def check_rewrite(inputs, output, values, present=(), absent=(), mode=None, rtol=1e-7,
                  atol=1e-12):
    """Compile ``output`` with and without rewrites; assert the optimized graph has
    every kind in ``present`` and none in ``absent``, and that values agree.

    Returns the optimized FunctionGraph.
    """
    ref, opt = compile_pair(inputs, output, mode)
    fgraph = opt.maker.fgraph
    for kind in present:
        assert has_op(fgraph, kind), f"no {kind.__name__} in {fgraph.toposort()}"
    for kind in absent:
        assert not has_op(fgraph, kind), f"{kind.__name__} left in {fgraph.toposort()}"
    expected, got = ref(*values), opt(*values)
    outs = output if isinstance(output, (list, tuple)) else [output]
    if not isinstance(output, (list, tuple)):
        expected, got = [expected], [got]
    for out, e, g in zip(outs, expected, got):
        g = np.asarray(g)
        assert g.dtype == np.asarray(e).dtype, (g.dtype, np.asarray(e).dtype)
        assert g.shape == np.shape(e), (g.shape, np.shape(e))
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    return fgraph
