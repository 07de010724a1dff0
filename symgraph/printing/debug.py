"""debugprint: a graph as an indented tree, one line per node (Theano's format).

::

    Elemwise{add} [id A] 'z'
     |Elemwise{mul} [id B]
     | |x [id C]
     | |TensorConstant{2.0} [id D]
     |Elemwise{exp} [id E]
       |y [id F]

Every node gets an id; a subtree used twice is printed once, and later
references show the node's line with its id and no children.  For a
FunctionGraph or a compiled function each node's line ends with its position
in the schedule.
"""

import os
import sys

from symgraph.graph.fg import FunctionGraph
from symgraph.printing._graphs import graph_view, variable_text

_ID_MODES = ("CHAR", "int", "id", "")


class _Ids:
    """Assigns ids to printed objects and remembers which were printed.

    ``done`` maps an object (an Apply node, or a Variable without owner) to
    its id text; passing the same dict to several debugprint calls shares ids
    between them, as in Theano.
    """

    def __init__(self, mode, done):
        if mode not in _ID_MODES:
            raise ValueError(f"debugprint: ids={mode!r} is not one of "
                             f"{', '.join(repr(m) for m in _ID_MODES)}")
        self.mode = mode
        self.done = {} if done is None else done
        self.used = set(self.done.values())
        self.counter = 0

    def get(self, obj):
        """``(id text, first time seen)`` for ``obj``."""
        if obj in self.done:
            return self.done[obj], False
        ident = self._new(obj)
        self.done[obj] = ident
        self.used.add(ident)
        return ident, True

    def _new(self, obj):
        if self.mode == "":
            return ""
        if self.mode == "id":
            return str(id(obj))
        while True:
            n = self.counter
            self.counter += 1
            ident = _letters(n) if self.mode == "CHAR" else str(n)
            if ident not in self.used:
                return ident


def _letters(n):
    """0 -> A, 25 -> Z, 26 -> AA, 27 -> AB ... (spreadsheet columns)."""
    text = ""
    n += 1
    while n:
        n, rem = divmod(n - 1, 26)
        text = chr(ord("A") + rem) + text
    return text


def debugprint(obj, depth=-1, print_type=False, file=None, ids="CHAR", print_storage=False,
               done=None, print_op_info=True, stop_on_name=False, print_rewrites=False,
               print_trace=False):
    """Print a graph as an indented tree, one line per node.

    ``obj`` is a Variable, a list of Variables, an Apply node, a FunctionGraph
    or a compiled function (its optimized graph ``f.maker.fgraph``, outputs in
    order; an output that updates a shared variable says so).

    * ``depth``: levels to print (-1: all).
    * ``print_type``: append each variable's type, ``<TensorType(float32, (?, 3))>``.
    * ``file``: None for stdout, ``'str'`` to return the text, or a file object.
    * ``ids``: ``'CHAR'`` (A, B, ... AA), ``'int'``, ``'id'`` (Python ids) or
      ``''`` (none).  A subtree seen before prints its id and no children.
    * ``print_storage``: for a compiled function, show the value held in each
      variable's storage (constants, shared values, results of the last call).
    * ``done``: a dict of ids to share between calls (filled in place).
    * ``print_op_info``: show in-place (``d={0: [0]}``) and view
      (``v={0: [0]}``) maps, and the inner graphs of ops that have one.
    * ``stop_on_name``: do not expand variables that have a name.
    * ``print_rewrites``: show the rewrites that produced each node
      (``node.tag.rewrites``).
    * ``print_trace``: show the user's source line that built each node.

    Returns the text when ``file='str'``, else the file written to.
    """
    view = graph_view(obj, "debugprint")
    printer = _TreePrinter(
        ids=_Ids(ids, done), depth=depth, print_type=print_type,
        print_op_info=print_op_info, stop_on_name=stop_on_name,
        print_rewrites=print_rewrites, print_trace=print_trace,
        order={node: i for i, node in enumerate(view.order or ())},
        storage=_storage_map(view.function) if print_storage else None)
    for pos, out in enumerate(view.outputs):
        note = ""
        if pos in view.updates:
            note = f" (update of {variable_text(view.inputs[view.updates[pos]])})"
        printer.tree(out, "", "", note=note)
    printer.inner_graphs()
    text = "\n".join(printer.lines) + "\n"
    if file == "str":
        return text
    stream = sys.stdout if file is None else file
    stream.write(text)
    return stream


