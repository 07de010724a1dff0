"""Joining and splitting tensors: MakeVector, Join (concatenate), stack, Split."""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable, is_python_scalar
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType, upcast

__all__ = ["MakeVector", "Join", "Split", "make_vector", "concatenate", "join", "stack",
           "stacklists", "split"]


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


def _is_float(dtype):
    return dtype in FLOAT_DTYPES or dtype.startswith("complex")


def _as_tensors(tensors, who):
    """Convert a list of tensors/data to variables of one common dtype.

    Python numbers promote weakly, as in element-wise ops.
    """
    if isinstance(tensors, (np.ndarray,)) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{who}: expected a list or tuple of tensors, got "
                        f"{type(tensors).__name__}")
    from symgraph.ops.math import cast

    strong = [as_tensor_variable(t) for t in tensors if not is_python_scalar(t)]
    if strong:
        dtype = upcast(*[t.dtype for t in strong])
        for t in tensors:
            if is_python_scalar(t):
                dtype = str(np.result_type(np.dtype(dtype), t))
    else:
        dtype = upcast(*[as_tensor_variable(t).dtype for t in tensors])
    out = []
    for t in tensors:
        if is_python_scalar(t):
            from symgraph.tensor.basic import constant

            t = constant(t, dtype=dtype)
        out.append(cast(as_tensor_variable(t), dtype))
    return out, dtype


