"""Making new arrays: Alloc (``alloc zeros ones``), Eye, ARange, and tile/repeat/roll,
which are built from them and from reshape/concatenate."""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["Alloc", "Eye", "ARange", "alloc", "zeros", "ones", "eye", "identity_like",
           "arange", "tile", "repeat", "roll"]


def _disconnected(x):
    from symgraph.graph.gradient_markers import disconnected_grad_for

    return disconnected_grad_for(x)


def _float_x():
    from symgraph.config import config

    return config.floatX


def _int_scalar(value, who, what):
    """``value`` as an integer scalar variable, or a TypeError naming ``who``."""
    var = as_tensor_variable(value)
    if var.ndim != 0 or var.dtype not in INT_DTYPES:
        raise TypeError(f"{who}: {what} must be an int scalar, got {var} of type {var.type}")
    return var


class Alloc(Op):
    """``value`` broadcast to the shape given by the int scalar inputs (a new array).

    ``value`` may have fewer dimensions (they are aligned on the right); only its
    dimensions of static size 1 are broadcast.
    """

    def make_node(self, value, *shape):
        from symgraph.ops.shape import as_shape_scalars, constant_int

        value = as_tensor_variable(value)
        shape = as_shape_scalars(list(shape), "alloc")
        if len(shape) < value.ndim:
            raise ValueError(f"Alloc: the value {value} has {value.ndim} dimensions, more "
                             f"than the {len(shape)} of the requested shape")
        lead = len(shape) - value.ndim
        out_shape = []
        for dim, size in enumerate(shape):
            static = constant_int(size)
            if static is not None and static < 0:
                raise ValueError(f"Alloc: negative size {static} in dimension {dim}")
            if dim >= lead:
                have = value.type.shape[dim - lead]
                if have not in (None, 1) and static not in (None, have):
                    raise ValueError(f"Alloc: cannot broadcast {value} of static shape "
                                     f"{value.type.shape} to size {static} in dimension {dim}")
                if static is None and have not in (None, 1):
                    static = have
            out_shape.append(static)
        return Apply(self, [value] + shape, [TensorType(value.dtype, shape=tuple(out_shape))()])

    def perform(self, node, inputs, output_storage):
        value, shape = inputs[0], tuple(int(s) for s in inputs[1:])
        if any(s < 0 for s in shape):
            raise ValueError(f"Alloc: negative size in the requested shape {shape}")
        lead = len(shape) - value.ndim
        for d, size in enumerate(value.shape):
            if size != shape[lead + d] and not node.inputs[0].type.broadcastable[d]:
                raise ValueError(f"Alloc: cannot broadcast {node.inputs[0]} of shape "
                                 f"{value.shape} to {shape}: dimension {d} has size {size} "
                                 f"and is not declared broadcastable")
        out = np.empty(shape, dtype=node.outputs[0].dtype)
        out[...] = value
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(node.inputs[1:])]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def grad(self, inputs, output_grads):
        from symgraph.ops.elemwise import reduce_to_input_shape
        from symgraph.ops.reduce import sum as sum_

        value = inputs[0]
        (gz,) = output_grads
        lead = gz.ndim - value.ndim
        if lead:
            gz = sum_(gz, axis=list(range(lead)))
        return [reduce_to_input_shape(gz, value)] + [_disconnected(s) for s in inputs[1:]]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


_alloc = Alloc()


def alloc(value, *shape):
    """A new array of ``shape`` filled with ``value`` (broadcast), as Theano's alloc.

    ``alloc(v, 3, n)`` or ``alloc(v, (3, n))`` or ``alloc(v, x.shape)``.
    """
    from symgraph.ops.shape import as_shape_scalars

    if len(shape) == 1 and not (isinstance(shape[0], (numbers.Integral, np.integer)) or
                                getattr(shape[0], "ndim", None) == 0):
        shape = as_shape_scalars(shape[0], "alloc")
    return _alloc(value, *shape)


def _filled(fill_value, shape, dtype):
    from symgraph.ops.shape import as_shape_scalars

    dtype = dtype or _float_x()
    return _alloc(constant(fill_value, dtype=dtype), *as_shape_scalars(shape, "zeros/ones"))


def zeros(shape, dtype=None):
    """An array of zeros of ``shape`` (ints, int scalars or an int vector); floatX by default."""
    return _filled(0, shape, dtype)


