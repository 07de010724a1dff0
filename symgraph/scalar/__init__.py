"""Theano's ``theano.scalar`` at ``symgraph.scalar``: scalar types (``float64``,
``int32``, ... as :class:`ScalarType`, the 0-d tensor types), ``upcast``,
``as_scalar``, ``constant`` and the scalar ops.  See :mod:`symgraph.scalar.basic`.

Some names (``bool``, ``pow``) shadow Python builtins on purpose, as in Theano.
"""

from symgraph.scalar.basic import *  # noqa: F401,F403
from symgraph.scalar.basic import __all__  # noqa: F401
