"""Theano's ``theano.tensor.signal.pool``: ``pool_2d``, ``pool_3d``,
``max_pool_2d_same_size`` and the ops (``Pool``, ``MaxPoolGrad``,
``AveragePoolGrad``, ``DownsampleFactorMaxGradGrad``), which live in
``symgraph/ops/pool.py`` and ``symgraph/ops/pool_grad.py``.
"""

import warnings

from symgraph.ops.pool import MODES, Pool, pool_out_size  # noqa: F401
from symgraph.ops.pool_grad import (AveragePoolGrad, DownsampleFactorMaxGradGrad,  # noqa: F401
                                    MaxPoolGrad)
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["pool_2d", "pool_3d", "max_pool_2d_same_size", "Pool", "MaxPoolGrad",
           "AveragePoolGrad", "DownsampleFactorMaxGradGrad"]


def _deprecated(new, old, new_value, old_value, name, default=None):
    """Theano's deprecated keyword ``old``: its value, with a DeprecationWarning;
    ValueError when both ``old`` and ``new`` are given."""
    if old_value is None:
        return new_value
    if new_value is not None and new_value != default:
        raise ValueError(f"{name}: give the window parameter only as {new!r}, not as both "
                         f"{new!r} and its deprecated name {old!r}")
    warnings.warn(f"{name}: the parameter {old!r} is deprecated, use {new!r}",
                  DeprecationWarning, stacklevel=4)
    return old_value


def _pool_nd(name, nd, input, ws, ignore_border, stride, pad, mode, ds, st, padding):
    zero = (0,) * nd
    ws = _deprecated("ws", "ds", ws, ds, name)
    stride = _deprecated("stride", "st", stride, st, name)
    pad = _deprecated("pad", "padding", pad, padding, name, default=zero)
    if ws is None:
        raise ValueError(f"{name}: the window size ws is required (a tuple of {nd} ints)")
    input = as_tensor_variable(input)
    if input.ndim < nd:
        raise TypeError(f"{name}: the input {input} must have at least {nd} dimensions (the "
                        f"last {nd} are pooled), got {input.ndim}")
    if ignore_border is None:
        ignore_border = False
    pad = zero if pad is None else pad
    static = [_static_ints(v) for v in (ws, stride, pad)]
    if any(v is _SYMBOLIC for v in static):
        from symgraph.ops.pool_dynamic import PoolDynamic

        return PoolDynamic(nd, ignore_border, mode)(input, ws, ws if stride is None else stride,
                                                     pad)
    ws, stride, pad = static
    op = Pool(ndim=nd, ignore_border=ignore_border, mode=mode, ws=ws, stride=stride, pad=pad)
    return op(input)


_SYMBOLIC = object()


def _static_ints(value):
    """A window parameter as Python ints when the graph fixes it (ints, or
    constants), ``_SYMBOLIC`` when it depends on inputs; other values pass
    unchanged, for Pool's errors."""
    from symgraph.graph.basic import Constant, Variable
    from symgraph.ops.shape import constant_int

    if isinstance(value, Variable):
        if isinstance(value, Constant) and value.ndim == 1:
            return tuple(int(v) for v in value.data)
        return _SYMBOLIC
    if isinstance(value, (tuple, list)) and any(isinstance(v, Variable) for v in value):
        known = [constant_int(v) for v in value]
        return _SYMBOLIC if None in known else tuple(known)
    return value


def pool_2d(input, ws=None, ignore_border=None, stride=None, pad=(0, 0), mode="max", ds=None,
            st=None, padding=None):
    """Pool the last 2 dimensions of ``input`` (rank >= 2; the others are a batch).

    ``ws``: the window (rows, cols).  ``stride``: the step between windows
    (None: ``ws``, windows that do not overlap).  ``pad``: (pad_h, pad_w)
    positions added before and after each dimension; needs
    ``ignore_border=True`` and ``pad < ws``.  ``mode``: ``'max'``,
    ``'sum'``, ``'average_inc_pad'`` (the padding counts in the divisor) or
    ``'average_exc_pad'``; ``'average'`` is Theano's alias of
    ``'average_inc_pad'``.  ``ignore_border``: True drops a partial window at
    the end ((5, 5) with ws (2, 2) gives (2, 2)); False keeps it ((3, 3)).
    None means False, Theano's default; Theano warned that the default would
    become True one day; here it stays False, without a warning, so pass it
    explicitly where it matters (and True to use padding).

    ``ds``, ``st`` and ``padding`` are Theano's deprecated names of ``ws``,
    ``stride`` and ``pad`` (a DeprecationWarning; an error with both).  The
    parameters may be symbolic (int vectors, or tuples holding int scalars):
    the pooled dimensions then have no static size and the pooling runs in
    NumPy until the rewrites find the values constant (``ops/pool_dynamic.py``).
    See ``symgraph/ops/pool.py`` for the output-size rule, NaN and ties.
    """
    return _pool_nd("pool_2d", 2, input, ws, ignore_border, stride, pad, mode, ds, st, padding)


def pool_3d(input, ws=None, ignore_border=None, stride=None, pad=(0, 0, 0), mode="max",
            ds=None, st=None, padding=None):
    """Pool the last 3 dimensions of ``input`` (rank >= 3): ``pool_2d`` with
    3-tuples for ``ws``, ``stride`` and ``pad``."""
    return _pool_nd("pool_3d", 3, input, ws, ignore_border, stride, pad, mode, ds, st, padding)


def max_pool_2d_same_size(input, patch_size):
    """Keep the maximum of each non-overlapping ``patch_size`` window of the last
    2 dimensions, where it is, and set the rest to zero (ties: the first
    maximum in row-major order keeps it).  The output has input's shape."""
    input = as_tensor_variable(input)
    op_args = dict(ndim=2, ignore_border=True, ws=tuple(patch_size))
    output = Pool(**op_args)(input)
    return MaxPoolGrad(**op_args)(input, output, output)
