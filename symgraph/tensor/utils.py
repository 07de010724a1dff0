"""Theano's ``tensor.utils``: ``hash_from_ndarray`` and ``shape_of_variables``."""

import hashlib

import numpy as np

__all__ = ["hash_from_ndarray", "shape_of_variables"]


def hash_from_ndarray(data):
    """A hex digest of an array's values, shape, strides and dtype (equal
    arrays of the same layout hash alike)."""
    data = np.asarray(data)
    if not data.flags["C_CONTIGUOUS"]:
        data = np.ascontiguousarray(data)
    h = hashlib.sha256()
    h.update(data.tobytes())
    h.update(str((data.shape, data.strides, data.dtype.str)).encode())
    return h.hexdigest()


def shape_of_variables(fgraph, input_shapes):
    """The shapes of every variable of ``fgraph`` (a FunctionGraph) given the
    shapes of its inputs (a dict {input: shape tuple}), as a dict of tuples
    of ints; raises ValueError when a shape depends on values."""
    from symgraph.graph.basic import Constant

    shapes = {}
    for var in fgraph.variables:
        if var in input_shapes:
            shapes[var] = tuple(int(s) for s in input_shapes[var])
        elif isinstance(var, Constant) and hasattr(var, "data"):
            shapes[var] = tuple(np.shape(var.data))
    for node in fgraph.toposort():
        infer = getattr(node.op, "infer_shape", None)
        if infer is None:
            raise ValueError(f"shape_of_variables: {node.op} has no infer_shape")
        in_shapes = [shapes[i] if hasattr(i.type, "ndim") else None for i in node.inputs]
        out_shapes = infer(fgraph, node, in_shapes)
        for out, shape in zip(node.outputs, out_shapes):
            shapes[out] = tuple(_as_int(s) for s in shape)
    return shapes


def _as_int(size):
    import numbers

    if isinstance(size, (numbers.Integral, np.integer)):
        return int(size)
    from symgraph.tensor.theano_basic import NotScalarConstantError, \
        get_scalar_constant_value

    try:
        return int(get_scalar_constant_value(size))
    except NotScalarConstantError:
        raise ValueError(f"shape_of_variables: a size depends on values ({size})") from None
