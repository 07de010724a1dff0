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
from symgraph.tensor import nnet  # noqa: F401,E402


def grad(cost, wrt, **kwargs):
    """Theano's ``tensor.grad``: the same as :func:`symgraph.grad`."""
    from symgraph.gradient import grad as _grad

    return _grad(cost, wrt, **kwargs)
