"""The warm-start key: a stable digest of a function's graph as the user built it.

``warm_key(maker, fgraph)`` hashes everything that decides what the compile
pipeline makes of a graph, so that two processes that build the same graph
with the same flags and versions get the same key, and any difference that
could change the optimized graph, its schedule or its code gives another:

- the graph (``fgraph`` before rewriting: the user's graph with ``givens``
  substituted), walked in a fixed order: each node's op (its class, its
  ``__props__`` and its other public attributes; private ones are memos), the
  types, classes and names of every variable, constants' values, the user's
  line that built each node (errors and ``debugprint`` of the restored graph
  name it), the inputs, outputs, updates and which inputs may be overwritten;
- the mode (linker, optimizer, tags);
- every config flag (not only those declared to change code: rewrites read
  flags too), but for the few that only say where and how big the cache is;
- the versions: symgraph, Python, NumPy, the CPU (``-march=native`` code),
  and a stamp of symgraph's own source files (name, size and modification
  time of each ``.py`` file and of ``c_src/``), so that editing symgraph in
  a checkout never restores a graph an older rewrite made.

A value the digest cannot describe by value (a Python function in an op, an
op holding an inner graph or a compiled function, a variable of an unknown
kind) makes the graph *uncacheable*: :class:`Uncacheable` is raised, and the
function is compiled as usual and not stored.
"""

import hashlib
import os
import sys
from types import SimpleNamespace

import numpy as np

__all__ = ["Uncacheable", "warm_key", "code_stamp", "WARM_FORMAT"]

#: Bump when the digest or the entry's layout changes meaning.
WARM_FORMAT = "1"

#: Flags that only say where the cache is and how large it may grow, or that
#: switch warm start itself: they never change what a graph compiles to.
_FLAGS_NOT_IN_KEY = frozenset({"compiledir", "compile_cache_size_mb", "compile_warm_start",
                               "compile_no_compile"})

_SCALARS = (bool, int, float, complex, str, bytes, type(None))


class Uncacheable(Exception):
    """The graph holds something the warm-start digest cannot describe by value."""


def _path(cls):
    """``module:qualname`` of a class, refused when it cannot be imported by
    that name (a class defined in a function)."""
    qualname = getattr(cls, "__qualname__", "")
    module = getattr(cls, "__module__", None)
    if not module or "<locals>" in qualname or not qualname:
        raise Uncacheable(f"{cls!r} is not importable by name")
    return f"{module}:{qualname}"


def canon(value, depth=0, memo=None):
    """``value`` as nested tuples of plain values that ``repr`` writes the same
    in every process; :class:`Uncacheable` when it has no such form.
    ``memo`` ({id: form}) reuses the forms of ops and types met before: a graph
    holds the same few many times.  Its values must outlive it."""
    if depth > 50:
        raise Uncacheable("too deeply nested")
    if memo is not None:
        known = memo.get(id(value))
        if known is not None:
            return known[1]
    if isinstance(value, _SCALARS):
        # bool before int: True and 1 differ; repr of a float round-trips exactly
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise Uncacheable("an object array")
        data = np.ascontiguousarray(value)
        return ("ndarray", value.dtype.str, value.shape,
                hashlib.sha256(data.view(np.uint8).reshape(-1)).hexdigest())
    if isinstance(value, np.generic):
        return ("npscalar", value.dtype.str, value.tobytes())
    if isinstance(value, np.dtype):
        return ("dtype", value.str, value.name)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(canon(v, depth + 1) for v in value)
    if isinstance(value, (frozenset, set)):
        return (type(value).__name__,) + tuple(sorted(repr(canon(v, depth + 1)) for v in value))
    if isinstance(value, dict):
        items = [(repr(canon(k, depth + 1)), canon(v, depth + 1)) for k, v in value.items()]
        return ("dict",) + tuple(sorted(items, key=lambda kv: kv[0]))
    if isinstance(value, type):
        return ("class", _path(value))
    if isinstance(value, SimpleNamespace):
        return ("namespace", canon(vars(value), depth + 1))
    state = _object_state(value)
    form = ("object", _path(type(value)), canon(state, depth + 1))
    if memo is not None:
        memo[id(value)] = (value, form)   # the value kept: its id stays its own
    return form


