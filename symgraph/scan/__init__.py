"""Loops: Theano's ``scan`` and its views, with gradients.

``symgraph.scan(fn, sequences, outputs_info, non_sequences, n_steps, ...)``
returns ``(outputs, updates)``; ``map``, ``reduce``, ``foldl``, ``foldr`` are
its special cases, ``until`` makes a loop stop on a condition and
``scan_checkpoints`` trades recomputation for memory in the gradient.
``docs/scan.md`` describes what runs how.

Modules: ``api`` (the user functions), ``taps`` and ``returns`` (their
arguments and the step function's results), ``builder`` (the Scan node from a
step graph), ``op`` (the Scan op), ``loop`` (its perform), ``shapes``,
``grad`` (reverse mode), ``rop`` (forward mode), ``checkpoints``, ``rewrites``.
"""

from symgraph.scan.api import OrderedUpdates, foldl, foldr, map, reduce, scan, until
from symgraph.scan.checkpoints import scan_checkpoints
from symgraph.scan.op import Scan
from symgraph.scan import rewrites  # noqa: F401  (registers the scan rewrites)

__all__ = ["scan", "map", "reduce", "foldl", "foldr", "until", "scan_checkpoints", "Scan",
           "OrderedUpdates"]

