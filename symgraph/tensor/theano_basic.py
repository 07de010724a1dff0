"""Theano's ``tensor`` names that the ops modules do not define themselves:
compositions of existing ops (``ptp``, ``choose``, ``largest``, ``smallest``,
``horizontal_stack``, ``vertical_stack``, ``batched_tensordot``, ``topk``,
``inverse_permutation``, ``permute_row_elements``, ``cov``, ``divmod``,
``complex``, ``complex_from_polar``, ``norm``), constant reading
(``get_scalar_constant_value``), and the dtype lists.
"""

import numbers

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import INT_DTYPES

__all__ = ["ptp", "choose", "largest", "smallest", "horizontal_stack", "vertical_stack",
           "batched_tensordot", "topk", "argtopk", "topk_and_argtopk", "inverse_permutation",
           "permute_row_elements", "cov", "divmod", "complex", "complex_from_polar", "norm",
           "tensor_copy", "get_scalar_constant_value", "NotScalarConstantError",
           "EmptyConstantError", "isnan_", "isinf_",
           "int_dtypes", "uint_dtypes", "float_dtypes", "complex_dtypes", "discrete_dtypes",
           "continuous_dtypes", "integer_dtypes", "all_dtypes"]

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integer_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
complex_dtypes = ["complex64", "complex128"]
discrete_dtypes = ["bool"] + integer_dtypes
continuous_dtypes = float_dtypes + complex_dtypes
all_dtypes = discrete_dtypes + continuous_dtypes


def _m():
    from symgraph.ops import math

    return math


def ptp(a, axis=None):
    """The range (max - min) of ``a`` along ``axis`` (all of it when None)."""
    a = as_tensor_variable(a)
    return a.max(axis=axis) - a.min(axis=axis)


def _broadcast_all(arrays):
    """The arrays broadcast against each other: each plus zeros of the
    broadcast shape (in its own dtype)."""
    m = _m()
    ndim = max(a.ndim for a in arrays)
    arrays = [a.dimshuffle(["x"] * (ndim - a.ndim) + list(range(a.ndim))) for a in arrays]
    template = m.zeros_like(arrays[0], dtype="int8")
    for a in arrays[1:]:
        template = template + m.zeros_like(a, dtype="int8")
    return [a + m.zeros_like(template, dtype=a.dtype) for a in arrays]


def choose(a, choices, out=None, mode="raise"):
    """NumPy's ``choose``: ``result[i] = choices[a[i]][i]``, the integer index
    array ``a`` and each choice broadcast together.  ``mode``: 'raise' (an
    index outside [0, n) is an error), 'wrap' (modulo n) or 'clip'."""
    from symgraph.ops.join import stack
    from symgraph.ops.sort import take_along_axis

    if out is not None:
        raise TypeError("choose: out= is not supported; use the returned variable")
    a = as_tensor_variable(a)
    if a.dtype not in INT_DTYPES:
        raise TypeError(f"choose: a must hold integers, got {a.dtype}")
    if isinstance(choices, (list, tuple)):
        choices = [as_tensor_variable(c) for c in choices]
        n = len(choices)
    else:
        choices = as_tensor_variable(choices)
        n = choices.shape[0]
        choices = [choices[i] for i in range(choices.type.shape[0])] \
            if choices.type.shape[0] is not None else None
        if choices is None:
            raise TypeError("choose: a symbolic array of choices needs a static first "
                            "dimension; pass a list")
    m = _m()
    if mode == "wrap":
        a = m.mod(a, n)
    elif mode == "clip":
        a = m.clip(a, 0, n - 1)
    elif mode != "raise":
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    full = _broadcast_all([a] + list(choices))
    index, options = full[0], stack(full[1:])
    return take_along_axis(options, index.dimshuffle(["x"] + list(range(index.ndim))), 0)[0]


def largest(*args):
    """The element-wise maximum of all the arguments."""
    if not args:
        raise TypeError("largest: needs at least one argument")
    result = as_tensor_variable(args[0])
    for a in args[1:]:
        result = _m().maximum(result, a)
    return result


def smallest(*args):
    """The element-wise minimum of all the arguments."""
    if not args:
        raise TypeError("smallest: needs at least one argument")
    result = as_tensor_variable(args[0])
    for a in args[1:]:
        result = _m().minimum(result, a)
    return result