class MakeVector(Op):
    """A vector made of scalars, all of dtype ``dtype``."""

    __props__ = ("dtype",)

    def __init__(self, dtype="int64"):
        self.dtype = str(np.dtype(dtype))

    def make_node(self, *scalars):
        from symgraph.ops.math import cast

        scalars = [as_tensor_variable(s) for s in scalars]
        for pos, s in enumerate(scalars):
            if s.ndim != 0:
                raise TypeError(f"{self}: input {pos} ({s}) is not a scalar: {s.type}")
            if s.dtype != self.dtype:
                if np.can_cast(s.dtype, self.dtype, "same_kind") or \
                        (s.dtype in INT_DTYPES and self.dtype in INT_DTYPES):
                    scalars[pos] = cast(s, self.dtype)
                else:
                    raise TypeError(f"{self}: input {pos} ({s}) has dtype {s.dtype}")
        return Apply(self, scalars, [TensorType(self.dtype, shape=(len(scalars),))()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs, dtype=self.dtype).reshape(len(inputs))

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.tensor.basic import constant

        return [(constant(len(node.inputs), dtype="int64"),)]

    def grad(self, inputs, output_grads):
        from symgraph.ops.subtensor import getitem

        (gz,) = output_grads
        return [getitem(gz, i) if _is_float(x.dtype) else _disconnected(x)
                for i, x in enumerate(inputs)]

    def R_op(self, inputs, eval_points):
        if any(e is None for e in eval_points):
            return [None]
        return [self(*eval_points)]


def make_vector(*scalars, dtype=None):
    """A vector of the given scalars (their common dtype unless ``dtype`` is given)."""
    tensors, common = _as_tensors(list(scalars), "make_vector")
    return MakeVector(dtype or common)(*tensors)


class Join(Op):
    """Concatenation of tensors of one rank and dtype along ``axis``."""

    __props__ = ("axis",)

    def __init__(self, axis=0):
        self.axis = int(axis)

    def make_node(self, *tensors):
        if not tensors:
            raise ValueError(f"{self}: nothing to join")
        tensors = [as_tensor_variable(t) for t in tensors]
        first = tensors[0]
        if not 0 <= self.axis < first.ndim:
            raise IndexError(f"{self}: axis out of range for {first.ndim}-d inputs")
        for pos, t in enumerate(tensors):
            if t.ndim != first.ndim or t.dtype != first.dtype:
                raise TypeError(f"{self}: input {pos} ({t}) is {t.type}; every input must "
                                f"be {first.ndim}-d of dtype {first.dtype}")
        out_shape = []
        for dim in range(first.ndim):
            sizes = [t.type.shape[dim] for t in tensors]
            if dim == self.axis:
                out_shape.append(None if None in sizes else sum(sizes))
                continue
            known = {s for s in sizes if s is not None}
            if len(known) > 1:
                raise ValueError(f"{self}: the inputs have different static sizes "
                                 f"{sorted(known)} in dimension {dim}")
            out_shape.append(known.pop() if known else None)
        return Apply(self, tensors, [TensorType(first.dtype, shape=tuple(out_shape))()])

    def perform(self, node, inputs, output_storage):
        for pos, value in enumerate(inputs):
            for dim in range(value.ndim):
                if dim != self.axis and value.shape[dim] != inputs[0].shape[dim]:
                    raise ValueError(
                        f"{self}: input {pos} ({node.inputs[pos]}) has shape {value.shape}, "
                        f"which differs from input 0's {inputs[0].shape} in dimension {dim}")
        output_storage[0][0] = np.concatenate(inputs, axis=self.axis)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import add

        out = list(input_shapes[0])
        sizes = [shp[self.axis] for shp in input_shapes]
        out[self.axis] = sizes[0] if len(sizes) == 1 else add(*sizes)
        return [tuple(out)]

    def grad(self, inputs, output_grads):
        from symgraph.ops.shape import shape_i

        (gz,) = output_grads
        if not _is_float(gz.dtype):
            return [_disconnected(x) for x in inputs]
        if len(inputs) == 1:
            return [gz]
        sizes = make_vector(*[shape_i(x, self.axis) for x in inputs], dtype="int64")
        parts = Split(len(inputs), self.axis)(gz, sizes)
        from symgraph.ops.shape import patternbroadcast

        return [patternbroadcast(p, x.broadcastable) for p, x in zip(parts, inputs)]

    def R_op(self, inputs, eval_points):
        if any(e is None for e in eval_points):
            return [None]
        return [self(*eval_points)]


def concatenate(tensors, axis=0):
    """The tensors joined along ``axis`` (NumPy's concatenate; dtypes are upcast)."""
    tensors, _ = _as_tensors(tensors, "concatenate")
    if not tensors:
        raise ValueError("concatenate: needs at least one tensor")
    ndim = tensors[0].ndim
    if ndim == 0:
        raise ValueError("concatenate: zero-dimensional tensors cannot be concatenated "
                         "(use stack)")
    for pos, t in enumerate(tensors):
        if t.ndim != ndim:
            raise ValueError(f"concatenate: tensor {pos} ({t}) has {t.ndim} dimensions, "
                             f"tensor 0 has {ndim}")
    if not isinstance(axis, (numbers.Integral, np.integer)) or not -ndim <= axis < ndim:
        raise IndexError(f"concatenate: axis {axis!r} is out of range for {ndim}-d tensors")
    if len(tensors) == 1:
        return tensors[0]
    return Join(int(axis) % ndim)(*tensors)


def join(axis, *tensors):
    """Theano's argument order: ``join(axis, t1, t2, ...)``."""
    return concatenate(list(tensors), axis=axis)


def stack(tensors, *more, axis=0):
    """The tensors (all of one shape) stacked along a new dimension ``axis``.

    ``stack([a, b])`` is the form to use; ``stack(a, b)`` is accepted as Theano did.
    """
    if more or not isinstance(tensors, (list, tuple)):
        tensors = [tensors, *more]
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    tensors, dtype = _as_tensors(tensors, "stack")
    ndim = tensors[0].ndim
    for pos, t in enumerate(tensors):
        if t.ndim != ndim:
            raise ValueError(f"stack: tensor {pos} ({t}) has {t.ndim} dimensions, "
                             f"tensor 0 has {ndim}")
    if not isinstance(axis, (numbers.Integral, np.integer)) or not -ndim - 1 <= axis <= ndim:
        raise IndexError(f"stack: axis {axis!r} is out of range for {ndim + 1}-d results")
    axis = int(axis) % (ndim + 1)
    if ndim == 0:
        return MakeVector(dtype)(*tensors)
    from symgraph.ops.shape import expand_dims

    expanded = [expand_dims(t, axis) for t in tensors]
    if len(expanded) == 1:
        return expanded[0]
    return Join(axis)(*expanded)


def stacklists(tensor_list):
    """Theano's ``stacklists``: nested lists of tensors stacked into one tensor of
    the same nesting, ``stacklists([[a, b], [c, d]])`` is ``[[a, b], [c, d]]``
    as a tensor of two more dimensions than ``a``."""
    if isinstance(tensor_list, (list, tuple)):
        if not tensor_list:
            raise ValueError("stacklists: an empty list has nothing to stack")
        return stack([stacklists(item) for item in tensor_list])
    return tensor_list


class Split(Op):
    """``x`` cut into ``len_splits`` pieces along ``axis``; the sizes are an int vector.

    Each output is a view of ``x``.
    """

    __props__ = ("len_splits", "axis")

    def __init__(self, len_splits, axis=0):
        self.len_splits = int(len_splits)
        self.axis = int(axis)
        self.view_map = {i: [0] for i in range(self.len_splits)}

    def make_node(self, x, splits):
        from symgraph.ops.math import cast
        from symgraph.ops.shape import constant_int

        x = as_tensor_variable(x)
        splits = as_tensor_variable(splits)
        if splits.ndim != 1 or splits.dtype not in INT_DTYPES:
            raise TypeError(f"{self}: the split sizes must be an int vector, got {splits.type}")
        splits = cast(splits, "int64")
        if not 0 <= self.axis < x.ndim:
            raise IndexError(f"{self}: axis out of range for {x.ndim}-d {x}")
        sizes = [None] * self.len_splits
        if splits.owner is not None and isinstance(splits.owner.op, MakeVector):
            sizes = [constant_int(s) for s in splits.owner.inputs]
        elif hasattr(splits, "data"):
            sizes = [int(s) for s in np.asarray(splits.data)]
        if len(sizes) != self.len_splits:
            raise ValueError(f"{self}: {len(sizes)} split sizes given for "
                             f"{self.len_splits} pieces")
        outs = []
        for size in sizes:
            shape = list(x.type.shape)
            shape[self.axis] = size
            outs.append(TensorType(x.dtype, shape=tuple(shape))())
        return Apply(self, [x, splits], outs)

    def perform(self, node, inputs, output_storage):
        x, splits = inputs
        if len(splits) != self.len_splits:
            raise ValueError(f"{self}: got {len(splits)} split sizes, expected "
                             f"{self.len_splits}")
        if (splits < 0).any() or splits.sum() != x.shape[self.axis]:
            raise ValueError(f"{self}: split sizes {splits.tolist()} do not add up to the "
                             f"size {x.shape[self.axis]} of dimension {self.axis} of "
                             f"{node.inputs[0]}")
        start = 0
        for storage, size in zip(output_storage, splits):
            index = [slice(None)] * x.ndim
            index[self.axis] = slice(start, start + int(size))
            storage[0] = x[tuple(index)]
            start += int(size)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.subtensor import getitem

        x_shape = input_shapes[0]
        out = []
        for i in range(self.len_splits):
            shp = list(x_shape)
            shp[self.axis] = getitem(node.inputs[1], i)
            out.append(tuple(shp))
        return out

    def connection_pattern(self, node):
        return [[True] * self.len_splits, [False] * self.len_splits]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import is_disconnected
        from symgraph.ops.alloc import zeros
        from symgraph.ops.shape import shape_i
        from symgraph.ops.subtensor import getitem

        x, splits = inputs
        if not _is_float(x.dtype):
            return [_disconnected(x), _disconnected(splits)]
        parts = []
        for i, g in enumerate(output_grads):
            if g is None or is_disconnected(g):
                shp = [shape_i(x, d) for d in range(x.ndim)]
                shp[self.axis] = getitem(splits, i)
                g = zeros(shp, dtype=x.dtype)
            parts.append(g)
        return [concatenate(parts, axis=self.axis), _disconnected(splits)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None] * self.len_splits
        return self.make_node(eval_points[0], inputs[1]).outputs


def split(x, splits_size, n_splits, axis=0):
    """``x`` cut along ``axis`` into ``n_splits`` pieces of sizes ``splits_size``
    (Theano's signature); returns a list of tensors."""
    x = as_tensor_variable(x)
    if not isinstance(axis, (numbers.Integral, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise IndexError(f"split: axis {axis!r} is out of range for {x.ndim}-d {x}")
    if isinstance(splits_size, (list, tuple)):
        from symgraph.ops.shape import as_shape_vector

        if all(isinstance(s, (numbers.Integral, np.integer)) for s in splits_size):
            from symgraph.tensor.basic import constant

            splits_size = constant(np.asarray(splits_size, dtype="int64"))
        else:
            splits_size = as_shape_vector(splits_size, "split")
    outs = Split(n_splits, int(axis) % x.ndim)(x, splits_size)
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]
