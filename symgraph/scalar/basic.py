"""Theano's ``theano.scalar``: scalar types, conversions and scalar ops.

In Theano a scalar was its own kind of variable, with its own type (``Scalar``) and
ops, joined to tensors by ``tensor_from_scalar``/``scalar_from_tensor``.  In
symgraph a scalar is a 0-d tensor: :class:`ScalarType` is the 0-d
:class:`~symgraph.tensor.type.TensorType` of a dtype (``scalar.float64 ==
T.dscalar``), so scalar variables mix with tensors without conversions, and every
tensor op and rewrite applies to them.  The scalar ops are the element functions
that ``Elemwise`` lifts (``Elemwise(scalar.add)``); calling one on variables
applies it element-wise (``scalar.exp(x)``).
"""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Variable
from symgraph.ops import scalar_basic as _sb
from symgraph.ops import scalar_logic as _sl
from symgraph.ops import scalar_math as _sm
from symgraph.ops.composite import Composite
from symgraph.ops.scalar import BinaryScalarOp, ScalarOp, UnaryScalarOp
from symgraph.tensor.type import ALL_DTYPES, TensorType

__all__ = [
    "ScalarType", "Scalar", "get_scalar_type", "upcast", "as_scalar", "constant",
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
    "int_types", "uint_types", "float_types", "complex_types", "discrete_types",
    "continuous_types", "all_types",
    "ScalarOp", "UnaryScalarOp", "BinaryScalarOp", "Composite", "Cast", "cast",
    "add", "sub", "mul", "true_div", "int_div", "mod", "pow", "neg", "abs_", "sgn",
    "sqr", "sqrt", "inv", "maximum", "minimum", "clip", "switch", "second", "identity",
    "lt", "gt", "le", "ge", "eq", "neq", "isnan", "isinf", "and_", "or_", "xor",
    "invert", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
    "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "sigmoid", "softplus", "erf", "erfc", "erfinv", "gammaln",
    "psi", "tri_gamma", "floor", "ceil", "trunc", "round_half_to_even",
    "round_half_away_from_zero", "real", "imag", "conj", "angle",
]


class ScalarType(TensorType):
    """The type of a scalar of ``dtype``: the 0-d TensorType of that dtype, to
    which it is equal (``ScalarType('float64') == T.dscalar``).  Calling it makes a
    variable, as Theano's ``theano.scalar.float64('x')``."""

    def __init__(self, dtype, name=None):
        super().__init__(dtype, shape=(), name=name)

    # Equal to, and hashed as, the 0-d TensorType: graphs, rewrites and caches
    # treat a scalar variable as the 0-d tensor it is.  Python tries a subclass's
    # __eq__ first, so the comparison is symmetric.
    def __eq__(self, other):
        return isinstance(other, TensorType) and other.dtype == self.dtype and \
            other.shape == ()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("TensorType", (self.dtype, ())))

    def __str__(self):
        return self.name or f"Scalar({self.dtype})"

    __repr__ = __str__

    def clone(self, dtype=None, shape=None, broadcastable=None):
        """A copy with the dtype changed; a shape other than ``()`` gives a TensorType."""
        if shape is None and broadcastable is None:
            return ScalarType(dtype or self.dtype)
        return super().clone(dtype, shape, broadcastable)


#: Theano 1.0's name of the class (PyTensor's is ScalarType).
Scalar = ScalarType

_TYPES = {dtype: ScalarType(dtype) for dtype in ALL_DTYPES}


def get_scalar_type(dtype):
    """The :class:`ScalarType` of ``dtype`` (one shared instance per dtype)."""
    dtype = str(np.dtype(dtype)) if dtype != "floatX" else _float_x()
    try:
        return _TYPES[dtype]
    except KeyError:
        raise TypeError(f"no scalar type of dtype {dtype!r}; use one of "
                        f"{', '.join(ALL_DTYPES)}") from None


bool = _TYPES["bool"]  # noqa: A001 - Theano's name
int8, int16, int32, int64 = (_TYPES[d] for d in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_TYPES[d] for d in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_TYPES[d] for d in ("float16", "float32", "float64"))
complex64, complex128 = _TYPES["complex64"], _TYPES["complex128"]

int_types = (int8, int16, int32, int64)
uint_types = (uint8, uint16, uint32, uint64)
float_types = (float16, float32, float64)
complex_types = (complex64, complex128)
discrete_types = (bool,) + int_types + uint_types
continuous_types = float_types + complex_types
all_types = discrete_types + continuous_types


def _float_x():
    from symgraph.config import config

    return config.floatX


def upcast(dtype, *dtypes):
    """The dtype of a result computed from values of ``dtype`` and ``dtypes``
    (NumPy's promotion of arrays), kept at ``floatX`` when that is float32 or
    float16 and no input asked for more: with ``floatX=float32``, int32 and
    float32 give float32 where NumPy gives float64.  Theano's rule, which keeps
    float32 programs in float32."""
    dtypes = (dtype,) + dtypes
    names = [str(np.dtype(d)) for d in dtypes]
    result = str(np.result_type(*[np.dtype(d) for d in names]))
    keep = _float_x()
    if keep in ("float16", "float32") and result in ("float32", "float64"):
        wider = ("float64",) if keep == "float32" else ("float32", "float64")
        if not any(d in wider for d in names) and \
                np.dtype(result).itemsize > np.dtype(keep).itemsize:
            return keep
    return result


