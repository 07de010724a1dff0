"""Theano's ``tensor.io``: ``load`` and ``LoadFromDisk`` (``symgraph.ops.io``).
Theano's MPI transfers are not part of symgraph (one process)."""

from symgraph.ops.io import LoadFromDisk, PathType, generic_string, load  # noqa: F401

__all__ = ["LoadFromDisk", "PathType", "generic_string", "load"]
