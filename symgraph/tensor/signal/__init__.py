"""Theano's ``tensor.signal`` path: ``symgraph.tensor.signal.pool`` (pooling)."""

from symgraph.tensor.signal import pool  # noqa: F401

__all__ = ["pool"]
