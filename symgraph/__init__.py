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
    "subgraph_grad": "symgraph.gradient", "pprint": "symgraph.printing",
    "OpFromGraph": "symgraph.ops.from_graph", "as_op": "symgraph.ops.from_graph",
    "dot": "symgraph.tensor", "sparse_grad": "symgraph._sparse_grad",
}


def clone(output, replace=None, strict=True, share_inputs=True):
    """Theano's ``clone``: a copy of the graph of ``output`` (a variable or a
    list) with the variables of ``replace`` (a dict or pairs) substituted.
    The inputs themselves are kept (``share_inputs=False`` is not
    supported); with ``strict``, a replacement must have the same type."""
    from symgraph.graph.basic import clone_replace

    if not share_inputs:
        raise NotImplementedError("clone: share_inputs=False is not supported")
    pairs = dict(replace.items() if isinstance(replace, dict) else (replace or []))
    if strict:
        for old, new in pairs.items():
            if old.type != new.type:
                raise TypeError(f"clone: {new} of type {new.type} cannot replace {old} of "
                                f"type {old.type}; give strict=False to allow it")
    return clone_replace(output, pairs)


def function_dump(filename, inputs, outputs=None, mode=None, updates=None, givens=None,
                  no_default_updates=False, accept_inplace=False, name=None,
                  rebuild_strict=True, allow_input_downcast=None, profile=None,
                  on_unused_input=None, extra_tag_to_remove=None):
    """Pickle the arguments of a ``function`` call to ``filename``, so that
    the function can be rebuilt elsewhere: ``function(**pickle.load(f))``."""
    import pickle

    args = dict(inputs=inputs, outputs=outputs, mode=mode, updates=updates, givens=givens,
                no_default_updates=no_default_updates, accept_inplace=accept_inplace,
                name=name, rebuild_strict=rebuild_strict,
                allow_input_downcast=allow_input_downcast, profile=profile,
                on_unused_input=on_unused_input)
    with open(filename, "wb") as f:
        pickle.dump(args, f, protocol=pickle.HIGHEST_PROTOCOL)


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
