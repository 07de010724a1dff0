"""The units of the rewrite engine: node rewriters, pattern rewriters, graph rewriters.

A *node rewriter* is a small pure function ``fn(fgraph, node)`` that looks at
one Apply node and returns

* ``None`` (or False): nothing to do;
* a list with one replacement variable per node output (``None`` keeps that
  output);
* a dict ``{old_variable: new_variable}``.

It never edits the graph itself: the driver (``opt.driver``) makes the
replacements through ``fgraph.replace(..., reason=<rewrite name>)``, which
records the reason and carries the user's source line over.

``tracks`` says which nodes a rewrite wants to see, so that the driver only
calls it on those.  An entry of ``tracks`` may be:

* an Op class (``DimShuffle``): nodes whose op is an instance of it;
* an Op instance: nodes whose op equals it;
* a ScalarOp class or instance (``scalar_basic.Add``), or a pair
  ``(Elemwise, scalar_basic.Add)``: Elemwise nodes around that scalar op;
* a user function made by ``ops.math`` (``T.log``): the Op it applies;
* a string ``"module.path:ClassName"``: an op class resolved when a graph is
  optimized, so that a rewrite may track an op that does not exist yet (the
  rewrite is inactive while the import fails);
* any other callable: a predicate ``pred(node) -> bool``.

``tracks=None`` means every node.
"""

import importlib
import inspect

from symgraph.graph.basic import Op
from symgraph.ops.scalar import ScalarOp


class _Track:
    """One resolved entry of ``tracks``: an index key and a node predicate.

    ``key`` is the op class the node's op must be an instance of (None: any
    op); ``check`` refines the match.
    """

    __slots__ = ("key", "check")

    def __init__(self, key, check):
        self.key = key
        self.check = check


def _scalar_matches(scalar_op, spec):
    if inspect.isclass(spec):
        return isinstance(scalar_op, spec)
    return scalar_op == spec


def _elemwise_track(spec):
    from symgraph.ops.elemwise import Elemwise

    return _Track(Elemwise, lambda node: _scalar_matches(node.op.scalar_op, spec))


def resolve_track(spec):
    """Turn one ``tracks`` entry into a _Track, or None when it names a missing op."""
    if isinstance(spec, str):
        module_name, _, attr = spec.partition(":")
        try:
            spec = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            return None
    if isinstance(spec, tuple):
        outer, inner = spec
        if not (inspect.isclass(outer) and issubclass(outer, Op)):
            raise TypeError(f"tracks: in {spec!r} the first item must be an Op class")
        return _Track(outer, lambda node: _scalar_matches(
            getattr(node.op, "scalar_op", None), inner))
    if inspect.isclass(spec):
        if issubclass(spec, ScalarOp):
            return _elemwise_track(spec)
        if issubclass(spec, Op):
            return _Track(spec, lambda node: True)
        raise TypeError(f"tracks: {spec!r} is neither an Op nor a ScalarOp class")
    if isinstance(spec, ScalarOp):
        return _elemwise_track(spec)
    if isinstance(spec, Op):
        return _Track(type(spec), lambda node: node.op == spec)
    if isinstance(getattr(spec, "op", None), Op):  # a user function from ops.math
        return resolve_track(spec.op)
    if callable(spec):
        return _Track(None, spec)
    raise TypeError(f"tracks: cannot track {spec!r}; give an Op class or instance, a "
                    f"ScalarOp, '(Elemwise, ScalarOpClass)', a 'module:Class' string "
                    f"or a predicate")


class NodeRewriter:
    """A named function ``fn(fgraph, node)`` that proposes replacements.

    Build it with the ``node_rewriter`` decorator.  Calling the object calls
    the function (handy in tests); the driver uses ``transform``.
    """

    def __init__(self, fn, tracks, name=None):
        self.fn = fn
        self.tracks = None if tracks is None else tuple(tracks)
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__

    def transform(self, fgraph, node):
        """The rewrite's proposal for ``node`` (None, list or dict)."""
        return self.fn(fgraph, node)

    def __call__(self, fgraph, node):
        return self.transform(fgraph, node)

    def resolved_tracks(self):
        """The _Track list (None: every node); names of missing ops drop out."""
        if self.tracks is None:
            return None
        return [t for t in (resolve_track(s) for s in self.tracks) if t is not None]

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"


def node_rewriter(tracks, name=None):
    """Decorator: make ``fn(fgraph, node)`` a NodeRewriter tracking ``tracks``.

    >>> @node_rewriter([scalar_math.Log])
    ... def local_log_exp(fgraph, node): ...
    """
    if tracks is not None and not isinstance(tracks, (list, tuple)):
        tracks = [tracks]

    def decorate(fn):
        return NodeRewriter(fn, tracks, name=name)

    return decorate


class GraphRewriter:
    """A whole-graph pass ``fn(fgraph) -> number of changes`` (e.g. merge).

    The function edits the graph through the driver's ``replace_validated``
    and returns how many replacements it made (0 or None: nothing changed).
    A function with a ``verbose`` parameter is told whether to print what
    it replaces.
    """

    def __init__(self, fn, name=None):
        self.fn = fn
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__
        self._takes_verbose = "verbose" in inspect.signature(fn).parameters

    def apply(self, fgraph, verbose=False):
        if self._takes_verbose:
            return self.fn(fgraph, verbose=verbose) or 0
        return self.fn(fgraph) or 0

    __call__ = apply

    def __repr__(self):
        return f"<GraphRewriter {self.name}>"


