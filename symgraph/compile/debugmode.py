"""Theano's import path for DebugMode and the errors it raises."""

from symgraph.compile.debug_checks import (  # noqa: F401
    BadDestroyMap, BadOptimization, BadThunkOutput, BadViewMap, DebugModeError,
    InvalidValueError, StochasticOrder)
from symgraph.compile.mode import DebugMode  # noqa: F401

__all__ = ["DebugMode", "DebugModeError", "BadThunkOutput", "BadOptimization", "BadDestroyMap",
           "BadViewMap", "StochasticOrder", "InvalidValueError"]
