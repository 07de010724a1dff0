"""The methods of Theano's tensor variables that ``var.py``'s operators do
not cover: element-wise functions (``x.exp()``, ``x.log()``, ...), rounding
(``x.floor()``, ``math.floor(x)``), ``diagonal``, ``trace``, ``norm``,
``ptp``, ``cumsum``, ``searchsorted``, ``choose``, ``compress``, ``fill``,
``zeros_like``, ``get_scalar_constant_value``, ``real``/``imag``, ...

Each forwards to the tensor function of the same name.
"""


def _math():
    from symgraph.ops import math

    return math


def _unary(name, doc):
    def method(self):
        return getattr(_math(), name)(self)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


class TheanoMethods:
    """Mixin of Theano's remaining tensor-variable methods."""

    for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin",
                  "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan",
                  "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "ceil", "floor",
                  "trunc", "conj"):
        locals()[_name] = _unary(_name, f"``{_name}`` of each element.")
    del _name

    def __ceil__(self):
        return _math().ceil(self)

    def __floor__(self):
        return _math().floor(self)

    def __trunc__(self):
        return _math().trunc(self)

    def __divmod__(self, other):
        return _math().int_div(self, other), _math().mod(self, other)

    def __rdivmod__(self, other):
        return _math().int_div(other, self), _math().mod(other, self)

    def __dot__(self, other):
        return _math().dot(self, other)

    def __rdot__(self, other):
        return _math().dot(other, self)

    @property
    def real(self):
        """The real part of each element."""
        return _math().real(self)

    @property
    def imag(self):
        """The imaginary part of each element (zeros for real values)."""
        return _math().imag(self)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        """NumPy's ``diagonal``."""
        from symgraph.ops.linalg import diagonal

        return diagonal(self, offset, axis1, axis2)

    def trace(self):
        """The sum of the main diagonal (of a matrix)."""
        from symgraph.ops.linalg import trace

        return trace(self)

    def norm(self, L, axis=None):
        """The L-norm along ``axis`` (see ``tensor.norm``)."""
        from symgraph.tensor.theano_basic import norm

        return norm(self, L, axis)

    def ptp(self, axis=None):
        """max - min along ``axis``."""
        from symgraph.tensor.theano_basic import ptp

        return ptp(self, axis)

    def cumsum(self, axis=None):
        """The cumulative sum along ``axis`` (flattened when None)."""
        from symgraph.ops.extra import cumsum

        return cumsum(self, axis)

    def cumprod(self, axis=None):
        """The cumulative product along ``axis`` (flattened when None)."""
        from symgraph.ops.extra import cumprod

        return cumprod(self, axis)

    def searchsorted(self, v, side="left", sorter=None):
        """Where the elements of ``v`` go in this sorted vector."""
        from symgraph.ops.extra import searchsorted

        return searchsorted(self, v, side, sorter)

    def choose(self, choices, out=None, mode="raise"):
        """NumPy's ``choose`` with this tensor as the index array."""
        from symgraph.tensor.theano_basic import choose

        return choose(self, choices, out, mode)

    def compress(self, condition, axis=None):
        """The slices along ``axis`` where ``condition`` is true."""
        from symgraph.ops.extra import compress

        return compress(condition, self, axis)

    def swapaxes(self, axis1, axis2):
        """This tensor with two axes exchanged."""
        from symgraph.ops.shape import swapaxes

        return swapaxes(self, axis1, axis2)

    def fill(self, value):
        """An array of this tensor's shape filled with ``value``."""
        return _math().second(self, value)

    def zeros_like(self, dtype=None):
        """Zeros of this tensor's shape (and dtype unless given)."""
        return _math().zeros_like(self, dtype)

    def ones_like(self, dtype=None):
        """Ones of this tensor's shape (and dtype unless given)."""
        return _math().ones_like(self, dtype)

    def nonzero_values(self):
        """The non-zero entries, flattened (C order)."""
        from symgraph.ops import subtensor

        return subtensor.nonzero_values(self)

    def get_scalar_constant_value(self):
        """The constant scalar this variable always holds (raises
        ``NotScalarConstantError`` otherwise)."""
        from symgraph.tensor.theano_basic import get_scalar_constant_value

        return get_scalar_constant_value(self)