def constant(x, name=None, dtype=None):
    """A scalar constant holding ``x``, with symgraph's dtype rule for Python numbers
    (``T.constant``'s: a float is floatX, an int int64, a bool bool); a NumPy
    scalar keeps its dtype.  Raises TypeError for values of more than 0 dimensions."""
    from symgraph.tensor.basic import constant as tensor_constant
    from symgraph.tensor.var import TensorConstant

    made = tensor_constant(x, name=name, dtype=dtype)
    if made.ndim != 0:
        raise TypeError(f"scalar.constant takes a scalar, not a value of shape "
                        f"{np.shape(made.data)}")
    return TensorConstant(get_scalar_type(made.dtype), made.data, name=name)


def as_scalar(x, name=None):
    """``x`` as a scalar variable: a scalar (0-d) variable is returned as it is, the
    single output of an Apply node is taken, and Python and NumPy numbers become
    :func:`constant`.  A variable of one or more dimensions raises TypeError, as
    in Theano."""
    if isinstance(x, Apply):
        if len(x.outputs) != 1:
            raise ValueError(f"{x.op} has {len(x.outputs)} outputs: which one to take as "
                             "a scalar is ambiguous")
        x = x.outputs[0]
    if isinstance(x, Variable):
        if getattr(x.type, "ndim", None) != 0:
            raise TypeError(f"cannot make {x} of type {x.type} a scalar: it has "
                            f"{getattr(x.type, 'ndim', '?')} dimensions")
        return x
    if isinstance(x, (numbers.Number, np.generic)) or \
            (isinstance(x, np.ndarray) and x.ndim == 0):
        return constant(x, name=name)
    raise TypeError(f"cannot make a scalar of {type(x).__name__}: {x!r}")


# -- ops ----------------------------------------------------------------------------
# The element functions that Elemwise lifts; each is also callable on variables
# (ScalarOp.__call__).

Cast = _sb.Cast


def cast(x, dtype):
    """``x`` converted to ``dtype`` (a dtype name or a ScalarType)."""
    from symgraph.ops.math import cast as tensor_cast

    return tensor_cast(as_scalar(x), getattr(dtype, "dtype", dtype))


add, mul = _sb.Add(2), _sb.Mul(2)
sub, true_div, int_div, mod, pow = (  # noqa: A001 - Theano's names
    _sb.Sub(), _sb.TrueDiv(), _sb.IntDiv(), _sb.Mod(), _sb.Pow())
neg, abs_, sgn, sqr, inv = _sb.Neg(), _sb.Abs(), _sb.Sign(), _sb.Sqr(), _sb.Reciprocal()
maximum, minimum, clip = _sb.Maximum(), _sb.Minimum(), _sb.Clip()
switch, second, identity = _sb.Switch(), _sb.Second(), _sb.Identity()
lt, gt, le, ge, eq, neq = _sl.LT(), _sl.GT(), _sl.LE(), _sl.GE(), _sl.EQ(), _sl.NEQ()
isnan, isinf = _sl.IsNan(), _sl.IsInf()
and_, or_, xor, invert = _sl.AND(), _sl.OR(), _sl.XOR(), _sl.Invert()
exp, exp2, expm1, sqrt = _sm.Exp(), _sm.Exp2(), _sm.Expm1(), _sm.Sqrt()
log, log2, log10, log1p = _sm.Log(), _sm.Log2(), _sm.Log10(), _sm.Log1p()
sin, cos, tan = _sm.Sin(), _sm.Cos(), _sm.Tan()
arcsin, arccos, arctan, arctan2 = _sm.ArcSin(), _sm.ArcCos(), _sm.ArcTan(), _sm.ArcTan2()
sinh, cosh, tanh = _sm.Sinh(), _sm.Cosh(), _sm.Tanh()
arcsinh, arccosh, arctanh = _sm.ArcSinh(), _sm.ArcCosh(), _sm.ArcTanh()
sigmoid, softplus = _sm.Sigmoid(), _sm.Softplus()
erf, erfc, erfinv = _sm.Erf(), _sm.Erfc(), _sm.Erfinv()
gammaln, psi, tri_gamma = _sm.GammaLn(), _sm.Psi(), _sm.TriGamma()
floor, ceil, trunc = _sm.Floor(), _sm.Ceil(), _sm.Trunc()
round_half_to_even, round_half_away_from_zero = (_sm.RoundHalfToEven(),
                                                 _sm.RoundHalfAwayFromZero())
real, imag, conj, angle = _sm.Real(), _sm.Imag(), _sm.Conj(), _sm.Angle()
