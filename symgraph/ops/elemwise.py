"""Elemwise (a ScalarOp over arrays, with broadcasting) and DimShuffle.

Inputs of lower rank are padded on the left with broadcastable dimensions at
build time (through DimShuffle), so an Elemwise node's inputs all have the
output's rank.  Only dimensions whose static size is 1 may broadcast; a size-1
value in a dimension not declared broadcastable is an error at run time, as in
Theano, because the gradient would otherwise not be summed over it.
"""

import numpy as np

from symgraph.configdefaults_theano import elemwise_errstate
from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable, constant, is_python_scalar
from symgraph.tensor.type import TensorType


class ShapeMismatchError(ValueError):
    """Inputs of an element-wise op whose shapes cannot broadcast together."""


class Elemwise(Op):
    """Apply ``scalar_op`` to every element of its inputs.

    ``inplace_pattern`` maps an output index to the input index whose memory it
    overwrites (set by in-place rewrites, never by users).
    """

    __props__ = ("scalar_op", "inplace_pattern")

    def __init__(self, scalar_op, inplace_pattern=None, name=None):
        self.scalar_op = scalar_op
        self.inplace_pattern = tuple(sorted((inplace_pattern or {}).items()))
        self.name = name
        self.destroy_map = {o: [i] for o, i in self.inplace_pattern}

    def __str__(self):
        text = f"Elemwise{{{self.scalar_op}}}"
        if self.inplace_pattern:
            text += str(list(self.inplace_pattern))
        return text

    __repr__ = __str__

    def make_node(self, *inputs):
        scalar_op = self.scalar_op
        if len(inputs) != scalar_op.nin:
            raise TypeError(f"{scalar_op} takes {scalar_op.nin} inputs, got {len(inputs)}")
        inputs = as_elemwise_inputs(inputs)
        out_shape = broadcast_static_shapes([i.type.shape for i in inputs], str(self))
        try:
            dtypes = scalar_op.output_dtypes(*[i.dtype for i in inputs])
        except TypeError as exc:
            described = ", ".join(f"{i} ({i.type})" for i in inputs)
            raise TypeError(f"{self}: {exc}; inputs: {described}") from exc
        outputs = [TensorType(dt, shape=out_shape)() for dt in dtypes]
        for o, i in self.inplace_pattern:
            if inputs[i].type != outputs[o].type:
                raise TypeError(f"{self}: output {o} cannot overwrite input {i} of type "
                                f"{inputs[i].type}")
        return Apply(self, inputs, outputs)

    def perform(self, node, inputs, output_storage):
        check_runtime_broadcast(node, inputs)
        compute = self.scalar_op.compute_dtype(*[i.dtype for i in node.inputs])
        args = inputs if compute is None else [np.asarray(a, dtype=compute) for a in inputs]
        # quiet as the C loops are, unless the numpy.seterr_* flags ask otherwise
        with np.errstate(**elemwise_errstate()):
            results = self.scalar_op.impl(*args)
        if self.scalar_op.nout == 1:
            results = (results,)
        for (o, i) in self.inplace_pattern:
            np.copyto(inputs[i], results[o], casting="unsafe")
            results = list(results)
            results[o] = inputs[i]
        for storage, out, value in zip(output_storage, node.outputs, results):
            value = np.asarray(value)
            if value.dtype != out.type.numpy_dtype:
                value = value.astype(out.type.dtype)
            storage[0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import maximum

        out_shape = []
        for dim in range(node.outputs[0].ndim):
            candidates = [shp[dim] for inp, shp in zip(node.inputs, input_shapes)
                          if not inp.type.broadcastable[dim]]
            # All agree at run time (checked by perform): the first one will do.
            out_shape.append(candidates[0] if candidates else constant(1, dtype="int64"))
        return [tuple(out_shape)] * len(node.outputs)

    def connection_pattern(self, node):
        return [[c] * len(node.outputs) for c in self.scalar_op.connection_pattern()]

    def L_op(self, inputs, outputs, output_grads):
        grads = self.scalar_op.grad(inputs, outputs, output_grads)
        return [reduce_to_input_shape(g, x) for g, x in zip(grads, inputs)]

    def R_op(self, inputs, eval_points):
        from symgraph.ops.math import ones_like
        from symgraph.graph.gradient_markers import is_disconnected

        node = self.make_node(*inputs)
        outs = node.outputs
        total = None
        ones = [ones_like(o) for o in outs]
        partials = self.scalar_op.grad(inputs, outs, ones)
        for partial, ev in zip(partials, eval_points):
            if ev is None or partial is None or is_disconnected(partial):
                continue
            term = partial * ev
            total = term if total is None else total + term
        if total is None:
            return [None] * len(outs)
        return [total]


def as_elemwise_inputs(inputs):
    """Convert and rank-align the inputs of an element-wise op.

    Python numbers promote weakly (NumPy's NEP 50): ``float32_x * 0.5`` stays
    float32, ``int8_x + 1`` stays int8.  Lower-rank inputs gain leading
    broadcastable dimensions.
    """
    tensors = [as_tensor_variable(x) for x in inputs if not is_python_scalar(x)]
    if tensors and len(tensors) < len(inputs):
        strong = [np.dtype(t.dtype) for t in tensors]
        converted = []
        for x in inputs:
            if is_python_scalar(x):
                try:
                    dtype = np.result_type(*strong, x)
                except (OverflowError, TypeError):
                    dtype = None
                x = constant(x) if dtype is None else constant(x, dtype=str(dtype))
            converted.append(as_tensor_variable(x))
        inputs = converted
    else:
        inputs = [as_tensor_variable(x) for x in inputs]
    ndim = max(i.ndim for i in inputs) if inputs else 0
    return [i if i.ndim == ndim else
            dimshuffle(i, ["x"] * (ndim - i.ndim) + list(range(i.ndim))) for i in inputs]


def broadcast_static_shapes(shapes, op_name="elemwise"):
    """The static shape of broadcasting ``shapes`` as NumPy does (shorter ones gain
    leading 1s); None where unknown.  ShapeMismatchError when two known sizes other
    than 1 differ."""
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for dim, sizes in enumerate(zip(*padded)):
        known = {s for s in sizes if s is not None and s != 1}
        if len(known) > 1:
            raise ShapeMismatchError(
                f"{op_name}: dimension {dim} has incompatible static sizes {sorted(known)}")
        if known:
            out.append(known.pop())
        elif all(s == 1 for s in sizes):
            out.append(1)
        else:
            out.append(None)
    return tuple(out)


def broadcast_symbolic_shapes(shapes, broadcastables):
    """The shape of broadcasting ``shapes`` (tuples of int64 scalars, shorter ones
    gaining leading 1s) whose dimensions flagged in ``broadcastables`` have size 1:
    the largest of the other sizes in each dimension (they agree at run time, or
    are 1), or the constant 1 where there is none."""
    from symgraph.ops.math import maximum

    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for dim in range(ndim):
        candidates = []
        for shape, flags in zip(shapes, broadcastables):
            k = dim - (ndim - len(shape))
            if k >= 0 and not flags[k]:
                candidates.append(shape[k])
        if not candidates:
            out.append(constant(1, dtype="int64"))
        else:
            size = candidates[0]
            for c in candidates[1:]:
                size = maximum(size, c)
            out.append(size)
    return tuple(out)


def check_runtime_broadcast(node, values):
    """Raise ShapeMismatchError, naming the inputs, when shapes do not agree."""
    ndim = node.outputs[0].ndim
    for dim in range(ndim):
        size, owner = None, None
        for pos, (var, val) in enumerate(zip(node.inputs, values)):
            if var.type.broadcastable[dim]:
                continue
            got = val.shape[dim]
            if size is None:
                size, owner = got, pos
            elif got != size:
                raise ShapeMismatchError(
                    f"{node.op}: input {pos} has size {got} in dimension {dim}, but input "
                    f"{owner} has size {size} (shapes "
                    f"{', '.join(str(v.shape) for v in values)})")
    for pos, (var, val) in enumerate(zip(node.inputs, values)):
        for dim, b in enumerate(var.type.broadcastable):
            if b and val.shape[dim] != 1:
                raise ShapeMismatchError(
                    f"{node.op}: input {pos} is declared broadcastable in dimension {dim} "
                    f"but has size {val.shape[dim]}")


def reduce_to_input_shape(grad, x):
    """Sum ``grad`` over the dimensions where ``x`` was broadcast, cast to x's dtype."""
    from symgraph.graph.gradient_markers import is_disconnected

    if grad is None or is_disconnected(grad) or getattr(grad.type, "is_null", False):
        return grad
    grad = as_tensor_variable(grad)
    axes = [d for d, (gb, xb) in enumerate(zip(grad.broadcastable, x.broadcastable))
            if xb and not gb]
    if axes:
        from symgraph.ops.reduce import sum as sum_

        grad = sum_(grad, axis=axes, keepdims=True)
    if grad.ndim > x.ndim:
        from symgraph.ops.reduce import sum as sum_

        grad = sum_(grad, axis=list(range(grad.ndim - x.ndim)))
    if x.dtype in ("float16", "float32", "float64") and grad.dtype != x.dtype:
        from symgraph.ops.math import cast

        grad = cast(grad, x.dtype)
    if grad.broadcastable != x.broadcastable:
        from symgraph.ops.shape import specify_shape

        grad = specify_shape(grad, x.type.shape)
    return grad


class DimShuffle(Op):
    """Reorder, add ('x') or drop (size-1) dimensions; returns a view.

    ``new_order`` lists input dimensions and 'x' for new broadcastable ones;
    input dimensions left out must have size 1.
    """

    __props__ = ("input_ndim", "new_order")
    view_map = {0: [0]}

    def __init__(self, input_ndim, new_order):
        self.input_ndim = int(input_ndim)
        self.new_order = tuple(new_order)
        kept = [d for d in self.new_order if d != "x"]
        for d in kept:
            if not isinstance(d, (int, np.integer)) or not 0 <= d < self.input_ndim:
                raise ValueError(f"DimShuffle: {d!r} is not a dimension of a "
                                 f"{self.input_ndim}-d input (pattern {self.new_order})")
        if len(set(kept)) != len(kept):
            raise ValueError(f"DimShuffle: pattern {self.new_order} repeats a dimension")
        self.drop = tuple(d for d in range(self.input_ndim) if d not in kept)
        self.shuffle = tuple(kept)
        self.augment = tuple(i for i, d in enumerate(self.new_order) if d == "x")

    def __str__(self):
        return f"DimShuffle{{{','.join(str(d) for d in self.new_order)}}}"

    __repr__ = __str__

    def make_node(self, x):
        x = as_tensor_variable(x)
        if x.ndim != self.input_ndim:
            raise TypeError(f"{self} expects a {self.input_ndim}-d input, got {x.ndim}-d {x}")
        for d in self.drop:
            if x.type.shape[d] is not None and x.type.shape[d] != 1:
                raise ValueError(f"{self}: cannot drop dimension {d} of {x}, "
                                 f"which has size {x.type.shape[d]}")
            if x.type.shape[d] is None:
                raise ValueError(f"{self}: cannot drop dimension {d} of {x}: it is not "
                                 f"broadcastable (use T.addbroadcast or squeeze first)")
        shape = tuple(1 if d == "x" else x.type.shape[d] for d in self.new_order)
        return Apply(self, [x], [TensorType(x.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        for d in self.drop:
            if x.shape[d] != 1:
                raise ShapeMismatchError(f"{self}: dimension {d} has size {x.shape[d]}, not 1")
        res = x.transpose(self.shuffle + self.drop)
        shape = list(res.shape[:len(self.shuffle)])
        for i in self.augment:
            shape.insert(i, 1)
        output_storage[0][0] = res.reshape(shape)

    def infer_shape(self, fgraph, node, input_shapes):
        (shp,) = input_shapes
        one = constant(1, dtype="int64")
        return [tuple(one if d == "x" else shp[d] for d in self.new_order)]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (gz,) = output_grads
        gz = as_tensor_variable(gz)
        unsure = [i for i in self.augment if not gz.broadcastable[i]]
        if unsure:
            from symgraph.ops.reduce import sum as sum_

            gz = sum_(gz, axis=unsure, keepdims=True)
        # Undo: drop the added dims, put kept dims back in place, re-add dropped ones.
        order = []
        for d in range(self.input_ndim):
            order.append(self.new_order.index(d) if d in self.new_order else "x")
        grad_in = dimshuffle(gz, order)
        if x.dtype in ("float16", "float32", "float64") and grad_in.dtype != x.dtype:
            from symgraph.ops.math import cast

            grad_in = cast(grad_in, x.dtype)
        return [grad_in]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


def dimshuffle(x, pattern):
    """``x`` with its dimensions rearranged by ``pattern`` (see DimShuffle)."""
    x = as_tensor_variable(x)
    pattern = tuple(pattern)
    if pattern == tuple(range(x.ndim)):
        return x
    return DimShuffle(x.ndim, pattern)(x)
