"""Abstract convolutions to concrete ones (tag ``conv_dnn``, phase ``device``).

``AbstractConv`` becomes ``DnnConv`` with ``algo = dnn.conv.algo_fwd``,
``AbstractConvGradInputs`` becomes ``DnnConvGradI`` (``algo_bwd_data``) and
``AbstractConvGradWeights`` becomes ``DnnConvGradW`` (``algo_bwd_filter``);
the precision is ``dnn.conv.precision`` resolved for the node's dtype
(``ops/dnn_conv.py: resolve_precision``).  The flags are read when a graph is
optimized, so ``change_flags`` around ``function()`` takes effect.

Where the graph already shows that the flag's algorithm cannot run the node
(``static_fallback``: Winograd with a stride, a dilation or non-3x3 filters),
the concrete op gets the fallback as ``algo`` and the flag's value as
``requested``, so that debugprint says so before anything runs.
"""

from symgraph.graph.basic import Apply
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter

__all__ = ["local_conv_dnn", "local_conv_gradinputs_dnn", "local_conv_gradweights_dnn",
           "concrete_op"]

#: The flag that chooses the algorithm of each direction.
ALGO_FLAGS = {"fwd": "dnn.conv.algo_fwd", "bwd_data": "dnn.conv.algo_bwd_data",
              "bwd_filter": "dnn.conv.algo_bwd_filter"}


def concrete_op(node, cls):
    """The concrete op of class ``cls`` for the abstract ``node``, from the flags."""
    from symgraph.config import config
    from symgraph.ops.dnn_conv import resolve_precision, static_fallback

    op = node.op
    algo = config.get(ALGO_FLAGS[cls.direction])
    precision = resolve_precision(config.dnn.conv.precision, node.outputs[0].dtype)
    concrete = cls.from_abstract(op, algo, precision)
    used, _reason = static_fallback(concrete, node, algo)
    if used != algo:
        concrete = cls.from_abstract(op, used, precision, requested=algo)
    return concrete


def _replace(node, cls_name):
    from symgraph.ops import dnn_conv

    op = concrete_op(node, getattr(dnn_conv, cls_name))
    # The abstract node's inputs as they are (its make_node already cast them
    # and declared the shape hints); the same output type.
    new = Apply(op, list(node.inputs), [node.outputs[0].type()])
    return [new.outputs[0]]


@node_rewriter(["symgraph.ops.conv:AbstractConv"])
def local_conv_dnn(fgraph, node):
    """``AbstractConv -> DnnConv(algo=dnn.conv.algo_fwd)``."""
    return _replace(node, "DnnConv")


@node_rewriter(["symgraph.ops.conv:AbstractConvGradInputs"])
def local_conv_gradinputs_dnn(fgraph, node):
    """``AbstractConvGradInputs -> DnnConvGradI(algo=dnn.conv.algo_bwd_data)``."""
    return _replace(node, "DnnConvGradI")


@node_rewriter(["symgraph.ops.conv:AbstractConvGradWeights"])
def local_conv_gradweights_dnn(fgraph, node):
    """``AbstractConvGradWeights -> DnnConvGradW(algo=dnn.conv.algo_bwd_filter)``."""
    return _replace(node, "DnnConvGradW")


for _rewriter in (local_conv_dnn, local_conv_gradinputs_dnn, local_conv_gradweights_dnn):
    register(_rewriter, "fast_run", "fast_compile", "conv_dnn", phase="device")
