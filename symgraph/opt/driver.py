"""The equilibrium driver: apply rewrites until the graph stops changing.

Each pass walks the nodes in topological order and offers each node to the
node rewriters that track it (in registration order); the first that proposes
a replacement wins and the walk moves on.  After the walk, the graph rewriters
(merge) run.  A pass without any change ends the phase.

A set of rewrites that undo each other would loop forever, so the driver is
bounded: at most ``max_passes`` passes and a number of replacements
proportional to the graph's size.  Hitting the bound is a bug in the rewrites:
it raises RewriteCycleError naming the rewrites that kept firing when
``config.on_opt_error`` is ``raise``, and warns otherwise (the graph is valid
either way; it is just not at a fixed point).

A rewrite that raises is handled by ``config.on_opt_error``: ``raise``
re-raises it as a RewriteError naming the rewrite and the node, ``warn`` logs
a warning and skips that proposal, ``ignore`` skips it silently.
"""

import logging
from collections import Counter

from symgraph.config import config
from symgraph.graph.fg import Feature, History, InconsistencyError

_logger = logging.getLogger("symgraph.opt")


class RewriteError(Exception):
    """A rewrite raised, or proposed a replacement of the wrong type."""


class RewriteCycleError(RuntimeError):
    """The rewrites of a phase did not reach a fixed point within the bound."""


class RewriterIndex:
    """Node rewriters indexed by the op class they track, for fast lookup."""

    def __init__(self, rewriters):
        self._by_class = {}
        self._generic = []  # (position, rewriter, check or None)
        for pos, rw in enumerate(rewriters):
            tracks = rw.resolved_tracks()
            if tracks is None:
                self._generic.append((pos, rw, None))
                continue
            for track in tracks:
                if track.key is None:
                    self._generic.append((pos, rw, track.check))
                else:
                    self._by_class.setdefault(track.key, []).append((pos, rw, track.check))
        self._cache = {}

    def candidates(self, node):
        """The rewriters whose tracks match ``node``, in registration order."""
        op_type = type(node.op)
        entries = self._cache.get(op_type)
        if entries is None:
            entries = list(self._generic)
            for cls in op_type.__mro__:
                entries.extend(self._by_class.get(cls, ()))
            entries.sort(key=lambda e: e[0])
            self._cache[op_type] = entries
        seen = set()
        for _, rw, check in entries:
            if id(rw) in seen:
                continue
            if check is None or check(node):
                seen.add(id(rw))
                yield rw


def handle_rewrite_error(rewriter_name, node, exc):
    """Apply ``config.on_opt_error`` to an exception raised by a rewrite."""
    message = f"rewrite {rewriter_name!r} failed on {node}: {type(exc).__name__}: {exc}"
    trace = getattr(getattr(node, "tag", None), "trace", None)
    if trace is not None:
        message += f"\n  the node was built at {trace}"
    mode = config.on_opt_error
    if mode == "raise":
        raise RewriteError(message) from exc
    if mode == "warn":
        _logger.warning("%s; the rewrite was skipped (set on_opt_error=raise to stop "
                        "here)", message)


def replacement_pairs(node, proposal, rewriter_name):
    """Normalize a rewrite's proposal to a list of ``(old, new)`` pairs."""
    if isinstance(proposal, dict):
        pairs = list(proposal.items())
    elif isinstance(proposal, (list, tuple)):
        if len(proposal) != len(node.outputs):
            raise TypeError(f"rewrite {rewriter_name!r} returned {len(proposal)} "
                            f"replacements for the {len(node.outputs)} outputs of {node}")
        pairs = list(zip(node.outputs, proposal))
    else:
        raise TypeError(f"rewrite {rewriter_name!r} returned {type(proposal).__name__}; "
                        f"a rewrite returns None, a list (one variable per output) "
                        f"or a dict {{old: new}}")
    return [(old, new) for old, new in pairs if new is not None and old is not new]


def check_types(pairs, rewriter_name):
    """Raise TypeError unless each new variable can stand for the old one."""
    for old, new in pairs:
        if old.type != new.type and old.type.convert_variable(new) is None:
            raise TypeError(f"rewrite {rewriter_name!r} would replace {old} of type "
                            f"{old.type} by {new} of type {new.type}; a replacement must "
                            f"keep the dtype and rank (cast or broadcast it)")


class DestroyerCount(Feature):
    """Counts the nodes that destroy an input, kept up to date on every change.

    Validating with the destroy handler walks the whole graph; while no node
    destroys anything (every phase before ``inplace``) no replacement can make
    the graph inconsistent, so the driver skips it: compiling stays linear in
    the graph's size instead of quadratic.
    """

    def on_attach(self, fgraph):
        self.count = sum(1 for n in fgraph.apply_nodes if _destroys(n))

    def on_import(self, fgraph, node, reason):
        self.count += _destroys(node)

    def on_prune(self, fgraph, node, reason):
        self.count -= _destroys(node)


