"""TensorVariable and TensorConstant: NumPy-like operators on symbolic arrays.

The operator methods build nodes through the ops modules, imported lazily:
the ops themselves build TensorVariables, so a top-level import would be a
cycle.
"""

import numpy as np

from symgraph.graph.basic import Constant, Variable
from symgraph.tensor.var_methods import TheanoMethods


def _math():
    from symgraph.ops import math

    return math


def _reduce():
    from symgraph.ops import reduce

    return reduce


def _blas():
    from symgraph.ops import blas

    return blas


def _shape():
    from symgraph.ops import shape

    return shape


def _comparison(result):
    """Mark the result of a comparison operator as having no truth value."""
    result._is_nonzero = False
    return result


class _TensorOperators(TheanoMethods):
    """Operators shared by every tensor-typed variable."""

    # -- arithmetic --------------------------------------------------------
    def __add__(self, other): return _math().add(self, other)
    def __radd__(self, other): return _math().add(other, self)
    def __sub__(self, other): return _math().sub(self, other)
    def __rsub__(self, other): return _math().sub(other, self)
    def __mul__(self, other): return _math().mul(self, other)
    def __rmul__(self, other): return _math().mul(other, self)
    def __truediv__(self, other): return _math().true_div(self, other)
    def __rtruediv__(self, other): return _math().true_div(other, self)
    def __floordiv__(self, other): return _math().int_div(self, other)
    def __rfloordiv__(self, other): return _math().int_div(other, self)
    def __mod__(self, other): return _math().mod(self, other)
    def __rmod__(self, other): return _math().mod(other, self)
    def __pow__(self, other): return _math().pow(self, other)
    def __rpow__(self, other): return _math().pow(other, self)
    def __neg__(self): return _math().neg(self)
    def __pos__(self): return self
    def __abs__(self): return _math().abs_(self)
    def __matmul__(self, other): return _blas().matmul(self, other)
    def __rmatmul__(self, other): return _blas().matmul(other, self)

    # -- comparisons and logic ----------------------------------------------
    def __lt__(self, other): return _comparison(_math().lt(self, other))
    def __le__(self, other): return _comparison(_math().le(self, other))
    def __gt__(self, other): return _comparison(_math().gt(self, other))
    def __ge__(self, other): return _comparison(_math().ge(self, other))
    def __and__(self, other): return _math().and_(self, other)
    def __rand__(self, other): return _math().and_(other, self)
    def __or__(self, other): return _math().or_(self, other)
    def __ror__(self, other): return _math().or_(other, self)
    def __xor__(self, other): return _math().xor(self, other)
    def __rxor__(self, other): return _math().xor(other, self)
    def __invert__(self): return _math().invert(self)

    # Variables are graph nodes: == and hash are identity (as in Theano);
    # element-wise equality is T.eq / T.neq.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    # Theano's rule: a variable is true (so `if not W:` tests for None), except
    # the result of <, <=, >, >=, which raises so that `a < b < c` (Python's
    # `(a < b) and (b < c)`) cannot silently drop a comparison.
    _is_nonzero = True

    def __bool__(self):
        if self._is_nonzero:
            return True
        raise TypeError("the result of a symbolic comparison has no truth value (a chained "
                        "comparison such as a < b < c needs T.and_(a < b, b < c)); use "
                        "symgraph.ifelse or T.switch for conditions on values")

    def __iter__(self):
        raise TypeError("a symbolic tensor cannot be iterated; index it or use T.split")

    def __len__(self):
        raise TypeError("a symbolic tensor has no len(); use x.shape[0]")

    # -- attributes ---------------------------------------------------------
    @property
    def dtype(self):
        return self.type.dtype

    @property
    def ndim(self):
        return self.type.ndim

    @property
    def broadcastable(self):
        return self.type.broadcastable

    @property
    def shape(self):
        return _shape().shape(self)

    @property
    def size(self):
        return _reduce().prod(self.shape)

    @property
    def T(self):
        return _shape().transpose(self)

    # -- methods (NumPy's names) --------------------------------------------
    def __getitem__(self, index):
        from symgraph.ops import subtensor

        return subtensor.getitem(self, index)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return _shape().transpose(self, axes or None)

    def dimshuffle(self, *pattern):
        from symgraph.ops.elemwise import dimshuffle

        if len(pattern) == 1 and isinstance(pattern[0], (tuple, list)):
            pattern = pattern[0]
        return dimshuffle(self, pattern)

    def reshape(self, shape, *more, ndim=None):
        if more:
            shape = (shape,) + more
        return _shape().reshape(self, shape, ndim=ndim)

    def flatten(self, ndim=1):
        return _shape().flatten(self, ndim)

    def ravel(self):
        return _shape().flatten(self, 1)

    def squeeze(self, axis=None):
        return _shape().squeeze(self, axis)

    def astype(self, dtype):
        return _math().cast(self, dtype)

    def dot(self, other):
        return _math().dot(self, other)

    def sum(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _reduce().sum(self, axis=axis, dtype=dtype, keepdims=keepdims, acc_dtype=acc_dtype)

    def prod(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _reduce().prod(self, axis=axis, dtype=dtype, keepdims=keepdims,
                              acc_dtype=acc_dtype)

    def mean(self, axis=None, dtype=None, keepdims=False, acc_dtype=None):
        return _reduce().mean(self, axis=axis, dtype=dtype, keepdims=keepdims,
                              acc_dtype=acc_dtype)

    def var(self, axis=None, ddof=0, keepdims=False, corrected=False):
        return _reduce().var(self, axis=axis, ddof=ddof, keepdims=keepdims,
                             corrected=corrected)

    def std(self, axis=None, ddof=0, keepdims=False, corrected=False):
        return _reduce().std(self, axis=axis, ddof=ddof, keepdims=keepdims,
                             corrected=corrected)

    def max(self, axis=None, keepdims=False):
        return _reduce().max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduce().min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _reduce().argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _reduce().argmin(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return _reduce().all(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        return _reduce().any(self, axis=axis, keepdims=keepdims)

    def clip(self, a_min, a_max):
        return _math().clip(self, a_min, a_max)

    def round(self, mode=None):
        return _math().round(self, mode or "half_to_even")

    def take(self, indices, axis=None, mode="raise"):
        """NumPy's ``take`` (see :func:`symgraph.tensor.take`)."""
        from symgraph.ops import sort

        return sort.take(self, indices, axis=axis, mode=mode)

    def repeat(self, repeats, axis=None):
        """NumPy's ``repeat``: a count, or one count per element along ``axis``."""
        from symgraph.ops import sort

        return sort.repeat(self, repeats, axis=axis)

    def sort(self, axis=-1, kind="quicksort", order=None):
        """This tensor sorted along ``axis`` (NumPy's ``sort``, returning the result)."""
        from symgraph.ops import sort

        return sort.sort(self, axis=axis, kind=kind, order=order)

    def argsort(self, axis=-1, kind="quicksort", order=None):
        """The int64 indices that sort this tensor along ``axis``."""
        from symgraph.ops import sort

        return sort.argsort(self, axis=axis, kind=kind, order=order)

    def copy(self, name=None):
        out = _math().identity(self)
        out.name = name
        return out

    def nonzero(self, return_matrix=False):
        """The indices of the non-zero entries: one int64 vector per dimension,
        or one (ndim, N) matrix with ``return_matrix``."""
        from symgraph.ops import subtensor

        return subtensor.nonzero(self, return_matrix=return_matrix)

    def transfer(self, target):
        """This variable moved to ``target`` (Theano's method): 'cpu', a device
        ('cuda1'), a name of the flag ``contexts`` ('dev0'), or None (the
        default context)."""
        from symgraph.ops.transfer import transfer

        return transfer(self, target)

    def __array__(self, *args, **kwargs):
        raise TypeError("a symbolic variable is not an array; compile a function "
                        "or call .eval() to get its value")

    # NumPy must defer to our operators when it is on the left (ndarray + var).
    __array_priority__ = 1000
    __array_ufunc__ = None


class TensorVariable(_TensorOperators, Variable):
    """A symbolic array of a TensorType."""


class TensorConstant(_TensorOperators, Constant):
    """A constant array.

    ``tag.unique_value`` caches the single value when every element is equal
    (rewrites ask for it often: ``x * 1``, ``x + 0``).
    """

    def __init__(self, type, data, name=None):
        data = np.asarray(data)
        super().__init__(type, data, name)
        self.data.setflags(write=False)

    def unique_value(self):
        """The value of every element if they are all equal, else None."""
        if "unique_value" not in vars(self.tag):
            flat = self.data.ravel()
            value = None
            if flat.size > 0 and (flat == flat[0]).all():
                value = flat[0]
            self.tag.unique_value = value
        return self.tag.unique_value

    def __str__(self):
        if self.name is not None:
            return self.name
        if self.data.ndim == 0:
            return str(self.data.item())
        text = np.array2string(self.data, threshold=6, separator=",").replace("\n", "")
        return text if len(text) <= 30 else f"TensorConstant{{{self.type}}}"
