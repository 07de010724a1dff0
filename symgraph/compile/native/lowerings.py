"""The native CPU backend's lowering table: which generator turns a node of
each op class into a ``CKernel``; and its answers to the fusion rewrites.

Ops carry no reference to this backend: this table is the one place that
connects them.  Rules are named ``"module:function"`` and imported when a node
first needs them (importing every generator at start costs about 40 ms);
``args`` pick the variant of a generator that serves several op classes.
A class not listed here (nor a base class of it) runs its Python ``perform``.
"""

from symgraph.backends.lowering import lower, register_lowering
from symgraph.compile.native.fusable import elemwise_has_c, reduction_has_c
from symgraph.ops import (advanced_subtensor, alloc, blas, bn, conv_algorithms, elemwise, gemm,
                          join, nnet, nnet_loss, pool, pool_argmax, pool_grad, reduce, shape,
                          subtensor)
from symgraph.opt.fuse_reduce import ReduceOfElemwise
from symgraph.opt.fusion_support import register_fusion_support

__all__ = ["BACKEND", "cpu_kernel"]

#: The name this backend registers under.
BACKEND = "cpu"

_G = "symgraph.compile.native."

_TABLE = [
    # element-wise, shapes, views
    (elemwise.Elemwise, "elemwise_codegen:elemwise_lowering", ()),
    (elemwise.DimShuffle, "shape_codegen:dimshuffle_kernel", ()),
    (shape.Shape, "shape_codegen:shape_kernel", ()),
    (shape.Shape_i, "shape_codegen:shape_i_kernel", ()),
    (shape.SpecifyShape, "shape_codegen:specify_shape_kernel", ()),
    (shape.Unbroadcast, "shape_codegen:unbroadcast_kernel", ()),
    (shape.Reshape, "shape_codegen:reshape_kernel", ()),
    (alloc.Alloc, "alloc_codegen:alloc_kernel", ()),
    (alloc.Eye, "alloc_codegen:eye_kernel", ()),
    (alloc.ARange, "alloc_codegen:arange_kernel", ()),
    (join.MakeVector, "join_codegen:make_vector_kernel", ()),
    (join.Join, "join_codegen:join_kernel", ()),
    (join.Split, "shape_codegen:split_kernel", ()),
    # indexing
    (subtensor.Subtensor, "index_codegen:subtensor_kernel", ()),
    (subtensor.IncSubtensor, "index_codegen:inc_subtensor_kernel", ()),
    (advanced_subtensor.AdvancedSubtensor,
     "advanced_index_codegen:advanced_subtensor_kernel", ()),
    (advanced_subtensor.AdvancedIncSubtensor,
     "advanced_index_codegen:advanced_inc_subtensor_kernel", ()),
    (advanced_subtensor.Nonzero, "advanced_index_codegen:nonzero_kernel", ()),
    # reductions
    (reduce.CAReduce, "reduce_lowering:careduce_kernel", ()),
    (reduce._ArgReduce, "reduce_lowering:careduce_kernel", ()),
    (ReduceOfElemwise, "reduce_lowering:fused_reduce_lowering", ()),
    # BLAS
    (blas.Dot, "blas_codegen:dot_lowering", ()),
    (blas.BatchedDot, "blas_codegen:batched_dot_lowering", ()),
    (gemm.Gemm, "blas_codegen:blas_update_lowering", ()),
    (gemm.Gemv, "blas_codegen:blas_update_lowering", ()),
    (gemm.Ger, "blas_codegen:blas_update_lowering", ()),
    # softmax and losses
    (nnet.Softmax, "softmax_codegen:nnet_kernel", ("softmax",)),
    (nnet.LogSoftmax, "softmax_codegen:nnet_kernel", ("log_softmax",)),
    (nnet.SoftmaxGrad, "softmax_codegen:nnet_kernel", ("softmax_grad",)),
    (nnet_loss.CrossentropyCategorical1Hot, "nnet_loss_codegen:loss_kernel",
     ("CrossentropyCategorical1Hot",)),
    (nnet_loss.CrossentropyCategorical1HotGrad, "nnet_loss_codegen:loss_kernel",
     ("CrossentropyCategorical1HotGrad",)),
    (nnet_loss.SoftmaxCrossEntropy1Hot, "nnet_loss_codegen:loss_kernel",
     ("SoftmaxCrossEntropy1Hot",)),
    (nnet_loss.SoftmaxCrossEntropy1HotGrad, "nnet_loss_codegen:loss_kernel",
     ("SoftmaxCrossEntropy1HotGrad",)),
    # batch normalization
    (bn.AbstractBatchNormTrain, "bn_codegen:bn_kernel", ("train",)),
    (bn.AbstractBatchNormTrainGrad, "bn_codegen:bn_kernel", ("grad",)),
    (bn.AbstractBatchNormInference, "bn_codegen:bn_kernel", ("infer",)),
    # pooling (the argmax gather, a rare second-order gradient, has none)
    (pool.Pool, "pool_codegen:pool_kernel", ("forward",)),
    (pool_grad.MaxPoolGrad, "pool_codegen:pool_kernel", ("max_grad",)),
    (pool_grad.AveragePoolGrad, "pool_codegen:pool_kernel", ("avg_grad",)),
    (pool_grad.DownsampleFactorMaxGradGrad, "pool_codegen:pool_kernel", ("grad_grad",)),
    (pool_argmax.MaxPoolWithArgmax, "pool_argmax_codegen:argmax_kernel", ("forward",)),
    (pool_argmax.MaxPoolGradFromArgmax, "pool_argmax_codegen:argmax_kernel", ("backward",)),
    # convolution (the algorithms chosen by the dnn flags)
    (conv_algorithms.DnnConv, "conv_codegen:conv_kernel", ()),
    (conv_algorithms.DnnConvGradI, "conv_codegen:conv_kernel", ()),
    (conv_algorithms.DnnConvGradW, "conv_codegen:conv_kernel", ()),
]

for _cls, _rule, _args in _TABLE:
    register_lowering(_cls, _G + _rule, backend=BACKEND, args=_args)

register_fusion_support(BACKEND, elemwise=elemwise_has_c, reduction=reduction_has_c)


def cpu_kernel(node):
    """The native CPU backend's CKernel of ``node``, or None (no rule for its
    op, or the rule declined the node's dtypes)."""
    return lower(node, BACKEND)
