"""Canonicalize, algebra: neutral right operands, equal branches, like terms and
cancelled factors.

Exactness, as in ``canonicalize.py``: every rewrite here keeps values up to
floating-point reassociation, and never turns a NaN or an infinity into a
finite value, except where the rewrite is tagged ``unsafe`` (not in fast_run):

* ``x - 0 -> x``, ``x / 1 -> x``, ``x // 1 -> x`` (integers), ``x ** 1 -> x``,
  ``switch(c, x, x) -> x``, ``maximum(x, x) -> x``: exact.
* ``maximum(n, 0) -> n`` where ``n`` is a size (``Shape_i``, or sums and
  products of sizes and non-negative integer constants): exact.
* Like terms collected: ``W - lr * (g + l2 * W) -> (1 - lr*l2) * W - lr * g``,
  ``i - 1 + 1 -> i``, ``x + x -> 2 * x``.  For finite inputs the results agree
  up to rounding.  For an infinite ``W`` the left side is ``inf - inf = NaN``
  and the right side is +-inf: a non-finite result stays non-finite (NaN-guard
  mode still stops there), so the rewrite is in fast_run; it is what turns an
  SGD step with an L2 penalty into one in-place Gemm.  Floats whose
  coefficient sums to 0 are left as written (``x - x``: its removal is the
  ``unsafe`` rewrite's); integer ones are dropped.
* Cancelled factors, ``g / s * s -> g``: when ``s`` is a finite non-zero
  constant, fast_run; for a symbolic ``s`` (0, Inf and NaN would give NaN on
  the left), the ``unsafe`` tag, as ``x / x -> 1``.
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.ops import scalar_basic as sb
from symgraph.ops.elemwise import DimShuffle, Elemwise
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, is_constant_value, is_discrete, owner_if


def _canonicalize(rewriter, *tags):
    return register(rewriter, "fast_run", *tags, phase="canonicalize")


def _single_client(fgraph, var):
    clients = fgraph.clients.get(var, ())
    return len(clients) == 1 and clients[0][0] != "output" and var not in fgraph.outputs


# ---------------------------------------------------------------------------
# Neutral right operands, equal branches


@node_rewriter([sb.Sub, sb.TrueDiv, sb.IntDiv, sb.Pow])
def local_neutral_right(fgraph, node):
    """``x - 0``, ``x / 1``, ``x // 1`` (integers) and ``x ** 1`` become ``x``."""
    x, y = node.inputs
    op = node.op.scalar_op
    neutral = 0 if isinstance(op, sb.Sub) else 1
    if not is_constant_value(y, neutral):
        return None
    if isinstance(op, sb.IntDiv) and not is_discrete(x.dtype):
        return None  # floor(x / 1) is floor(x) for floats
    new = conform(x, node.outputs[0], fill_from=[y])
    return None if new is None else [new]


@node_rewriter([sb.Switch])
def local_switch_same_branches(fgraph, node):
    """``switch(c, x, x) -> x`` (broadcast by ``c`` when ``c`` is larger)."""
    cond, a, b = node.inputs
    if a is not b:
        return None
    new = conform(a, node.outputs[0], fill_from=[cond])
    return None if new is None else [new]


@node_rewriter([sb.Maximum, sb.Minimum])
def local_minmax_same(fgraph, node):
    """``maximum(x, x) -> x`` and ``minimum(x, x) -> x`` (NaN stays NaN)."""
    a, b = node.inputs
    if a is not b:
        return None
    return [conform(a, node.outputs[0])]


