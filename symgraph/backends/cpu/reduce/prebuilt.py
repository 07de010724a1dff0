"""The element loops of plain reductions, compiled once in the support library.

A reduction kernel keeps the loops that touch its elements (path A's block
and runs, path B's columns: reduce/codegen.py), and GCC spends most of a
kernel's compile time on them (a float sum: 0.06 of its 0.08 s).  For a plain
reduction (one input, no fused element) those loops depend only on the kind
and the dtype, so for the common ones (``PREBUILT``: sums, maxima and minima
of float32 and float64, e.g. every bias gradient of a training step) the
support library holds them, generated from the same generator with a fixed
spec, and such a kernel keeps only its shape checks and a run that hands the
drivers the library's functions.  The loops are the same text, compiled with
the same flags and the same per-function optimization levels, so the same
bits.
"""

import re

from symgraph.backends.cpu.reduce.codegen import _Gen, mark_drivers
from symgraph.backends.cpu.reduce.spec import ReduceSpec

__all__ = ["PREBUILT", "prefix_of", "support_text", "support_unit"]

#: (kind, dtype) of the plain reductions whose loops the support library holds
#: (the accumulator and the result of that dtype too).
PREBUILT = tuple((kind, dtype) for kind in ("sum", "max", "min")
                 for dtype in ("float32", "float64"))
#: Bump when the loops' C changes in a way its text would not show.
VERSION = 1
_SUFFIX = {"float32": "f32", "float64": "f64"}


def _canonical(kind, dtype):
    """The spec of the plain reduction ``kind`` of ``dtype`` (its loops do
    not depend on the axes or the rank)."""
    from symgraph.backends.cpu.reduce.lowering import element_fn

    one = element_fn(kind, dtype)
    return ReduceSpec(kind=kind, in_dtypes=(dtype,), in_broadcastable=((False,),), axes=(0,),
                      acc_dtype=dtype, out_dtype=dtype, element=lambda v: one(v[0]),
                      name=f"{kind} of {dtype}")


def prefix_of(spec):
    """The support library's name prefix of ``spec``'s loops, or None when it
    has none (a fused element, several inputs, another kind or dtype)."""
    if spec.fused or len(spec.in_dtypes) != 1 or spec.support or spec.headers or \
            spec.extra or spec.in_compute:
        return None
    dtype = spec.in_dtypes[0]
    if (spec.kind, dtype) not in PREBUILT or spec.acc_dtype != dtype or spec.out_dtype != dtype:
        return None
    return f"sg_redp_{spec.kind}_{_SUFFIX[dtype]}_"


def support_text(kind, dtype):
    """(key, C text) of the support library's loops of ``kind`` over ``dtype``."""
    gen = _Gen(_canonical(kind, dtype))
    text = mark_drivers("\n".join([gen.block_fn(), gen.runs_fn(), gen.cols_fn(), f"""\
static void SG_FN(store)(char *ob, {gen.ACC} v) {{ *({gen.OUT} *)ob = ({gen.OUT})v; }}

static {gen.ACC} SG_FN(comb)({gen.ACC} a, {gen.ACC} b) {{ return {gen.comb('a', 'b')}; }}
"""]))
    prefix = f"sg_redp_{kind}_{_SUFFIX[dtype]}_"
    text = re.sub(r"SG_FN\((\w+)\)", lambda m: prefix + m.group(1), text)
    return (f"{prefix}v{VERSION}",
            f"/* ---- symgraph reductions: the loops of a plain {kind} of {dtype} "
            f"(reduce/prebuilt.py) ---- */\n{text}")


def support_unit(kind, dtype):
    """The support library's Unit of ``support_text(kind, dtype)``."""
    from symgraph.backends.cpu.support_lib import split_unit

    return split_unit(*support_text(kind, dtype))
