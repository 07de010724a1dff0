"""Theano's ``tensor.signal`` path: ``symgraph.tensor.signal.pool`` (pooling) and ``conv`` (``conv2d`` of channel-less images)."""

from symgraph.tensor.signal import conv, pool  # noqa: F401

__all__ = ["conv", "pool"]
