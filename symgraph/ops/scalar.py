"""Scalar operations: what one element of an Elemwise computes.

A ScalarOp is a value (compared by class and props) that knows its arity, the
dtype of its result for given input dtypes, its NumPy implementation on whole
arrays (``impl``) and its gradient in tensor terms.  ``Elemwise(scalar_op)``
lifts it to arrays with broadcasting; fusion composes several of them; native
backends keep its per-element C in their own table
(``backends/c_family/scalar_c.py``), not here.

New scalar ops are one class each: declare ``nin``, ``ufunc`` (or ``impl``),
``output_dtype`` and ``grad``.
"""


from symgraph.graph.basic import PropsValue
from symgraph.tensor.type import FLOAT_DTYPES, upcast, upgrade_to_float


# -- output dtype rules --------------------------------------------------------

def same_out(*dtypes):
    """The common dtype of the inputs (arithmetic)."""
    return upcast(*dtypes)


def float_out(*dtypes):
    """A float dtype: ints become floats (Theano's upgrade_to_float)."""
    return upgrade_to_float(*dtypes)


def bool_out(*dtypes):
    return "bool"


def no_bool_out(*dtypes):
    """same_out, refusing bool (NumPy has no boolean subtract or negative)."""
    out = upcast(*dtypes)
    if out == "bool":
        raise TypeError("this op is not defined on bool inputs (NumPy's rule); use "
                        "T.xor / T.invert, or cast the input first")
    return out


def complex_to_real_out(*dtypes):
    """same_out, except that complex inputs give their real dtype (abs, angle)."""
    out = upcast(*dtypes)
    return {"complex64": "float32", "complex128": "float64"}.get(out, out)


def int_or_bool_out(*dtypes):
    out = upcast(*dtypes)
    if out in FLOAT_DTYPES or out.startswith("complex"):
        raise TypeError(f"bitwise/logical op needs integer or bool inputs, got {dtypes}")
    return out


def same_as_first(*dtypes):
    return dtypes[0]


class ScalarOp(PropsValue):
    """One element-wise function.

    Attributes a subclass sets:
      ``nin``, ``nout``: arity;
      ``ufunc``: a NumPy ufunc (or override ``impl``);
      ``output_dtype``: a rule mapping input dtypes to the output dtype;
      ``identity``: the neutral element when the op is used as a reduction;
      ``commutative``, ``associative``: used by canonicalization.
    """

    nin = 1
    nout = 1
    ufunc = None
    identity = None
    commutative = False
    associative = False
    output_dtype = staticmethod(same_out)

    @property
    def name(self):
        return type(self).__name__.lower()

    def __str__(self):
        return self.name

    __repr__ = __str__

    def __call__(self, *inputs):
        """Apply this op to variables, as Theano's scalar ops are applied
        (``theano.scalar.add(x, y)``): through ``Elemwise``, so 0-d inputs give a
        0-d result.  Add and Mul take any number of inputs."""
        from symgraph.ops.elemwise import Elemwise

        op = self
        if len(inputs) != self.nin and self.__props__ == ("nin",):
            op = type(self)(len(inputs))
        return Elemwise(op)(*inputs)

    def output_dtypes(self, *dtypes):
        """The output dtypes, one per output."""
        return [self.output_dtype(*dtypes)] * self.nout

    def compute_dtype(self, *dtypes):
        """The dtype the inputs are cast to before calling the ufunc (None: as they are)."""
        return None

    def impl(self, *inputs):
        """Compute on NumPy arrays; returns an array or a tuple of arrays."""
        if self.ufunc is None:
            raise NotImplementedError(f"{self} has no NumPy implementation")
        return self.ufunc(*inputs)

    def grad(self, inputs, outputs, output_grads):
        """Gradients (tensor variables or None when disconnected) for each input.

        ``inputs``/``outputs`` are the Elemwise's tensor variables; the
        Elemwise sums over broadcast dimensions afterwards.
        """
        from symgraph.graph.gradient_markers import grad_not_implemented

        return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]

    def connection_pattern(self):
        """One bool per input: whether the output depends on it (for gradients)."""
        return [True] * self.nin







class FloatScalarOp(ScalarOp):
    """An op with a float result (Theano's upgrade_to_float rule).

    Inputs are converted to the output dtype before the NumPy call, so that
    ``exp(int8)`` is computed in float32 as its type says (NumPy would give
    float16); float16 is computed in float32 and rounded once at the end.
    """

    output_dtype = staticmethod(float_out)

    def compute_dtype(self, *dtypes):
        out = self.output_dtypes(*dtypes)[0]
        return "float32" if out == "float16" else out


class UnaryScalarOp(ScalarOp):
    nin = 1


class BinaryScalarOp(ScalarOp):
    nin = 2
