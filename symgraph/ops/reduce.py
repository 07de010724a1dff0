"""Reductions: sum, prod, max, min, all, any, argmax, argmin, and the
statistics built from them (mean, var, std).

``CAReduce(scalar_op, axis)`` reduces with a commutative-associative scalar
op's NumPy ufunc; ``Sum``, ``Prod``, ``Max``, ``Min``, ``All`` and ``Any`` are
its subclasses, each naming the NumPy function it computes with.  As in
Theano, a reduction op drops the reduced axes; ``keepdims`` puts them back as
broadcastable dimensions with a DimShuffle afterwards.

Accumulation dtypes follow Theano (sums of small ints accumulate and return
int64, of unsigned ints uint64, of bools int64; float16 accumulates in
float32 and returns float16) with one deliberate change: float32 accumulates
in float32, not float64.  NumPy's pairwise summation keeps the rounding error
of a float32 sum at O(log n) ulps, and it avoids a silent float64 upcast (and
its cost) in float32 programs.  Ask for ``acc_dtype='float64'`` to get
Theano's behaviour.

This module shadows the builtins ``sum max min all any`` on purpose (Theano's
names): do not use the builtins here.
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Variable
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_logic as sl
from symgraph.ops.elemwise import dimshuffle, reduce_to_input_shape
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import DISCRETE_DTYPES, TensorType, upcast

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
           "max_and_argmax", "all", "any"]


def _m():
    # ops.math builds the gradient graphs; it imports elemwise, which calls
    # back into this module lazily, so import it at call time.
    from symgraph.ops import math

    return math


def _is_float(dtype):
    return dtype.startswith("float") or dtype.startswith("complex")


# -- axes ------------------------------------------------------------------------

def normalize_axis(axis, ndim, name):
    """``axis`` (None, an int, a negative int, a list/tuple of them, or a
    constant tensor) as a sorted tuple of distinct dimensions of an
    ``ndim``-d input; None means all of them.  ``name`` is used in errors."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, Constant):
        axis = axis.data
    if isinstance(axis, Variable):
        raise TypeError(f"{name}: axis must be known when the graph is built, "
                        f"got the symbolic {axis}")
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    if not isinstance(axis, (list, tuple)):
        axis = [axis]
    out = []
    for a in axis:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{name}: axis must be an int or a sequence of ints, got {a!r}")
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"{name}: axis {a} is out of range for a {ndim}-d input")
        a %= ndim
        if a in out:
            raise ValueError(f"{name}: axis {a} appears twice in {tuple(axis)}")
        out.append(a)
    return tuple(sorted(out))


def _restore_dims(var, ndim, axes):
    """``var`` (a reduction over ``axes`` of an ``ndim``-d tensor) with the
    reduced axes put back as broadcastable size-1 dimensions."""
    pattern, kept = [], 0
    for d in range(ndim):
        if d in axes:
            pattern.append("x")
        else:
            pattern.append(kept)
            kept += 1
    return dimshuffle(var, pattern)


def _count(x, axes):
    """The number of elements reduced over ``axes`` of ``x``: an int64 scalar."""
    n = constant(1, dtype="int64")
    static = [x.type.shape[a] for a in axes]
    if None not in static:
        return constant(int(np.prod(static, dtype="int64")), dtype="int64")
    for a in axes:
        n = n * x.shape[a]
    return n


# -- dtypes of sum and prod ---------------------------------------------------------

# The dtype of an int sum or product (Theano's): small ints widen to 64 bits.
_WIDE = {"bool": "int64", "int8": "int64", "int16": "int64", "int32": "int64",
         "uint8": "uint64", "uint16": "uint64", "uint32": "uint64"}


def _holds(in_dtype, dtype):
    """Whether ``dtype`` holds every value of ``in_dtype``: any float holds ints
    and bools (as Theano allows), else ``dtype`` must be the wider one."""
    return (in_dtype in DISCRETE_DTYPES and _is_float(dtype)) or upcast(in_dtype, dtype) == dtype


def _out_dtype(name, in_dtype, dtype):
    """The output dtype of a sum/prod of ``in_dtype`` asked to return ``dtype``."""
    if dtype is None:
        return _WIDE.get(in_dtype, in_dtype)
    if not _holds(in_dtype, dtype):
        raise TypeError(f"{name}: an input of dtype {in_dtype} cannot return dtype {dtype} "
                        f"without losing precision; cast the input or the result instead")
    return dtype


