"""symgraph: an optimizing compiler for array expressions, with Theano's API.

Build a graph from symbolic tensors (``import symgraph.tensor as T``), take
gradients (``symgraph.grad``), compile it (``symgraph.function``) and call the
result with NumPy arrays.  ``symgraph.config`` holds the flags.
"""

from symgraph.version import __version__

from symgraph.config import config, change_flags  # noqa: E402,F401
from symgraph import tensor  # noqa: E402,F401
from symgraph.compile.function import function, Function  # noqa: E402,F401
from symgraph.compile.io import In, Out  # noqa: E402,F401
from symgraph.compile.mode import Mode, FAST_RUN, FAST_COMPILE  # noqa: E402,F401
from symgraph.compile.shared import shared, SharedVariable  # noqa: E402,F401
from symgraph.graph.basic import Variable, Constant, Apply, Op, Type  # noqa: E402,F401
from symgraph.graph.fg import FunctionGraph  # noqa: E402,F401

# Loaded on first use, so that `import symgraph` stays fast.
_LAZY = {
    "grad": "symgraph.gradient", "jacobian": "symgraph.gradient",
    "hessian": "symgraph.gradient", "Rop": "symgraph.gradient", "Lop": "symgraph.gradient",
    "gradient": None, "printing": None, "ifelse": None, "opt": None,
    "debugprint": "symgraph.printing", "pp": "symgraph.printing",
    # symgraph.scan is the package symgraph/scan/, callable as Theano's function.
    "scan": None, "scan_module": None, "map": "symgraph.scan", "reduce": "symgraph.scan",
    "foldl": "symgraph.scan", "foldr": "symgraph.scan", "scan_checkpoints": "symgraph.scan",
}


def __getattr__(name):
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'symgraph' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:
        return importlib.import_module(f"symgraph.{name}")
    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
