"""Theano's import path for NanGuardMode."""

from symgraph.compile.mode import NanGuardMode  # noqa: F401
