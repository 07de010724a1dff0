"""Exceptions of compiled functions, and the messages that point at user code.

A failure while a function runs names the node (its op and inputs), the user's
line that created it (``node.tag.trace``) and, with
``exception_verbosity=high``, the input shapes and strides and the subgraph.
The node's unnamed inputs are described by the expressions the user wrote and
the lines that built them, and the error keeps its class (a failed allocation
is a MemoryError under every linker).
"""

import re

import numpy as np

from symgraph.graph.errors import MissingInputError  # noqa: F401  (raised by graph/fg.py)


class UnusedInputError(ValueError):
    """An input of function() that the outputs do not depend on."""


class InputError(TypeError):
    """A value passed to a compiled function does not fit its input."""


def describe_value(value):
    """A short description: shape, dtype and strides of an array (a host
    ndarray, or a device array, which says where it lives)."""
    if isinstance(value, np.ndarray):
        return f"shape {value.shape}, dtype {value.dtype}, strides {value.strides}"
    if _is_array_like(value):
        return (f"{type(value).__name__} of shape {tuple(value.shape)}, dtype {value.dtype}, "
                f"strides {tuple(value.strides)}")
    return type(value).__name__


def _is_array_like(value):
    return all(hasattr(value, name) for name in ("shape", "dtype", "strides"))


def _short(value):
    """Shape only (the default verbosity); device arrays say where they live."""
    if isinstance(value, np.ndarray):
        return f"shape {value.shape}"
    if _is_array_like(value):
        return f"{type(value).__name__} of shape {tuple(value.shape)}"
    return type(value).__name__


def node_origin(node):
    """The user's line that built ``node`` and the rewrites that produced it."""
    trace = getattr(node.tag, "trace", None)
    text = f"\nThe node was created at:\n  {trace}" if trace else \
        "\nThe node's creation line is unknown."
    rewrites = getattr(node.tag, "rewrites", ())
    if rewrites:
        text += f"\nIt was produced by the rewrites: {', '.join(rewrites)}"
    return text


def _tree_size(var, cap, memo):
    """Nodes in ``var``'s expression written out as a tree (shared parts
    counted at each use) when at most ``cap``, else some number over ``cap``:
    a printed expression grows with this, not with the graph's node count.
    The recursion goes no deeper than ``cap``."""
    if var.owner is None:
        return 1
    if var in memo:
        return memo[var]
    if cap < 1:
        return cap + 1
    size = 1
    for inp in var.owner.inputs:
        size += _tree_size(inp, cap - size, memo)
        if size > cap:
            return size  # not memoized: only exact sizes are
    memo[var] = size
    return size


#: Expressions longer than this name their node and the inputs they use instead.
_EXPRESSION_CHARS = 80
_EXPRESSION_NODES = 24


def describe_variable(var):
    """How an error message names ``var``.

    The user's name when it has one; for an unnamed intermediate of the
    compiled graph, its expression over the graph's inputs
    (``Softmax{axis=1}(x)``) when that is short, else its node's name and the
    named inputs it is computed from.
    """
    if var.name is not None or var.owner is None:
        return str(var)
    if _tree_size(var, _EXPRESSION_NODES, {}) <= _EXPRESSION_NODES:
        from symgraph.printing import pp

        try:
            text = pp(var)
        except Exception:  # noqa: BLE001 - a custom printer must not hide the user's error
            text = None
        if text is not None and len(text) <= _EXPRESSION_CHARS and "\n" not in text:
            return text
    from symgraph.graph.basic import Constant, graph_inputs

    names = list(dict.fromkeys(v.name for v in graph_inputs([var])
                               if v.name is not None and not isinstance(v, Constant)))
    return f"{var} (computed from {', '.join(names)})" if names else str(var)


def _is_intermediate(var):
    return var.name is None and var.owner is not None


def _one_line(trace):
    text = f": {trace.text}" if getattr(trace, "text", "") else ""
    return f'File "{trace.filename}", line {trace.lineno}, in {trace.function}{text}'