def horizontal_stack(*args):
    """The matrices side by side (joined along axis 1)."""
    from symgraph.ops.join import concatenate

    if any(as_tensor_variable(a).ndim != 2 for a in args):
        raise TypeError("horizontal_stack: takes matrices")
    return concatenate(list(args), axis=1)


def vertical_stack(*args):
    """The matrices one above the other (joined along axis 0)."""
    from symgraph.ops.join import concatenate

    if any(as_tensor_variable(a).ndim != 2 for a in args):
        raise TypeError("vertical_stack: takes matrices")
    return concatenate(list(args), axis=0)


def _axes_pair(axes, xdim, ydim):
    if isinstance(axes, numbers.Integral):
        return list(range(xdim - axes, xdim)), list(range(1, 1 + axes))
    xa, ya = axes
    xa = [xa] if isinstance(xa, numbers.Integral) else list(xa)
    ya = [ya] if isinstance(ya, numbers.Integral) else list(ya)
    return [a % xdim for a in xa], [a % ydim for a in ya]


def batched_tensordot(x, y, axes=2):
    """``tensordot`` of each pair ``x[i]``, ``y[i]`` along the first
    (batch) dimension; ``axes`` is an int (the last ``axes`` dimensions of x
    with the first ``axes`` after the batch of y) or a pair of axis lists
    counted with the batch dimension."""
    from symgraph.ops.blas import batched_dot

    x, y = as_tensor_variable(x), as_tensor_variable(y)
    xa, ya = _axes_pair(axes, x.ndim, y.ndim)
    if 0 in xa or 0 in ya or len(xa) != len(ya):
        raise ValueError(f"batched_tensordot: bad axes {axes!r}: the batch axis 0 cannot "
                         f"be summed, and both sides need as many axes")
    xk = [d for d in range(1, x.ndim) if d not in xa]
    yk = [d for d in range(1, y.ndim) if d not in ya]
    xt = x.dimshuffle([0] + xk + xa)
    yt = y.dimshuffle([0] + ya + yk)
    prod_ = lambda dims: _product(dims)  # noqa: E731
    x3 = xt.reshape((x.shape[0], prod_([x.shape[d] for d in xk]),
                     prod_([x.shape[d] for d in xa])), ndim=3)
    y3 = yt.reshape((y.shape[0], prod_([y.shape[d] for d in ya]),
                     prod_([y.shape[d] for d in yk])), ndim=3)
    out = batched_dot(x3, y3)
    shape = [x.shape[0]] + [x.shape[d] for d in xk] + [y.shape[d] for d in yk]
    return out.reshape(shape, ndim=len(shape))


def _product(dims):
    result = 1
    for d in dims:
        result = result * d
    return result


def _topk_indices(x, kth, axis):
    from symgraph.ops.sort import argsort

    x = as_tensor_variable(x)
    if not isinstance(kth, numbers.Integral) or kth == 0:
        raise ValueError(f"topk: kth must be a non-zero Python int, got {kth!r}")
    if axis is None:
        x, axis = x.flatten(), 0
    axis = axis % x.ndim
    order = argsort(x, axis=axis, kind="stable")
    before = (slice(None),) * axis
    if kth > 0:
        idx = order[before + (slice(None, None, -1),)][before + (slice(0, kth),)]
    else:
        idx = order[before + (slice(0, -kth),)]
    return x, idx, axis


def argtopk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002
    """The indices of the ``kth`` largest entries along ``axis`` (of the
    ``-kth`` smallest when ``kth`` is negative), largest (or smallest) first."""
    _, idx, _ = _topk_indices(x, kth, axis)
    return _m().cast(idx, idx_dtype)


def topk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002
    """The ``kth`` largest entries along ``axis`` (the ``-kth`` smallest when
    ``kth`` is negative), largest (or smallest) first; differentiable."""
    from symgraph.ops.sort import take_along_axis

    x, idx, axis = _topk_indices(x, kth, axis)
    return take_along_axis(x, idx, axis)


def topk_and_argtopk(x, kth, axis=-1, sorted=True, idx_dtype="int64"):  # noqa: A002
    """``(topk(...), argtopk(...))``."""
    from symgraph.ops.sort import take_along_axis

    x, idx, axis = _topk_indices(x, kth, axis)
    return take_along_axis(x, idx, axis), _m().cast(idx, idx_dtype)


