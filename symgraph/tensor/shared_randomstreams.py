"""Theano's import path for random streams.

``from symgraph.tensor.shared_randomstreams import RandomStreams`` gives the
class of ``symgraph.tensor.random``: Theano's methods and argument order
(``uniform(size, low, high, ndim, dtype)``), draws backed by shared NumPy
generator states that advance on every call of a compiled function.
"""

from symgraph.tensor.random import RandomStream, RandomStreams

__all__ = ["RandomStreams", "RandomStream"]
