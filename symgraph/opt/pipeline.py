"""The rewrite pipeline: the phases, in the order they run, and ``optimize``.

This is the one place that says what runs when.  Adding a phase is one line in
``PHASES`` (plus the import of its module below); a rewrite is registered in
its module with ``register(rewriter, *tags, phase=<phase name>)``.

Every phase runs its selected rewrites to a fixed point (``EquilibriumDriver``).
A phase's *helpers* are phases whose selected rewrites also run inside it:
constant folding and merge clean up after every canonicalize/stabilize/
specialize pass, so that, e.g., ``2 * x * 3`` folds its constants and equal
subexpressions that a rewrite created merge before the next pass; the later
phases also run the canonicalizations.
"""

import time
from collections import Counter
from dataclasses import dataclass

# Every pass module, imported explicitly so that registration never depends on
# which module someone happened to import first.
from symgraph.opt import merge, constant_folding  # noqa: F401
from symgraph.opt import canonicalize, canonicalize_shape, canonicalize_algebra  # noqa: F401
from symgraph.opt import canonicalize_fill, canonicalize_subtensor  # noqa: F401
from symgraph.opt import stabilize, specialize  # noqa: F401
from symgraph.opt import stabilize_nnet  # noqa: F401
from symgraph.opt import stabilize_softmax  # noqa: F401
from symgraph.opt import conv_concrete  # noqa: F401
from symgraph.opt import pool_rewrites  # noqa: F401
from symgraph.opt import fusion  # noqa: F401
from symgraph.opt import blas_rewrites  # noqa: F401
from symgraph.opt import fuse_reduce  # noqa: F401
from symgraph.opt import gpu_placement  # noqa: F401
from symgraph.opt import inplace  # noqa: F401
from symgraph.opt.driver import EquilibriumDriver
from symgraph.opt.registry import RewriteQueryError, _split, registry


@dataclass(frozen=True)
class Phase:
    """A named step of the pipeline; ``helpers`` name phases that run inside it."""

    name: str
    helpers: tuple = ()
    doc: str = ""


_CLEANUP = ("constant_folding", "merge")
# Later phases keep the graph canonical: their rewrites build forms such as
# -(-x) that canonicalize would simplify.
_CANONICAL = ("canonicalize",) + _CLEANUP

PHASES = (
    Phase("merge", (), "merge equal constants and common subexpressions"),
    Phase("constant_folding", ("merge",), "compute nodes whose inputs are all constants"),
    Phase("canonicalize", _CLEANUP, "one canonical form: neutral elements, n-ary add/mul, "
                                     "shapes, dimshuffles, casts"),
    Phase("stabilize", _CANONICAL, "numerically stable forms: log1p, expm1, softplus"),
    Phase("specialize", _CANONICAL, "faster forms: x**2 -> sqr(x), ..."),
    Phase("device", _CLEANUP, "move nodes to the GPU and cuDNN-style ops"),
    Phase("fusion", ("merge",), "fuse element-wise subgraphs into one loop"),
    # After fusion, so that a fused composite moves as one kernel.
    Phase("gpu", ("merge",), "move nodes to the GPU (device=cuda): transfers at the edges"),
    # Last: in-place ops constrain the schedule, so nothing may rewrite after them.
    Phase("inplace", (), "let ops overwrite inputs nobody needs any more"),
)

#: Future phases (commented out above) may be excluded already, as tags.
PLANNED_PHASES = ("device", "fusion", "inplace")

#: The tags each ``optimizer`` value includes.
OPTIMIZERS = {
    "fast_run": ("fast_run",),
    "fast_compile": ("fast_compile",),
    "merge": ("merge",),
    None: (),
}


def phase_names():
    """The names of the phases, in order."""
    return [p.name for p in PHASES]


def _check_phases(entries):
    names = set(phase_names())
    for entry in entries:
        if entry.phase not in names:
            raise RewriteQueryError(
                f"rewrite {entry.name!r} is registered in phase {entry.phase!r}, which "
                f"opt/pipeline.py does not list; phases: {', '.join(phase_names())}")


def optimize(fgraph, optimizer="fast_run", including=(), excluding=(), verbose=None):
    """Rewrite ``fgraph`` in place with the rewrites the query selects.

    ``optimizer``: ``fast_run`` (every rewrite tagged fast_run),
    ``fast_compile`` (merge, constant folding and the cheap canonicalizations),
    ``merge`` (only merge) or None/'None' (nothing but what ``including`` asks).
    ``including``/``excluding``: tags or rewrite names, as a sequence or a
    colon-separated string (the Mode merges the ``optimizer_including`` /
    ``optimizer_excluding`` flags into them).  ``verbose`` (default
    ``config.optimizer_verbose``) prints each rewrite applied and the node it
    replaced.

    Returns a Counter {rewrite name: times applied}; ``.phase_seconds`` holds
    the time spent in each phase.
    """
    from symgraph.config import config

    if optimizer == "None":
        optimizer = None
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of fast_run, "
                         f"fast_compile, merge, None")
    if verbose is None:
        verbose = config.optimizer_verbose
    include = list(OPTIMIZERS[optimizer]) + _split(including)
    selected = registry.select(include, excluding,
                               extra_known=phase_names() + list(PLANNED_PHASES))
    _check_phases(selected)
    counts = Counter()
    counts.phase_seconds = {}
    for phase in PHASES:
        own = [e for e in selected if e.phase == phase.name]
        if not own:
            continue
        members = own + [e for e in selected if e.phase in phase.helpers]
        members.sort(key=lambda e: e.position)
        driver = EquilibriumDriver(
            [e.rewriter for e in members if not e.is_graph_rewriter],
            [e.rewriter for e in members if e.is_graph_rewriter],
            name=phase.name)
        start = time.perf_counter()
        driver.run(fgraph, verbose=verbose, counts=counts)
        counts.phase_seconds[phase.name] = time.perf_counter() - start
    return counts
