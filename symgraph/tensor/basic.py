"""Building tensor variables: constants, conversions and typed constructors.

``scalar vector matrix tensor3 tensor4 tensor5`` come with Theano's dtype
prefixes (``b`` int8, ``w`` int16, ``i`` int32, ``l`` int64, ``f`` float32,
``d`` float64, ``c`` complex64, ``z`` complex128) and plural forms
(``dmatrices('a', 'b')``); the unprefixed forms use ``config.floatX``.
"""

import numbers

import numpy as np

from symgraph.graph.basic import Variable
from symgraph.tensor.type import TensorType
from symgraph.tensor.var import TensorConstant, TensorVariable

__all__ = ["TensorType", "TensorVariable", "TensorConstant", "as_tensor_variable",
           "as_tensor", "constant", "tensor", "is_python_scalar"]


def _float_x():
    from symgraph.config import config

    return config.floatX


def constant(value, name=None, ndim=None, dtype=None):
    """A TensorConstant holding ``value``.

    A Python float becomes ``floatX``, a Python int int64, a bool bool, unless
    ``dtype`` says otherwise.  The constant's static shape is the value's shape.
    """
    if isinstance(value, TensorConstant) and dtype is None and ndim is None:
        return value
    if dtype is None:
        arr = _default_array(value)
    else:
        arr = np.asarray(value, dtype=dtype)
    if ndim is not None:
        if arr.ndim > ndim:
            raise ValueError(f"constant {value!r} has {arr.ndim} dims, more than ndim={ndim}")
        arr = arr.reshape((1,) * (ndim - arr.ndim) + arr.shape)
    return TensorConstant(TensorType(str(arr.dtype), shape=arr.shape), arr, name=name)


def _default_array(value):
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return np.asarray(value, dtype="bool")
    if isinstance(value, numbers.Integral) and not isinstance(value, np.integer):
        return np.asarray(value, dtype="int64")
    if isinstance(value, float):
        return np.asarray(value, dtype=_float_x())
    if isinstance(value, complex):
        return np.asarray(value, dtype="complex128")
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"cannot make a tensor constant from {type(value).__name__}: {value!r}")
    if arr.dtype.kind == "f" and isinstance(value, (list, tuple)):
        arr = arr.astype(_float_x())  # nested Python floats follow floatX
    if arr.dtype.kind in "US":
        raise TypeError(f"cannot make a tensor constant from strings: {value!r}")
    return arr


def is_python_scalar(value):
    """True for Python (not NumPy) numbers, which promote weakly (NEP 50)."""
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


def as_tensor_variable(x, name=None, ndim=None, dtype=None):
    """``x`` as a TensorVariable: variables pass through, data becomes a constant.

    A Variable of another kind (a random state, a list type) is an error.
    """
    if isinstance(x, Variable) and isinstance(x.type, TensorType):
        if ndim is not None and x.ndim != ndim:
            if x.ndim < ndim and all(x.broadcastable):
                from symgraph.ops.elemwise import dimshuffle

                return dimshuffle(x, ["x"] * (ndim - x.ndim) + list(range(x.ndim)))
            raise TypeError(f"{x} has {x.ndim} dimensions, expected {ndim}")
        if dtype is not None and x.dtype != dtype:
            from symgraph.ops.math import cast

            return cast(x, dtype)
        return x
    if isinstance(x, Variable):
        if hasattr(x, "_as_tensor_variable"):
            return x._as_tensor_variable()
        raise TypeError(f"{x} of type {x.type} is not a tensor")
    if isinstance(x, (list, tuple)) and any(isinstance(e, Variable) for e in x):
        from symgraph.ops.shape import stack

        return stack([as_tensor_variable(e) for e in x])
    return constant(x, name=name, ndim=ndim, dtype=dtype)


as_tensor = as_tensor_variable


def tensor(dtype=None, broadcastable=None, name=None, shape=None):
    """A new symbolic input: ``tensor('float32', (False, True), name='x')``.

    Theano's argument order is kept; ``shape=(None, 1)`` is the newer form.
    """
    if isinstance(dtype, (tuple, list)) and broadcastable is None:
        dtype, broadcastable = None, dtype
    if broadcastable is None and shape is None:
        raise TypeError("tensor() needs broadcastable=(...) or shape=(...)")
    return TensorType(dtype or _float_x(), broadcastable=broadcastable,
                      shape=shape)(name)


_PREFIXES = {"": None, "b": "int8", "w": "int16", "i": "int32", "l": "int64",
             "f": "float32", "d": "float64", "c": "complex64", "z": "complex128"}
_RANKS = {"scalar": 0, "vector": 1, "matrix": 2, "row": 2, "col": 2,
          "tensor3": 3, "tensor4": 4, "tensor5": 5, "tensor6": 6, "tensor7": 7}
_PLURALS = {"scalar": "scalars", "vector": "vectors", "matrix": "matrices", "row": "rows",
            "col": "cols", "tensor3": "tensor3s", "tensor4": "tensor4s",
            "tensor5": "tensor5s", "tensor6": "tensor6s", "tensor7": "tensor7s"}


def _shape_for(kind):
    if kind == "row":
        return (1, None)
    if kind == "col":
        return (None, 1)
    return (None,) * _RANKS[kind]


def _make_constructor(prefix, kind, fixed_dtype):
    """A prefixed constructor (``dmatrix``) is a TensorType instance, as in
    Theano, so ``x.type == T.dmatrix``; an unprefixed one (``matrix``) is a
    function, since its dtype is ``floatX`` when it is called."""
    if fixed_dtype is not None:
        return TensorType(fixed_dtype, shape=_shape_for(kind))

    def constructor(name=None, dtype=None, shape=None):
        return TensorType(dtype or _float_x(), shape=shape or _shape_for(kind))(name)

    constructor.__name__ = constructor.__qualname__ = kind
    constructor.__doc__ = (f"A symbolic {kind} ({_RANKS[kind]}-d) input of dtype "
                           f"config.floatX (or dtype=).")
    return constructor


def _make_plural(single, name):
    def plural(*names, dtype=None):
        if len(names) == 1 and isinstance(names[0], int):
            names = [None] * names[0]
        elif len(names) == 1 and isinstance(names[0], str) and "," in names[0]:
            names = [n.strip() for n in names[0].split(",")]
        elif len(names) == 1 and isinstance(names[0], str):
            names = list(names[0])  # Theano's rule: scalars('abcd') names a, b, c, d
        variables = [single(n) if dtype is None else single(n, dtype=dtype) for n in names]
        return variables if len(variables) != 1 else variables[0]

    plural.__name__ = plural.__qualname__ = name
    plural.__doc__ = (f"Several inputs at once ({name}): one per name given, one per "
                      f"character of a single string ('abc'), one per comma-separated "
                      f"name ('x, y'), or a count.")
    return plural


def _build_constructors():
    made = {}
    for prefix, fixed in _PREFIXES.items():
        for kind in _RANKS:
            name = prefix + kind
            made[name] = _make_constructor(prefix, kind, fixed)
            plural = prefix + _PLURALS[kind]
            made[plural] = _make_plural(made[name], plural)
    return made


_CONSTRUCTORS = _build_constructors()
globals().update(_CONSTRUCTORS)
__all__ += sorted(_CONSTRUCTORS)
