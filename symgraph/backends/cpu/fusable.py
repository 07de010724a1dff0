"""The native CPU backend's answers to the fusion rewrites
(``opt/fusion_support.py``): which scalar ops its generated C can fuse."""

from symgraph.backends.c_family.c_types import has_c_type

__all__ = ["elemwise_has_c", "reduction_has_c"]


def elemwise_has_c(scalar_op, in_dtypes):
    """True when the element-wise generator has C for ``scalar_op`` on inputs of
    ``in_dtypes`` (its dtypes, its conversions and its body)."""
    try:
        out_dtypes = [str(d) for d in scalar_op.output_dtypes(*in_dtypes)]
        want = scalar_op.c_input_dtypes(*in_dtypes)
        if not all(has_c_type(d) for d in list(in_dtypes) + out_dtypes + list(want)):
            return False
        return scalar_op.c_body([f"x{i}" for i in range(len(in_dtypes))], list(want),
                                [f"y{k}" for k in range(len(out_dtypes))],
                                out_dtypes) is not None
    except (TypeError, ValueError, NotImplementedError):
        return False


def reduction_has_c(scalar_op, in_dtypes):
    """True when the reduction generator can evaluate ``scalar_op`` per element
    inside its loop (one output, C for its dtypes, no error it must raise)."""
    from symgraph.backends.cpu.reduce.lowering import pre_body

    try:
        out = str(scalar_op.output_dtypes(*in_dtypes)[0])
        cin = [str(d) for d in scalar_op.c_input_dtypes(*in_dtypes)]
        if not all(has_c_type(d) for d in list(in_dtypes) + cin + [out]):
            return False
        if scalar_op.c_error_messages(cin):
            return False
        return pre_body(scalar_op, [f"x{k}" for k in range(len(cin))], cin, out) is not None
    except (TypeError, NotImplementedError, KeyError):
        return False
