"""Theano's import path for DebugMode."""

from symgraph.compile.mode import DebugMode  # noqa: F401
