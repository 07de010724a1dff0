"""``OnDevice(op, context_name)``: any op's node, run on a device.

The ``gpu`` rewrites do not need a GPU twin of every op class (Theano's
``GpuElemwise``, ``GpuCAReduce``...): they wrap the node's own op, so its
semantics (types, ``perform``, ``infer_shape``) stay in one place, and a device
backend lowers the wrapped op's class from its own table.  Inputs and outputs
are device arrays (``GpuArrayType``); ``perform`` runs the op on host copies,
which is what DebugMode compares the device kernel with.
"""

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.gpu_type import GpuArrayType, is_device_array, to_device, to_host

__all__ = ["OnDevice"]



def _writes_in_place(op):
    """True for the ops whose device kernels write into the input their
    destroy map names: Gemm, Gemv and Ger with ``inplace=True``."""
    from symgraph.ops.gemm import Gemm, Gemv, Ger

    return type(op) in (Gemm, Gemv, Ger) and op.inplace


class OnDevice(Op):
    """``op`` computed in the memory of the device ``context_name``.

    ``host_inputs``: the positions of inputs the kernel reads on the host
    (index values, target shapes: small integers); every other input is a
    device array."""

    __props__ = ("op", "context_name", "host_inputs")

    def __init__(self, op, context_name="cuda0", host_inputs=()):
        self.op = op
        self.context_name = context_name
        self.host_inputs = tuple(sorted(host_inputs))
        # A view on the host is a view on the device (the kernel describes the
        # same memory).  Of the ops that overwrite an input, the device
        # kernels of the BLAS updates do so (z): their destroy map holds; any
        # other makes a new output on the device, so it declares none.
        self.view_map = dict(getattr(op, "view_map", None) or {})
        if _writes_in_place(op):
            self.destroy_map = dict(op.destroy_map)

    def make_node(self, *inputs):
        for position, var in enumerate(inputs):
            on_device = isinstance(getattr(var, "type", None), GpuArrayType)
            if position in self.host_inputs:
                if on_device:
                    raise TypeError(f"{self}: input {position} ({var}) is read on the host; "
                                    f"pass a host tensor")
            elif not on_device:
                raise TypeError(f"{self}: input {position} ({var}) is not on a device; "
                                f"transfer it first (gpu_from_host)")
            elif var.type.context_name != self.context_name:
                # a kernel reads its inputs on its own device: another
                # context's memory must come through a GpuToGpu
                raise TypeError(f"{self}: input {position} ({var}) is on the context "
                                f"{var.type.context_name}, the node runs on "
                                f"{self.context_name}; transfer it first "
                                f"(x.transfer({self.context_name!r}))")
        inner = self._inner_node(inputs)
        outputs = [GpuArrayType.like(out.type, self.context_name)() for out in inner.outputs]
        node = Apply(self, list(inputs), outputs)
        node.tag.inner = inner
        return node

    def _inner_node(self, inputs):
        """The wrapped op's node over host stand-ins of ``inputs``."""
        return self.op.make_node(*[var.type.tensor_type()() if isinstance(var.type, GpuArrayType)
                                   else var for var in inputs])

    def inner_node(self, node):
        """The wrapped op's node (host types) matching ``node``: what its
        generators and ``perform`` read dtypes and shapes from."""
        inner = getattr(node.tag, "inner", None)
        if inner is None:
            inner = node.tag.inner = self._inner_node(node.inputs)
        return inner

    def perform(self, node, inputs, output_storage):
        host = [to_host(value) if is_device_array(value) else value for value in inputs]
        storage = [[None] for _ in node.outputs]
        self.op.perform(self.inner_node(node), host, storage)
        for cell, result in zip(output_storage, storage):
            cell[0] = to_device(result[0], self.context_name)

    def infer_shape(self, fgraph, node, input_shapes):
        infer = getattr(self.op, "infer_shape", None)
        if infer is None:
            raise NotImplementedError(f"{self.op} has no infer_shape")
        return infer(fgraph, self.inner_node(node), input_shapes)

    def do_constant_folding(self, fgraph, node):
        return False     # a folded value would be a device array constant

    def __str__(self):
        return f"Gpu{self.op}"
