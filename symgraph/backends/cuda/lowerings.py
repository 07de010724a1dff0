"""The CUDA backend's lowering table, and its answers to the ``gpu`` rewrites.

Device nodes are ``OnDevice(op)``: the table is keyed by the wrapped op's
class (looked up through its hierarchy, as the CPU's), so a second table of
GPU op classes is never needed.  ``device_reason(node)`` tells the placement
rewrite whether a host node can move, and why not.
"""

from symgraph.backends.lowering import lowering_rule, register_lowering
from symgraph.ops import (advanced_subtensor, alloc, blas, bn, conv_algorithms, elemwise, gemm,
                          join, mrg, nnet, nnet_loss, pool, pool_argmax, pool_dynamic, pool_grad,
                          reduce, shape, subtensor, transfer)
from symgraph.opt.fuse_reduce import ReduceOfElemwise
from symgraph.opt.placement_support import register_device_support

__all__ = ["BACKEND", "device_reason", "host_inputs"]

#: The name this backend registers under.
BACKEND = "cuda"

_G = "symgraph.backends.cuda."

_CPU = "symgraph.backends.cpu."

_TABLE = [
    (elemwise.Elemwise, _G + "elemwise:elemwise_lowering"),
    # Views only describe memory: the CPU's kernels (host code that reads the
    # descriptors, never the data) serve the device too; the step's allocator
    # makes the view.  A CPU kernel that reads an input's data must not be
    # listed here: that data is device memory.
    (elemwise.DimShuffle, _CPU + "shape.codegen:dimshuffle_kernel"),
    (shape.SpecifyShape, _CPU + "shape.codegen:specify_shape_kernel"),
    (shape.Reshape, _G + "shape:reshape_lowering"),
    (shape.Unbroadcast, _CPU + "shape.codegen:unbroadcast_kernel"),
    (subtensor.Subtensor, _CPU + "index.basic:subtensor_kernel"),
    (subtensor.IncSubtensor, _G + "index:inc_subtensor_lowering"),
    (reduce.CAReduce, _G + "reduce:careduce_lowering"),
    (reduce._ArgReduce, _G + "reduce:argreduce_lowering"),
    (advanced_subtensor.AdvancedSubtensor, _G + "advanced:advanced_gather_lowering"),
    (advanced_subtensor.AdvancedIncSubtensor, _G + "advanced:advanced_update_lowering"),
    (advanced_subtensor.Nonzero, _G + "nonzero:nonzero_lowering"),
    (alloc.Alloc, _G + "index:alloc_lowering"),
    (alloc.Eye, _G + "join:eye_lowering"),
    (join.Join, _G + "join:join_lowering"),
    (join.Split, _CPU + "shape.codegen:split_kernel"),
    (mrg.MRGUniform, _G + "random:mrg_uniform_lowering"),
    (blas.Dot, _G + "blas:dot_lowering"),
    (blas.BatchedDot, _G + "blas:batched_dot_lowering"),
    (gemm.Gemm, _G + "blas:blas_update_lowering"),
    (gemm.Gemv, _G + "blas:blas_update_lowering"),
    (gemm.Ger, _G + "blas:blas_update_lowering"),
    (ReduceOfElemwise, _G + "reduce:fused_reduce_lowering"),
    (nnet.Softmax, _G + "nnet:softmax_lowering"),
    (nnet.LogSoftmax, _G + "nnet:softmax_lowering"),
    (nnet.SoftmaxGrad, _G + "nnet:softmax_grad_lowering"),
    (nnet_loss.SoftmaxCrossEntropy1Hot, _G + "nnet:xent_lowering"),
    (nnet_loss.SoftmaxCrossEntropy1HotGrad, _G + "nnet:xent_grad_lowering"),
    (conv_algorithms.DnnConv, _G + "conv:conv_lowering"),
    (conv_algorithms.DnnConvGradI, _G + "conv:conv_lowering"),
    (conv_algorithms.DnnConvGradW, _G + "conv:conv_lowering"),
    (pool.Pool, _G + "pool:pool_lowering"),
    (pool_argmax.MaxPoolWithArgmax, _G + "pool:pool_lowering"),
    (pool_argmax.MaxPoolGradFromArgmax, _G + "pool:pool_lowering"),
    (pool_argmax.MaxPoolArgmaxGather, _G + "pool:pool_lowering"),
    (pool_grad.MaxPoolGrad, _G + "pool:pool_lowering"),
    (pool_grad.AveragePoolGrad, _G + "pool:pool_lowering"),
    (pool_grad.DownsampleFactorMaxGradGrad, _G + "pool:pool_lowering"),
    (pool_dynamic.PoolDynamic, _G + "pool:pool_lowering"),
    (pool_dynamic.PoolDynamicGrad, _G + "pool:pool_lowering"),
    (bn.AbstractBatchNormTrain, _G + "batchnorm:batchnorm_lowering"),
    (bn.AbstractBatchNormTrainGrad, _G + "batchnorm:batchnorm_lowering"),
    (bn.AbstractBatchNormInference, _G + "batchnorm:batchnorm_lowering"),
    (transfer.GpuFromHost, _G + "transfer:gpu_from_host_lowering"),
    (transfer.HostFromGpu, _G + "transfer:host_from_gpu_lowering"),
    (transfer.GpuToGpu, _G + "transfer:gpu_to_gpu_lowering"),
]

