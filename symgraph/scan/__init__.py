"""Loops: Theano's ``scan`` and its views, with gradients.

``symgraph.scan(fn, sequences, outputs_info, non_sequences, n_steps, ...)``
returns ``(outputs, updates)``: this package is callable (calling it calls
``symgraph.scan.scan``), so Theano's ``theano.scan(...)`` ports and
``import symgraph.scan.op`` keeps working.  ``map``, ``reduce``, ``foldl`` and
``foldr`` are its special cases, ``until`` makes a loop stop on a condition
and ``scan_checkpoints`` trades recomputation for memory in the gradient.
``docs/scan.md`` describes what runs how.

Modules: ``api`` (the user functions), ``taps`` and ``returns`` (their
arguments and the step function's results), ``builder`` (the Scan node from a
step graph), ``op`` (the Scan op), ``loop`` (its perform), ``shapes``,
``grad`` (reverse mode), ``rop`` (forward mode), ``checkpoints``, ``rewrites``.
"""

import inspect
import sys
import types

from symgraph.scan.api import OrderedUpdates, foldl, foldr, map, reduce, scan, until
from symgraph.scan.checkpoints import scan_checkpoints
from symgraph.scan.op import Scan
from symgraph.scan import rewrites  # noqa: F401  (registers the scan rewrites)

__all__ = ["scan", "map", "reduce", "foldl", "foldr", "until", "scan_checkpoints", "Scan",
           "OrderedUpdates"]


class _CallableModule(types.ModuleType):
    """The package, callable as Theano's ``scan`` function."""

    def __call__(self, *args, **kwargs):
        return scan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
# inspect.signature(symgraph.scan) and help() describe the function.
__signature__ = inspect.signature(scan)
