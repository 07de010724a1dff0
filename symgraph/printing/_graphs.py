"""What the printers share: turning "something printable" into outputs to walk.

``debugprint``, ``pp`` and ``graph_to_dot`` all accept a Variable, a list of
Variables, an Apply node, a FunctionGraph or a compiled function.  A compiled
function is recognised by duck typing (it has ``maker.fgraph``) so that this
module does not import the compile layer, which sits above it.
"""

from dataclasses import dataclass, field

import numpy as np

from symgraph.graph.basic import Apply, Constant, Variable, graph_inputs, io_toposort
from symgraph.graph.fg import FunctionGraph


@dataclass
class GraphView:
    """The parts of a printable object that the printers need.

    ``outputs`` are printed in order; ``inputs`` are the graph's inputs (the
    function's or, for loose variables, the leaves); ``order`` is a
    topological order of the Apply nodes when the object is a FunctionGraph
    or a function (printed as each node's position), else None;
    ``updates`` maps an output position to the input it updates.
    """

    outputs: list
    inputs: list
    order: list = None
    updates: dict = field(default_factory=dict)
    function: object = None


def is_compiled_function(obj):
    """True for objects that look like ``symgraph.function``'s result."""
    return getattr(getattr(obj, "maker", None), "fgraph", None) is not None


def graph_view(obj, caller="debugprint"):
    """A GraphView of ``obj`` (see the module docstring), or TypeError."""
    if is_compiled_function(obj):
        view = _fgraph_view(obj.maker.fgraph)
        view.function = obj
        return view
    if isinstance(obj, FunctionGraph):
        return _fgraph_view(obj)
    if isinstance(obj, Variable):
        outputs = [obj]
    elif isinstance(obj, Apply):
        outputs = list(obj.outputs)
    elif isinstance(obj, (list, tuple)):
        outputs = []
        for item in obj:
            if isinstance(item, Apply):
                outputs.extend(item.outputs)
            elif isinstance(item, Variable):
                outputs.append(item)
            else:
                raise TypeError(f"{caller}: cannot print {type(item).__name__} {item!r} "
                                f"inside a list; expected Variables or Apply nodes")
    else:
        raise TypeError(f"{caller}: cannot print a {type(obj).__name__}; expected a "
                        f"Variable, a list of Variables, an Apply node, a FunctionGraph "
                        f"or a compiled function")
    return GraphView(outputs=outputs, inputs=graph_inputs(outputs))


def _fgraph_view(fgraph):
    updates = dict(getattr(fgraph, "update_mapping", None) or {})
    return GraphView(outputs=list(fgraph.outputs), inputs=list(fgraph.inputs),
                     order=fgraph.toposort(), updates=updates)


def apply_nodes(view):
    """The view's Apply nodes, parents before children."""
    if view.order is not None:
        return list(view.order)
    return io_toposort(view.inputs, view.outputs)


def is_shared(var):
    """True for shared variables (duck-typed: they carry a value container)."""
    return var.owner is None and not isinstance(var, Constant) and \
        callable(getattr(var, "get_value", None))


def constant_value_text(const, max_len=30):
    """A short text for a Constant's value: ``2.0``, ``[1. 2. 3.]``, or a
    summary (``float32, shape=(100, 3)``) when the value does not fit."""
    data = const.data
    if isinstance(data, np.ndarray) or np.isscalar(data):
        arr = np.asarray(data)
        if arr.ndim == 0:
            text = str(arr.item())
        else:
            text = np.array2string(arr, threshold=8, max_line_width=10 ** 6)
            text = " ".join(text.split())
            if len(text) > max_len:
                text = f"{arr.dtype}, shape={arr.shape}"
        return text
    text = str(data)
    return text if len(text) <= max_len else text[:max_len - 3] + "..."


def constant_text(const):
    """How a Constant leaf prints: its name, or ``TensorConstant{2.0}``."""
    if const.name is not None:
        return const.name
    return f"{type(const).__name__}{{{constant_value_text(const)}}}"


def variable_text(var):
    """How a leaf variable prints: its name, a constant's value, or ``<type>``."""
    if isinstance(var, Constant):
        return constant_text(var)
    if var.name is not None:
        return var.name
    return f"<{var.type}>"
