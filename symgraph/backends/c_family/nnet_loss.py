"""The C of the scalar ops of the fused losses (``symgraph/ops/nnet_loss.py``),
registered in the C family's scalar table (``scalar_c.py``)."""

from symgraph.backends.c_family.scalar_c import c_method
from symgraph.backends.c_family.scalar_base import c_kind, c_fn
from symgraph.ops.nnet_loss import BinaryCrossentropy, SigmoidBinaryCrossentropy


@c_method(BinaryCrossentropy, "c_expr")
def _binary_crossentropy_c_expr(op, inputs, in_dtypes, out_dtype):
    if c_kind(out_dtype) != "f":
        return None
    o, t = inputs
    return (f"(-({t} * {c_fn('log', out_dtype)}({o}) + (1 - {t}) * "
            f"{c_fn('log1p', out_dtype)}(-{o})))")


@c_method(SigmoidBinaryCrossentropy, "c_expr")
def _sigmoid_binary_crossentropy_c_expr(op, inputs, in_dtypes, out_dtype):
    if c_kind(out_dtype) != "f":
        return None
    z, t = inputs
    # Both branches of the max computed (a blend, no branch): NaN stays NaN
    # through the log1p term.
    return (f"(({z} > 0 ? {z} : 0) - {z} * {t} + {c_fn('log1p', out_dtype)}("
            f"{c_fn('exp', out_dtype)}(-{c_fn('fabs', out_dtype)}({z}))))")
