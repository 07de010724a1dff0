"""Theano's import path: ``from symgraph.ifelse import ifelse``.

The op lives in ``symgraph.ops.ifelse``; see ``ifelse`` there.
"""

from symgraph.ops.ifelse import IfElse, ifelse

__all__ = ["IfElse", "ifelse"]
