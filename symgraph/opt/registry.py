"""The rewrite registry: every rewrite with its tags and its phase.

Registering only records the rewrite: nothing is selected or ordered at import
time.  A mode becomes a *query* (tags to include, tags or names to exclude)
when a graph is optimized (``opt.pipeline.optimize``), and the phases run in
the order ``opt/pipeline.py`` lists them.

Query rules:

* a rewrite is selected when one of its tags (or its name) is included and
  none of its tags (nor its name) is excluded;
* including a tag that no rewrite carries is an error that lists the tags
  there are (with a reason for the tags of features not built in, such as
  ``cudnn``); excluding an unknown tag or name is an error too, so that a typo
  never silently does nothing;
* a rewrite's phase is also one of its tags.
"""

from dataclasses import dataclass


class RewriteQueryError(ValueError):
    """An include or exclude item that names no tag and no rewrite."""


# Tags that rewrites of later issues (or optional features) will carry.
# Excluding them is always allowed; including one that no rewrite carries
# is an error that gives the reason below.
DECLARED_TAGS = {
    "fast_run": "the default set of rewrites",
    "fast_compile": "the cheap rewrites run by FAST_COMPILE",
    "unsafe": "rewrites that may change results for NaN, Inf or zero inputs",
    "gpu": "rewrites that move nodes to the GPU (device=cuda)",
    "cudnn": "cuDNN rewrites are not available: no cuDNN rewrite is registered in this "
             "build (they need the GPU support, symgraph.gpu, and a cuDNN library)",
    "inplace": "in-place rewrites",
    "fusion": "element-wise fusion",
}


@dataclass
class Entry:
    """A registered rewrite: the rewriter, its name, tags and phase."""

    rewriter: object
    name: str
    tags: frozenset
    phase: str
    position: int

    @property
    def is_graph_rewriter(self):
        from symgraph.opt.rewriter import GraphRewriter

        return isinstance(self.rewriter, GraphRewriter)


class RewriteRegistry:
    """Rewrites by name, with tags and a phase; selected by ``select``."""

    def __init__(self):
        self._entries = {}
        self._declared = dict(DECLARED_TAGS)

    def register(self, rewriter, *tags, phase, name=None):
        """Record ``rewriter`` under ``tags`` in ``phase``; returns the rewriter.

        The phase name is added to the tags.  Registering the same rewriter
        again under the same name is a no-op; another rewriter under a taken
        name is an error.
        """
        name = name or rewriter.name
        if not isinstance(phase, str) or not phase:
            raise TypeError(f"register({name}): phase must be a phase name from "
                            f"opt/pipeline.py, got {phase!r}")
        old = self._entries.get(name)
        if old is not None:
            if old.rewriter is rewriter:
                return rewriter
            raise ValueError(f"a rewrite named {name!r} is already registered "
                             f"(in phase {old.phase}); choose another name")
        self._entries[name] = Entry(rewriter, name, frozenset(tags) | {phase}, phase,
                                    len(self._entries))
        return rewriter

    def declare_tag(self, tag, doc):
        """Make ``tag`` known before any rewrite carries it (see DECLARED_TAGS)."""
        self._declared.setdefault(tag, doc)

    def entries(self):
        """All entries, in registration order."""
        return sorted(self._entries.values(), key=lambda e: e.position)

    def __getitem__(self, name):
        return self._entries[name].rewriter

    def __contains__(self, name):
        return name in self._entries

    def tags(self):
        """Every tag some rewrite carries."""
        return set().union(*(e.tags for e in self._entries.values()))

    def select(self, include=(), exclude=(), extra_known=()):
        """The entries a query selects, in registration order.

        ``extra_known`` are further tags that may be excluded (the phase names).
        """
        include, exclude = _split(include), _split(exclude)
        carried = self.tags()
        for item in include:
            if item not in carried and item not in self._entries:
                raise RewriteQueryError(self._unknown_message(item, "include", carried))
        known = carried | set(self._declared) | set(extra_known)
        for item in exclude:
            if item not in known and item not in self._entries:
                raise RewriteQueryError(self._unknown_message(item, "exclude", carried))
        include, exclude = set(include), set(exclude)
        return [e for e in self.entries()
                if (e.name in include or e.tags & include)
                and e.name not in exclude and not (e.tags & exclude)]

    def _unknown_message(self, item, verb, carried):
        reason = self._declared.get(item)
        if reason is not None and item not in carried:
            head = f"cannot {verb} {item!r}: no rewrite has this tag. {reason}."
        else:
            head = f"cannot {verb} {item!r}: it is neither a rewrite tag nor a rewrite name."
        return (f"{head} Known tags: {', '.join(sorted(carried))}. "
                f"(Rewrite names are accepted too: symgraph.opt.rewrite_registry.entries() lists them.)")


def _split(items):
    """Tags from a colon-separated string or a sequence of them (empties dropped)."""
    if items is None:
        return []
    if isinstance(items, str):
        items = items.split(":")
    out = []
    for item in items:
        out.extend(t.strip() for t in str(item).split(":") if t.strip())
    return out


#: The registry every pass module registers into.
registry = RewriteRegistry()


def register(rewriter, *tags, phase, name=None):
    """Register ``rewriter`` in the default registry (see RewriteRegistry.register)."""
    return registry.register(rewriter, *tags, phase=phase, name=name)
