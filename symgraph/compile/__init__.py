"""Compiling graphs into callables: function(), In, Out, modes, shared variables."""

from symgraph.compile.function import function, Function  # noqa: F401
from symgraph.compile.io import In, Out  # noqa: F401
from symgraph.compile.mode import DebugMode, Mode, NanGuardMode, get_mode  # noqa: F401
from symgraph.compile.shared import SharedVariable, shared  # noqa: F401