class _TreePrinter:
    """Accumulates the lines of one debugprint call."""

    def __init__(self, ids, depth, print_type, print_op_info, stop_on_name,
                 print_rewrites, print_trace, order, storage):
        self.ids = ids
        self.depth = depth
        self.print_type = print_type
        self.print_op_info = print_op_info
        self.stop_on_name = stop_on_name
        self.print_rewrites = print_rewrites
        self.print_trace = print_trace
        self.order = order
        self.storage = storage
        self.lines = []
        self.inner = []  # Apply nodes whose op has an inner graph, in print order
        self.sources = {}  # inner input -> the outer variable feeding it (scan)

    def tree(self, var, prefix, child_prefix, note=""):
        """Print ``var``'s subtree.  Iterative: deep graphs must not hit
        Python's recursion limit."""
        stack = [(var, prefix, child_prefix, self.depth, note)]
        while stack:
            var, prefix, child_prefix, depth, note = stack.pop()
            if depth == 0:
                continue
            children = self._line(var, prefix, note)
            # Pushed in reverse so that the first input prints first.
            for i in reversed(range(len(children))):
                last = i == len(children) - 1
                stack.append((children[i], child_prefix + " |",
                              child_prefix + ("  " if last else " |"), depth - 1, ""))

    def _line(self, var, prefix, note):
        """Append ``var``'s line; return the inputs to print below it."""
        node = var.owner
        type_text = f" <{var.type}>" if self.print_type else ""
        if node is None:
            ident, _ = self.ids.get(var)
            source = self.sources.get(var)
            if source is not None:
                outer_ident, _ = self.ids.get(source.owner or source)
                note = f" -> [id {outer_ident}]{note}"
            self.lines.append(f"{prefix}{variable_text(var)}{_id_text(ident)}{type_text}"
                              f"{self._storage_text(var)}{note}")
            return []
        ident, first = self.ids.get(node)
        op_text = str(node.op)
        if len(node.outputs) > 1:
            op_text += f".{var.index}"
        if not first:
            self.lines.append(f"{prefix}{op_text}{_id_text(ident)}{type_text}{note}")
            return []
        parts = [f"{prefix}{op_text}{_id_text(ident)}{type_text}"]
        if var.name is not None:
            parts.append(f" '{var.name}'")
        if self.print_op_info:
            parts.append(_op_info(node.op))
            # An op may describe its run-time choices (a convolution's algorithm).
            note_fn = getattr(node.op, "debug_note", None)
            op_note = note_fn(node) if callable(note_fn) else ""
            if op_note:
                parts.append(f" [{op_note}]")
            if _inner_graph(node.op) is not None:
                self.inner.append(node)
        if node in self.order:
            parts.append(f" {self.order[node]}")
        parts.append(self._storage_text(var))
        if self.print_rewrites and node.tag.rewrites:
            parts.append(f" rewrites=[{', '.join(map(str, node.tag.rewrites))}]")
        trace = getattr(node.tag, "trace", None)
        if self.print_trace and trace is not None:
            parts.append(f" @ {os.path.basename(trace.filename)}:{trace.lineno}")
        parts.append(note)
        self.lines.append("".join(parts))
        if self.stop_on_name and var.name is not None:
            return []
        return list(node.inputs)

    def _storage_text(self, var):
        if self.storage is None or var not in self.storage:
            return ""
        cell = self.storage[var]
        value = cell[0] if isinstance(cell, list) else getattr(cell, "value", cell)
        if value is None:  # not computed yet, or freed after the call
            return ""
        text = " ".join(str(value).split())
        if len(text) > 40:
            text = text[:37] + "..."
        return f" storage={text}"

    def inner_graphs(self):
        """Print, after the main trees, the inner graph of each op that has one
        (fused composites, scan-like ops)."""
        if not self.inner:
            return
        self.lines.extend(["", "Inner graphs:"])
        printed = set()
        while self.inner:
            node = self.inner.pop(0)
            if node.op in printed:
                continue
            printed.add(node.op)
            ident, _ = self.ids.get(node)
            self.lines.extend(["", f"{node.op}{_id_text(ident)}"])
            # An op may show the graph it runs for this node (scan: its compiled step)
            # and which outer input feeds each inner input ("x[t] -> [id B]").
            per_node = getattr(node.op, "debug_inner_graph", None)
            inputs, outputs, sources = per_node(node) if callable(per_node) else \
                (*_inner_graph(node.op), None)
            self.sources = dict(zip(inputs, sources)) if sources else {}
            for out in outputs:
                self.tree(out, " >", "  ")
            self.sources = {}


def _id_text(ident):
    return f" [id {ident}]" if ident else ""


def _op_info(op):
    text = ""
    destroy_map = getattr(op, "destroy_map", None)
    if destroy_map:
        text += f" d={dict(destroy_map)}"
    view_map = getattr(op, "view_map", None)
    if view_map:
        text += f" v={dict(view_map)}"
    return text


def _inner_graph(op):
    """``(inputs, outputs)`` of ``op``'s inner graph (its own or its scalar
    op's: a fused Composite), or None.  Duck-typed: ``fgraph`` or
    ``inner_inputs``/``inner_outputs``."""
    for candidate in (op, getattr(op, "scalar_op", None)):
        if candidate is None:
            continue
        try:
            fgraph = getattr(candidate, "fgraph", None)
            if isinstance(fgraph, FunctionGraph):
                return list(fgraph.inputs), list(fgraph.outputs)
            outputs = getattr(candidate, "inner_outputs", None)
            if outputs is not None:
                return list(getattr(candidate, "inner_inputs", ())), list(outputs)
        except Exception:  # a lazily built inner graph that fails is not ours to report
            return None
    return None


def _storage_map(function):
    """The compiled function's map variable -> storage cell, if it exposes one."""
    if function is None:
        return None
    for holder in (function, getattr(function, "vm", None), getattr(function, "fn", None)):
        for attr in ("storage_map", "storage"):
            storage = getattr(holder, attr, None)
            if isinstance(storage, dict):
                return storage
    return None
