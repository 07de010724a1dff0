"""Advanced indexing: integer arrays and boolean masks (NumPy's semantics), and nonzero.

``AdvancedSubtensor`` shares the ``idx_list`` form of ``Subtensor``: per indexed
dimension an int, a ``SliceSpec`` or ``'?'``, an extra input that may be an int
scalar, an int array or a bool mask.  The result is a copy.  As in NumPy, the
dimensions that the array indices broadcast to replace the indexed ones in place
when the array indices (and ints) are adjacent, and go first otherwise.

``AdvancedIncSubtensor`` increments with ``np.add.at``, so repeated indices
accumulate; its set form assigns (the last repeated index wins).
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op
from symgraph.ops.elemwise import (ShapeMismatchError, broadcast_static_shapes,
                                   broadcast_symbolic_shapes)
from symgraph.ops.shape import shape_i
from symgraph.ops.subtensor import (SYMBOLIC, BaseIncSubtensor, BaseSubtensor, SliceSpec,
                                    check_pattern, check_runtime_value, index_from_pattern,
                                    static_slice_length, symbolic_slice_length,
                                    _disconnected, _index_error)
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import INT_DTYPES, TensorType

__all__ = ["AdvancedSubtensor", "AdvancedIncSubtensor", "Nonzero", "nonzero",
           "flatnonzero", "nonzero_values"]


# ---------------------------------------------------------------------------
# Where each output dimension comes from


def _entries(op, x, idx_list, index_inputs):
    """Pair every ``idx_list`` entry with its kind, its values and the dimensions of
    ``x`` that it indexes; raise clear errors for bad patterns.

    Returns a list of (kind, value, first_dim) with kind 'int', 'array', 'bool' or
    'slice'; value is an int, a variable, or (SliceSpec, [part variables]).
    """
    inputs = iter(index_inputs)
    out, dim = [], 0
    for entry in idx_list:
        if isinstance(entry, SliceSpec):
            parts = [next(inputs) for p in entry if p == SYMBOLIC]
            out.append(("slice", (entry, parts), dim))
            dim += 1
            continue
        if entry != SYMBOLIC:
            out.append(("int", entry, dim))
            dim += 1
            continue
        var = next(inputs)
        if var.dtype == "bool":
            if var.ndim == 0:
                raise TypeError(f"{op}: a 0-d boolean index is not supported")
            out.append(("bool", var, dim))
            dim += var.ndim
        elif var.dtype in INT_DTYPES:
            out.append(("int" if var.ndim == 0 else "array", var, dim))
            dim += 1
        else:
            raise TypeError(f"{op}: index {var} must be of integer or bool dtype, "
                            f"got {var.type}")
    if dim > x.ndim:
        raise IndexError(f"{op}: too many indices for {x.ndim}-d {x}: the index uses "
                         f"{dim} dimensions")
    return out


def _advanced_first(entries):
    """True when the advanced indices are not adjacent (their dims then go first)."""
    positions = [i for i, (kind, _, _) in enumerate(entries) if kind != "slice"]
    return positions != list(range(positions[0], positions[-1] + 1))


def _output_layout(entries, x_ndim):
    """The output dimensions, each ('adv', k) for dimension k of the broadcast index
    shape, or ('slice', entry_number) or ('dim', input dim) for untouched trailing dims."""
    adv_pos = [i for i, (kind, _, _) in enumerate(entries) if kind != "slice"]
    slices = [("slice", i) for i, (kind, _, _) in enumerate(entries) if kind == "slice"]
    used = entries[-1][2] + (entries[-1][1].ndim if entries[-1][0] == "bool" else 1)
    trailing = [("dim", d) for d in range(used, x_ndim)]
    return adv_pos, slices, trailing


def _broadcast_static(shapes):
    try:
        return broadcast_static_shapes(shapes, "indexing: the index arrays cannot be "
                                               "broadcast together")
    except ShapeMismatchError as exc:
        raise IndexError(str(exc)) from None  # an index error, as NumPy's


def _static_index_shape(kind, value):
    if kind == "int":
        return ()
    if kind == "array":
        return value.type.shape
    if isinstance(value, Constant):  # a constant mask: its count is known
        return (int(np.count_nonzero(value.data)),)
    return (None,)


def _check_static_bounds(op, x, entries):
    for kind, value, dim in entries:
        size = x.type.shape[dim]
        if kind == "bool":
            for d, (have, want) in enumerate(zip(value.type.shape, x.type.shape[dim:])):
                if have is not None and want is not None and have != want:
                    raise IndexError(f"{op}: the boolean index {value} has static size "
                                     f"{have} in its dimension {d}, but dimension {dim + d} "
                                     f"of {x} has size {want}")
            continue
        if size is None or kind == "slice":
            continue
        data = value if isinstance(value, int) else getattr(value, "data", None)
        if data is None or np.size(data) == 0:
            continue
        data = np.asarray(data)
        if data.max() >= size or data.min() < -size:
            bad = data[(data >= size) | (data < -size)].ravel()[0]
            raise IndexError(f"{op}: index {int(bad)} is out of bounds for dimension {dim} "
                             f"of {x}, of static size {size}")


def _output_shape(entries, x_shape, broadcast_indices, slice_length):
    """The output shape, static or symbolic by the functions given:
    ``broadcast_indices(advanced entries)`` the broadcast shape of the index arrays,
    ``slice_length((spec, part variables), size)`` the length of a slice.  The index
    dimensions go first when the advanced indices are not adjacent, else in place."""
    adv_pos, slices, trailing = _output_layout(entries, len(x_shape))
    adv = list(broadcast_indices([entries[i] for i in adv_pos]))
    slice_sizes = [(i, slice_length(entries[i][1], x_shape[entries[i][2]])) for _, i in slices]
    tail = [x_shape[d] for _, d in trailing]
    if _advanced_first(entries):
        return tuple(adv + [s for _, s in slice_sizes] + tail)
    before = [s for i, s in slice_sizes if i < adv_pos[0]]
    after = [s for i, s in slice_sizes if i > adv_pos[0]]
    return tuple(before + adv + after + tail)


def _output_static_shape(entries, x):
    return _output_shape(
        entries, x.type.shape,
        lambda adv: _broadcast_static([_static_index_shape(k, v) for k, v, _ in adv]),
        lambda part, size: static_slice_length(part[0], size))


# ---------------------------------------------------------------------------
# The ops


class AdvancedSubtensor(BaseSubtensor):
    """``x[idx]`` where the index holds integer arrays or boolean masks (a copy)."""

    def make_node(self, x, *index_inputs):
        x = as_tensor_variable(x)
        index_inputs = [as_tensor_variable(i) for i in index_inputs]
        check_pattern(self, x, self.idx_list, index_inputs, scalars_only=False)
        entries = _entries(self, x, self.idx_list, index_inputs)
        if all(kind in ("int", "slice") for kind, _, _ in entries):
            raise TypeError(f"{self}: no array index; use Subtensor")
        _check_static_bounds(self, x, entries)
        shape = _output_static_shape(entries, x)
        return Apply(self, [x] + index_inputs, [TensorType(x.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        index = index_from_pattern(self.idx_list, inputs[1:])
        try:
            output_storage[0][0] = np.asarray(x[index])
        except IndexError as exc:
            raise _index_error(self, node, x, index, exc) from None

    def infer_shape(self, fgraph, node, input_shapes):
        x = node.inputs[0]
        index_inputs = node.inputs[1:]
        entries = _entries(self, x, self.idx_list, index_inputs)
        shape_of = dict(zip(index_inputs, input_shapes[1:]))
        return [_output_shape(
            entries, input_shapes[0],
            lambda adv: _broadcast_symbolic([(kind, value) for kind, value, _ in adv], shape_of),
            lambda part, size: symbolic_slice_length(part[0], size, iter(part[1])))]


def _broadcast_symbolic(adv_entries, shape_of):
    """The broadcast shape of the advanced indices, as int64 scalars."""
    shapes, flags = [], []
    for kind, value in adv_entries:
        if kind == "int":
            shapes.append(())
            flags.append(())
        elif kind == "array":
            shapes.append(shape_of[value])
            flags.append(value.broadcastable)
        else:
            count = _static_index_shape(kind, value)[0]
            if count is None:
                count = shape_i(nonzero(value)[0], 0)
            else:
                count = constant(count, dtype="int64")
            shapes.append((count,))
            flags.append((False,))
    return broadcast_symbolic_shapes(shapes, flags)


def _mask_to_nonzero(index):
    """The index with each boolean mask replaced by its nonzero() arrays."""
    out = []
    for part in index:
        if isinstance(part, np.ndarray) and part.dtype == bool:
            out.extend(np.nonzero(part))
        else:
            out.append(part)
    return tuple(out)


class AdvancedIncSubtensor(BaseIncSubtensor):
    """``x`` with ``x[idx]`` incremented by ``y`` (``np.add.at``: repeated indices
    accumulate) or set to ``y`` (the last repeated index wins), for an advanced index."""

    subtensor_class = AdvancedSubtensor
    str_prefix = "Advanced"

    def perform(self, node, inputs, output_storage):
        x, y = inputs[0], inputs[1]
        out = x if self.inplace else x.copy()
        index = index_from_pattern(self.idx_list, inputs[2:])
        try:
            # The indexed shape, without copying the data (a zero-stride view).
            target = np.broadcast_to(np.zeros((), dtype=np.int8), x.shape)[index].shape
        except IndexError as exc:
            raise _index_error(self, node, x, index, exc) from None
        check_runtime_value(self, node, target, y)
        if self.set_instead_of_inc:
            out[index] = y
        else:
            # y broadcast first: NumPy's add.at reads garbage when it broadcasts
            # y itself against an index array of 2 or more dimensions.
            np.add.at(out, _mask_to_nonzero(index), np.broadcast_to(y, target))
        output_storage[0][0] = out


AdvancedSubtensor.increment_class = AdvancedIncSubtensor  # its gradient (defined after it)


# ---------------------------------------------------------------------------
# nonzero


class Nonzero(Op):
    """The indices of the non-zero elements of ``x``: one int64 vector per dimension."""

    def make_node(self, x):
        x = as_tensor_variable(x)
        if x.ndim == 0:
            raise ValueError(f"{self}: nonzero of a 0-d tensor is not defined; use "
                             f"nonzero(x.flatten())")
        return Apply(self, [x], [TensorType("int64", shape=(None,))() for _ in range(x.ndim)])

    def perform(self, node, inputs, output_storage):
        for storage, idx in zip(output_storage, np.nonzero(inputs[0])):
            storage[0] = idx.astype("int64", copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import cast, neq
        from symgraph.ops.reduce import sum as sum_

        count = cast(sum_(neq(node.inputs[0], 0)), "int64")
        return [(count,)] * len(node.outputs)

    def connection_pattern(self, node):
        return [[False] * len(node.outputs)]

    def grad(self, inputs, output_grads):
        return [_disconnected(inputs[0])]


def nonzero(x, return_matrix=False):
    """The indices of the non-zero elements of ``x``: a tuple of int64 vectors, one per
    dimension (a single (ndim, N) matrix with ``return_matrix``), as Theano's."""
    outs = Nonzero()(x)
    outs = tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
    if return_matrix:
        from symgraph.ops.join import stack

        return stack(list(outs))
    return outs


def flatnonzero(x):
    """The indices of the non-zero elements of ``x`` flattened."""
    from symgraph.ops.shape import flatten

    return nonzero(flatten(x, 1))[0]


def nonzero_values(x):
    """The non-zero elements of ``x`` flattened."""
    from symgraph.ops.shape import flatten
    from symgraph.ops.subtensor import getitem

    flat = flatten(x, 1)
    return getitem(flat, nonzero(flat)[0])
