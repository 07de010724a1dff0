"""Specialize: faster forms of general ops, chosen late in the pipeline.

Powers with a constant exponent (every element equal):

* ``x ** 0 -> ones`` (NumPy's 0 ** 0 and nan ** 0 are 1 too), ``x ** 1 -> x``;
* ``x ** 2 -> sqr(x)``, ``x ** 0.5 -> sqrt(x)``;
* other integer exponents up to ``MAX_INT_POWER`` by repeated squaring
  (``x ** 5 -> sqr(sqr(x)) * x``);
* negative exponents (-1 -> reciprocal, -0.5 -> 1 / sqrt, -n -> 1 / x ** n)
  only for float results: NumPy refuses an integer to a negative integer
  power, and the rewrite must not turn that error into a value.

The base is cast to the output dtype first, so that ``int_x ** 2.0`` is
squared in floats as the original computed it.
"""

from symgraph.ops import math as M
from symgraph.ops import scalar_basic as sb
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import as_dtype, conform, fill_like, scalar_constant_value

#: The largest |integer exponent| expanded into multiplications.
MAX_INT_POWER = 8


def _power_by_squaring(x, n):
    """``x ** n`` for an integer n >= 1, with about log2(n) multiplications."""
    result, square = None, x
    while n:
        if n & 1:
            result = square if result is None else M.mul(result, square)
        n >>= 1
        if n:
            square = M.sqr(square)
    return result


def _specialized_power(x, exponent, is_float):
    """``x ** exponent`` without pow, or None when no special form applies."""
    if exponent == 0.5:
        return M.sqrt(x)
    if exponent == -0.5 and is_float:
        return M.reciprocal(M.sqrt(x))
    if exponent != int(exponent) or abs(exponent) > MAX_INT_POWER:
        return None
    n = int(exponent)
    if n > 0:
        return x if n == 1 else _power_by_squaring(x, n)
    if n < 0 and is_float:
        return M.reciprocal(_power_by_squaring(x, -n))
    return None


@node_rewriter([sb.Pow])
def local_pow_specialize(fgraph, node):
    """``x ** c`` for a constant c: ones, x, sqr, sqrt, reciprocal, or products."""
    x, y = node.inputs
    out = node.outputs[0]
    exponent = scalar_constant_value(y)
    if exponent is None or out.dtype.startswith("complex"):
        return None
    try:
        exponent = float(exponent)
    except (TypeError, ValueError):
        return None
    if exponent == 0:
        return [fill_like(node.inputs, 1, out.dtype)]
    is_float = out.dtype.startswith("float")
    new = _specialized_power(as_dtype(x, out.dtype), exponent, is_float)
    if new is None:
        return None
    new = conform(new, out, fill_from=[y])
    return None if new is None else [new]


register(local_pow_specialize, "fast_run", phase="specialize")
