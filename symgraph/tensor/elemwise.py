"""Theano's ``tensor.elemwise`` import path: the element-wise op, the
dimension shuffle, and the reductions (symgraph's classes)."""

from symgraph.ops.elemwise import DimShuffle, Elemwise  # noqa: F401
from symgraph.ops.reduce import All, Any, CAReduce, Max, Min, Prod, Sum  # noqa: F401

__all__ = ["DimShuffle", "Elemwise", "CAReduce", "All", "Any", "Sum", "Prod", "Max", "Min"]
