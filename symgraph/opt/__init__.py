"""The rewrite engine and its passes.

``optimize(fgraph, optimizer='fast_run', including=(), excluding=())`` is what
compilation calls; ``pipeline.py`` lists the phases in order; each pass module
(``merge``, ``constant_folding``, ``canonicalize``, ``canonicalize_shape``,
``stabilize``, ``specialize``) registers its rewrites with tags.  Write a new
rewrite with ``node_rewriter`` (or ``PatternRewriter``) and ``register``.
"""

from symgraph.opt.driver import (EquilibriumDriver, RewriteCycleError,  # noqa: F401
                                 RewriteError)
from symgraph.opt.registry import RewriteQueryError, register  # noqa: F401
from symgraph.opt.registry import registry as rewrite_registry  # noqa: F401
from symgraph.opt.rewriter import (GraphRewriter, NodeRewriter,  # noqa: F401
                                   PatternRewriter, graph_rewriter, node_rewriter)
from symgraph.opt.shape_feature import ShapeFeature  # noqa: F401
from symgraph.opt.pipeline import PHASES, optimize  # noqa: F401

__all__ = ["optimize", "PHASES", "node_rewriter", "graph_rewriter", "PatternRewriter",
           "NodeRewriter", "GraphRewriter", "register", "rewrite_registry", "ShapeFeature",
           "EquilibriumDriver", "RewriteError", "RewriteCycleError", "RewriteQueryError"]
