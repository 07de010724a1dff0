"""Theano's ``theano.scan_module``: ``scan``, ``until``, the views and ``scan_checkpoints``.

Theano programs write ``from theano.scan_module import until`` or call
``theano.scan_module.scan``; these are the names of ``symgraph.scan``.
"""

from symgraph.scan import (Scan, foldl, foldr, map, reduce, scan,  # noqa: F401
                           scan_checkpoints, until)

__all__ = ["scan", "map", "reduce", "foldl", "foldr", "until", "scan_checkpoints", "Scan"]
