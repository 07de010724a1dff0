"""Transfers between host memory and devices: ``GpuFromHost``, ``HostFromGpu``,
``GpuToGpu``.

Theano's ``gpu_from_host``/``host_from_gpu``: each is the other's gradient, so
that a graph moved to the GPU differentiates as the host graph does, and
``GpuToGpu`` (between two contexts, the reverse copy its gradient).  The
``gpu`` rewrites put them at the edges of the device part of a graph and merge
them; ``x.transfer('cpu')``, ``x.transfer('cuda0')`` and ``x.transfer('dev1')``
(a name of the flag ``contexts``) are the user's spelling.
"""

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.gpu_type import GpuArrayType, GpuArrayVariable, to_device, to_host
from symgraph.tensor.type import TensorType

__all__ = ["GpuFromHost", "HostFromGpu", "GpuToGpu", "gpu_from_host", "host_from_gpu",
           "gpu_to_gpu", "transfer"]


class GpuFromHost(Op):
    """Copy a host array to the device of ``context_name``."""

    __props__ = ("context_name",)

    def __init__(self, context_name="cuda0"):
        self.context_name = context_name

    def make_node(self, x):
        x = as_tensor_variable(x)
        if not isinstance(x.type, TensorType):
            raise TypeError(f"GpuFromHost: {x} is not a host tensor (its type is {x.type})")
        return Apply(self, [x], [GpuArrayType.like(x.type, self.context_name)()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = to_device(inputs[0], self.context_name)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [host_from_gpu(output_grads[0])]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else gpu_from_host(eval_points[0],
                                                                  self.context_name)]


class HostFromGpu(Op):
    """Copy a device array back to host memory."""

    __props__ = ()

    def make_node(self, x):
        if not isinstance(getattr(x, "type", None), GpuArrayType):
            raise TypeError(f"HostFromGpu: {x} is not a device array variable")
        return Apply(self, [x], [x.type.tensor_type()()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = to_host(inputs[0])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [gpu_from_host(output_grads[0], inputs[0].type.context_name)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else host_from_gpu(eval_points[0])]


class GpuToGpu(Op):
    """Copy a device array to the device of another context (Theano's
    ``GpuToGpu``): a peer copy between devices, or a device copy between two
    contexts of one device."""

    __props__ = ("context_name",)

    def __init__(self, context_name):
        self.context_name = context_name

    def make_node(self, x):
        if not isinstance(getattr(x, "type", None), GpuArrayType):
            raise TypeError(f"GpuToGpu: {x} is not a device array variable")
        if x.type.context_name == self.context_name:
            raise TypeError(f"GpuToGpu: {x} is on {self.context_name} already")
        return Apply(self, [x], [GpuArrayType.like(x.type.tensor_type(), self.context_name)()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = to_device(inputs[0], self.context_name)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        # the gradient flows back to the input's device
        return [transfer(output_grads[0], inputs[0].type.context_name)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else gpu_to_gpu(eval_points[0],
                                                               self.context_name)]


def gpu_to_gpu(x, context_name):
    """The device variable ``x`` copied to the context ``context_name``."""
    return GpuToGpu(context_name)(x)


def gpu_from_host(x, context_name="cuda0"):
    """``x`` copied to the device ``context_name``."""
    return GpuFromHost(context_name)(x)


_host_from_gpu = HostFromGpu()


def host_from_gpu(x):
    """A device variable ``x`` copied back to host memory."""
    return _host_from_gpu(x)


def transfer(x, target):
    """``x`` moved to ``target``: ``'cpu'``, a device (``'cuda'``, ``'cuda1'``),
    a name of the flag ``contexts`` (``'dev0'``), or None (Theano's default
    context: the device of the flag ``device``); a variable already there is
    returned as is.  Between two contexts the copy stays on the devices
    (``GpuToGpu``)."""
    from symgraph.tensor.gpu_contexts import context_name

    if target == "cpu":
        return host_from_gpu(x) if isinstance(x, GpuArrayVariable) else as_tensor_variable(x)
    context = context_name(target)
    if isinstance(getattr(x, "type", None), GpuArrayType):
        if x.type.context_name == context:
            return x
        return gpu_to_gpu(x, context)
    return gpu_from_host(x, context)
