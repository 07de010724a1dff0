"""BLAS rewrites: a dot with scaling and addition becomes one Gemm, Gemv or Ger.

Theano's forms, for float32 and float64:

* ``z * b + a * dot(x, y)`` (x, y matrices) -> ``Gemm(z, a, x, y, b)``, and
  every spelling of it after canonicalize: ``z + a * dot(x, y)``,
  ``z - dot(x, y)``, ``-dot(x, y) * a + z + w`` (the other terms stay in an
  add around the Gemm) ...
* the same with a matrix-vector or vector-matrix dot -> ``Gemv`` (``dot(x,
  A)`` is ``Gemv(z, a, A.T, x, b)``);
* ``z + a * outer(x, y)`` (the canonical ``x[:, None] * y[None, :] * a``)
  -> ``Ger(z, a, x, y)``.

The scales a and b are products of scalar factors (0-d, or all-broadcastable
dims) and a sign; z must have the full result shape (no broadcast dims) and
every term the result's dtype.  A dot used anywhere else stays a Dot: the
rewrite would compute it twice.  A plain ``dot(x, y)`` also stays a Dot (its
kernel calls gemm), and a transposed operand (``dot(x.T, g)``) needs no
rewrite: the kernels read transposed contiguous arrays in place through the
BLAS trans flags.

Phase ``specialize``; tags ``fast_run`` and ``blas``.
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.ops import math as M
from symgraph.ops import scalar_basic as sb
from symgraph.ops.blas import Dot
from symgraph.ops.elemwise import DimShuffle, dimshuffle
from symgraph.ops.gemm import Gemm, Gemv, Ger
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform, is_elemwise
from symgraph.tensor.basic import constant

#: Result dtypes the rewrites handle (those SciPy's BLAS computes).
BLAS_DTYPES = ("float32", "float64")


def _only_client(fgraph, var):
    """True when ``var`` feeds exactly one node (and is not a graph output)."""
    clients = fgraph.clients.get(var, [])
    return len(clients) == 1 and clients[0][0] != "output"


def _as_scalar(var):
    """``var`` (every dim broadcastable) as a 0-d variable, or None."""
    if var.ndim == 0:
        return var
    if not all(var.type.broadcastable):
        return None
    if isinstance(var, Constant):
        return constant(np.asarray(var.data).reshape(()), dtype=var.dtype)
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and node.inputs[0].ndim == 0:
        return node.inputs[0]
    return dimshuffle(var, [])


class _Term:
    """``sign * prod(scalars) * base``: one addend of an add/sub node.

    ``base`` is a variable, or for an outer product the pair (x, y) of vectors.
    ``var`` is the addend as it appears in the graph, ``top_sign`` its sign there.
    """

    def __init__(self, var, top_sign, sign, scalars, base, shared=False):
        self.var, self.top_sign = var, top_sign
        self.sign, self.scalars, self.base = sign, scalars, base
        self.shared = shared   # used elsewhere too: never folded into an update

    def dot_node(self):
        base = self.base
        if self.shared or isinstance(base, tuple) or base.owner is None:
            return None
        return base.owner if isinstance(base.owner.op, Dot) else None


def _outer_factors(factors):
    """(x, y) when ``factors`` are x[:, None] and y[None, :] (in either order)."""
    if len(factors) != 2:
        return None
    col = row = None
    for f in factors:
        node = f.owner
        if node is None or not isinstance(node.op, DimShuffle) or node.inputs[0].ndim != 1:
            return None
        if node.op.new_order == (0, "x"):
            col = node.inputs[0]
        elif node.op.new_order == ("x", 0):
            row = node.inputs[0]
    return None if col is None or row is None else (col, row)


def _decompose(fgraph, var, dtype, depth=0):
    """(sign, scalars, base) with ``var == sign * prod(scalars) * base``.

    Looks through negations and multiplications by scalars; every node passed
    through must have ``dtype`` and feed only the next one, so that nothing
    computed here is needed elsewhere.
    """
    sign, scalars = 1, []
    while depth < 8 and var.owner is not None and var.dtype == dtype:
        node = var.owner
        inner, step_sign, step_scalars = None, 1, []
        if is_elemwise(node, sb.Neg):
            step_sign, inner = -1, node.inputs[0]
        elif is_elemwise(node, sb.Mul):
            tensors = [i for i in node.inputs if not all(i.type.broadcastable)]
            if len(tensors) == 2 and tensors[0].ndim == 2:
                pair = _outer_factors(tensors)
                if pair is not None and all(_only_client(fgraph, t) for t in tensors):
                    scalars += [_as_scalar(i) for i in node.inputs if i not in tensors]
                    return sign, scalars, pair
            if len(tensors) != 1 or tensors[0].ndim != var.ndim:
                break
            step_scalars = [_as_scalar(i) for i in node.inputs if i is not tensors[0]]
            inner = tensors[0]
        if inner is None or not (_only_client(fgraph, inner) or inner.owner is None):
            # Stop at ``var``: it is the base, and the factors of this node stay
            # inside it.  Taking them as scalars too would apply them twice.
            # (A graph input, a weight, may have other readers: it costs nothing
            # to compute, and the Gemm reads it as its z with the scale as beta.)
            break
        sign, scalars = sign * step_sign, scalars + step_scalars
        var, depth = inner, depth + 1
    return sign, scalars, var


def _terms(fgraph, node, dtype):
    """The addends of an Add or Sub node as _Terms."""
    if is_elemwise(node, sb.Sub):
        signed = [(node.inputs[0], 1), (node.inputs[1], -1)]
    else:
        signed = [(i, 1) for i in node.inputs]
    terms = []
    for var, top_sign in signed:
        shared = not _only_client(fgraph, var)
        if shared:   # take it whole, without looking inside
            sign, scalars, base = 1, [], var
        else:
            sign, scalars, base = _decompose(fgraph, var, dtype)
        terms.append(_Term(var, top_sign, sign * top_sign, scalars, base, shared))
    return terms


def _scale(sign, scalars, dtype):
    """The 0-d ``sign * prod(scalars)`` in ``dtype``."""
    if not scalars:
        return constant(np.asarray(sign, dtype=dtype), dtype=dtype)
    scalars = [M.cast(s, dtype) for s in scalars]
    value = scalars[0] if len(scalars) == 1 else M.mul(*scalars)
    return M.neg(value) if sign < 0 else value


def _fits_as_z(term, out, dtype):
    """A term that can be the z of an update: full shape (no broadcast dim where
    the result has none), the result's dtype and rank."""
    base = term.base
    if isinstance(base, tuple) or base.dtype != dtype or base.ndim != out.ndim:
        return False
    return all(o or not b for b, o in zip(base.type.broadcastable, out.type.broadcastable))