def _acc_dtype(name, in_dtype, out_dtype, acc_dtype):
    """The accumulator dtype: by default the output dtype, with float16 and small
    ints widened (float16 accumulates in float32, ints in 64 bits)."""
    if acc_dtype is None:
        return "float32" if out_dtype == "float16" else _WIDE.get(out_dtype, out_dtype)
    if not _holds(in_dtype, acc_dtype):
        raise TypeError(f"{name}: cannot accumulate an input of dtype {in_dtype} in "
                        f"{acc_dtype} without losing precision")
    return acc_dtype


def _dtype_or_none(dtype):
    return None if dtype is None else TensorType(dtype, shape=()).dtype


# -- ops ----------------------------------------------------------------------------

class AxisReduce(Op):
    """What CAReduce and Argmax/Argmin share: one input, whose dimensions in
    ``axis`` (a sorted tuple, or None for all of them) the output drops."""

    def __init__(self, axis=None):
        self.axis = None if axis is None else tuple(sorted(int(a) for a in axis))

    def axes(self, ndim):
        """The reduced dimensions of an ``ndim``-d input."""
        return tuple(range(ndim)) if self.axis is None else self.axis

    def output_dtype(self, in_dtype):
        """The dtype of the result for an input of ``in_dtype``."""
        raise NotImplementedError

    def make_node(self, x):
        x = as_tensor_variable(x)
        axes = self.axes(x.ndim)
        if axes and (axes[0] < 0 or axes[-1] >= x.ndim):
            raise ValueError(f"{self}: axis {axes} out of range for the {x.ndim}-d input {x}")
        shape = tuple(s for d, s in enumerate(x.type.shape) if d not in axes)
        return Apply(self, [x], [TensorType(self.output_dtype(x.dtype), shape=shape)()])

    def infer_shape(self, fgraph, node, input_shapes):
        axes = self.axes(node.inputs[0].ndim)
        return [tuple(s for d, s in enumerate(input_shapes[0]) if d not in axes)]


class CAReduce(AxisReduce):
    """Reduce over ``axis`` (a tuple of dimensions, or None for all of them)
    with a commutative-associative binary scalar op, through its NumPy ufunc's
    ``reduce`` (Add: sum, Mul: prod, Maximum: max, AND: all, ...).

    The output has the input's dimensions minus the reduced ones, and the
    scalar op's output dtype.
    """

    __props__ = ("scalar_op", "axis")

    def __init__(self, scalar_op, axis=None):
        super().__init__(axis)
        self.scalar_op = scalar_op
        if self.axis is not None and len(set(self.axis)) != len(self.axis):
            raise ValueError(f"{type(self).__name__}: repeated axis in {axis}")

    def output_dtype(self, in_dtype):
        return self.scalar_op.output_dtypes(in_dtype, in_dtype)[0]

    def reduce(self, x, axes):
        """The NumPy computation; subclasses name their function."""
        ufunc = getattr(self.scalar_op, "ufunc", None)
        if ufunc is None:
            raise NotImplementedError(f"{self}: {self.scalar_op} has no NumPy ufunc to reduce with")
        return ufunc.reduce(x, axis=axes)

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        axes = self.axes(x.ndim)
        try:
            result = self.reduce(x, axes)
        except ValueError as exc:
            if x.size == 0:
                raise ValueError(f"{self}: cannot reduce an empty array of shape {x.shape} "
                                 f"over axes {axes}: the operation has no identity "
                                 f"value") from exc
            raise
        out = np.asarray(result, dtype=node.outputs[0].dtype)
        # ufunc.reduce over no axis may hand back its input; outputs never alias inputs.
        output_storage[0][0] = out.copy() if np.may_share_memory(out, x) else out

    def _expand(self, var, x):
        """``var`` (shaped like the output) broadcast back to ``x``'s shape."""
        return _m().second(x, _restore_dims(var, x.ndim, self.axes(x.ndim)))


class _FixedReduce(CAReduce):
    """A CAReduce whose scalar op is its class's ``scalar_op`` (Sum, Max, All, ...),
    so that ``axis`` is its only prop."""

    __props__ = ("axis",)

    def __init__(self, axis=None):
        super().__init__(self.scalar_op, axis)


