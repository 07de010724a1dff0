"""TensorType: the type of n-dimensional arrays (dtype + static shape).

A dimension's static size is an int when known and None otherwise; a size of 1
is what Theano called a *broadcastable* dimension, so ``broadcastable`` is
derived from ``shape``.  Only dimensions declared broadcastable may broadcast at
run time, as in Theano: a silent NumPy broadcast of an undeclared dimension
would make gradients wrong.
"""

import numpy as np

from symgraph.graph.basic import Type

ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64", "complex64", "complex128")
FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DISCRETE_DTYPES = ("bool",) + INT_DTYPES


class ArrayTypeProperties:
    """What every array type derives from its ``dtype`` and static ``shape``
    (TensorType on the host, GpuArrayType on a device)."""

    @property
    def broadcastable(self):
        return tuple(s == 1 for s in self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numpy_dtype(self):
        return np.dtype(self.dtype)


class TensorType(ArrayTypeProperties, Type):
    """An array type: ``TensorType('float32', shape=(None, 1))``.

    ``broadcastable`` may be given instead of ``shape`` (Theano's form):
    ``TensorType('float32', (False, True))``.
    """

    __props__ = ("dtype", "shape")

    def __init__(self, dtype, broadcastable=None, shape=None, name=None):
        if dtype == "floatX":
            from symgraph.config import config

            dtype = config.floatX
        dtype = str(np.dtype(dtype))
        if dtype not in ALL_DTYPES:
            raise TypeError(f"unsupported dtype {dtype!r}; use one of {', '.join(ALL_DTYPES)}")
        if shape is None:
            if broadcastable is None:
                raise TypeError("TensorType needs broadcastable or shape")
            shape = tuple(1 if b else None for b in broadcastable)
        elif broadcastable is not None:
            raise TypeError("give TensorType either broadcastable or shape, not both")
        self.dtype = dtype
        self.shape = tuple(None if s is None else int(s) for s in shape)
        if any(s is not None and s < 0 for s in self.shape):
            raise ValueError(f"negative static shape {self.shape}")
        self.name = name

    def clone(self, dtype=None, shape=None, broadcastable=None):
        """A copy with the dtype or the shape changed."""
        if broadcastable is not None:
            shape = tuple(1 if b else None for b in broadcastable)
        return TensorType(dtype or self.dtype, shape=self.shape if shape is None else shape)

    def __str__(self):
        if self.name:
            return self.name
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        trailing = "," if self.ndim == 1 else ""
        return f"TensorType({self.dtype}, ({dims}{trailing}))"

    __repr__ = __str__

    # -- values -----------------------------------------------------------

    def filter(self, value, strict=False, allow_downcast=None):
        """Return ``value`` as an ndarray of this type, or raise TypeError.

        ``strict`` demands an ndarray of exactly this dtype.  Otherwise values
        are converted when no information is lost (int32 to float64, a Python
        float to float32 when it round-trips), or whenever ``allow_downcast``.
        """
        if isinstance(value, np.ndarray) and value.dtype == self.numpy_dtype:
            arr = value
        elif strict:
            raise TypeError(f"expected an ndarray of dtype {self.dtype}, "
                            f"got {type(value).__name__}"
                            f"{' of dtype ' + str(value.dtype) if hasattr(value, 'dtype') else ''}")
        else:
            arr = self._convert(value, allow_downcast)
        if arr.ndim != self.ndim:
            raise TypeError(f"wrong number of dimensions: expected {self.ndim}, "
                            f"got {arr.ndim} with shape {arr.shape}")
        for dim, (want, got) in enumerate(zip(self.shape, arr.shape)):
            if want is not None and want != got:
                raise TypeError(f"dimension {dim} must have size {want} "
                                f"(the type {self} says so), got shape {arr.shape}")
        return arr

    def _convert(self, value, allow_downcast):
        source = value
        if hasattr(value, "dtype") and not isinstance(value, np.ndarray):
            value = np.asarray(value)  # numpy scalars
        if isinstance(value, np.ndarray):
            if allow_downcast or np.can_cast(value.dtype, self.dtype, "safe"):
                return value.astype(self.dtype, copy=False)
            raise TypeError(f"cannot safely cast an array of dtype {value.dtype} to "
                            f"{self.dtype}; cast it yourself, or pass "
                            f"allow_input_downcast=True to function()")
        try:
            original = np.asarray(source)
        except Exception as exc:
            raise TypeError(f"cannot convert {type(source).__name__} to an array: {exc}")
        if original.dtype == object:
            raise TypeError(f"cannot convert {type(source).__name__} to a {self.dtype} array")
        with np.errstate(all="ignore"):
            arr = original.astype(self.dtype)
        if not allow_downcast and not np.can_cast(original.dtype, self.dtype, "safe"):
            # Python numbers and lists: accept when the conversion is exact.
            if not np.array_equal(arr.astype(original.dtype), original, equal_nan=
                                  original.dtype.kind in "fc"):
                raise TypeError(f"{source!r} cannot be stored exactly as {self.dtype}; "
                                f"pass allow_input_downcast=True to function() to allow it")
        return arr

    def values_eq(self, a, b):
        return np.array_equal(a, b, equal_nan=self.dtype in FLOAT_DTYPES)

    def values_eq_approx(self, a, b, rtol=None, atol=None):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if self.dtype not in FLOAT_DTYPES and not self.dtype.startswith("complex"):
            return np.array_equal(a, b)
        tol = {"float16": 1e-2, "float32": 1e-4}.get(self.dtype, 1e-8)
        return np.allclose(a, b, rtol=rtol or tol, atol=atol or tol, equal_nan=True)

    # -- relations between types ----------------------------------------------

    def is_super(self, other):
        return isinstance(other, TensorType) and other.dtype == self.dtype and \
            other.ndim == self.ndim and \
            all(s is None or s == o for s, o in zip(self.shape, other.shape))

    def convert_variable(self, var):
        """``var`` seen as this type: itself when it is at least as specific,
        through ``specify_shape`` when it is more general, else None.  A device
        variable is seen through its copy to the host (which the ``gpu``
        rewrites remove when its consumers run on the device), so that device
        shared variables replace host tensors in ``givens``."""
        if not isinstance(var.type, TensorType):
            as_host = getattr(var, "_as_tensor_variable", None)
            if as_host is None:
                return None
            var = as_host()
            if not isinstance(var.type, TensorType):
                return None
        if var.type == self or self.is_super(var.type):
            return var
        if var.type.is_super(self) or self._compatible(var.type):
            from symgraph.ops.shape import specify_shape

            return specify_shape(var, self.shape)
        return None

    def _compatible(self, other):
        return other.dtype == self.dtype and other.ndim == self.ndim and all(
            a is None or b is None or a == b for a, b in zip(self.shape, other.shape))

    def __call__(self, name=None, dtype=None, shape=None):
        """A new input variable of this type: ``T.dmatrix('x')`` (Theano's typed
        constructors are TensorType instances).  ``dtype`` may repeat this
        type's dtype; ``shape`` refines the unknown static sizes."""
        if dtype is not None and TensorType(dtype, shape=()).dtype != self.dtype:
            raise TypeError(f"{self} has dtype {self.dtype}, not {dtype}")
        if shape is None:
            return self.make_variable(name)
        shape = tuple(shape)
        if len(shape) != self.ndim or not all(
                mine is None or mine == s for mine, s in zip(self.shape, shape)):
            raise TypeError(f"shape {shape} does not fit {self}")
        return TensorType(self.dtype, shape=shape).make_variable(name)

    def make_variable(self, name=None):
        if self.dtype == "float64":
            _check_float64(self)
        return self.variable_class(self, name=name)

    @property
    def variable_class(self):
        from symgraph.tensor.var import TensorVariable

        return TensorVariable

    @property
    def constant_class(self):
        from symgraph.tensor.var import TensorConstant

        return TensorConstant


def upcast(*dtypes):
    """The dtype that holds every value of all ``dtypes`` (NumPy's promotion)."""
    return str(np.result_type(*[np.dtype(d) for d in dtypes]))


def upgrade_to_float(*dtypes):
    """Theano's rule for functions like exp: small ints to float32, others to float64."""
    out = upcast(*dtypes)
    if out in FLOAT_DTYPES or out.startswith("complex"):
        return out
    if all(d in ("bool", "int8", "uint8", "int16", "uint16") for d in dtypes):
        return "float32"
    return "float64"


def _check_float64(ttype):
    from symgraph.config import config

    policy = config.warn_float64
    if policy == "ignore":
        return
    message = (f"a float64 variable ({ttype}) was created; set floatX=float32 or cast "
               f"explicitly (flag warn_float64={policy})")
    if policy == "raise":
        raise TypeError(message)
    import warnings

    warnings.warn(message, stacklevel=4)