def _with_descriptions(text, node, described):
    """``text`` with the graph's names of the node's intermediates replaced by
    their descriptions (in one pass: a description is never rewritten); a name
    two differently described intermediates share stays."""
    by_name = {}
    for var in node.inputs + node.outputs:
        if var in described:
            by_name.setdefault(str(var), set()).add(described[var])
    replace = {name: descs.pop() for name, descs in by_name.items() if len(descs) == 1}
    if not replace:
        return text
    pattern = "|".join(re.escape(name) for name in sorted(replace, key=len, reverse=True))
    return re.sub(pattern, lambda match: replace[match.group(0)], text)


def runtime_error_message(node, values, exc, type_name=None):
    """The message for ``exc`` raised while computing ``node`` on ``values``.

    Unnamed intermediates (``Softmax{axis=1}.out``) are described by the
    expression the user wrote (``describe_variable``) and the line that built
    them.  ``type_name``, when given, starts the message: the exception is
    raised as another class than the original's.
    """
    from symgraph.config import config

    described = {var: describe_variable(var) for var in node.inputs + node.outputs
                 if _is_intermediate(var)}
    first = _with_descriptions(str(exc), node, described)
    args = ", ".join(described.get(var, str(var)) for var in node.inputs)
    lines = [f"{type_name}: {first}" if type_name else first,
             f"Apply node that caused the error: {node.op}({args})"]
    own_trace = getattr(node.tag, "trace", None)
    for i, (var, value) in enumerate(zip(node.inputs, values)):
        name = f" '{var.name}'" if var.name else (f" {described[var]}" if var in described else "")
        desc = describe_value(value) if config.exception_verbosity == "high" else _short(value)
        lines.append(f"  input {i}{name}: {var.type}, {desc}")
        trace = getattr(var.owner.tag, "trace", None) if var in described else None
        if trace and trace != own_trace:
            lines.append(f"    computed at {_one_line(trace)}")
    text = "\n".join(lines) + node_origin(node)
    if config.exception_verbosity == "high":
        from symgraph import printing

        text += "\nThe subgraph of the failing node:\n" + printing.debugprint(
            node.outputs, file="str", print_type=True)
    else:
        text += "\nUse exception_verbosity=high for strides and the subgraph's print."
    return text


def _built(cls, message, exc):
    """``cls`` carrying ``message``, or None.  A class whose constructor wants
    more than a message is created without running it, which works when its
    ``__str__`` prints its args."""
    for make in (lambda: cls(message), lambda: cls.__new__(cls, message)):
        try:
            new = make()
            if type(new) is not cls:
                continue
            new.__dict__.update({k: v for k, v in vars(exc).items() if k not in vars(new)})
            text = str(new)
        except Exception:  # noqa: BLE001 - a constructor or __str__ that wants more
            continue
        # KeyError prints its message's repr; a custom __str__ may drop the message.
        if message in text or repr(message) in text:
            return new
    return None


def _rebuilt(exc, message_for):
    """An exception of ``exc``'s class carrying ``message_for(type_name)``; for
    a class that cannot carry a message (NumPy's ``_ArrayMemoryError`` prints
    its shape and dtype), its nearest base class that can, so that ``except
    MemoryError`` still catches it.  The original's attributes come along."""
    cls = type(exc)
    messages = {}
    for base in cls.__mro__:
        if not issubclass(base, BaseException):
            break
        # NumPy's private subclasses already display as their base's name.
        renamed = base.__name__ != cls.__name__ and not cls.__name__.startswith("_")
        type_name = cls.__name__ if renamed else None
        if type_name not in messages:
            messages[type_name] = message_for(type_name)
        new = _built(base, messages[type_name], exc)
        if new is not None:
            return new
    return RuntimeError(message_for(cls.__name__))


def reraise_with_node(node, values, exc):
    """Raise ``exc`` again, as its own class, with a message naming the node,
    the user's expressions and line (see ``runtime_error_message``)."""
    new = _rebuilt(exc, lambda type_name: runtime_error_message(node, values, exc, type_name))
    new.__symgraph_node__ = node
    raise new.with_traceback(exc.__traceback__) from exc
