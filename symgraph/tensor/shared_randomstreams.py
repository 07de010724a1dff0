"""Theano's import path for random streams.

``from symgraph.tensor.shared_randomstreams import RandomStreams`` gives the
same class as ``symgraph.tensor.random.RandomStream``: draws backed by shared
NumPy generator states that advance on every call of a compiled function.
"""

from symgraph.tensor.random import RandomStream

RandomStreams = RandomStream

__all__ = ["RandomStreams", "RandomStream"]