def is_size(var, depth=0):
    """True when ``var`` is known to be an integer >= 0: a dimension's size, a
    non-negative integer constant, or a sum or product of those."""
    from symgraph.ops.shape import Shape_i

    if depth > 8 or not is_discrete(var.dtype) or var.ndim != 0:
        return False
    if isinstance(var, Constant):
        return bool(np.all(np.asarray(var.data) >= 0))
    node = var.owner
    if node is None:
        return False
    if isinstance(node.op, Shape_i):
        return True
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, (sb.Add, sb.Mul)) \
            and all(i.dtype == var.dtype for i in node.inputs):
        return all(is_size(i, depth + 1) for i in node.inputs)
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, sb.Maximum):
        return any(is_size(i, depth + 1) for i in node.inputs)
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, sb.Cast) and \
            np.dtype(var.dtype).itemsize >= np.dtype(node.inputs[0].dtype).itemsize and \
            not var.dtype.startswith("uint"):
        return is_size(node.inputs[0], depth + 1)
    return False


@node_rewriter([sb.Maximum])
def local_maximum_of_size(fgraph, node):
    """``maximum(n, 0) -> n`` for a size ``n`` (``arange`` lengths, shape arithmetic)."""
    a, b = node.inputs
    for keep, other in ((a, b), (b, a)):
        if is_constant_value(other, 0) and is_size(keep):
            new = conform(keep, node.outputs[0], fill_from=[other])
            return None if new is None else [new]
    return None


_canonicalize(local_neutral_right, "fast_compile")
_canonicalize(local_switch_same_branches, "fast_compile")
_canonicalize(local_minmax_same, "fast_compile")
_canonicalize(local_maximum_of_size, "shape")


# ---------------------------------------------------------------------------
# Like terms


class _Coef:
    """``value * prod(factors)``: a number and 0-d symbolic factors (a scale)."""

    __slots__ = ("value", "factors")

    def __init__(self, value, factors=()):
        self.value, self.factors = value, tuple(factors)

    def times(self, value, factors=()):
        with np.errstate(all="ignore"):  # integers wrap around, as in the graph
            return _Coef(self.value * value, self.factors + tuple(factors))


def _scalar_of(var):
    """``var`` as a 0-d variable when all its dimensions broadcast, else None."""
    if var.ndim == 0:
        return var
    if not all(var.type.broadcastable):
        return None
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and node.inputs[0].ndim == 0:
        return node.inputs[0]
    return None


def _number(var):
    """The value of a constant with all elements equal and every dim broadcastable."""
    from symgraph.opt.utils import scalar_constant_value

    if not all(var.type.broadcastable):
        return None
    value = scalar_constant_value(var)
    if value is None or np.iscomplexobj(value):
        return None
    return value


def _linear_terms(fgraph, var, coef, out, terms, depth=0, top=False, is_term=None):
    """Append ``(coef, leaf)`` pairs whose sum is ``coef * var``.

    Goes through add, sub, neg, and mul by scales, only into nodes used once
    (else their work would be done twice) and of the output's dtype.
    ``is_term(v)`` True: a factor ``v`` of a product is never taken for a
    scale, even 0-d (in ``c * sum(x)`` the sum is the term).
    """
    number = _number(var)
    if number is not None:
        terms.append((coef.times(number), None))
        return
    node = var.owner
    inside = top or (depth < 8 and var.dtype == out.dtype and _single_client(fgraph, var))
    if inside and isinstance(node.op if node else None, Elemwise):
        op = node.op.scalar_op
        more = {"is_term": is_term}
        if isinstance(op, sb.Add):
            for i in node.inputs:
                _linear_terms(fgraph, i, coef, out, terms, depth + 1, **more)
            return
        if isinstance(op, sb.Sub):
            _linear_terms(fgraph, node.inputs[0], coef, out, terms, depth + 1, **more)
            _linear_terms(fgraph, node.inputs[1], coef.times(-1), out, terms, depth + 1,
                          **more)
            return
        if isinstance(op, sb.Neg):
            _linear_terms(fgraph, node.inputs[0], coef.times(-1), out, terms, depth + 1,
                          **more)
            return
        if isinstance(op, sb.Mul):
            rest, value, factors = [], 1, []
            for i in node.inputs:
                n = _number(i)
                s = None if n is not None or (is_term is not None and is_term(i)) else \
                    _scalar_of(i)
                if n is not None:
                    value = value * n
                elif s is not None and (s.dtype == out.dtype or not is_discrete(out.dtype)):
                    factors.append(s)
                else:
                    rest.append(i)
            # A zero scale stays a term of its own: x + 0*x is NaN for infinite x,
            # and dropping x * 0 is the unsafe rewrite's decision.
            if len(rest) == 1 and (value != 1 or factors) and value != 0 and \
                    rest[0].type.broadcastable == var.type.broadcastable:
                _linear_terms(fgraph, rest[0], coef.times(value, factors), out, terms,
                              depth + 1, **more)
                return
    terms.append((coef, var))


