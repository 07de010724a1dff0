"""Scalar operations: what one element of an Elemwise computes.

A ScalarOp is a value (compared by class and props) that knows its arity, the
dtype of its result for given input dtypes, its NumPy implementation on whole
arrays (``impl``) and its gradient in tensor terms.  ``Elemwise(scalar_op)``
lifts it to arrays with broadcasting; fusion composes several of them; native
backends add a per-element C expression (``c_expr``).

New scalar ops are one class each: declare ``nin``, ``ufunc`` (or ``impl``),
``output_dtype`` and ``grad``.
"""

import numpy as np

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

    # -- native code (see symgraph/backends/cpu/elemwise/loop.py) ----------

    def c_input_dtypes(self, *dtypes):
        """The dtype each input is converted to before ``c_expr`` sees it.

        Mirrors what the Python side computes in: ``compute_dtype`` when the
        op has one (float ops), else NumPy's common dtype of the inputs.
        """
        compute = self.compute_dtype(*dtypes)
        common = compute if compute is not None else upcast(*dtypes)
        return [common] * len(dtypes)

    def c_expr(self, inputs, in_dtypes, out_dtype):
        """A C expression for one element, or None (no native code).

        ``inputs`` are C names or literals (each may be used more than once)
        holding values of ``c_compute_type(in_dtypes[i])``, where ``in_dtypes``
        come from ``c_input_dtypes``; the result must convert to the compute
        type of ``out_dtype`` (0 or 1 for bool).  The caller rounds it to
        ``out_dtype``.
        """
        return None

    def c_body(self, inputs, in_dtypes, outputs, out_dtypes, error_flag=None):
        """C statements assigning each name of ``outputs`` (declared by the
        caller with the compute types of ``out_dtypes``), or None.

        ``error_flag``: the name of an int the statements OR ``c_error``'s
        condition into (the kernel fails the call when it is set).  The
        default uses ``c_expr``; ops with several outputs override it.
        """
        if self.nout != 1:
            return None
        expr = self.c_expr(inputs, in_dtypes, out_dtypes[0])
        if expr is None:
            return None
        text = f"{outputs[0]} = {expr};"
        error = self.c_error(inputs, in_dtypes, out_dtypes[0])
        if error is not None and error_flag:
            text += f" {error_flag} |= {error[0]};"
        return text

    def c_error(self, inputs, in_dtypes, out_dtype):
        """``(condition, message)``: a C condition on the inputs that makes the
        whole call fail with ValueError(message), as ``impl`` would; or None."""
        return None

    def c_error_messages(self, in_dtypes):
        """The messages of the errors ``c_body`` may flag for these input dtypes."""
        names = [f"x{i}" for i in range(len(in_dtypes))]
        out = self.output_dtypes(*in_dtypes)[0] if self.nout == 1 else None
        error = self.c_error(names, in_dtypes, out) if out is not None else None
        return () if error is None else (error[1],)

    def c_support(self):
        """((key, code), ...): C helpers the expressions call (``sg_`` names),
        emitted once per library."""
        return ()


# -- helpers for writing C expressions ------------------------------------------
#
# The native backend computes float16 in float32 (C's ``float``), bools as
# 0/1 bytes, and integer + - * through the unsigned type of the same width so
# that overflow wraps as in NumPy (signed overflow is undefined in C).

def c_exact(code):
    """``code`` compiled without floating-point contraction.

    GCC fuses ``a * b + c`` into one FMA by default (``-ffp-contract=fast``),
    which rounds once where NumPy rounds twice: results would change with
    fusion.  Element loops and the helpers they inline are wrapped in this
    (inlining needs the same options on both sides).
    """
    return ("#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC push_options\n"
            "#pragma GCC optimize (\"fp-contract=off\")\n#endif\n" + code +
            "\n#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC pop_options\n#endif")


def c_kind(dtype):
    """'f' (float), 'i' (signed int), 'u' (unsigned int), 'b' (bool) or 'c'."""
    return np.dtype(dtype).kind


def c_ctype(dtype):
    """The C type values of ``dtype`` are computed in (float16 -> float)."""
    from symgraph.backends.c_family.c_types import c_compute_type

    return c_compute_type(dtype)


def c_fn(name, dtype):
    """The libm function ``name`` for ``dtype``: ``expf`` for float32/16, ``exp`` else."""
    return name + ("f" if str(dtype) in ("float32", "float16") else "")


def c_lit(value, dtype):
    """``value`` as a parenthesized C literal of ``dtype``'s compute type."""
    from symgraph.backends.c_family.c_types import c_literal

    dtype = str(dtype)
    if dtype == "int64" and int(value) == -2 ** 63:
        return "(-9223372036854775807LL - 1)"
    if c_kind(dtype) in "iu" and dtype != "int64":
        return f"(({c_ctype(dtype)}){c_literal(value, dtype)})"
    return f"({c_literal(value, 'float32' if dtype == 'float16' else dtype)})"


def c_wrapping(op, inputs, dtype):
    """``a op b op ...`` in ``dtype`` with NumPy's overflow (wrap-around for
    ints, a float16 rounding after each step, logical for bools)."""
    kind = c_kind(dtype)
    if kind == "b":
        op = {"+": "|", "*": "&"}.get(op, op)
        return "(" + f" {op} ".join(inputs) + ")"
    if kind in "iu":
        unsigned = "uint64_t" if np.dtype(dtype).itemsize == 8 else "uint32_t"
        inner = f" {op} ".join(f"({unsigned})({x})" for x in inputs)
        return f"(({c_ctype(dtype)})({inner}))"
    if dtype == "float16" and len(inputs) > 2:
        # NumPy folds pairwise, rounding each partial result to float16.
        out = inputs[0]
        for x in inputs[1:]:
            out = f"((float)(_Float16)({out} {op} {x}))"
        return out
    return "(" + f" {op} ".join(inputs) + ")"


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