def _object_state(value):
    """The attributes that define an op, a type or a scalar op: its ``__props__``
    and whatever else the instance holds.  Graph objects and callables have no
    value form."""
    from symgraph.graph.basic import Apply, PropsValue, Variable

    if isinstance(value, (Variable, Apply)) or callable(value) and \
            not isinstance(value, PropsValue):
        raise Uncacheable(f"{type(value).__name__} {value!r} has no value form")
    if not isinstance(value, PropsValue):
        # plain value objects (a dataclass, a namedtuple...) are judged by their state
        if not hasattr(value, "__dict__") or type(value).__eq__ is object.__eq__:
            raise Uncacheable(f"{type(value).__name__} has no value form")
    state = dict(getattr(value, "__dict__", {}))
    if isinstance(value, PropsValue):
        # Private attributes of a value object are memos that its methods fill
        # as they are asked (``_fusable_memo``): its equality ignores them, and
        # so does the key.  What defines it is in its props and public attributes.
        state = {k: v for k, v in state.items() if not k.startswith("_")}
        for name in value.__props__:
            state[name] = getattr(value, name)
    # a doc string copied onto the instance says nothing about what it computes
    state.pop("__doc__", None)
    return state


def _trace(node):
    trace = getattr(node.tag, "trace", None)
    if trace is None:
        return None
    return (trace.filename, trace.lineno, trace.function, trace.text)


def _graph_tokens(fgraph, write):
    """Write the graph's parts, in a fixed order, through ``write(part)``."""
    from symgraph.compile.shared import SharedVariable
    from symgraph.graph.basic import Constant, io_toposort

    ref, memo = {}, {}
    for pos, var in enumerate(fgraph.inputs):
        if var.owner is not None:
            raise Uncacheable("an input is computed by a node")
        kind = "shared" if isinstance(var, SharedVariable) else "input"
        ref[var] = ("in", pos)
        write(("input", pos, kind, _path(type(var)), canon(var.type, memo=memo), var.name))

    def use(var):
        if var in ref:
            return ref[var]
        if isinstance(var, Constant):
            ref[var] = ("const", len(ref))
            write(("constant", ref[var], _path(type(var)), canon(var.type, memo=memo),
                   var.name, canon(var.data)))
            return ref[var]
        raise Uncacheable(f"the graph reads {var}, which is neither an input nor computed")

    for index, node in enumerate(io_toposort(fgraph.inputs, fgraph.outputs)):
        inputs = tuple(use(v) for v in node.inputs)
        write(("node", index, canon(node.op, memo=memo), inputs, _trace(node),
               tuple((_path(type(o)), canon(o.type, memo=memo), o.name)
                     for o in node.outputs)))
        for k, out in enumerate(node.outputs):
            ref[out] = ("out", index, k)
    write(("outputs", tuple(use(v) for v in fgraph.outputs)))
    write(("updates", tuple(sorted(fgraph.update_mapping.items()))))


def _config_tokens():
    from symgraph.config import config

    return tuple((info.name, repr(info.value)) for info in config.flags()
                 if info.name not in _FLAGS_NOT_IN_KEY)


def code_stamp():
    """A digest of symgraph's own files (each ``.py`` file of the package and
    each file of ``c_src/``: its name, size and modification time), computed
    once per process (``backends/native/source_stamp.py``, which the support
    library's recorded source hash shares)."""
    from symgraph.backends.native.source_stamp import source_stamp

    return source_stamp().digest


def _versions():
    from symgraph.backends.cpu.compiler import cpu_signature
    from symgraph.version import __version__

    return (WARM_FORMAT, __version__, sys.implementation.cache_tag, sys.version,
            np.__version__, cpu_signature(), code_stamp())


def warm_key(maker, fgraph):
    """The sha256 key of ``maker``'s function (``fgraph``: its graph before
    rewriting); :class:`Uncacheable` when it cannot have one."""
    from symgraph.compile.mode import Mode

    mode = maker.mode
    if type(mode) is not Mode:
        raise Uncacheable(f"{type(mode).__name__} adds checks around every node")
    digest = hashlib.sha256()

    def write(part):
        data = repr(part).encode("utf-8", "surrogatepass")
        digest.update(b"%d:" % len(data))
        digest.update(data)

    write(("versions",) + _versions())
    write(("mode", mode.linker, mode.optimizer, mode.including_tags(),
           mode.excluding_tags()))
    write(("config",) + _config_tokens())
    write(("function", len(maker.in_specs), maker.n_outputs,
           tuple(sorted(maker.update_index.items())),
           tuple(sorted(maker.state_index.items())),
           tuple(bool(spec.mutable) for spec in maker.in_specs)))
    _graph_tokens(fgraph, write)
    return digest.hexdigest()
