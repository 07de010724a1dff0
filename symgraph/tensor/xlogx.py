"""Theano's ``tensor.xlogx``: ``x * log(x)`` and ``x * log(y)`` taken as 0
where ``x`` is 0 (the limit), for entropies and cross-entropies."""

from symgraph.ops import math as _m

__all__ = ["xlogx", "xlogy0"]


def xlogx(x):
    """``x * log(x)``, 0 where x is 0."""
    return _m.switch(_m.eq(x, 0), 0.0, x * _m.log(x))


def xlogy0(x, y):
    """``x * log(y)``, 0 where x is 0 (even if y is 0 there)."""
    return _m.switch(_m.eq(x, 0), 0.0, x * _m.log(y))