def _coef_expr(coefs, dtype):
    """The sum of ``coefs`` as (number or None, 0-d variable or None)."""
    from symgraph.ops import math as M

    with np.errstate(all="ignore"):  # integer coefficients wrap around, as the graph would
        number = sum(c.value for c in coefs if not c.factors)
    symbolic = [c for c in coefs if c.factors]
    if not symbolic:
        return number, None
    parts = []
    for c in symbolic:
        part = M.mul(*c.factors) if len(c.factors) > 1 else c.factors[0]
        if c.value != 1:
            part = M.mul(np.asarray(c.value, dtype=dtype), part)
        parts.append(part)
    if number != 0:
        parts.insert(0, np.asarray(number, dtype=dtype))
    return None, M.add(*parts) if len(parts) > 1 else parts[0]


@node_rewriter([sb.Add, sb.Sub])
def local_collect_like_terms(fgraph, node):
    """``a*x + b*x -> (a+b)*x`` and constants gathered across add/sub/neg:
    ``W - lr*(g + l2*W) -> (1 - lr*l2)*W - lr*g``, ``i - 1 + 1 -> i``.

    Fires only when two terms share a leaf or two constant terms meet (so the
    graph never grows for nothing).  For integers, only constant coefficients
    and one dtype (wrap-around arithmetic is then exact).
    """
    from symgraph.ops import math as M

    out = node.outputs[0]
    if out.dtype.startswith("complex") or out.dtype == "bool":
        return None
    terms = []
    _linear_terms(fgraph, out, _Coef(1), out, terms, top=True)
    if is_discrete(out.dtype) and any(c.factors or v is not None and v.dtype != out.dtype
                                      for c, v in terms):
        return None
    order, groups = [], {}
    for coef, leaf in terms:
        if leaf not in groups:
            order.append(leaf)
            groups[leaf] = []
        groups[leaf].append(coef)
    if len(order) == len(terms):
        return None
    dtype = out.type.numpy_dtype
    entries = []  # (positive?, expression, is a matrix product)
    for leaf in order:
        number, sym = _coef_expr(groups[leaf], dtype)
        product = leaf is not None and leaf.owner is not None and \
            type(leaf.owner.op).__name__ == "Dot"
        if sym is None:
            with np.errstate(all="ignore"):
                number = np.asarray(number, dtype=dtype) if is_discrete(dtype) else \
                    np.asarray(number).astype(dtype)
            negative = number < 0 and not is_discrete(dtype)
            size = -number if negative else number
            if leaf is None:
                if number != 0:
                    entries.append((not negative, size, False))
                continue
            if number == 0 and not is_discrete(dtype):
                return None  # x - x stays: its removal is the unsafe rewrite's
            entries.append((not negative, leaf if size == 1 else M.mul(size, leaf), product))
        else:
            entries.append((True, sym if leaf is None else M.mul(sym, leaf), product))
    leaves = [v for v in order if v is not None]
    # Matrix products last, outermost: ``(a*W - b*sign(W)) - c*dot(x, y)`` is one
    # element-wise pass and a Gemm into its result, and ``a*W - c*dot(x, y)`` one
    # in-place Gemm (the Gemm rewrites look at the outer add).
    others = [e for e in entries if not e[2]]
    products = [e for e in entries if e[2]]
    new = _signed_sum(others) if others else None
    for positive, expr, _ in products:
        new = expr if new is None and positive else \
            M.neg(expr) if new is None else M.add(new, expr) if positive else M.sub(new, expr)
    if new is None:
        new = M.mul(np.asarray(0, dtype=dtype), leaves[0]) if leaves else \
            np.zeros((), dtype=dtype)
    from symgraph.tensor.basic import as_tensor_variable

    new = conform(as_tensor_variable(new), out, fill_from=leaves + list(node.inputs))
    return None if new is None else [new]


