"""Theano's ``theano.compile.builders``: ``OpFromGraph`` (a graph used as one op;
it lives in ``symgraph.ops.from_graph``)."""

from symgraph.ops.from_graph import OpFromGraph  # noqa: F401

__all__ = ["OpFromGraph"]
