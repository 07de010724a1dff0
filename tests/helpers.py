"""Checkers shared by the op tests."""

import numpy as np

import symgraph


def check_infer_shape(outputs, inputs, values, mode=None):
    """Assert that the shapes the ops infer equal the shapes of the real outputs.

    ``outputs``: a variable or a list; ``inputs``: the symbolic inputs;
    ``values``: their values.  The shapes are computed from ``infer_shape``
    (through the shape rewrites, so the outputs themselves are not computed
    when the ops can say their shape) and compared with the computed outputs.
    """
    from symgraph.opt.shape_feature import ShapeFeature
    from symgraph.graph.fg import FunctionGraph

    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    fgraph = FunctionGraph(inputs, outputs, clone=False)
    feature = ShapeFeature()
    fgraph.attach_feature(feature)
    shape_vars = []
    for out in fgraph.outputs:
        shape_vars.extend(feature.shape_of(out))
    real = symgraph.function(inputs, outputs, on_unused_input="ignore",
                             mode=symgraph.Mode(optimizer=None))(*values)
    if not shape_vars:
        return
    inferred = symgraph.function(inputs, list(shape_vars), on_unused_input="ignore",
                                 mode=mode or symgraph.Mode(optimizer=None))(*values)
    pos = 0
    for out, value in zip(outputs, real):
        got = tuple(int(np.asarray(s)) for s in inferred[pos:pos + out.ndim])
        pos += out.ndim
        assert got == np.shape(value), f"inferred shape {got} != real {np.shape(value)} for {out}"