def graph_rewriter(fn=None, name=None):
    """Decorator: make ``fn(fgraph)`` a GraphRewriter (``@graph_rewriter`` or
    ``@graph_rewriter(name=...)``)."""
    if fn is None:
        return lambda f: GraphRewriter(f, name=name)
    return GraphRewriter(fn, name=name)


# ---------------------------------------------------------------------------
# Patterns


class PatternRewriter(NodeRewriter):
    """A rewrite written as data: ``in_pattern`` -> ``out_pattern``.

    ``in_pattern`` is a nested tuple ``(op_spec, arg, ...)``: ``op_spec`` is
    anything ``tracks`` accepts except a predicate, and each ``arg`` is a
    nested pattern, a variable name (a string: the same name must match the
    same variable) or a number (a constant whose elements all equal it, seen
    through broadcasting DimShuffles).  Two-input commutative scalar ops
    (add, mul) match in either order.

    ``out_pattern`` is a variable name, or ``(fn, arg, ...)`` where ``fn`` is
    a callable building a variable (``T.log1p``, an Op instance) applied to the
    built args; numbers stay Python numbers (they promote weakly).  A callable
    ``out_pattern`` receives the dict of bindings instead.

    ``constraints`` maps a variable name to ``pred(var) -> bool``.  Unless
    ``allow_multiple_clients``, inner matched nodes must feed only the match
    (else the rewrite would compute them twice).  The result is cast to the
    replaced output's dtype and broadcast to its shape when needed.
    """

    def __init__(self, in_pattern, out_pattern, name=None, constraints=None,
                 allow_multiple_clients=False):
        if not isinstance(in_pattern, tuple) or not in_pattern:
            raise TypeError("PatternRewriter: in_pattern must be a tuple (op, args...)")
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.constraints = dict(constraints or {})
        self.allow_multiple_clients = allow_multiple_clients
        name = name or f"pattern {_pattern_str(in_pattern)} -> {_pattern_str(out_pattern)}"
        super().__init__(self._rewrite, [in_pattern[0]], name=name)
        self.__doc__ = f"Rewrites {_pattern_str(in_pattern)} to {_pattern_str(out_pattern)}."

    def _rewrite(self, fgraph, node):
        from symgraph.opt.utils import conform

        if len(node.outputs) != 1:
            return None
        bindings = {}
        if not self._match(fgraph, node.outputs[0], self.in_pattern, bindings, root=True):
            return None
        for var_name, pred in self.constraints.items():
            if var_name in bindings and not pred(bindings[var_name]):
                return None
        new = self._build(self.out_pattern, bindings)
        new = conform(new, node.outputs[0], fill_from=node.inputs)
        return None if new is None else [new]

    def _match(self, fgraph, var, pattern, bindings, root=False):
        from symgraph.opt.utils import scalar_constant_value

        if isinstance(pattern, str):
            if pattern in bindings:
                return bindings[pattern] is var
            bindings[pattern] = var
            return True
        if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
            value = scalar_constant_value(var)
            return value is not None and value == pattern
        node = var.owner
        if node is None or len(node.outputs) != 1:
            return False
        track = _pattern_track(pattern[0])
        if track is None or not isinstance(node.op, track.key or object) or \
                not track.check(node):
            return False
        if not root and not self.allow_multiple_clients and \
                len(fgraph.clients.get(var, ())) > 1:
            return False
        args = pattern[1:]
        if len(args) != len(node.inputs):
            return False
        orders = [list(node.inputs)]
        scalar_op = getattr(node.op, "scalar_op", None)
        if len(args) == 2 and getattr(scalar_op, "commutative", False):
            orders.append(list(reversed(node.inputs)))
        for inputs in orders:
            trial = dict(bindings)
            if all(self._match(fgraph, i, p, trial) for i, p in zip(inputs, args)):
                bindings.clear()
                bindings.update(trial)
                return True
        return False

    def _build(self, pattern, bindings):
        if isinstance(pattern, str):
            return bindings[pattern]
        if isinstance(pattern, tuple):
            fn, *args = pattern
            return fn(*[self._build(a, bindings) for a in args])
        if callable(pattern):
            return pattern(bindings)
        return pattern  # a number: left to the building function's promotion


_PATTERN_TRACKS = {}


def _pattern_track(spec):
    # Resolved once per spec: patterns are matched on every visited node.
    key = spec if not isinstance(spec, list) else tuple(spec)
    try:
        return _PATTERN_TRACKS[key]
    except KeyError:
        track = resolve_track(spec)
        if track is not None:  # a missing op may appear later: ask again then
            _PATTERN_TRACKS[key] = track
        return track
    except TypeError:  # an unhashable spec
        return resolve_track(spec)


def _pattern_str(pattern):
    if isinstance(pattern, tuple):
        head = pattern[0]
        head = getattr(head, "__name__", None) or str(head)
        return f"{head}({', '.join(_pattern_str(p) for p in pattern[1:])})"
    if callable(pattern):
        return getattr(pattern, "__name__", "fn")
    return str(pattern)