def ones(shape, dtype=None):
    """An array of ones of ``shape``; floatX by default."""
    return _filled(1, shape, dtype)


class Eye(Op):
    """An ``n`` x ``m`` array with ones on diagonal ``k`` (the inputs are int scalars)."""

    __props__ = ("dtype",)

    def __init__(self, dtype=None):
        self.dtype = str(np.dtype(dtype or _float_x()))

    def make_node(self, n, m, k):
        from symgraph.ops.shape import constant_int

        n, m, k = (_int_scalar(v, "eye", what) for v, what in ((n, "n"), (m, "m"), (k, "k")))
        shape = (constant_int(n), constant_int(m))
        return Apply(self, [n, m, k], [TensorType(self.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        n, m, k = (int(v) for v in inputs)
        if n < 0 or m < 0:
            raise ValueError(f"{self}: negative size ({n}, {m})")
        output_storage[0][0] = np.eye(n, m, k, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.math import cast

        return [(cast(node.inputs[0], "int64"), cast(node.inputs[1], "int64"))]

    def connection_pattern(self, node):
        return [[False]] * 3

    def grad(self, inputs, output_grads):
        return [_disconnected(x) for x in inputs]


def eye(n, m=None, k=0, dtype=None):
    """A 2-d array with ones on diagonal ``k`` and zeros elsewhere (NumPy's eye)."""
    return Eye(dtype)(n, n if m is None else m, k)


def identity_like(x, dtype=None):
    """An identity matrix of ``x``'s shape (and dtype unless given)."""
    from symgraph.ops.shape import shape_i

    x = as_tensor_variable(x)
    return eye(shape_i(x, 0), shape_i(x, 1), 0, dtype=dtype or x.dtype)


class ARange(Op):
    """``start, start + step, ...`` below ``stop`` (NumPy's arange of scalar inputs)."""

    __props__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = str(np.dtype(dtype))

    def make_node(self, start, stop, step):
        inputs = [as_tensor_variable(v) for v in (start, stop, step)]
        for name, v in zip(("start", "stop", "step"), inputs):
            if v.ndim != 0:
                raise TypeError(f"{self}: {name} must be a scalar, got {v.type}")
        length = None
        if all(hasattr(v, "data") for v in inputs):
            if inputs[2].data == 0:
                raise ValueError(f"{self}: step is zero")
            length = len(np.arange(*[v.data for v in inputs], dtype=self.dtype))
        return Apply(self, inputs, [TensorType(self.dtype, shape=(length,))()])

    def perform(self, node, inputs, output_storage):
        start, stop, step = inputs
        if step == 0:
            raise ValueError(f"{self}: step is zero")
        output_storage[0][0] = np.arange(start, stop, step, dtype=self.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.constant_values import scalar_constant_value
        from symgraph.ops.math import cast, ceil, int_div, maximum, true_div

        zero = constant(0, dtype="int64")
        if all(v.dtype in INT_DTYPES and v.dtype != "uint64"
               for v in node.inputs):
            # Integer arithmetic, exact (a float ceil loses integers above 2**53),
            # and simple where the rewrites can see through it: arange(0, n, 1)
            # has length maximum(n, 0), which is n for a size.
            start, stop, step = (cast(v, "int64") for v in node.inputs)
            start_v, step_v = (scalar_constant_value(v) for v in (node.inputs[0],
                                                                  node.inputs[2]))
            span = stop if start_v == 0 else stop - start
            # ceil(span / step) == -((-span) // step), with floor division.
            length = span if step_v == 1 else -int_div(-span, step)
            return [(maximum(length, zero),)]
        start, stop, step = (cast(v, "float64") for v in node.inputs)
        length = cast(ceil(true_div(stop - start, step)), "int64")
        return [(maximum(length, zero),)]

    def connection_pattern(self, node):
        return [[True], [False], [True]]

    def grad(self, inputs, output_grads):
        start, stop, step = inputs
        (gz,) = output_grads
        if self.dtype not in FLOAT_DTYPES:
            return [_disconnected(v) for v in inputs]
        from symgraph.ops.shape import shape_i

        # out[i] = start + i * step.
        index = arange(0, shape_i(gz, 0), 1, dtype=gz.dtype)
        return [gz.sum().astype(start.dtype), _disconnected(stop),
                (gz * index).sum().astype(step.dtype)]


def arange(start, stop=None, step=1, dtype=None):
    """Values from ``start`` to ``stop`` by ``step`` (symbolic scalars allowed).

    The dtype is the inputs' common dtype (Python numbers promote weakly) unless
    given: ``arange(5)`` is int64, ``arange(0.5)`` floatX.
    """
    from symgraph.ops.join import _as_tensors

    if stop is None:
        start, stop = 0, start
    inputs, common = _as_tensors([start, stop, step], "arange")
    return ARange(dtype or common)(*inputs)


def tile(x, reps, ndim=None):
    """``x`` repeated ``reps[i]`` times along each dimension (NumPy's tile).

    ``reps`` holds ints or int scalars; when longer than ``x.ndim``, ``x`` gains
    leading dimensions.
    """
    from symgraph.ops.math import mul
    from symgraph.ops.shape import as_shape_scalars, constant_int, reshape, shape_i, \
        shape_padleft
    from symgraph.ops.elemwise import dimshuffle

    x = as_tensor_variable(x)
    reps = as_shape_scalars(reps, "tile")
    d = max(len(reps), x.ndim)
    if ndim is not None and ndim != d:
        raise ValueError(f"tile: ndim={ndim} disagrees with the {d} dimensions of the result")
    reps = [constant(1, dtype="int64")] * (d - len(reps)) + reps
    x = shape_padleft(x, d - x.ndim)
    # (s0, s1) -> (1, s0, 1, s1) -> alloc (r0, s0, r1, s1) -> reshape (r0*s0, r1*s1)
    spread = dimshuffle(x, [e for i in range(d) for e in ("x", i)])
    sizes = [shape_i(x, i) for i in range(d)]
    big = alloc(spread, *[e for r, s in zip(reps, sizes) for e in (r, s)])
    final = []
    for r, s in zip(reps, sizes):
        known_r, known_s = constant_int(r), constant_int(s)
        final.append(known_r * known_s if None not in (known_r, known_s) else mul(r, s))
    return reshape(big, final)


def repeat(x, repeats, axis=None):
    """Each element of ``x`` repeated ``repeats`` times along ``axis`` (NumPy's repeat,
    for a scalar count; ``axis=None`` works on the flattened ``x``)."""
    from symgraph.ops.math import mul
    from symgraph.ops.shape import constant_int, flatten, reshape, shape_i, _normalize_axis
    from symgraph.ops.elemwise import dimshuffle

    x = as_tensor_variable(x)
    if axis is None:
        x, axis = flatten(x, 1), 0
    axis = _normalize_axis(axis, x.ndim, "repeat")
    r = as_tensor_variable(repeats)
    if r.ndim != 0:
        raise NotImplementedError("repeat: only a scalar number of repeats is supported")
    r = _int_scalar(r, "repeat", "repeats")
    # (.., n, ..) -> (.., n, 1, ..) -> alloc (.., n, r, ..) -> reshape (.., n*r, ..)
    spread = dimshuffle(x, list(range(axis + 1)) + ["x"] + list(range(axis + 1, x.ndim)))
    sizes = [shape_i(x, i) for i in range(x.ndim)]
    big = alloc(spread, *(sizes[:axis + 1] + [r] + sizes[axis + 1:]))
    known_n, known_r = constant_int(sizes[axis]), constant_int(r)
    merged = known_n * known_r if None not in (known_n, known_r) else mul(sizes[axis], r)
    return reshape(big, sizes[:axis] + [merged] + sizes[axis + 1:])


def roll(x, shift, axis=None):
    """``x`` rotated by ``shift`` positions along ``axis`` (NumPy's roll; ``axis=None``
    rolls the flattened array and restores the shape)."""
    from symgraph.ops.join import concatenate
    from symgraph.ops.math import mod, sub
    from symgraph.ops.shape import flatten, reshape, shape, shape_i, _normalize_axis
    from symgraph.ops.subtensor import getitem

    x = as_tensor_variable(x)
    if axis is None:
        if x.ndim == 0:
            return x
        return reshape(roll(flatten(x, 1), shift, 0), shape(x), ndim=x.ndim)
    axis = _normalize_axis(axis, x.ndim, "roll")
    n = shape_i(x, axis)
    # The first n - s elements move to the end.
    cut = sub(n, mod(_int_scalar(shift, "roll", "shift"), n))
    head = [slice(None)] * axis
    return concatenate([getitem(x, tuple(head + [slice(cut, None)])),
                        getitem(x, tuple(head + [slice(None, cut)]))], axis=axis)
