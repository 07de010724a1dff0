"""Indexing: ``x[idx]``, ``set_subtensor`` and ``inc_subtensor``.

Basic indexing (ints, int scalars, slices, ``None``, ``...``) is a ``Subtensor``
whose output is a view of its input.  Its ``idx_list`` describes the index: per
indexed dimension an int (a constant index), ``'?'`` (an index taken from the next
extra input, an int scalar) or a ``SliceSpec`` whose parts are None, ints or
``'?'``.  Integer-array and boolean-mask indices go to ``AdvancedSubtensor``
(``ops/advanced_subtensor.py``), with NumPy's advanced-indexing semantics.

``None`` in an index becomes a DimShuffle of ``x`` before the Subtensor, as in
Theano, so that the ops only ever see indices over existing dimensions.
"""

import numbers
from collections import namedtuple

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Variable
from symgraph.ops.elemwise import DimShuffle, dimshuffle
from symgraph.ops.shape import Shape, Shape_i, constant_int, shape_i
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["Subtensor", "IncSubtensor", "getitem", "set_subtensor", "inc_subtensor",
           "SliceSpec"]

SYMBOLIC = "?"


class SliceSpec(namedtuple("SliceSpec", ["start", "stop", "step"])):
    """A hashable slice in an ``idx_list``: each part None, an int or ``'?'``."""

    __slots__ = ()

    def __str__(self):
        parts = ["" if p is None else str(p) for p in self]
        return ":".join(parts[:2] if self.step is None else parts)


FULL_SLICE = SliceSpec(None, None, None)


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


# ---------------------------------------------------------------------------
# The index pattern: from idx_list plus run-time values to a NumPy index


def index_from_pattern(idx_list, values):
    """The NumPy index tuple that ``idx_list`` describes, with ``'?'`` parts taken in
    order from ``values`` (0-d arrays become ints)."""
    values = iter(values)

    def take(part):
        if part == SYMBOLIC:
            value = next(values)
            return int(value) if np.ndim(value) == 0 else value
        return part

    out = []
    for entry in idx_list:
        if isinstance(entry, SliceSpec):
            out.append(slice(*[take(p) for p in entry]))
        else:
            out.append(take(entry))
    return tuple(out)


def pattern_str(idx_list):
    """``idx_list`` printed as an index: ``[1:?, ?]``."""
    return "[" + ", ".join(str(e) for e in idx_list) + "]"


def _index_error(op, node, x, index, exc):
    shown = tuple(i.tolist() if isinstance(i, np.ndarray) and i.size <= 10 else i
                  for i in index)
    return IndexError(f"{op}: index {shown} is out of bounds for {node.inputs[0]} of shape "
                      f"{x.shape} ({exc})")


# ---------------------------------------------------------------------------
# Static and symbolic lengths of a slice


def static_slice_length(spec, size):
    """The length of ``spec`` over a dimension of static ``size``, or None when unknown."""
    if spec.step == 0:
        raise ValueError("slice step cannot be zero")
    if spec.start is None and spec.stop is None and spec.step in (None, 1, -1):
        return size
    if size is None or SYMBOLIC in spec:
        return None
    return len(range(*slice(*spec).indices(size)))


class SliceLength(Op):
    """The length of ``slice(start, stop, step)`` over a dimension of size ``n``.

    ``present`` says which of start, stop, step are inputs (after ``n``); the
    others are None.  Used by infer_shape: one node instead of a dozen switches.
    """

    __props__ = ("present",)

    def __init__(self, present):
        self.present = tuple(bool(p) for p in present)

    def make_node(self, n, *parts):
        inputs = [as_tensor_variable(v) for v in (n,) + parts]
        return Apply(self, inputs, [TensorType("int64", shape=())()])

    def perform(self, node, inputs, output_storage):
        n, parts = int(inputs[0]), iter(inputs[1:])
        args = [int(next(parts)) if p else None for p in self.present]
        output_storage[0][0] = np.asarray(len(range(*slice(*args).indices(n))), dtype="int64")

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def connection_pattern(self, node):
        return [[False]] * len(node.inputs)

    def grad(self, inputs, output_grads):
        return [_disconnected(v) for v in inputs]


