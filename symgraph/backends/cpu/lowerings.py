"""The native CPU backend's lowering table: which generator turns a node of
each op class into a ``CKernel``; and its answers to the fusion rewrites.

Ops carry no reference to this backend: this table is the one place that
connects them.  Rules are named ``"module:function"`` and imported when a node
first needs them (importing every generator at start costs about 40 ms);
``args`` pick the variant of a generator that serves several op classes.
A class not listed here (nor a base class of it) runs its Python ``perform``.
"""

from symgraph.backends.lowering import lower, register_lowering
from symgraph.backends.cpu.fusable import elemwise_has_c, reduction_has_c
from symgraph.ops import (advanced_subtensor, alloc, blas, bn, conv_algorithms, elemwise, gemm,
                          join, nnet, nnet_loss, pool, pool_argmax, pool_grad, reduce, shape,
                          subtensor)
from symgraph.opt.fuse_reduce import ReduceOfElemwise
from symgraph.opt.fusion_support import register_fusion_support

__all__ = ["BACKEND", "cpu_kernel"]

#: The name this backend registers under.
BACKEND = "cpu"

_G = "symgraph.backends.cpu."

_TABLE = [
    # element-wise, shapes, views
    (elemwise.Elemwise, "elemwise.loop:elemwise_lowering", ()),
    (elemwise.DimShuffle, "shape.codegen:dimshuffle_kernel", ()),
    (shape.Shape, "shape.codegen:shape_kernel", ()),
    (shape.Shape_i, "shape.codegen:shape_i_kernel", ()),
    (shape.SpecifyShape, "shape.codegen:specify_shape_kernel", ()),
    (shape.Unbroadcast, "shape.codegen:unbroadcast_kernel", ()),
    (shape.Reshape, "shape.codegen:reshape_kernel", ()),
    (alloc.Alloc, "shape.alloc:alloc_kernel", ()),
    (alloc.Eye, "shape.alloc:eye_kernel", ()),
    (alloc.ARange, "shape.alloc:arange_kernel", ()),
    (join.MakeVector, "shape.join:make_vector_kernel", ()),
    (join.Join, "shape.join:join_kernel", ()),
    (join.Split, "shape.codegen:split_kernel", ()),
    # indexing
    (subtensor.Subtensor, "index.basic:subtensor_kernel", ()),
    (subtensor.IncSubtensor, "index.basic:inc_subtensor_kernel", ()),
    (advanced_subtensor.AdvancedSubtensor,
     "index.advanced:advanced_subtensor_kernel", ()),
    (advanced_subtensor.AdvancedIncSubtensor,
     "index.advanced:advanced_inc_subtensor_kernel", ()),
    (advanced_subtensor.Nonzero, "index.advanced:nonzero_kernel", ()),
    # reductions
    (reduce.CAReduce, "reduce.lowering:careduce_kernel", ()),
    (reduce._ArgReduce, "reduce.lowering:careduce_kernel", ()),
    (ReduceOfElemwise, "reduce.lowering:fused_reduce_lowering", ()),
    # BLAS
    (blas.Dot, "blas.codegen:dot_lowering", ()),
    (blas.BatchedDot, "blas.codegen:batched_dot_lowering", ()),
    (gemm.Gemm, "blas.codegen:blas_update_lowering", ()),
    (gemm.Gemv, "blas.codegen:blas_update_lowering", ()),
    (gemm.Ger, "blas.codegen:blas_update_lowering", ()),
    # softmax and losses
    (nnet.Softmax, "nnet.softmax:nnet_kernel", ("softmax",)),
    (nnet.LogSoftmax, "nnet.softmax:nnet_kernel", ("log_softmax",)),
    (nnet.SoftmaxGrad, "nnet.softmax:nnet_kernel", ("softmax_grad",)),
    (nnet_loss.CrossentropyCategorical1Hot, "nnet.loss:loss_kernel",
     ("CrossentropyCategorical1Hot",)),
    (nnet_loss.CrossentropyCategorical1HotGrad, "nnet.loss:loss_kernel",
     ("CrossentropyCategorical1HotGrad",)),
    (nnet_loss.SoftmaxCrossEntropy1Hot, "nnet.loss:loss_kernel",
     ("SoftmaxCrossEntropy1Hot",)),
    (nnet_loss.SoftmaxCrossEntropy1HotGrad, "nnet.loss:loss_kernel",
     ("SoftmaxCrossEntropy1HotGrad",)),
    # batch normalization
    (bn.AbstractBatchNormTrain, "nnet.batchnorm:bn_kernel", ("train",)),
    (bn.AbstractBatchNormTrainGrad, "nnet.batchnorm:bn_kernel", ("grad",)),
    (bn.AbstractBatchNormInference, "nnet.batchnorm:bn_kernel", ("infer",)),
    # pooling (the argmax gather, a rare second-order gradient, has none)
    (pool.Pool, "pool.forward:pool_kernel", ("forward",)),
    (pool_grad.MaxPoolGrad, "pool.forward:pool_kernel", ("max_grad",)),
    (pool_grad.AveragePoolGrad, "pool.forward:pool_kernel", ("avg_grad",)),
    (pool_grad.DownsampleFactorMaxGradGrad, "pool.forward:pool_kernel", ("grad_grad",)),
    (pool_argmax.MaxPoolWithArgmax, "pool.argmax:argmax_kernel", ("forward",)),
    (pool_argmax.MaxPoolGradFromArgmax, "pool.argmax:argmax_kernel", ("backward",)),
    # convolution (the algorithms chosen by the dnn flags)
    (conv_algorithms.DnnConv, "conv.codegen:conv_kernel", ()),
    (conv_algorithms.DnnConvGradI, "conv.codegen:conv_kernel", ()),
    (conv_algorithms.DnnConvGradW, "conv.codegen:conv_kernel", ()),
]

for _cls, _rule, _args in _TABLE:
    register_lowering(_cls, _G + _rule, backend=BACKEND, args=_args)

register_fusion_support(BACKEND, elemwise=elemwise_has_c, reduction=reduction_has_c)


def cpu_kernel(node):
    """The native CPU backend's CKernel of ``node``, or None (no rule for its
    op, or the rule declined the node's dtypes)."""
    return lower(node, BACKEND)
