"""Where in the user's code a graph node was created.

Errors must point at the user's own line, not at symgraph's internals or at the
optimized graph, so every Apply records the first stack frame outside the
symgraph package when it is built, and rewrites copy that record onto what they
create (see ``FunctionGraph.replace``).
"""

import os
import sys
from dataclasses import dataclass

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class SourceLine:
    """A user's source location: file, line number, function and the text."""

    filename: str
    lineno: int
    function: str
    text: str

    def __str__(self):
        text = f"\n    {self.text}" if self.text else ""
        return f'File "{self.filename}", line {self.lineno}, in {self.function}{text}'


def _is_internal(filename):
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)


def user_line(skip_internal=True):
    """The innermost stack frame outside symgraph, as a SourceLine (or None)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (skip_internal and _is_internal(filename)) and not filename.startswith("<frozen") \
                and not _inside_user_op(frame):
            return SourceLine(filename, frame.f_lineno, frame.f_code.co_name,
                              _line_text(filename, frame.f_lineno))
        frame = frame.f_back
    return None


def _line_text(filename, lineno):
    # linecache is imported lazily: it is only needed when a node is built.
    import linecache

    return linecache.getline(filename, lineno).strip()


_OP_METHODS = frozenset({"make_node", "__call__", "L_op", "grad", "R_op"})


def _inside_user_op(frame):
    # An op defined in user code: point at the line that applies it, not at its
    # make_node.
    if frame.f_code.co_name not in _OP_METHODS:
        return False
    owner = frame.f_locals.get("self")
    return owner is not None and hasattr(owner, "make_node") and hasattr(owner, "perform")
