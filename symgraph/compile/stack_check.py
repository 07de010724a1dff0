"""Theano's ``check_stack_trace`` flag: after the rewrites, every node of the
optimized graph must still point at a line of the user's program.

symgraph records on each node the user's line that built it (``tag.trace``), and
``FunctionGraph.replace`` copies it onto what a rewrite builds.  A rewrite that
builds nodes some other way leaves them with no line, or with the line that
called ``function()``: errors at run time would then point at the wrong place.
This check finds such nodes.
"""

import logging
import warnings

from symgraph.config import config

_log = logging.getLogger("symgraph.compile.stack_check")


class StackTraceError(AssertionError):
    """A node of an optimized graph lost the user's source line (check_stack_trace=raise)."""


def user_traces(fgraph):
    """The source lines of the nodes of the graph the user wrote, taken before the
    rewrites run."""
    return {node.tag.trace for node in fgraph.apply_nodes if node.tag.trace is not None}


def check_stack_traces(fgraph, before):
    """Act as the flag ``check_stack_trace`` says (off, log, warn, raise) on the nodes
    of ``fgraph`` whose line is none of ``before`` (see :func:`user_traces`)."""
    mode = config.get("check_stack_trace")
    if mode == "off":
        return []
    lost = [node for node in fgraph.apply_nodes if node.tag.trace not in before]
    if not lost:
        return lost
    names = "; ".join(f"{node} (rewrites: {', '.join(node.tag.rewrites) or 'none'})"
                      for node in lost[:5])
    message = (f"{len(lost)} node(s) of the optimized graph lost the user's source line: "
               f"{names}{' ...' if len(lost) > 5 else ''}")
    if mode == "raise":
        raise StackTraceError(message)
    if mode == "warn":
        warnings.warn(message, UserWarning, stacklevel=4)
    else:
        _log.info(message)
    return lost
