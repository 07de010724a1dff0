"""Graph pictures: DOT text for Graphviz, rendered by its ``dot`` program.

``graph_to_dot`` needs nothing installed; ``pydotprint`` runs ``dot`` (found on
PATH) to make an SVG, PNG or PDF.  Apply nodes are boxes, variables ellipses:
inputs green, shared variables yellow-green and dashed, constants grey,
outputs blue.  With ``compact=True`` unnamed intermediate variables are not
drawn as nodes: their edge carries their type instead.
"""

import itertools
import os
import shutil
import subprocess

from symgraph.graph.basic import Constant
from symgraph.printing._graphs import (apply_nodes, constant_value_text, graph_view,
                                       is_shared, variable_text)

COLORS = {
    "input": "limegreen",
    "shared_input": "yellowgreen",
    "constant_input": "lightgrey",
    "output": "skyblue",
    "variable": "white",
    "apply": "white",
}

# Op class name -> fill colour of its Apply boxes (Theano's colorCodes).
DEFAULT_OP_COLORS = {
    "GpuFromHost": "red", "HostFromGpu": "red", "Scan": "yellow", "Shape": "brown",
    "IfElse": "magenta", "Elemwise": "#FFAABB", "Subtensor": "#FFAAFF", "Alloc": "#FFAA22",
    "Print": "gold",
}

FORMATS = ("svg", "png", "pdf", "ps", "eps", "jpg", "jpeg", "gif", "dot", "canon", "plain",
           "json")


class GraphvizNotFoundError(RuntimeError):
    """Graphviz's ``dot`` program is needed to render a picture and is not on PATH."""