def symbolic_slice_length(spec, size, values):
    """An int64 scalar: the length of ``spec`` over ``size``; ``values`` iterates the
    variables of the spec's ``'?'`` parts."""
    if spec.start is None and spec.stop is None and spec.step in (None, 1, -1):
        return size
    parts = [next(values) if p == SYMBOLIC else (None if p is None else constant(p, dtype="int64"))
             for p in spec]
    known = constant_int(size)
    if known is not None and all(p is None or constant_int(p) is not None for p in parts):
        args = [None if p is None else constant_int(p) for p in parts]
        return constant(len(range(*slice(*args).indices(known))), dtype="int64")
    return SliceLength([p is not None for p in parts])(size, *[p for p in parts if p is not None])


# ---------------------------------------------------------------------------
# Basic indexing


class BaseSubtensor(Op):
    """What Subtensor and AdvancedSubtensor share: ``x[idx]`` for an ``idx_list``,
    with inputs ``(x, *index_inputs)``.  The gradient scatters into zeros with
    ``increment_class`` (the matching IncSubtensor), linear in ``x`` alone."""

    __props__ = ("idx_list",)
    increment_class = None

    def __init__(self, idx_list):
        self.idx_list = tuple(idx_list)

    def __str__(self):
        return f"{type(self).__name__}{{{pattern_str(self.idx_list)[1:-1]}}}"

    __repr__ = __str__

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def grad(self, inputs, output_grads):
        x, rest = inputs[0], inputs[1:]
        (gz,) = output_grads
        if x.dtype not in FLOAT_DTYPES and not x.dtype.startswith("complex"):
            return [_disconnected(v) for v in inputs]
        gz = _as_dtype(gz, x.dtype)
        gx = self.increment_class(self.idx_list)(zeros_like_shape(x), gz, *rest)
        return [gx] + [_disconnected(i) for i in rest]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


class Subtensor(BaseSubtensor):
    """``x[idx]`` for a basic index: a view of ``x`` (see the module docstring)."""

    view_map = {0: [0]}

    def make_node(self, x, *index_inputs):
        x = as_tensor_variable(x)
        index_inputs = [as_tensor_variable(i) for i in index_inputs]
        check_pattern(self, x, self.idx_list, index_inputs, scalars_only=True)
        out_shape = []
        for dim, entry in enumerate(self.idx_list):
            size = x.type.shape[dim]
            if isinstance(entry, SliceSpec):
                out_shape.append(static_slice_length(entry, size))
            elif isinstance(entry, int) and size is not None and not -size <= entry < size:
                raise IndexError(f"{self}: index {entry} is out of bounds for dimension "
                                 f"{dim} of {x}, of static size {size}")
        out_shape.extend(x.type.shape[len(self.idx_list):])
        return Apply(self, [x] + index_inputs, [TensorType(x.dtype, shape=tuple(out_shape))()])

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        index = index_from_pattern(self.idx_list, inputs[1:])
        try:
            # The trailing Ellipsis makes NumPy return a 0-d view, not a scalar copy.
            output_storage[0][0] = x[index + (Ellipsis,)]
        except IndexError as exc:
            raise _index_error(self, node, x, index, exc) from None

    def infer_shape(self, fgraph, node, input_shapes):
        x_shape = input_shapes[0]
        values = iter(node.inputs[1:])
        out = []
        for dim, entry in enumerate(self.idx_list):
            if isinstance(entry, SliceSpec):
                out.append(symbolic_slice_length(entry, x_shape[dim], values))
            elif entry == SYMBOLIC:
                next(values)
        out.extend(x_shape[len(self.idx_list):])
        return [tuple(out)]