def _signed_sum(entries):
    """``sum(positives) - sum(negatives)`` for ``(positive?, expression)`` entries."""
    from symgraph.ops import math as M

    pos = [e for p, e, _ in entries if p]
    neg = [e for p, e, _ in entries if not p]
    if not pos:
        return M.neg(M.add(*neg) if len(neg) > 1 else neg[0])
    new = M.add(*pos) if len(pos) > 1 else pos[0]
    if neg:
        new = M.sub(new, M.add(*neg) if len(neg) > 1 else neg[0])
    return new


_canonicalize(local_collect_like_terms)


# ---------------------------------------------------------------------------
# Cancelled factors


def _factors(fgraph, var, num, den, top=False):
    """Split ``var`` into numerator and denominator factors through mul, true_div
    and reciprocal nodes used only here."""
    node = var.owner
    if top or (_single_client(fgraph, var) and node is not None):
        if owner_if(var, sb.Mul) is not None:
            for i in node.inputs:
                _factors(fgraph, i, num, den)
            return
        if owner_if(var, sb.TrueDiv) is not None:
            _factors(fgraph, node.inputs[0], num, den)
            _factors(fgraph, node.inputs[1], den, num)
            return
        if owner_if(var, sb.Reciprocal) is not None:
            _factors(fgraph, node.inputs[0], den, num)
            return
    num.append(var)


def _finite_nonzero_constant(var):
    value = _number(var)
    if value is None:
        return isinstance(var, Constant) and bool(np.all(np.isfinite(var.data)) and
                                                  np.all(np.asarray(var.data) != 0))
    return bool(np.isfinite(value) and value != 0)


def _cancel(fgraph, node, allow_symbolic):
    from symgraph.ops import math as M

    out = node.outputs[0]
    if is_discrete(out.dtype) or out.dtype.startswith("complex"):
        return None
    num, den = [], []
    _factors(fgraph, out, num, den, top=True)
    cancelled = []
    for d in list(den):
        if d in num and (allow_symbolic or _finite_nonzero_constant(d)):
            num.remove(d)
            den.remove(d)
            cancelled.append(d)
    if not cancelled:
        return None
    top = M.mul(*num) if len(num) > 1 else num[0] if num else np.ones((), out.dtype)
    if den:
        top = M.true_div(top, M.mul(*den) if len(den) > 1 else den[0])
    from symgraph.tensor.basic import as_tensor_variable

    new = conform(as_tensor_variable(top), out, fill_from=cancelled + list(node.inputs))
    return None if new is None else [new]


@node_rewriter([sb.Mul, sb.TrueDiv])
def local_cancel_constant_factors(fgraph, node):
    """``g / 4 * 4 -> g`` for a finite non-zero constant (exact up to rounding)."""
    return _cancel(fgraph, node, allow_symbolic=False)


@node_rewriter([sb.Mul, sb.TrueDiv])
def local_cancel_factors_unsafe(fgraph, node):
    """``g / s * s -> g`` for any ``s`` (wrong for s = 0, Inf, NaN): tag ``unsafe``."""
    return _cancel(fgraph, node, allow_symbolic=True)


_canonicalize(local_cancel_constant_factors)
register(local_cancel_factors_unsafe, "unsafe", phase="canonicalize")
