"""Theano's ``tensor.opt`` names that user programs call: ``Assert`` and
``assert_op``.  symgraph's rewrites themselves live in ``symgraph.opt``."""

from symgraph.ops.assert_op import Assert, assert_op  # noqa: F401

__all__ = ["Assert", "assert_op"]