def _as_dtype(var, dtype):
    """``var`` cast to ``dtype`` when it differs (gradients may arrive upcast)."""
    from symgraph.ops.math import cast

    return var if var.dtype == dtype else cast(var, dtype)


def zeros_like_shape(x):
    """Zeros of ``x``'s shape and dtype (through Alloc, with ``x``'s static shape)."""
    from symgraph.ops.alloc import alloc

    return alloc(constant(0, dtype=x.dtype), *[shape_i(x, d) for d in range(x.ndim)])


def check_pattern(op, x, idx_list, index_inputs, scalars_only):
    """Validate an ``idx_list`` against ``x`` and the ``'?'`` inputs; raise clear errors."""
    n_symbolic = sum(1 for e in idx_list if e == SYMBOLIC) + \
        sum(list(e).count(SYMBOLIC) for e in idx_list if isinstance(e, SliceSpec))
    if n_symbolic != len(index_inputs):
        raise TypeError(f"{op}: the index pattern needs {n_symbolic} index inputs, got "
                        f"{len(index_inputs)}")
    if scalars_only:
        if len(idx_list) > x.ndim:
            raise IndexError(f"{op}: too many indices ({len(idx_list)}) for {x.ndim}-d {x}")
        for i in index_inputs:
            if i.ndim != 0 or i.dtype not in INT_DTYPES:
                raise TypeError(f"{op}: index {i} must be an int scalar, got {i.type}")


class BaseIncSubtensor(Op):
    """What IncSubtensor and AdvancedIncSubtensor share: ``x`` with ``x[idx]``
    incremented by ``y`` (or set to ``y``), inputs ``(x, y, *index_inputs)``; a
    new array unless ``inplace``.  ``subtensor_class`` is the matching indexing op
    (it checks the index and reads the gradient of ``y``)."""

    __props__ = ("idx_list", "set_instead_of_inc", "inplace")
    subtensor_class = None
    str_prefix = ""  # before "IncSubtensor" / "SetSubtensor" in the op's name

    def __init__(self, idx_list, set_instead_of_inc=False, inplace=False):
        self.idx_list = tuple(idx_list)
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if inplace else {}

    def __str__(self):
        kind = "Set" if self.set_instead_of_inc else "Inc"
        extra = ";inplace" if self.inplace else ""
        return f"{self.str_prefix}{kind}Subtensor{{{pattern_str(self.idx_list)[1:-1]}{extra}}}"

    __repr__ = __str__

    def make_node(self, x, y, *index_inputs):
        x = as_tensor_variable(x)
        y = as_tensor_variable(y)
        index_inputs = [as_tensor_variable(i) for i in index_inputs]
        sub = self.subtensor_class(self.idx_list).make_node(x, *index_inputs).outputs[0]
        check_update_value(self, sub, y, x)
        return Apply(self, [x, y] + index_inputs, [x.type()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True]] + [[False]] * (len(node.inputs) - 2)

    def grad(self, inputs, output_grads):
        x, y, rest = inputs[0], inputs[1], inputs[2:]
        (gz,) = output_grads
        if x.dtype not in FLOAT_DTYPES and not x.dtype.startswith("complex"):
            return [_disconnected(v) for v in inputs]
        if self.set_instead_of_inc:
            gx = type(self)(self.idx_list, True)(gz, constant(0, dtype=gz.dtype), *rest)
        else:
            gx = gz
        gy = reduce_to_value_shape(self.subtensor_class(self.idx_list)(gz, *rest), y)
        return [gx, gy] + [_disconnected(i) for i in rest]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None or eval_points[1] is None:
            return [None]
        return [self(eval_points[0], eval_points[1], *inputs[2:])]


