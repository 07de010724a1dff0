"""Theano's tensor functions that ``math.py`` lacks: ``gamma``, ``sgn``,
``iround``, ``allclose``, and the grid makers ``mgrid`` / ``ogrid``.

``gamma`` is an Elemwise of its own scalar op (``Gamma``, C's ``tgamma``,
which gives scipy's values at the poles: +-inf at +-0, NaN at the negative
integers).
"""

import numbers

import numpy as np
from symgraph.ops.lazy_scipy import ScipyFunction

from symgraph.ops import math as _math
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import Elemwise

__all__ = ["gamma", "sgn", "iround", "allclose", "mgrid", "ogrid", "Gamma"]


class Gamma(sm._Unary):
    """The Gamma function (scipy.special.gamma)."""

    ufunc = ScipyFunction("scipy.special", "gamma")

    def grad(self, inputs, outputs, output_grads):
        return [output_grads[0] * outputs[0] * _math.psi(inputs[0])]


_gamma = Elemwise(Gamma())


def gamma(x):
    """The Gamma function of each element (a float result); its gradient is
    ``gamma(x) * psi(x)``."""
    return _gamma(x)


def sgn(x):
    """Theano's name of :func:`symgraph.tensor.sign`: -1, 0 or 1 by the sign of x."""
    return _math.sign(x)


def iround(x, mode=None):
    """``x`` rounded to the nearest integer, as int64: ``cast(round(x, mode),
    'int64')``; ``mode`` is 'half_to_even' (the default, NumPy's) or
    'half_away_from_zero'."""
    return _math.cast(_math.round(x, mode or "half_to_even"), "int64")


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """A bool scalar: ``|a - b| <= atol + rtol * |b|`` everywhere (NumPy's
    ``allclose``, not symmetric in a and b)."""
    from symgraph.ops.reduce import all as all_

    return all_(_math.isclose(a, b, rtol, atol, equal_nan))


class _Grid:
    """``mgrid[...]`` / ``ogrid[...]``: NumPy's grids from slices whose
    bounds may be symbolic scalars.

    ``mgrid[0:5, 0:3]`` is a list of two (5, 3) tensors (the row and the
    column index); ``ogrid`` gives them unexpanded, of shapes (5, 1) and
    (1, 3).  One slice gives one tensor.  A complex step ``5j`` asks for that
    many points, ``stop`` included (Python numbers only), as in NumPy.
    """

    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_range(key)
        if not isinstance(key, tuple) or not all(isinstance(k, slice) for k in key):
            raise TypeError(f"{self!r}[...] takes slices, like mgrid[0:5, 0:3]; got {key!r}")
        ndim = len(key)
        ranges = []
        for axis, spec in enumerate(key):
            pattern = ["x"] * ndim
            pattern[axis] = 0
            ranges.append(_grid_range(spec).dimshuffle(pattern))
        if self.sparse:
            return ranges
        grids = []
        for i, r in enumerate(ranges):
            grid = r
            for j, other in enumerate(ranges):
                if j != i:
                    grid = grid + _math.zeros_like(other)
            grids.append(grid)
        return grids

    def __repr__(self):
        return "ogrid" if self.sparse else "mgrid"


def _grid_range(spec):
    from symgraph.ops.alloc import arange

    start = 0 if spec.start is None else spec.start
    step = 1 if spec.step is None else spec.step
    if isinstance(step, complex):
        count = int(abs(step))
        if not all(isinstance(v, numbers.Real) for v in (start, spec.stop)):
            raise NotImplementedError("mgrid/ogrid: a complex step (a number of points) "
                                      "needs Python-number bounds")
        from symgraph.config import config
        from symgraph.tensor.basic import constant

        return constant(np.linspace(start, spec.stop, count).astype(config.floatX))
    if spec.stop is None:
        raise ValueError("mgrid/ogrid: every slice needs a stop")
    return arange(start, spec.stop, step)


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)
