"""Abstract convolutions to concrete ones (tag ``conv_dnn``, phase ``device``).

``AbstractConv`` becomes ``DnnConv`` with ``algo = dnn.conv.algo_fwd``,
``AbstractConvGradInputs`` becomes ``DnnConvGradI`` (``algo_bwd_data``) and
``AbstractConvGradWeights`` becomes ``DnnConvGradW`` (``algo_bwd_filter``);
the precision is ``dnn.conv.precision`` resolved for the node's dtype
(``ops/conv_algorithms.py: resolve_precision``).  The flags are read when a graph is
optimized, so ``change_flags`` around ``function()`` takes effect.

Where the graph already shows that the flag's algorithm cannot run the node
(``static_fallback``: Winograd with a stride, a dilation or non-3x3 filters),
the concrete op gets the fallback as ``algo`` and the flag's value as
``requested``, so that debugprint says so before anything runs.

Then the epilogue (tags ``conv_fusion`` and ``fast_run``, same phase, after
canonicalization): ``DnnConv(x, w) + b.dimshuffle('x', 0, 'x', 'x')``
becomes ``DnnConv{bias=True}(x, w, b)`` (``local_conv_bias``), and a ReLU of
a DnnConv's result, ``maximum(c, 0)`` or ``switch(c > 0, c, 0)``, becomes
``DnnConv{activation='relu'}`` (``local_conv_relu``).  The gradient built
before the rewrite reads the pre-activation ``c`` to make its mask
(``eq(maximum(c, 0), c)`` for maximum, ``c > 0`` for the switch); those
masks are rewritten to ``out > 0`` of the fused op's output, so ``c`` is
never computed.  That differs from maximum's gradient only where ``c`` is
exactly 0 (the mask is then 0, not 1).  When ``c`` has any other client the
ReLU is not fused: ``c`` must exist anyway.
"""

from symgraph.graph.basic import Apply
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter

__all__ = ["local_conv_dnn", "local_conv_gradinputs_dnn", "local_conv_gradweights_dnn",
           "concrete_op", "local_conv_bias", "local_conv_relu"]

#: The flag that chooses the algorithm of each direction.
ALGO_FLAGS = {"fwd": "dnn.conv.algo_fwd", "bwd_data": "dnn.conv.algo_bwd_data",
              "bwd_filter": "dnn.conv.algo_bwd_filter"}


def concrete_op(node, cls):
    """The concrete op of class ``cls`` for the abstract ``node``, from the flags."""
    from symgraph.config import config
    from symgraph.ops.conv_algorithms import resolve_precision, static_fallback

    op = node.op
    algo = config.get(ALGO_FLAGS[cls.direction])
    precision = resolve_precision(config.dnn.conv.precision, node.outputs[0].dtype)
    concrete = cls.from_abstract(op, algo, precision)
    used, _reason = static_fallback(concrete, node, algo)
    if used != algo:
        concrete = cls.from_abstract(op, used, precision, requested=algo)
    return concrete


def _replace(node, cls_name):
    from symgraph.ops import conv_algorithms

    op = concrete_op(node, getattr(conv_algorithms, cls_name))
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


# -- the epilogue: bias and ReLU fused into DnnConv --------------------------------------

def _plain_conv(var, dtype, *, bias_ok):
    """The DnnConv node computing ``var`` when it can take an epilogue (no
    activation yet; no bias yet unless ``bias_ok``; of ``dtype``), else None."""
    from symgraph.ops.conv_algorithms import DnnConv

    node = var.owner
    if node is None or type(node.op) is not DnnConv or node.op.activation is not None:
        return None
    if (node.op.bias and not bias_ok) or var.dtype != dtype:
        return None
    return node


def _channel_vector(var, convdim):
    """``b`` when ``var`` is ``b`` (a vector) broadcast over every axis but the
    channels (``b.dimshuffle('x', 0, 'x', 'x')``, or a tensor of that
    broadcast pattern), else None."""
    from symgraph.ops.elemwise import DimShuffle

    pattern = (True, False) + (True,) * convdim
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and \
            node.op.new_order == ("x", 0) + ("x",) * convdim:
        return node.inputs[0]
    if tuple(var.type.broadcastable) == pattern:
        return var.dimshuffle(1)
    return None