class IncSubtensor(BaseIncSubtensor):
    """``x`` with ``x[idx]`` incremented by ``y`` (or set to ``y``), for a basic
    index.  ``y`` broadcasts over its dimensions of static size 1 and over
    missing leading dimensions."""

    subtensor_class = Subtensor

    def perform(self, node, inputs, output_storage):
        x, y = inputs[0], inputs[1]
        out = x if self.inplace else x.copy()
        index = index_from_pattern(self.idx_list, inputs[2:]) + (Ellipsis,)
        try:
            view = out[index]
        except IndexError as exc:
            raise _index_error(self, node, x, index[:-1], exc) from None
        check_runtime_value(self, node, view.shape, y)
        if self.set_instead_of_inc:
            view[...] = y
        else:
            view[...] += y
        output_storage[0][0] = out


Subtensor.increment_class = IncSubtensor  # its gradient (defined after it)


def check_update_value(op, sub, y, x):
    """``y`` must fit ``sub`` (= ``x[idx]``): rank, dtype and static sizes."""
    if y.ndim > sub.ndim:
        raise ValueError(f"{op}: the value {y} has {y.ndim} dimensions, more than the "
                         f"{sub.ndim} of the indexed part of {x}")
    if y.dtype != x.dtype:
        raise TypeError(f"{op}: the value {y} has dtype {y.dtype}, {x} has {x.dtype} "
                        f"(set_subtensor/inc_subtensor cast it when it is safe)")
    lead = sub.ndim - y.ndim
    for d, (have, want) in enumerate(zip(y.type.shape, sub.type.shape[lead:])):
        if have not in (None, 1) and want is not None and have != want:
            raise ValueError(f"{op}: the value {y} has static size {have} in dimension {d}, "
                             f"the indexed part of {x} has {want}")


def check_runtime_value(op, node, target_shape, y):
    """At run time ``y`` may broadcast only where it was declared broadcastable."""
    y_var = node.inputs[1]
    lead = len(target_shape) - y.ndim
    for d, size in enumerate(y.shape):
        if size != target_shape[lead + d] and not y_var.type.broadcastable[d]:
            raise ValueError(f"{op}: the value {y_var} has shape {y.shape}, which does not "
                             f"match the indexed shape {tuple(target_shape)} (dimension {d}; "
                             f"only dimensions declared broadcastable may broadcast)")


def reduce_to_value_shape(g, y):
    """``g`` (of the indexed part's shape) summed down to ``y``'s shape."""
    from symgraph.ops.elemwise import reduce_to_input_shape

    if g.ndim > y.ndim:
        from symgraph.ops.reduce import sum as sum_

        g = sum_(g, axis=list(range(g.ndim - y.ndim)))
    return reduce_to_input_shape(g, y)


# ---------------------------------------------------------------------------
# From a Python index to ops


