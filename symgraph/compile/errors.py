"""Exceptions of compiled functions, and the messages that point at user code.

A failure while a function runs names the node (its op and inputs), the user's
line that created it (``node.tag.trace``) and, with
``exception_verbosity=high``, the input shapes and strides and the subgraph.
"""

import numpy as np


class MissingInputError(ValueError):
    """The graph needs a variable that is neither an input nor given."""


class UnusedInputError(ValueError):
    """An input of function() that the outputs do not depend on."""


class InputError(TypeError):
    """A value passed to a compiled function does not fit its input."""


def describe_value(value):
    """A short description: shape, dtype and strides of an array."""
    if isinstance(value, np.ndarray):
        return f"shape {value.shape}, dtype {value.dtype}, strides {value.strides}"
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


def runtime_error_message(node, values, exc):
    """The message for ``exc`` raised while computing ``node`` on ``values``."""
    from symgraph.config import config

    lines = [f"{type(exc).__name__}: {exc}", f"Apply node that caused the error: {node}"]
    for i, (var, value) in enumerate(zip(node.inputs, values)):
        name = f" '{var.name}'" if var.name else ""
        desc = describe_value(value) if config.exception_verbosity == "high" else \
            (f"shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__)
        lines.append(f"  input {i}{name}: {var.type}, {desc}")
    text = "\n".join(lines) + node_origin(node)
    if config.exception_verbosity == "high":
        from symgraph import printing

        text += "\nThe subgraph of the failing node:\n" + printing.debugprint(
            node.outputs, file="str", print_type=True)
    else:
        text += "\nUse exception_verbosity=high for strides and the subgraph's print."
    return text


def reraise_with_node(node, values, exc):
    """Raise ``exc``'s class again with a message naming the node and user line."""
    message = runtime_error_message(node, values, exc)
    try:
        new = type(exc)(message)
    except Exception:  # an exception class with a custom constructor
        new = RuntimeError(message)
    new.__symgraph_node__ = node
    raise new.with_traceback(exc.__traceback__) from exc
