"""Theano's ``tensor.raw_random`` import path: ``RandomStreamsBase``, the
class whose methods draw with Theano's argument order (symgraph's
``RandomStreams`` is that class)."""

from symgraph.tensor.random import RandomStreams

RandomStreamsBase = RandomStreams

__all__ = ["RandomStreamsBase"]