def _scalar_part(value, what):
    """A slice part or an int index: None, an int, or an int scalar variable."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"indexing: {what} cannot be a bool ({value!r})")
    if isinstance(value, (numbers.Integral, np.integer)):
        return int(value)
    if isinstance(value, Variable) or isinstance(value, (np.ndarray, float, np.floating)):
        var = as_tensor_variable(value)
        if var.ndim != 0 or var.dtype not in INT_DTYPES:
            raise TypeError(f"indexing: {what} must be an integer scalar, got {var} of "
                            f"type {var.type}")
        known = constant_int(var) if isinstance(var, Constant) else None
        return var if known is None else known
    raise TypeError(f"indexing: {what} must be an integer, got {type(value).__name__} "
                    f"{value!r}")


def _classify(entry):
    """One element of a user index as (kind, value): 'none', 'ellipsis', 'slice',
    'int' (an int or int scalar variable), 'array' (an int tensor, ndim >= 1) or
    'bool' (a bool tensor, ndim >= 1)."""
    if entry is None:
        return "none", None
    if entry is Ellipsis:
        return "ellipsis", None
    if isinstance(entry, slice):
        parts = tuple(_scalar_part(p, f"slice {name}")
                      for p, name in zip((entry.start, entry.stop, entry.step),
                                         ("start", "stop", "step")))
        if parts[2] == 0:
            raise ValueError("indexing: slice step cannot be zero")
        return "slice", parts
    if isinstance(entry, tuple):
        entry = list(entry)  # a tuple inside the index is an array, as in NumPy
    if isinstance(entry, list) and any(isinstance(e, Variable) for e in entry):
        entry = as_tensor_variable(entry)  # symbolic scalars in a list: stack them
    if isinstance(entry, (list, np.ndarray)):
        arr = np.asarray(entry)
        if arr.dtype == bool:
            entry = constant(arr)
        elif arr.size == 0 or arr.dtype.kind in "iu":
            entry = constant(arr.astype("int64") if arr.dtype.kind not in "iu" else arr)
        else:
            raise TypeError(f"indexing: index arrays must hold integers or bools, got "
                            f"dtype {arr.dtype}")
    if isinstance(entry, Variable):
        var = as_tensor_variable(entry)
        if var.dtype == "bool":
            if var.ndim == 0:
                raise TypeError("indexing: a 0-d boolean index is not supported")
            return "bool", var
        if var.dtype not in INT_DTYPES:
            raise TypeError(f"indexing: index {var} must have an integer or bool dtype, "
                            f"got {var.dtype}")
        if var.ndim == 0:
            return "int", _scalar_part(var, "an index")
        return "array", var
    return "int", _scalar_part(entry, "an index")


def _dims_used(kind, value):
    if kind in ("none", "ellipsis"):
        return 0
    return value.ndim if kind == "bool" else 1


def normalize_index(x, index):
    """``index`` as a list of (kind, value) with Ellipsis expanded and ``None`` removed,
    plus the DimShuffle-d ``x`` that the ``None``s asked for."""
    if not isinstance(index, tuple):
        index = (index,)
    entries = [_classify(e) for e in index]
    if sum(1 for k, _ in entries if k == "ellipsis") > 1:
        raise IndexError("indexing: an index can only have a single ellipsis ('...')")
    used = sum(_dims_used(k, v) for k, v in entries)
    if used > x.ndim:
        raise IndexError(f"indexing: too many indices for {x.ndim}-d {x}: the index uses "
                         f"{used} dimensions")
    expanded = []
    for kind, value in entries:
        if kind == "ellipsis":
            expanded.extend([("slice", (None, None, None))] * (x.ndim - used))
        else:
            expanded.append((kind, value))
    if not any(k == "ellipsis" for k, _ in entries):
        expanded.extend([("slice", (None, None, None))] * (x.ndim - used))
    if any(k == "none" for k, _ in expanded):
        pattern, dims = [], iter(range(x.ndim))
        for kind, value in expanded:
            if kind == "none":
                pattern.append("x")
            else:
                pattern.extend(next(dims) for _ in range(_dims_used(kind, value)))
        x = dimshuffle(x, pattern)
        expanded = [("slice", (None, None, None)) if k == "none" else (k, v)
                    for k, v in expanded]
    return x, expanded


def build_pattern(entries):
    """``(idx_list, inputs)`` for normalized entries: constants go in the pattern,
    variables become ``'?'`` and inputs."""
    idx_list, inputs = [], []

    def part(p):
        if isinstance(p, Variable):
            inputs.append(p)
            return SYMBOLIC
        return p

    for kind, value in entries:
        if kind == "slice":
            idx_list.append(SliceSpec(*[part(p) for p in value]))
        else:
            idx_list.append(part(value))
    while idx_list and idx_list[-1] == FULL_SLICE:
        idx_list.pop()  # trailing full slices are implicit
    return idx_list, inputs


def getitem(x, index):
    """``x[index]`` with NumPy's semantics (TensorVariable.__getitem__ calls this)."""
    x = as_tensor_variable(x)
    if x.owner is not None and isinstance(x.owner.op, Shape) and \
            isinstance(index, (numbers.Integral, np.integer)) and not isinstance(index, bool):
        # x.shape[i]: one node that rewrites and constant folding understand.
        # A Shape_i node even when the size is static (the rewrites fold it), so
        # the graph keeps x as the user wrote it: function([x], x.shape[0]) uses x.
        inner = x.owner.inputs[0]
        if not -inner.ndim <= index < inner.ndim:
            raise IndexError(f"indexing: index {index} is out of bounds for the shape of "
                             f"{inner.ndim}-d {inner}")
        return Shape_i(int(index) % inner.ndim)(inner)
    base, entries = normalize_index(x, index)
    if any(k in ("array", "bool") for k, _ in entries):
        from symgraph.ops.advanced_subtensor import AdvancedSubtensor

        idx_list, inputs = build_pattern(entries)
        return AdvancedSubtensor(idx_list)(base, *inputs)
    idx_list, inputs = build_pattern(entries)
    return Subtensor(idx_list)(base, *inputs)


