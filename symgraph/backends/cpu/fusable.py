"""The native CPU backend's answers to the fusion rewrites
(``opt/fusion_support.py``): which scalar ops its generated C can fuse."""

from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.c_family.scalar_c import c_body, c_error_messages, c_input_dtypes

__all__ = ["elemwise_has_c", "reduction_has_c"]


def elemwise_has_c(scalar_op, in_dtypes):
    """True when the element-wise generator has C for ``scalar_op`` on inputs of
    ``in_dtypes`` (its dtypes, its conversions and its body)."""
    try:
        out_dtypes = [str(d) for d in scalar_op.output_dtypes(*in_dtypes)]
        want = c_input_dtypes(scalar_op, *in_dtypes)
        if not all(has_c_type(d) for d in list(in_dtypes) + out_dtypes + list(want)):
            return False
        return c_body(scalar_op, [f"x{i}" for i in range(len(in_dtypes))], list(want),
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
        cin = [str(d) for d in c_input_dtypes(scalar_op, *in_dtypes)]
        if not all(has_c_type(d) for d in list(in_dtypes) + cin + [out]):
            return False
        if c_error_messages(scalar_op, cin):
            return False
        return pre_body(scalar_op, [f"x{k}" for k in range(len(cin))], cin, out) is not None
    except (TypeError, NotImplementedError, KeyError):
        return False
