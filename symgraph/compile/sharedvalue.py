"""Theano's ``compile.sharedvalue`` import path: ``shared``,
``shared_constructor``, ``SharedVariable`` (defined in
``symgraph.compile.shared``)."""

from symgraph.compile.shared import SharedVariable, shared, shared_constructor  # noqa: F401

__all__ = ["SharedVariable", "shared", "shared_constructor"]