# ---------------------------------------------------------------------------
# set_subtensor / inc_subtensor


def _cast_value(y, x, who):
    from symgraph.ops.math import cast
    from symgraph.tensor.basic import is_python_scalar

    if is_python_scalar(y):
        return constant(y, dtype=x.dtype)
    y = as_tensor_variable(y)
    if y.dtype != x.dtype:
        if not np.can_cast(y.dtype, x.dtype, "same_kind"):
            raise TypeError(f"{who}: cannot store values of dtype {y.dtype} ({y}) into "
                            f"{x} of dtype {x.dtype}; cast them first")
        y = cast(y, x.dtype)
    return y


def _added_axes(var):
    """When ``var`` is a DimShuffle that only inserts new axes (what ``None`` in an
    index makes), the pattern that removes them again; else None."""
    if var.owner is None or not isinstance(var.owner.op, DimShuffle):
        return None
    order = var.owner.op.new_order
    kept = [d for d in order if d != "x"]
    if kept != list(range(var.owner.op.input_ndim)):
        return None
    return [i for i, d in enumerate(order) if d != "x"]


def _update(x_sub, y, set_instead_of_inc, inplace, who):
    from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor, AdvancedSubtensor

    if not isinstance(x_sub, Variable) or x_sub.owner is None or \
            not isinstance(x_sub.owner.op, (Subtensor, AdvancedSubtensor)):
        raise TypeError(f"{who}: the first argument must be the result of indexing, like "
                        f"x[1:3], got {x_sub}")
    node = x_sub.owner
    base, rest = node.inputs[0], node.inputs[1:]
    y = _cast_value(y, base, who)
    if isinstance(node.op, Subtensor):
        op = IncSubtensor(node.op.idx_list, set_instead_of_inc, inplace)
    else:
        op = AdvancedIncSubtensor(node.op.idx_list, set_instead_of_inc, inplace)
    out = op(base, y, *rest)
    keep = _added_axes(base)
    if keep is not None:
        # The index had None: update the expanded x, then drop the new axes.
        out = dimshuffle(out, keep)
    return out


def set_subtensor(x_sub, y, inplace=False, tolerate_inplace_aliasing=False):
    """A copy of ``x`` with ``x[idx]`` replaced by ``y``, given ``x_sub = x[idx]``.

    With repeated integer-array indices, the last value wins (NumPy's assignment).
    """
    return _update(x_sub, y, True, inplace, "set_subtensor")


def inc_subtensor(x_sub, y, inplace=False, set_instead_of_inc=False,
                  tolerate_inplace_aliasing=False):
    """A copy of ``x`` with ``y`` added to ``x[idx]``, given ``x_sub = x[idx]``.

    With repeated integer-array indices every occurrence adds (``np.add.at``).
    """
    return _update(x_sub, y, set_instead_of_inc, inplace, "inc_subtensor")


# Advanced indexing, re-exported (imported last: it imports this module).
from symgraph.ops.advanced_subtensor import *  # noqa: E402,F401,F403
from symgraph.ops.advanced_subtensor import __all__ as _advanced_all  # noqa: E402

__all__ += _advanced_all
