"""Theano's ``theano.compile.ops``: the ops that programs imported from there.

``as_op``/``FromFunctionOp`` (a Python function as an op, ``symgraph.ops.from_graph``),
``Shape``, ``Shape_i``, ``shape_i``, ``SpecifyShape``, ``specify_shape``
(``symgraph.ops.shape``), ``ViewOp``/``view_op`` and ``DeepCopyOp``/``deep_copy_op``
(``symgraph.ops.view_copy``).  The C-code registration hooks that Theano kept here
have no counterpart: native code is registered in the backends' lowering tables.
"""

from symgraph.ops.from_graph import FromFunctionOp, as_op  # noqa: F401
from symgraph.ops.shape import Shape, Shape_i, SpecifyShape, specify_shape  # noqa: F401
from symgraph.ops.shape import shape_i as _shape_i
from symgraph.ops.view_copy import DeepCopyOp, ViewOp, deep_copy_op, view_op  # noqa: F401

__all__ = ["FromFunctionOp", "as_op", "Shape", "Shape_i", "shape_i", "SpecifyShape",
           "specify_shape", "ViewOp", "view_op", "DeepCopyOp", "deep_copy_op",
           "OutputGuard", "_output_guard"]


class OutputGuard(ViewOp):
    """Theano's ``OutputGuard``: the identity, as a view, that Theano's linker
    put on outputs so that no in-place op overwrote them.  symgraph's linker
    copies an output that aliases an input or another output itself, so
    nothing inserts this op; a program that applies it gets ``view_op``'s
    behaviour (the same array, the gradient passed through)."""


_output_guard = OutputGuard()


def shape_i(var, i, fgraph=None):
    """Dimension ``i`` of ``var``'s shape (Theano's signature).

    With ``fgraph``, the size comes from the graph's shape inference when it
    has one (so that reading it does not need ``var`` itself).
    """
    feature = getattr(fgraph, "shape_feature", None) if fgraph is not None else None
    if feature is not None and var in fgraph.variables:
        return feature.shape_i(var, i)
    return _shape_i(var, i)
