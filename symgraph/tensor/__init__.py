"""The user-facing tensor API (``import symgraph.tensor as T``).

Every name here is re-exported from the module that implements it:
constructors from ``tensor.basic``, ops from ``symgraph.ops.*``.
"""

from symgraph.tensor.basic import *  # noqa: F401,F403
from symgraph.ops.elemwise import dimshuffle  # noqa: F401
from symgraph.ops.math import *  # noqa: F401,F403
from symgraph.ops.reduce import *  # noqa: F401,F403
from symgraph.ops.blas import *  # noqa: F401,F403
from symgraph.ops.shape import *  # noqa: F401,F403
from symgraph.ops.subtensor import *  # noqa: F401,F403
from symgraph.ops.math_extra import *  # noqa: F401,F403
from symgraph.ops.sort import *  # noqa: F401,F403
from symgraph.ops.special_extra import (chi2sf, erfcinv, erfcx, gammainc,  # noqa: F401,E402
                                        gammaincc, gammal, gammau, i0, i1, iv, j0, j1, jv)
from symgraph.ops.extra import (bartlett, bincount, cumprod, cumsum, diff,  # noqa: F401,E402
                                fill_diagonal, fill_diagonal_offset, ravel_multi_index,
                                unravel_index)
from symgraph.ops.linalg import diagonal, tri, tril, triu  # noqa: F401,E402
from symgraph.tensor.theano_basic import *  # noqa: F401,F403,E402
from symgraph.tensor.nlinalg import diag  # noqa: F401,E402
from symgraph.tensor import nnet  # noqa: F401,E402
from symgraph.tensor import (elemwise, extra_ops, nlinalg, opt, slinalg,  # noqa: F401,E402
                             utils, xlogx)
from symgraph.ops.elemwise import DimShuffle, Elemwise  # noqa: F401,E402
from symgraph.ops.reduce import CAReduce  # noqa: F401,E402
from symgraph.ops.transfer import transfer  # noqa: F401,E402  (Theano's tensor.transfer)
from symgraph.tensor import shared_randomstreams  # noqa: F401,E402  (T.shared_randomstreams)


def grad(cost, wrt, **kwargs):
    """Theano's ``tensor.grad``: the same as :func:`symgraph.grad`."""
    from symgraph.gradient import grad as _grad

    return _grad(cost, wrt, **kwargs)


def Rop(f, wrt, eval_points, **kwargs):
    """Theano's ``tensor.Rop``: the same as :func:`symgraph.Rop` (forward mode:
    the Jacobian of ``f`` times ``eval_points``)."""
    from symgraph.gradient import Rop as _rop

    return _rop(f, wrt, eval_points, **kwargs)


def Lop(f, wrt, eval_points, **kwargs):
    """Theano's ``tensor.Lop``: the same as :func:`symgraph.Lop` (``eval_points``
    times the Jacobian of ``f``)."""
    from symgraph.gradient import Lop as _lop

    return _lop(f, wrt, eval_points, **kwargs)


def verify_grad(fun, pt, **kwargs):
    """Theano's ``tensor.verify_grad``: the same as :func:`symgraph.gradient.verify_grad`."""
    from symgraph.gradient import verify_grad as _verify

    return _verify(fun, pt, **kwargs)


# Theano's tensor module re-exports these from its gradient module; loaded on
# first use, as symgraph.grad is, so that importing the tensor API stays fast.
_FROM_GRADIENT = ("consider_constant", "grad_not_implemented", "grad_undefined", "hessian",
                  "jacobian", "numeric_grad")


def __getattr__(name):
    if name in _FROM_GRADIENT:
        from symgraph import gradient

        return getattr(gradient, name)
    if name == "TensorSharedVariable":
        from symgraph.compile.shared import TensorSharedVariable

        return TensorSharedVariable
    if name == "_tensor_py_operators":
        from symgraph.tensor.var import _TensorOperators

        return _TensorOperators
    raise AttributeError(f"module 'symgraph.tensor' has no attribute {name!r}")