@node_rewriter(["symgraph.ops.scalar_basic:Add"])
def local_conv_bias(fgraph, node):
    """``DnnConv(x, w) + b.dimshuffle('x', 0, 'x', 'x') -> DnnConv{bias=True}(x, w, b)``
    (other terms of an n-ary add stay in an add)."""
    from symgraph.ops.math import add

    out = node.outputs[0]
    for i, term in enumerate(node.inputs):
        conv = _plain_conv(term, out.dtype, bias_ok=False)
        if conv is None or len(fgraph.clients[term]) != 1:
            continue
        others = node.inputs[:i] + node.inputs[i + 1:]
        for j, other in enumerate(others):
            bias = _channel_vector(other, conv.op.convdim)
            if bias is None or bias.dtype != out.dtype:
                continue
            fused = conv.op.with_epilogue(True, None)(*conv.inputs, bias)
            rest = others[:j] + others[j + 1:]
            result = add(fused, *rest) if rest else fused
            if result.type != out.type:
                return None
            return [result]
    return None


def _relu_input(node):
    """``c`` when ``node`` computes ``relu(c)`` as ``maximum(c, 0)``,
    ``maximum(0, c)`` or ``switch(c > 0, c, 0)``, else None."""
    from symgraph.ops import scalar_basic as sb
    from symgraph.ops import scalar_logic as sl
    from symgraph.opt.utils import is_constant_value, owner_if

    op = node.op.scalar_op
    if isinstance(op, sb.Maximum):
        a, b = node.inputs
        if is_constant_value(b, 0):
            return a
        if is_constant_value(a, 0):
            return b
        return None
    if isinstance(op, sb.Switch):
        cond, then, other = node.inputs
        test = owner_if(cond, sl.GT)
        if test is not None and test.inputs[0] is then and is_constant_value(test.inputs[1], 0) \
                and is_constant_value(other, 0):
            return then
    return None


def _mask_of(client, pre, relu_out):
    """When ``client`` is a ReLU mask over ``pre`` (``pre > 0``, ``0 < pre``,
    or maximum's gradient ``eq(relu_out, pre)``), True; else False."""
    from symgraph.ops import scalar_logic as sl
    from symgraph.opt.utils import is_constant_value, is_elemwise

    if is_elemwise(client, sl.GT):
        a, b = client.inputs
        return a is pre and is_constant_value(b, 0)
    if is_elemwise(client, sl.LT):
        a, b = client.inputs
        return b is pre and is_constant_value(a, 0)
    if is_elemwise(client, sl.EQ):
        return set(client.inputs) == {pre, relu_out}
    return False


@node_rewriter(["symgraph.ops.scalar_basic:Maximum", "symgraph.ops.scalar_basic:Switch"])
def local_conv_relu(fgraph, node):
    """``relu(DnnConv(...)) -> DnnConv{activation='relu'}(...)``; the gradient's
    masks over the pre-activation become ``out > 0`` of the fused output."""
    from symgraph.ops.math import gt

    pre = _relu_input(node)
    out = node.outputs[0]
    if pre is None:
        return None
    conv = _plain_conv(pre, out.dtype, bias_ok=True)
    if conv is None or pre.type != out.type:
        return None
    masks = []
    for client, _ in fgraph.clients[pre]:
        if client is node or any(client is m for m in masks):
            continue
        if client == "output" or not _mask_of(client, pre, out):
            return None  # the pre-activation is needed as it is: nothing to gain
        masks.append(client)
    fused = conv.op.with_epilogue(conv.op.bias, "relu")(*conv.inputs)
    positive = gt(fused, 0)
    replacements = {out: fused}
    for client in masks:
        old = client.outputs[0]
        if old.type == positive.type:
            replacements[old] = positive
        else:
            return None
    return replacements


for _rewriter in (local_conv_bias, local_conv_relu):
    register(_rewriter, "fast_run", "conv_dnn", "conv_fusion", phase="device")