def _quote(text):
    """A DOT double-quoted string (backslashes and quotes escaped)."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shorten(text, max_len):
    return text if max_len is None or len(text) <= max_len else text[:max_len - 3] + "..."


def _attrs(**attrs):
    """`` [key="value", ...]`` for the attributes that are not None ('' if none)."""
    items = [f"{k}={_quote(v)}" for k, v in attrs.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


def _input_positions(io_map):
    """The input positions named in a destroy_map or view_map."""
    return {i for inputs in (io_map or {}).values() for i in inputs}


def graph_to_dot(obj, compact=True, with_ids=False, high_contrast=True, colorCodes=None,
                 max_label_size=70, var_with_name_simple=False, graph_name="symgraph"):
    """The DOT text of a graph (a Variable, list, Apply, FunctionGraph or
    compiled function), ready for Graphviz.

    * ``compact``: do not draw unnamed intermediate variables as nodes.
    * ``with_ids``: add each node's position to its label.
    * ``high_contrast``: fill boxes with colour (else colour only their outline).
    * ``colorCodes``: op class name -> colour, added to ``DEFAULT_OP_COLORS``.
    * ``max_label_size``: longer labels are cut with "...".
    * ``var_with_name_simple``: label named variables by name only (no type).
    """
    view = graph_view(obj, "graph_to_dot")
    op_colors = dict(DEFAULT_OP_COLORS, **(colorCodes or {}))
    nodes = apply_nodes(view)
    outputs = set(view.outputs)
    used = {inp for node in nodes for inp in node.inputs}
    names = {}  # Variable or Apply -> DOT node name
    var_ids = itertools.count()
    lines = [f"digraph {_quote(graph_name)} {{", "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']

    def fill(color, shape, style="filled"):
        if high_contrast:
            return {"shape": shape, "style": style, "fillcolor": color}
        return {"shape": shape, "style": style.replace("filled", "solid"), "color": color}

    def var_node(var):
        """The DOT name of ``var``'s node, declaring it the first time."""
        if var in names:
            return names[var]
        name = f"v{next(var_ids)}"
        names[var] = name
        if isinstance(var, Constant):
            kind = "constant_input"
            label = var.name or constant_value_text(var)
        else:
            label = variable_text(var)
            if var.name is not None and not var_with_name_simple:
                label = f"{var.name} {var.type}"
            if var in outputs:
                kind = "output"
            elif is_shared(var):
                kind = "shared_input"
            elif var.owner is None:
                kind = "input"
            else:
                kind = "variable"
        style = "filled,dashed" if kind == "shared_input" else "filled"
        if with_ids:
            label = f"{label} id={name}"
        attrs = _attrs(label=_shorten(label, max_label_size),
                       **fill(COLORS[kind], "ellipse", style))
        lines.append(f"  {name}{attrs};")
        return name

    def drawn(var):
        return not compact or var.owner is None or var.name is not None or var in outputs

    for pos, node in enumerate(nodes):
        name = f"n{pos}"
        names[node] = name
        label = str(node.op) + (f" id={pos}" if with_ids else "")
        color = op_colors.get(type(node.op).__name__, COLORS["apply"])
        attrs = _attrs(label=_shorten(label, max_label_size), **fill(color, "box"))
        lines.append(f"  {name}{attrs};")
        destroyed = _input_positions(getattr(node.op, "destroy_map", None))
        viewed = _input_positions(getattr(node.op, "view_map", None))
        for i, inp in enumerate(node.inputs):
            label = str(i) if len(node.inputs) > 1 else ""
            if drawn(inp):
                source = var_node(inp)
            else:
                source = names[inp.owner]
                which = f"out{inp.index} " if len(inp.owner.outputs) > 1 else ""
                label = f"{label} {which}{inp.type}".strip()
            edge = {"label": label or None}
            if i in destroyed:
                edge.update(color="red", label=f"{label} destroyed".strip())
            elif i in viewed:
                edge.update(color="blue", style="dashed")
            lines.append(f"  {source} -> {name}{_attrs(**edge)};")
        for out in node.outputs:
            if drawn(out) and (out in used or out in outputs or not compact):
                lines.append(f"  {name} -> {var_node(out)};")
    for out in view.outputs:
        var_node(out)  # outputs that are inputs or constants (an empty graph)
    for pos, inp_pos in sorted(view.updates.items()):
        # constraint=false: the back edge must not pull the input below the output.
        edge = _attrs(label="update", style="dashed", color="grey40", constraint="false")
        lines.append(f"  {var_node(view.outputs[pos])} -> {var_node(view.inputs[inp_pos])}{edge};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def pydotprint(fct_or_var, outfile=None, format=None, compact=True, with_ids=False,
               high_contrast=True, colorCodes=None, max_label_size=70,
               var_with_name_simple=False, print_output_file=True, return_image=False):
    """Draw a graph with Graphviz and return the output file's path.

    ``fct_or_var`` is anything ``debugprint`` accepts.  ``format`` is one of
    ``FORMATS`` (default: from ``outfile``'s extension, else ``'svg'``);
    ``'dot'`` writes the DOT text and needs no Graphviz.  ``outfile`` defaults
    to ``symgraph.pydotprint.<format>`` in the current folder.  With
    ``return_image=True`` the rendered bytes are returned instead of the path
    (for notebooks).  The other arguments are ``graph_to_dot``'s.

    Raises GraphvizNotFoundError when Graphviz's ``dot`` program is missing.
    """
    if format is None:
        ext = os.path.splitext(outfile)[1].lstrip(".").lower() if outfile else ""
        format = ext if ext in FORMATS else "svg"
    if format not in FORMATS:
        raise ValueError(f"pydotprint: unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if outfile is None:
        outfile = f"symgraph.pydotprint.{format}"
    outfile = os.fspath(outfile)
    text = graph_to_dot(fct_or_var, compact=compact, with_ids=with_ids,
                        high_contrast=high_contrast, colorCodes=colorCodes,
                        max_label_size=max_label_size,
                        var_with_name_simple=var_with_name_simple)
    if format == "dot":
        with open(outfile, "w") as f:
            f.write(text)
    else:
        render_dot(text, outfile, format)
    if print_output_file:
        print(f"The output file is available at {outfile}")
    if return_image:
        with open(outfile, "rb") as f:
            return f.read()
    return outfile


def render_dot(text, outfile, format="svg"):
    """Run Graphviz's ``dot`` on DOT ``text``, writing ``outfile`` in ``format``."""
    program = shutil.which("dot")
    if program is None:
        raise GraphvizNotFoundError(
            f"pydotprint needs Graphviz's 'dot' program to render {format}, and it is not "
            f"on PATH. Install Graphviz (Debian/Ubuntu: apt-get install graphviz; "
            f"macOS: brew install graphviz; conda: conda install graphviz), or use "
            f"graph_to_dot() or format='dot' to get the DOT text without it.")
    try:
        result = subprocess.run([program, f"-T{format}", "-o", outfile], input=text.encode(),
                                capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Graphviz's dot took over 120 s to draw the graph into {outfile}")
    if result.returncode != 0:
        raise RuntimeError(f"Graphviz's dot failed (exit {result.returncode}) writing "
                           f"{outfile}: {result.stderr.decode(errors='replace').strip()}")
    return outfile