for _cls, _rule in _TABLE:
    register_lowering(_cls, _rule, backend=BACKEND)


def device_reason(node):
    """None when the host node ``node`` can run on the device, else the reason."""
    if lowering_rule(node.op, BACKEND) is None:
        return f"no CUDA lowering for {type(node.op).__name__}"
    if isinstance(node.op, elemwise.Elemwise):
        from symgraph.backends.cuda.elemwise import elemwise_reason

        return elemwise_reason(node)
    if isinstance(node.op, (blas.Dot, blas.BatchedDot, gemm.Gemm, gemm.Gemv, gemm.Ger)):
        from symgraph.backends.cuda.blas import blas_reason

        return blas_reason(node)
    if isinstance(node.op, (nnet.Softmax, nnet.LogSoftmax, nnet.SoftmaxGrad,
                            nnet_loss.SoftmaxCrossEntropy1Hot,
                            nnet_loss.SoftmaxCrossEntropy1HotGrad)):
        from symgraph.backends.cuda.nnet import nnet_reason

        return nnet_reason(node)
    if isinstance(node.op, (advanced_subtensor.AdvancedSubtensor, subtensor.IncSubtensor,
                            advanced_subtensor.AdvancedIncSubtensor, alloc.Alloc)):
        from symgraph.backends.cuda.index import index_reason

        return index_reason(node)
    if isinstance(node.op, advanced_subtensor.Nonzero):
        from symgraph.backends.cuda.nonzero import nonzero_reason

        return nonzero_reason(node)
    if isinstance(node.op, mrg.MRGUniform):
        from symgraph.backends.cuda.random import mrg_reason

        return mrg_reason(node)
    if isinstance(node.op, (join.Join, join.Split, alloc.Eye)):
        from symgraph.backends.cuda.join import join_reason

        return join_reason(node)
    if isinstance(node.op, conv_algorithms._DnnConvBase):
        from symgraph.backends.cuda.conv import conv_reason

        return conv_reason(node)
    if isinstance(node.op, bn._BatchNormOp):
        from symgraph.backends.cuda.batchnorm import batchnorm_reason

        return batchnorm_reason(node)
    if isinstance(node.op, shape.Reshape):
        from symgraph.backends.cuda.shape import reshape_reason

        return reshape_reason(node)
    if isinstance(node.op, (pool.PoolBase, pool_dynamic.PoolDynamic,
                            pool_dynamic.PoolDynamicGrad)):
        from symgraph.backends.cuda.pool import pool_reason

        return pool_reason(node)
    if isinstance(node.op, (reduce.CAReduce, reduce._ArgReduce, ReduceOfElemwise)):
        from symgraph.backends.cuda.reduce import reduce_reason

        return reduce_reason(node)
    return None


def host_inputs(node):
    """Inputs read on the host by the kernel of ``node`` (they stay there):
    index values and sizes."""
    if isinstance(node.op, alloc.Eye):
        return range(len(node.inputs))
    if isinstance(node.op, bn._BatchNormOp):
        from symgraph.backends.cuda.batchnorm import batchnorm_host_inputs

        return batchnorm_host_inputs(node)
    if isinstance(node.op, (subtensor.Subtensor, shape.SpecifyShape, shape.Reshape, alloc.Alloc,
                            join.Split,
                            advanced_subtensor.AdvancedSubtensor, mrg.MRGUniform)):
        return range(1, len(node.inputs))
    if isinstance(node.op, (pool_dynamic.PoolDynamic, pool_dynamic.PoolDynamicGrad)):
        from symgraph.backends.cuda.pool import pool_host_inputs

        return pool_host_inputs(node)
    if isinstance(node.op, (conv_algorithms.DnnConvGradI, conv_algorithms.DnnConvGradW)):
        return (2,)
    if isinstance(node.op, (advanced_subtensor.AdvancedIncSubtensor, subtensor.IncSubtensor)):
        return range(2, len(node.inputs))
    return ()


register_device_support(BACKEND, device_reason, host_inputs)