def inverse_permutation(perm):
    """The inverse of the permutation vector ``perm`` (of each row, for a
    matrix): ``out[perm[i]] = i``."""
    from symgraph.ops.sort import argsort

    perm = as_tensor_variable(perm)
    if perm.dtype not in INT_DTYPES:
        raise TypeError(f"inverse_permutation: perm must hold integers, got {perm.dtype}")
    return _m().cast(argsort(perm, axis=-1, kind="stable"), perm.dtype)


def permute_row_elements(x, y, inverse=0):
    """The last dimension of ``x`` permuted by the integer array ``y`` (one
    permutation, or one per row, broadcasting): ``out[..., i] = x[..., y[..., i]]``,
    or ``out[..., y[..., i]] = x[..., i]`` when ``inverse``."""
    from symgraph.ops.sort import take_along_axis

    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if y.dtype not in INT_DTYPES:
        raise TypeError(f"permute_row_elements: y must hold integers, got {y.dtype}")
    if inverse:
        y = inverse_permutation(y)
    ndim = max(x.ndim, y.ndim)
    if ndim == 1:
        return take_along_axis(x, y, 0)
    # broadcast all but the last dimension
    x_lead, y_lead = _broadcast_all([x[..., 0], y[..., 0]])
    x_b = x + _m().zeros_like(y_lead, dtype=x.dtype).dimshuffle(
        list(range(y_lead.ndim)) + ["x"])
    y_b = y + _m().zeros_like(x_lead, dtype=y.dtype).dimshuffle(
        list(range(x_lead.ndim)) + ["x"])
    return take_along_axis(x_b, y_b, ndim - 1)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """NumPy's ``cov`` (without weights): the covariance of the variables,
    one per row (per column when ``rowvar`` is false)."""
    from symgraph.ops.join import concatenate
    from symgraph.ops.math import dot

    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights and aweights are not supported")
    m_ = as_tensor_variable(m)
    if m_.ndim == 1:
        m_ = m_.dimshuffle("x", 0)
    if not rowvar:
        m_ = m_.T
    if y is not None:
        y = as_tensor_variable(y)
        y = y.dimshuffle("x", 0) if y.ndim == 1 else (y if rowvar else y.T)
        m_ = concatenate([m_, y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = m_.shape[1]
    centered = m_ - m_.mean(axis=1, keepdims=True)
    return dot(centered, centered.T) / _m().cast(n - ddof, centered.dtype
                                                 if centered.dtype.startswith("float")
                                                 else "float64")


def divmod(x, y):  # noqa: A001 - Theano's name
    """``(x // y, x % y)``, with Python's signs (as NumPy's ``divmod``)."""
    return _m().int_div(x, y), _m().mod(x, y)


def complex(real, imag):  # noqa: A001 - Theano's name
    """The complex array ``real + 1j * imag`` (complex128 for float64 parts,
    complex64 otherwise)."""
    m = _m()
    real, imag = as_tensor_variable(real), as_tensor_variable(imag)
    dtype = "complex128" if "float64" in (real.dtype, imag.dtype) or \
        real.dtype in INT_DTYPES and np.dtype(real.dtype).itemsize > 2 else "complex64"
    return m.cast(real, dtype) + m.cast(imag, dtype) * np.array(1j, dtype=dtype)


def complex_from_polar(abs, angle):  # noqa: A002 - Theano's names
    """The complex array of modulus ``abs`` and argument ``angle``."""
    m = _m()
    return complex(abs * m.cos(angle), abs * m.sin(angle))


def norm(x, L, axis=None):
    """The L-norm of ``x`` (of its entries along ``axis``): ``sum(|x|**L) **
    (1/L)``; ``L = inf`` gives ``max(|x|)``.  ``L = 0`` is refused, as in
    Theano."""
    m = _m()
    x = as_tensor_variable(x)
    if L == 0:
        raise NotImplementedError("norm: the L0 norm is not a norm; use (x != 0).sum()")
    if np.isinf(L):
        return m.abs_(x).max(axis=axis) if L > 0 else m.abs_(x).min(axis=axis)
    if L == 1:
        return m.abs_(x).sum(axis=axis)
    if L == 2:
        return m.sqrt(m.sqr(x).sum(axis=axis))
    return m.pow(m.pow(m.abs_(x), L).sum(axis=axis), 1.0 / L)


def tensor_copy(x):
    """A copy of ``x`` (a new variable computing the same values)."""
    return _m().identity(x)


def isnan_(x):
    """Theano's alias of ``isnan``."""
    return _m().isnan(x)


def isinf_(x):
    """Theano's alias of ``isinf``."""
    return _m().isinf(x)


class NotScalarConstantError(Exception):
    """``get_scalar_constant_value`` found no constant scalar."""


class EmptyConstantError(NotScalarConstantError):
    """``get_scalar_constant_value`` was given an empty constant."""


def get_scalar_constant_value(v, elemwise=True, only_process_constants=False,
                              max_recur=10):
    """The Python/NumPy scalar that ``v`` always holds, read through
    broadcasting, ``fill``, casts, static shapes (``x.shape[i]`` of a known
    size) and element-wise ops of constants; raises
    :class:`NotScalarConstantError` when ``v`` is not such a constant."""
    from symgraph.ops.constant_values import scalar_constant_value

    if isinstance(v, (numbers.Number, np.number, np.ndarray, np.bool_)):
        data = np.asarray(v)
        if data.size == 0:
            raise EmptyConstantError(f"{v!r} is empty")
        if not (data == data.flat[0]).all():
            raise NotScalarConstantError(f"{v!r} holds several values")
        return data.flat[0] if data.ndim else data[()]
    if isinstance(v, Constant):
        data = np.asarray(v.data)
        if data.size == 0:
            raise EmptyConstantError(f"{v} is an empty constant")
    found = scalar_constant_value(v)
    if found is not None:
        return np.asarray(found)[()]
    if only_process_constants or max_recur <= 0 or v.owner is None:
        raise NotScalarConstantError(f"{v} is not a constant scalar")
    node = v.owner
    from symgraph.ops.shape import Shape_i

    if isinstance(node.op, Shape_i):
        size = node.inputs[0].type.shape[node.op.i]
        if size is not None:
            return np.int64(size)
    if elemwise and hasattr(node.op, "scalar_op") and len(node.outputs) == 1:
        values = [get_scalar_constant_value(i, elemwise, only_process_constants,
                                            max_recur - 1) for i in node.inputs]
        storage = [[None]]
        node.op.perform(node, [np.asarray(val, dtype=i.dtype).reshape((1,) * i.ndim)
                               for val, i in zip(values, node.inputs)], storage)
        return np.asarray(storage[0][0]).flat[0]
    raise NotScalarConstantError(f"{v} is not a constant scalar")


def advanced_subtensor1(x, ilist):
    """``x[ilist]`` for an integer vector ``ilist`` (rows of x)."""
    return as_tensor_variable(x)[ilist]


def advanced_set_subtensor1(x, y, ilist):
    """``set_subtensor(x[ilist], y)`` for an integer vector ``ilist``."""
    from symgraph.ops.subtensor import set_subtensor

    return set_subtensor(as_tensor_variable(x)[ilist], y)


def advanced_inc_subtensor1(x, y, ilist):
    """``inc_subtensor(x[ilist], y)`` (repeated indices accumulate)."""
    from symgraph.ops.subtensor import inc_subtensor

    return inc_subtensor(as_tensor_variable(x)[ilist], y)


def get_vector_length(v):
    """The length of the vector ``v`` when it is known when the graph is built
    (a static size, a constant, a ``make_vector`` or ``x.shape`` of a tensor
    of known rank); ValueError otherwise."""
    from symgraph.ops.shape import Shape

    v = as_tensor_variable(v)
    if v.ndim != 1:
        raise TypeError(f"get_vector_length: expected a vector, got {v.type}")
    if v.type.shape[0] is not None:
        return v.type.shape[0]
    if v.owner is not None:
        if isinstance(v.owner.op, Shape):
            return v.owner.inputs[0].ndim
        if type(v.owner.op).__name__ == "MakeVector":
            return len(v.owner.inputs)
    raise ValueError(f"get_vector_length: the length of {v} is not known before run time")


__all__ += ["advanced_subtensor1", "advanced_set_subtensor1", "advanced_inc_subtensor1",
            "get_vector_length"]
