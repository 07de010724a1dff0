"""Ops defined by the user: ``as_op`` (a Python function on arrays, Theano's
``FromFunctionOp``) and ``OpFromGraph`` (a graph used as one op, Theano's
``compile.builders.OpFromGraph``).

``OpFromGraph`` runs its inner graph node by node through each op's
``perform`` (no native code of its own) and its gradient is the gradient of
the inner graph, rebuilt on the outer inputs (``grad_overrides`` replaces it
with the user's).  The gradient machinery sits above the ops, so it
registers itself here (``register_gradient``) when ``symgraph.gradient`` is
imported.
"""

from symgraph.graph.basic import Apply, Constant, Op, Variable, clone_replace, io_toposort

__all__ = ["FromFunctionOp", "as_op", "OpFromGraph", "register_gradient"]

_GRADIENT = {}


def register_gradient(grad_function):
    """Give ``OpFromGraph`` the ``grad`` function (called by ``symgraph.gradient``)."""
    _GRADIENT["grad"] = grad_function


class FromFunctionOp(Op):
    """An op whose ``perform`` calls ``fn(*arrays)``, with fixed input and
    output types; ``infer_shape(fgraph, node, input_shapes)`` is optional.
    No gradient."""

    __props__ = ("fn", "itypes", "otypes", "infer_shape_fn")

    def __init__(self, fn, itypes, otypes, infer_shape=None):
        self.fn, self.itypes, self.otypes = fn, tuple(itypes), tuple(otypes)
        self.infer_shape_fn = infer_shape
        self.__name__ = getattr(fn, "__name__", "FromFunctionOp")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __str__(self):
        return f"FromFunctionOp{{{self.__name__}}}"

    def make_node(self, *inputs):
        from symgraph.tensor.basic import as_tensor_variable

        if len(inputs) != len(self.itypes):
            raise TypeError(f"{self}: expected {len(self.itypes)} inputs, got {len(inputs)}")
        converted = []
        for x, t in zip(inputs, self.itypes):
            x = as_tensor_variable(x) if not isinstance(x, Variable) else x
            if x.type != t:
                x = t.filter_variable(x) if hasattr(t, "filter_variable") else x
                if x.type != t:
                    raise TypeError(f"{self}: expected an input of type {t}, got {x.type}")
            converted.append(x)
        return Apply(self, converted, [t() for t in self.otypes])

    def perform(self, node, inputs, output_storage):
        import numpy as np

        outs = self.fn(*inputs)
        if len(self.otypes) == 1:
            outs = [outs]
        if len(outs) != len(self.otypes):
            raise ValueError(f"{self}: the function returned {len(outs)} values for "
                             f"{len(self.otypes)} outputs")
        for store, t, val in zip(output_storage, self.otypes, outs):
            store[0] = np.asarray(val, dtype=t.dtype) if hasattr(t, "dtype") else val

    def infer_shape(self, fgraph, node, input_shapes):
        if self.infer_shape_fn is None:
            raise NotImplementedError(f"{self} has no infer_shape")
        return self.infer_shape_fn(fgraph, node, input_shapes)


def as_op(itypes, otypes, infer_shape=None):
    """A decorator that makes a Python function on NumPy arrays an op:
    ``@as_op(itypes=[T.dmatrix], otypes=[T.dvector])``.  The op has no
    gradient; ``infer_shape(fgraph, node, input_shapes)`` may be given."""
    itypes = list(itypes) if isinstance(itypes, (list, tuple)) else [itypes]
    otypes = list(otypes) if isinstance(otypes, (list, tuple)) else [otypes]

    def make(fn):
        return FromFunctionOp(fn, itypes, otypes, infer_shape)

    return make


class OpFromGraph(Op):
    """``OpFromGraph(inputs, outputs)``: the graph from ``inputs`` to
    ``outputs`` used as one op.  Shared variables and constants that the
    graph reads become extra (implicit) inputs.  ``inline`` is accepted
    (the op is always kept whole); ``grad_overrides`` is a function
    ``(inputs, output_grads) -> input grads`` that replaces the gradient."""

    __props__ = ()

    def __init__(self, inputs, outputs, inline=False, grad_overrides="default",
                 rop_overrides="default", name=None, **kwargs):
        from symgraph.graph.basic import graph_inputs

        if not isinstance(outputs, (list, tuple)):
            raise TypeError("OpFromGraph: outputs must be a list of variables")
        for v in inputs:
            if isinstance(v, Constant) or getattr(v, "owner", None) is not None:
                raise ValueError(f"OpFromGraph: input {v} must be a root variable")
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.shared_inputs = [v for v in graph_inputs(self.outputs)
                              if v not in self.inputs and not isinstance(v, Constant)
                              and hasattr(v, "get_value")]
        missing = [v for v in graph_inputs(self.outputs)
                   if v not in self.inputs and v not in self.shared_inputs
                   and not isinstance(v, Constant)]
        if missing:
            raise ValueError(f"OpFromGraph: the outputs depend on {missing}, which are not "
                             f"among the inputs")
        self.inline, self.name = inline, name
        self.grad_overrides = grad_overrides
        self._order = io_toposort(self.inputs + self.shared_inputs, self.outputs)

    def __str__(self):
        return self.name or f"OpFromGraph{{{len(self.inputs)} in, {len(self.outputs)} out}}"

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def make_node(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise TypeError(f"{self}: expected {len(self.inputs)} inputs, got {len(inputs)}")
        converted = []
        for x, inner in zip(inputs, self.inputs):
            if not isinstance(x, Variable):
                from symgraph.tensor.basic import as_tensor_variable

                x = as_tensor_variable(x, dtype=getattr(inner.type, "dtype", None))
            if x.type != inner.type:
                raise TypeError(f"{self}: expected an input of type {inner.type}, got "
                                f"{x.type}")
            converted.append(x)
        return Apply(self, converted + self.shared_inputs,
                     [o.type() for o in self.outputs])

    def perform(self, node, inputs, output_storage):
        values = dict(zip(self.inputs + self.shared_inputs, inputs))
        for inner in self._order:
            args = []
            for i in inner.inputs:
                args.append(i.data if isinstance(i, Constant) else values[i])
            storage = [[None] for _ in inner.outputs]
            inner.op.perform(inner, args, storage)
            for out, cell in zip(inner.outputs, storage):
                values[out] = cell[0]
        for store, out in zip(output_storage, self.outputs):
            val = values[out] if not isinstance(out, Constant) else out.data
            store[0] = val.copy() if hasattr(val, "copy") else val

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import is_disconnected

        outer_inputs = inputs[:len(self.inputs)]
        if self.grad_overrides != "default":
            grads = list(self.grad_overrides(outer_inputs, output_grads))
            return grads + [self._disconnected(v) for v in self.shared_inputs]
        known = {o: g for o, g in zip(self.outputs, output_grads)
                 if g is not None and not is_disconnected(g)}
        wrt = self.inputs + self.shared_inputs
        if not known:
            return [self._disconnected(v) for v in wrt]
        grads = _GRADIENT["grad"](None, wrt, known_grads=known, disconnected_inputs="ignore",
                                  return_disconnected="Disconnected")
        replace = dict(zip(wrt, inputs))
        return [g if is_disconnected(g) else clone_replace(g, replace) for g in grads]

    @staticmethod
    def _disconnected(v):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return disconnected_grad_for(v)

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.ops.shape import shape

        replace = dict(zip(self.inputs + self.shared_inputs, node.inputs))
        result = []
        for out in self.outputs:
            s = clone_replace(shape(out), replace)
            result.append([s[i] for i in range(out.ndim)])
        return result
