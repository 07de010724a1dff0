"""Reshaping: ``reshape`` (a view when NumPy can) and ``flatten``.

Re-exported by ``ops/shape.py``, where the rest of the code base imports it from.
"""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op
from symgraph.ops.shape import _disconnected, as_shape_vector, constant_int, shape, shape_i
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["Reshape", "reshape", "flatten"]


class Reshape(Op):
    """``x`` with a new shape of ``ndim`` dimensions (a view when NumPy can).

    The second input is the int64 shape vector; one entry may be -1 (inferred).
    """

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim):
        self.ndim = int(ndim)

    def make_node(self, x, shp):
        x = as_tensor_variable(x)
        shp = as_tensor_variable(shp)
        if shp.ndim != 1 or shp.dtype not in INT_DTYPES:
            raise TypeError(f"{self}: the shape must be an int vector, got {shp.type}")
        if shp.type.shape[0] not in (None, self.ndim):
            raise ValueError(f"{self}: the shape vector has length {shp.type.shape[0]}")
        out_shape = self._static_shape(x, shp)
        return Apply(self, [x, shp], [TensorType(x.dtype, shape=out_shape)()])

    def _static_shape(self, x, shp):
        sizes = [None] * self.ndim
        if isinstance(shp, Constant):
            sizes = [int(s) for s in np.asarray(shp.data)]
        elif shp.owner is not None:
            from symgraph.ops.join import MakeVector

            if isinstance(shp.owner.op, MakeVector):
                sizes = [constant_int(s) for s in shp.owner.inputs]
        for s in sizes:
            if s is not None and s < -1:
                raise ValueError(f"{self}: invalid size {s} in the new shape")
        if sizes.count(-1) > 1:
            raise ValueError(f"{self}: the new shape {sizes} has more than one -1")
        if -1 in sizes:
            # The inferred size is known when every other size is.
            total = x.type.shape
            rest = [s for s in sizes if s != -1]
            pos = sizes.index(-1)
            sizes[pos] = None
            if None not in total and None not in rest:
                n_in, n_rest = int(np.prod(total)), int(np.prod(rest))
                if n_rest and n_in % n_rest == 0:
                    sizes[pos] = n_in // n_rest
        elif None not in sizes and None not in x.type.shape and \
                int(np.prod(sizes)) != int(np.prod(x.type.shape)):
            raise ValueError(f"{self}: cannot reshape {x} of static shape {x.type.shape} "
                             f"({int(np.prod(x.type.shape))} elements) to {tuple(sizes)}")
        return tuple(sizes)

    def perform(self, node, inputs, output_storage):
        x, shp = inputs
        if len(shp) != self.ndim:
            raise ValueError(f"{self}: the shape {tuple(shp)} has {len(shp)} entries, "
                             f"expected {self.ndim}")
        try:
            output_storage[0][0] = np.reshape(x, tuple(int(s) for s in shp))
        except ValueError:
            raise ValueError(f"{self}: cannot reshape {node.inputs[0]} of shape {x.shape} "
                             f"({x.size} elements) to {tuple(int(s) for s in shp)}") from None

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import eq, int_div, neg, switch
        from symgraph.ops.subtensor import getitem

        x, shp = node.inputs
        out = []
        entries = [getitem(shp, i) for i in range(self.ndim)]
        total = None
        for i, (static, entry) in enumerate(zip(node.outputs[0].type.shape, entries)):
            known = constant_int(entry)
            if static is not None:
                out.append(constant(static, dtype="int64"))
            elif known is not None and known >= 0:
                out.append(entry)
            else:
                # With exactly one -1, the product of all entries is minus the
                # product of the others: the missing size is total // -prod.
                if total is None:
                    total = _product(input_shapes[0])
                    rest = neg(_product(entries))
                out.append(switch(eq(entry, -1), int_div(total, rest), entry))
        return [tuple(out)]

    def connection_pattern(self, node):
        return [[True], [False]]

    def grad(self, inputs, output_grads):
        x, shp = inputs
        return [reshape(output_grads[0], shape(x), ndim=x.ndim), _disconnected(shp)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], inputs[1])]


def _product(sizes):
    """The product of int64 scalars (1 for none)."""
    from symgraph.ops.math import mul

    sizes = list(sizes)
    if not sizes:
        return constant(1, dtype="int64")
    return sizes[0] if len(sizes) == 1 else mul(*sizes)


def reshape(x, newshape, ndim=None):
    """``x`` reshaped to ``newshape``: a tuple of ints / int scalars, or an int vector.

    One entry may be -1 (inferred from the others).  ``ndim`` is needed only for
    a shape vector of unknown static length.
    """
    x = as_tensor_variable(x)
    if isinstance(newshape, (numbers.Integral, np.integer)):
        newshape = (newshape,)
    if isinstance(newshape, (list, tuple)):
        if ndim is not None and ndim != len(newshape):
            raise ValueError(f"reshape: ndim={ndim} but the new shape {newshape} has "
                             f"{len(newshape)} entries")
        if all(isinstance(s, (numbers.Integral, np.integer)) for s in newshape):
            shp = constant(np.asarray(newshape, dtype="int64"))
        else:
            shp = as_shape_vector(newshape, "reshape")
        ndim = len(newshape)
    else:
        shp = as_tensor_variable(newshape)
        if shp.ndim != 1 or shp.dtype not in INT_DTYPES:
            raise TypeError(f"reshape: the new shape must be an int vector, got {shp.type}")
        if ndim is None:
            ndim = shp.type.shape[0]
            if ndim is None:
                raise ValueError("reshape: the shape vector has no static length; pass ndim=")
        from symgraph.ops.math import cast

        shp = cast(shp, "int64")
    return Reshape(ndim)(x, shp)


def flatten(x, ndim=1, outdim=None):
    """Keep the first ``ndim - 1`` dimensions of ``x`` and flatten the rest (Theano's;
    ``outdim`` is Theano's older name for ``ndim``)."""
    x = as_tensor_variable(x)
    if outdim is not None:
        ndim = outdim
    if ndim < 1 or (ndim > x.ndim and x.ndim > 0):
        raise ValueError(f"flatten: ndim={ndim} must be between 1 and {max(x.ndim, 1)}")
    kept = [shape_i(x, d) for d in range(ndim - 1)]
    rest = x.type.shape[ndim - 1:]
    if None not in rest:
        last = int(np.prod(rest))
    else:
        last = _product(shape_i(x, d) for d in range(ndim - 1, x.ndim))
    return reshape(x, kept + [last])