class _DtypeReduce(_FixedReduce):
    """A CAReduce with Theano's ``dtype`` (of the output) and ``acc_dtype``."""

    __props__ = ("axis", "dtype", "acc_dtype")
    numpy_fn = None

    def __init__(self, axis=None, dtype=None, acc_dtype=None):
        super().__init__(axis)
        self.dtype = _dtype_or_none(dtype)
        self.acc_dtype = _dtype_or_none(acc_dtype)

    def output_dtype(self, in_dtype):
        return _out_dtype(type(self).__name__, in_dtype, self.dtype)

    def reduce(self, x, axes):
        out = self.output_dtype(x.dtype.name)
        acc = _acc_dtype(type(self).__name__, x.dtype.name, out, self.acc_dtype)
        return type(self).numpy_fn(x, axis=axes, dtype=acc)


class Sum(_DtypeReduce):
    """The sum over ``axis`` (np.sum), accumulated in ``acc_dtype``."""

    scalar_op = sb.Add()
    numpy_fn = np.sum

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        return [reduce_to_input_shape(self._expand(output_grads[0], x), x)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


class Prod(_DtypeReduce):
    """The product over ``axis`` (np.prod), accumulated in ``acc_dtype``."""

    scalar_op = sb.Mul()
    numpy_fn = np.prod

    def L_op(self, inputs, outputs, output_grads):
        # d prod / d x_i is the product of the other elements of x_i's group.
        # Without zeros that is prod / x_i; with one zero, only the zero gets
        # something (the product of the non-zeros); with two or more, nothing.
        m = _m()
        (x,), (out,) = inputs, outputs
        axes = self.axes(x.ndim)
        is_zero = m.eq(x, 0)
        n_zeros = _restore_dims(sum(is_zero, axis=axes), x.ndim, axes)
        x_safe = m.switch(is_zero, 1, x)
        prod_nonzero = _restore_dims(prod(x_safe, axis=axes, dtype=out.dtype), x.ndim, axes)
        single_zero = m.and_(m.eq(n_zeros, 1), is_zero)
        others = m.switch(m.eq(n_zeros, 0), _restore_dims(out, x.ndim, axes) / x_safe,
                          m.switch(single_zero, prod_nonzero, 0))
        gz = _restore_dims(output_grads[0], x.ndim, axes)
        return [reduce_to_input_shape(gz * others, x)]

    def R_op(self, inputs, eval_points):
        if eval_points[0] is None:
            return [None]
        (x,) = inputs
        out = self(x)
        (g,) = self.L_op(inputs, [out], [_m().ones_like(out)])
        return [sum(g * eval_points[0], axis=self.axes(x.ndim))]


class _Extremum(_FixedReduce):
    """Max or Min: the result has the input's dtype; ties all get the gradient."""

    def output_dtype(self, in_dtype):
        return in_dtype

    def reduce(self, x, axes):
        if axes and 0 in [x.shape[a] for a in axes]:
            raise ValueError(f"{self}: the {self.word} of an empty array is undefined "
                             f"(input shape {x.shape}, reduced axes {axes})")
        return self.scalar_op.ufunc.reduce(x, axis=axes)

    def _mask(self, x, out):
        """Where x equals its group's extremum (every tie counts, as Theano)."""
        return _m().eq(x, _restore_dims(out, x.ndim, self.axes(x.ndim)))

    def L_op(self, inputs, outputs, output_grads):
        (x,), (out,) = inputs, outputs
        gz = _restore_dims(output_grads[0], x.ndim, self.axes(x.ndim))
        return [reduce_to_input_shape(gz * self._mask(x, out), x)]

    def R_op(self, inputs, eval_points):
        # The transpose of L_op's Jacobian: the sum of the eval points at ties.
        if eval_points[0] is None:
            return [None]
        (x,) = inputs
        out = self(x)
        return [sum(eval_points[0] * self._mask(x, out), axis=self.axes(x.ndim))]


class Max(_Extremum):
    """The maximum over ``axis`` (np.max); an error on empty groups."""

    scalar_op = sb.Maximum()
    word = "maximum"


class Min(_Extremum):
    """The minimum over ``axis`` (np.min); an error on empty groups."""

    scalar_op = sb.Minimum()
    word = "minimum"


class _Logical(_FixedReduce):
    """All or Any: the truth of any dtype's elements (non-zero), a bool result."""

    def output_dtype(self, in_dtype):
        return "bool"

    def reduce(self, x, axes):
        # logical, not bitwise: AND's ufunc on ints would be bitwise_and.
        return self.logical_ufunc.reduce(x, axis=axes)

    def connection_pattern(self, node):
        return [[False]]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [disconnected_grad_for(inputs[0])]


class All(_Logical):
    """Whether every element over ``axis`` is true (np.all); True when empty."""

    scalar_op = sl.AND()
    logical_ufunc = np.logical_and


class Any(_Logical):
    """Whether some element over ``axis`` is true (np.any); False when empty."""

    scalar_op = sl.OR()
    logical_ufunc = np.logical_or


class _ArgReduce(AxisReduce):
    """Argmax or Argmin over ``axis``: int64 indices into the reduced axes,
    flattened in C order when there are several (None: the whole array, so
    the index is into ``x.ravel()`` as NumPy's)."""

    __props__ = ("axis",)

    def output_dtype(self, in_dtype):
        return "int64"

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        axes = self.axes(x.ndim)
        kept = [d for d in range(x.ndim) if d not in axes]
        group = int(np.prod([x.shape[a] for a in axes], dtype="int64"))
        out_shape = tuple(x.shape[d] for d in kept)
        if axes and group == 0:
            raise ValueError(f"{self}: the {self.word} of an empty array is undefined "
                             f"(input shape {x.shape}, reduced axes {axes})")
        if not axes:
            # Each element is its own group: index 0 everywhere.
            output_storage[0][0] = np.zeros(x.shape, dtype="int64")
            return
        flat = np.transpose(x, kept + list(axes)).reshape(out_shape + (group,))
        output_storage[0][0] = np.asarray(self.numpy_fn(flat, axis=-1), dtype="int64")

    def grad(self, inputs, output_grads):
        # The index moves in jumps: zero almost everywhere (Theano's choice),
        # so costs that use argmax stay differentiable in their other terms.
        return [_m().zeros_like(inputs[0])]

    def R_op(self, inputs, eval_points):
        return [None]


class Argmax(_ArgReduce):
    """Indices of the maxima over ``axis`` (the first one at ties)."""

    numpy_fn = staticmethod(np.argmax)
    word = "argmax"


class Argmin(_ArgReduce):
    """Indices of the minima over ``axis`` (the first one at ties)."""

    numpy_fn = staticmethod(np.argmin)
    word = "argmin"


# -- user functions -------------------------------------------------------------------

def _reduce(op_class, name, x, axis, keepdims, **kwargs):
    x = as_tensor_variable(x)
    axes = normalize_axis(axis, x.ndim, name)
    out = op_class(axes, **kwargs)(x)
    return _restore_dims(out, x.ndim, axes) if keepdims else out


def _with_dtypes(op_class, name, x, axis, dtype, keepdims, acc_dtype):
    x = as_tensor_variable(x)
    dtype, acc_dtype = _dtype_or_none(dtype), _dtype_or_none(acc_dtype)
    out = _out_dtype(name, x.dtype, dtype)
    acc = _acc_dtype(name, x.dtype, out, acc_dtype)
    return _reduce(op_class, name, x, axis, keepdims, dtype=out, acc_dtype=acc)


def sum(x, axis=None, dtype=None, keepdims=False, acc_dtype=None):  # noqa: A001
    """The sum of ``x`` over ``axis`` (None: every axis; an int, negative or
    not; a tuple or list of them).

    By default bool and small int inputs return int64 (unsigned: uint64), and
    float16 accumulates in float32 but returns float16.  ``dtype`` sets the
    result's dtype (it may not lose precision), ``acc_dtype`` the
    accumulator's; ``keepdims`` keeps the reduced axes with size 1.
    """
    return _with_dtypes(Sum, "sum", x, axis, dtype, keepdims, acc_dtype)


def prod(x, axis=None, dtype=None, keepdims=False, acc_dtype=None):
    """The product of ``x`` over ``axis``; dtypes as ``sum``.

    The gradient is exact with zeros in the input (the product of the other
    elements, not ``prod / x``).
    """
    return _with_dtypes(Prod, "prod", x, axis, dtype, keepdims, acc_dtype)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """The maximum of ``x`` over ``axis`` (NaN if any is NaN); an error for an
    empty group.  The gradient goes to every element equal to the maximum."""
    return _reduce(Max, "max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """The minimum of ``x`` over ``axis``; see ``max``."""
    return _reduce(Min, "min", x, axis, keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element of ``x`` over ``axis`` is non-zero: a bool tensor."""
    return _reduce(All, "all", x, axis, keepdims)


def any(x, axis=None, keepdims=False):  # noqa: A001
    """Whether some element of ``x`` over ``axis`` is non-zero: a bool tensor."""
    return _reduce(Any, "any", x, axis, keepdims)


def argmax(x, axis=None, keepdims=False):
    """The int64 index of the maximum over ``axis`` (the first at ties).

    ``axis=None`` indexes the flattened array, as NumPy; with several axes
    the index is into those axes flattened in C order.
    """
    return _reduce(Argmax, "argmax", x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """The int64 index of the minimum over ``axis``; see ``argmax``."""
    return _reduce(Argmin, "argmin", x, axis, keepdims)


def max_and_argmax(x, axis=None, keepdims=False):
    """``[max(x, axis), argmax(x, axis)]`` (Theano's name)."""
    return [max(x, axis, keepdims), argmax(x, axis, keepdims)]


def mean(x, axis=None, dtype=None, keepdims=False, acc_dtype=None):
    """The arithmetic mean of ``x`` over ``axis``.

    Int and bool inputs give float64 (accumulated in float64, as NumPy);
    float16 is summed and divided in float32 and returns float16.  The mean
    of an empty group is NaN.
    """
    x = as_tensor_variable(x)
    axes = normalize_axis(axis, x.ndim, "mean")
    dtype = _dtype_or_none(dtype)
    out_dtype = dtype or ("float64" if x.dtype in DISCRETE_DTYPES else x.dtype)
    sum_dtype = "float32" if out_dtype == "float16" else out_dtype
    if x.dtype in DISCRETE_DTYPES and not _is_float(sum_dtype):
        sum_dtype = "float64"  # an int mean asked for: compute in float, cast at the end
    total = sum(x, axis=axes, dtype=sum_dtype, acc_dtype=acc_dtype)
    if axes:
        total = total / _m().cast(_count(x, axes), total.dtype)
    result = _m().cast(total, out_dtype)
    return _restore_dims(result, x.ndim, axes) if keepdims else result


def var(x, axis=None, ddof=0, keepdims=False, corrected=False):
    """The variance of ``x`` over ``axis``: the sum of squared deviations from
    the mean divided by ``N - ddof`` (N the number of elements reduced).

    ``corrected=True`` uses the compensated two-pass formula (subtracts the
    rounding error of the mean).  Int inputs give float64; float16 is
    computed in float32.  Complex inputs use ``|x - mean|**2``.
    """
    m = _m()
    x = as_tensor_variable(x)
    axes = normalize_axis(axis, x.ndim, "var")
    if isinstance(ddof, (bool, np.bool_)) or not isinstance(ddof, (int, np.integer)):
        raise TypeError(f"var: ddof must be a Python int, got {ddof!r}")
    work = "float32" if x.dtype == "float16" else None
    xw = m.cast(x, work) if work else x
    centered = xw - mean(xw, axis=axes, keepdims=True)
    squares = m.sqr(m.abs_(centered)) if centered.dtype.startswith("complex") else m.sqr(centered)
    total = sum(squares, axis=axes)
    n = _count(x, axes)
    if corrected:
        total = total - m.sqr(m.abs_(sum(centered, axis=axes))) / m.cast(n, total.dtype)
    result = total / m.cast(n - int(ddof), total.dtype)
    if work:
        result = m.cast(result, x.dtype)
    return _restore_dims(result, x.ndim, axes) if keepdims else result


def std(x, axis=None, ddof=0, keepdims=False, corrected=False):
    """The standard deviation: ``sqrt(var(x, axis, ddof, keepdims, corrected))``."""
    return _m().sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims, corrected=corrected))
