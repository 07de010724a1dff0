"""The C of the base scalar op's defaults and the helpers for writing C expressions (``symgraph/ops/scalar.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

import numpy as np

from symgraph.tensor.type import upcast

from symgraph.backends.c_family.scalar_c import c_error, c_expr, c_method
from symgraph.ops.scalar import ScalarOp


# The native backends compute float16 in float32 (C's ``float``), bools as 0/1
# bytes, and integer + - * through the unsigned type of the same width so that
# overflow wraps as in NumPy (signed overflow is undefined in C).

def c_exact(code):
    """``code`` compiled without floating-point contraction.

    GCC fuses ``a * b + c`` into one FMA by default (``-ffp-contract=fast``),
    which rounds once where NumPy rounds twice: results would change with
    fusion.  Element loops and the helpers they inline are wrapped in this
    (inlining needs the same options on both sides).
    """
    # (not under nvcc, which defines __GNUC__ but rejects GCC's pragmas)
    guard = "#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)\n"
    return (guard + "#pragma GCC push_options\n#pragma GCC optimize (\"fp-contract=off\")\n"
            "#endif\n" + code + "\n" + guard + "#pragma GCC pop_options\n#endif")


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
            out = f"SG_ROUND_F16({out} {op} {x})"
        return out
    return "(" + f" {op} ".join(inputs) + ")"


@c_method(ScalarOp, "c_input_dtypes")
def _scalar_op_c_input_dtypes(op, *dtypes):
    """The dtype each input is converted to before ``c_expr`` sees it.

    Mirrors what the Python side computes in: ``compute_dtype`` when the
    op has one (float ops), else NumPy's common dtype of the inputs.
    """
    compute = op.compute_dtype(*dtypes)
    common = compute if compute is not None else upcast(*dtypes)
    return [common] * len(dtypes)


@c_method(ScalarOp, "c_expr")
def _scalar_op_c_expr(op, inputs, in_dtypes, out_dtype):
    """A C expression for one element, or None (no native code).

    ``inputs`` are C names or literals (each may be used more than once)
    holding values of ``c_compute_type(in_dtypes[i])``, where ``in_dtypes``
    come from ``c_input_dtypes``; the result must convert to the compute
    type of ``out_dtype`` (0 or 1 for bool).  The caller rounds it to
    ``out_dtype``.
    """
    return None


@c_method(ScalarOp, "c_body")
def _scalar_op_c_body(op, inputs, in_dtypes, outputs, out_dtypes, error_flag=None):
    """C statements assigning each name of ``outputs`` (declared by the
    caller with the compute types of ``out_dtypes``), or None.

    ``error_flag``: the name of an int the statements OR ``c_error``'s
    condition into (the kernel fails the call when it is set).  The
    default uses ``c_expr``; ops with several outputs override it.
    """
    if op.nout != 1:
        return None
    expr = c_expr(op, inputs, in_dtypes, out_dtypes[0])
    if expr is None:
        return None
    text = f"{outputs[0]} = {expr};"
    error = c_error(op, inputs, in_dtypes, out_dtypes[0])
    if error is not None and error_flag:
        text += f" {error_flag} |= {error[0]};"
    return text


@c_method(ScalarOp, "c_error")
def _scalar_op_c_error(op, inputs, in_dtypes, out_dtype):
    """``(condition, message)``: a C condition on the inputs that makes the
    whole call fail with ValueError(message), as ``impl`` would; or None."""
    return None


@c_method(ScalarOp, "c_error_messages")
def _scalar_op_c_error_messages(op, in_dtypes):
    """The messages of the errors ``c_body`` may flag for these input dtypes."""
    names = [f"x{i}" for i in range(len(in_dtypes))]
    out = op.output_dtypes(*in_dtypes)[0] if op.nout == 1 else None
    error = c_error(op, names, in_dtypes, out) if out is not None else None
    return () if error is None else (error[1],)


@c_method(ScalarOp, "c_support")
def _scalar_op_c_support(op):
    """((key, code), ...): C helpers the expressions call (``sg_`` names),
    emitted once per library."""
    return ()