def _update_for(term, z_term, dtype):
    """The Gemm/Gemv/Ger computing ``z_term + term``, or None."""
    a = _scale(term.sign, term.scalars, dtype)
    if isinstance(term.base, tuple):   # outer product: Ger, which has no beta
        x, y = term.base
        if x.dtype != dtype or y.dtype != dtype:
            return None
        z = z_term.var if z_term.top_sign > 0 else M.neg(z_term.var)
        return Ger()(z, a, x, y)
    x, y = term.dot_node().inputs
    if x.dtype != dtype or y.dtype != dtype:
        return None
    b = _scale(z_term.sign, z_term.scalars, dtype)
    z = z_term.base
    if x.ndim == 2 and y.ndim == 2:
        return Gemm()(z, a, x, y, b)
    if x.ndim == 2 and y.ndim == 1:
        return Gemv()(z, a, x, y, b)
    if x.ndim == 1 and y.ndim == 2:
        return Gemv()(z, a, dimshuffle(y, [1, 0]), x, b)
    return None


def _is_product(term, dtype):
    """A dot (of vectors or matrices, not vector . vector) or an outer product term."""
    if isinstance(term.base, tuple):
        return True
    node = term.dot_node()   # None for a shared term
    return node is not None and term.base.dtype == dtype and term.base.ndim >= 1


@node_rewriter([sb.Add, sb.Sub])
def local_dot_to_blas_update(fgraph, node):
    """``z * b + a * dot(x, y)`` -> Gemm (matrices) or Gemv (a vector);
    ``z + a * outer(x, y)`` -> Ger.  Other addends stay in an add around it."""
    out = node.outputs[0]
    dtype = out.dtype
    if dtype not in BLAS_DTYPES or out.ndim not in (1, 2):
        return None
    terms = _terms(fgraph, node, dtype)
    products = [t for t in terms if _is_product(t, dtype)]
    if not products:
        return None
    for product in products:
        # Prefer a z that is not a product itself: that one can fuse next.
        candidates = [t for t in terms if t is not product and _fits_as_z(t, out, dtype)]
        candidates.sort(key=lambda t: _is_product(t, dtype))
        for z_term in candidates:
            update = _update_for(product, z_term, dtype)
            if update is None:
                continue
            result = update
            for t in terms:
                if t is not product and t is not z_term:
                    result = M.add(result, t.var) if t.top_sign > 0 else M.sub(result, t.var)
            new = conform(result, out, fill_from=[t.var for t in terms])
            if new is not None:
                return [new]
    return None


register(local_dot_to_blas_update, "fast_run", "blas", phase="specialize")