def _destroys(node):
    return bool(getattr(node.op, "destroy_map", None))


def replace_validated(fgraph, pairs, reason, verbose=False):
    """Make the replacements ``pairs``; False (and nothing changed) when a
    feature rejects them (the destroy handler, through InconsistencyError).

    Without a destroy handler, plain ``fgraph.replace`` calls.  With one, the
    replacements are validated and reverted on InconsistencyError (as
    ``replace_all_validate``, with the driver's own verbose message); the
    validation is skipped while no node destroys anything (DestroyerCount).
    """
    pairs = [(old, new) for old, new in pairs if old in fgraph.variables]
    if not pairs:
        return False
    if verbose:
        for old, new in pairs:
            shown = new.owner if new.owner is not None else new
            print(f"rewrite {reason}: {old.owner if old.owner is not None else old} "
                  f"-> {shown}")
    if getattr(fgraph, "destroy_handler", None) is None:
        for old, new in pairs:
            fgraph.replace(old, new, reason=reason, verbose=False)
        return True
    history = fgraph.ensure_feature(History)
    destroyers = fgraph.ensure_feature(DestroyerCount)
    checkpoint = history.checkpoint()
    try:
        for old, new in pairs:
            fgraph.replace(old, new, reason=reason, verbose=False)
        if destroyers.count:
            fgraph.validate()
    except InconsistencyError:
        history.revert(checkpoint)
        return False
    return True


def apply_node_rewriter(fgraph, rewriter, node, verbose=False):
    """Offer ``node`` to ``rewriter``; True when the graph changed."""
    try:
        proposal = rewriter.transform(fgraph, node)
        if not proposal:
            return False
        pairs = replacement_pairs(node, proposal, rewriter.name)
        check_types(pairs, rewriter.name)
    except Exception as exc:  # noqa: BLE001 - on_opt_error decides
        handle_rewrite_error(rewriter.name, node, exc)
        return False
    try:
        return replace_validated(fgraph, pairs, rewriter.name, verbose)
    except Exception as exc:  # noqa: BLE001 - e.g. a replacement needing a missing input
        handle_rewrite_error(rewriter.name, node, exc)
        return False


class EquilibriumDriver:
    """Runs node rewriters (and graph rewriters after each pass) to a fixed point.

    ``name`` (the phase) appears in messages; ``max_passes`` bounds the passes
    and ``changes_per_node`` the replacements per node of the initial graph.
    """

    def __init__(self, node_rewriters=(), graph_rewriters=(), name="rewrites",
                 max_passes=100, changes_per_node=20):
        self.node_rewriters = list(node_rewriters)
        self.graph_rewriters = list(graph_rewriters)
        self.name = name
        self.max_passes = max_passes
        self.changes_per_node = changes_per_node

    def run(self, fgraph, verbose=False, counts=None):
        """Rewrite ``fgraph`` in place; returns a Counter {rewrite name: times applied}."""
        counts = Counter() if counts is None else counts
        index = RewriterIndex(self.node_rewriters)
        max_changes = 100 + self.changes_per_node * len(fgraph.apply_nodes)
        total = 0
        history = []  # the Counter of each pass, to name the rewrites of a cycle
        for _ in range(self.max_passes):
            fired = self._one_pass(fgraph, index, verbose)
            history.append(fired)
            counts.update(fired)
            changes = sum(fired.values())
            total += changes
            if changes == 0:
                return counts
            if total > max_changes:
                break
        self._not_converged(history, total)
        return counts

    def _one_pass(self, fgraph, index, verbose):
        fired = Counter()
        for node in fgraph.toposort():
            if node not in fgraph.apply_nodes:
                continue  # replaced earlier in this pass
            for rewriter in index.candidates(node):
                if apply_node_rewriter(fgraph, rewriter, node, verbose):
                    fired[rewriter.name] += 1
                    break
        for rewriter in self.graph_rewriters:
            try:
                changed = rewriter.apply(fgraph, verbose=verbose)
            except Exception as exc:  # noqa: BLE001 - on_opt_error decides
                handle_rewrite_error(rewriter.name, fgraph, exc)
                changed = 0
            if changed:
                fired[rewriter.name] += int(changed)
        return fired

    def _not_converged(self, history, total):
        recent = Counter()
        for fired in history[-max(1, len(history) // 2):]:
            recent.update(fired)
        culprits = ", ".join(f"{name} ({n} times)" for name, n in recent.most_common(8))
        message = (f"phase {self.name!r} did not reach a fixed point after {len(history)} "
                   f"passes and {total} replacements: rewrites that undo each other? "
                   f"Rewrites that kept firing: {culprits}. Exclude one of them with "
                   f"optimizer_excluding=<name> while it is fixed.")
        if config.on_opt_error == "raise":
            raise RewriteCycleError(message)
        if config.on_opt_error == "warn":
            _logger.warning(message)
