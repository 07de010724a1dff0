"""Modes: which rewrites run and how the graph is executed.

A Mode is a value: a linker name, an optimizer name and the extra tags to
include or exclude.  The tags become a rewrite query only when a function is
compiled (``symgraph.opt.optimize``), never at import time.
"""

from symgraph.config import config

_OPTIMIZERS = ("fast_run", "fast_compile", "merge", "None", None)


class Mode:
    """How function() compiles: ``Mode(linker='py', optimizer='fast_run')``.

    ``optimizer=None`` or ``'None'`` applies no rewrite; ``'default'`` and
    ``linker=None`` take the config flags.
    """

    def __init__(self, linker=None, optimizer="default", including=(), excluding=()):
        self.linker = linker if linker is not None else config.linker
        if optimizer == "default":
            optimizer = config.optimizer
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; use one of "
                             f"fast_run, fast_compile, merge, None")
        self.optimizer = None if optimizer in (None, "None") else optimizer
        self.include_tags = tuple(including)
        self.exclude_tags = tuple(excluding)
        self.require_tags = ()

    def including_tags(self):
        """This mode's included tags plus those of config.optimizer_including."""
        extra = tuple(t for t in config.optimizer_including.split(":") if t)
        return self.include_tags + extra

    def excluding_tags(self):
        """This mode's excluded tags plus those of config.optimizer_excluding, plus
        the names of the rewrites that lack a tag ``requiring`` asked for."""
        extra = tuple(t for t in config.optimizer_excluding.split(":") if t)
        return self.exclude_tags + extra + self._not_required()

    def _not_required(self):
        # A requirement is a filter on the selected rewrites: those without every
        # required tag are excluded by name, which the rewrite query accepts.
        required = getattr(self, "require_tags", ()) + \
            tuple(t for t in config.optimizer_requiring.split(":") if t)
        if not required:
            return ()
        from symgraph.opt import pipeline  # noqa: F401  (every rewrite registered)
        from symgraph.opt.registry import RewriteQueryError, registry

        carried = registry.tags()
        for tag in required:
            if tag not in carried:
                raise RewriteQueryError(f"cannot require {tag!r}: no rewrite has this tag. "
                                        f"Known tags: {', '.join(sorted(carried))}.")
        return tuple(e.name for e in registry.entries() if not set(required) <= e.tags)

    def requiring(self, *tags):
        """A copy of this mode that applies only rewrites carrying every tag in
        ``tags`` (among those its optimizer and ``including`` select)."""
        return self._with(require_tags=getattr(self, "require_tags", ()) + tags)

    def including(self, *tags):
        """A copy of this mode that also applies the rewrites tagged ``tags``."""
        return self._with(include_tags=self.include_tags + tags)

    def excluding(self, *tags):
        """A copy of this mode without the rewrites tagged (or named) ``tags``."""
        return self._with(exclude_tags=self.exclude_tags + tags)

    def _with(self, **changes):
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def __repr__(self):
        required = f", requiring={self.require_tags!r}" if self.require_tags else ""
        return (f"{type(self).__name__}(linker={self.linker!r}, optimizer={self.optimizer!r}, "
                f"including={self.include_tags!r}, excluding={self.exclude_tags!r}{required})")


class NanGuardMode(Mode):
    """A mode that stops at the first node producing NaN, Inf or huge values
    (as flagged by ``nan_guard.*``), naming the node and the user's line."""

    def __init__(self, nan_is_error=None, inf_is_error=None, big_is_error=None, **kwargs):
        super().__init__(**kwargs)
        self.nan_is_error = config.nan_guard.nan_is_error if nan_is_error is None else nan_is_error
        self.inf_is_error = config.nan_guard.inf_is_error if inf_is_error is None else inf_is_error
        self.big_is_error = config.nan_guard.big_is_error if big_is_error is None else big_is_error


class DebugMode(Mode):
    """A mode that checks each node's result against its declared type and
    view/destroy maps, and the optimized graph's outputs against the
    unoptimized graph's."""


def get_mode(mode):
    """A Mode from None (config.mode), a name, or a Mode."""
    if isinstance(mode, Mode):
        return mode
    name = mode if mode is not None else config.mode
    if name == "FAST_RUN":
        return Mode()  # the optimizer flag (default fast_run) decides
    if name == "FAST_COMPILE":
        return Mode(optimizer="fast_compile", linker="py")
    if name == "NanGuardMode":
        return NanGuardMode()
    if name == "DebugMode":
        return DebugMode(optimizer="fast_run")
    raise ValueError(f"unknown mode {name!r}; use one of FAST_RUN, FAST_COMPILE, "
                     f"DebugMode, NanGuardMode, or a Mode instance")


FAST_RUN = "FAST_RUN"
FAST_COMPILE = "FAST_COMPILE"
