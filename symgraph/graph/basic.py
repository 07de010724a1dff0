"""The IR: typed Variables joined by Apply nodes of immutable Ops.

A graph is a DAG: each Variable is either a graph input (no owner), a Constant,
or output ``index`` of an Apply node (its ``owner``).  Ops and Types are values:
they compare and hash by their declared ``__props__``, so merge (common
subexpression elimination) and the compile cache can compare them.
"""

from types import SimpleNamespace

from symgraph.graph import test_value as _test_value
from symgraph.graph.trace import user_line


class PropsValue:
    """Equality, hashing and printing derived from ``__props__``.

    A subclass lists the attributes that define it in ``__props__``; two
    instances of the same class with equal props are interchangeable.
    """

    __props__ = ()

    def _props(self):
        return tuple(getattr(self, name) for name in self.__props__)

    def _props_dict(self):
        return {name: getattr(self, name) for name in self.__props__}

    def __eq__(self, other):
        return type(self) is type(other) and self._props() == other._props()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self).__name__, self._props()))

    def __str__(self):
        if not self.__props__:
            return type(self).__name__
        params = ", ".join(f"{name}={value!r}" for name, value in self._props_dict().items())
        return f"{type(self).__name__}{{{params}}}"

    __repr__ = __str__


class Type(PropsValue):
    """The static type of a Variable: what values it may hold at run time."""

    def filter(self, value, strict=False, allow_downcast=None):
        """Return ``value`` converted to this type, or raise TypeError."""
        raise NotImplementedError

    def is_valid_value(self, value):
        try:
            self.filter(value, strict=True)
            return True
        except (TypeError, ValueError):
            return False

    def values_eq(self, a, b):
        return a == b

    def values_eq_approx(self, a, b):
        return self.values_eq(a, b)

    def make_variable(self, name=None):
        """A new input Variable of this type."""
        return self.variable_class(self, name=name)

    def make_constant(self, value, name=None):
        return self.constant_class(self, self.filter(value), name=name)

    def __call__(self, name=None):
        return self.make_variable(name)

    def is_super(self, other):
        """True when every value of ``other`` is also a value of this type."""
        return self == other

    def convert_variable(self, var):
        """``var`` seen as this type (possibly through a conversion op), or None."""
        if var.type == self:
            return var
        return None


class Variable:
    """A symbolic value in a graph.

    ``owner`` is the Apply node that computes it (None for inputs and
    constants) and ``index`` its position among that node's outputs.
    """

    def __init__(self, type, owner=None, index=None, name=None):
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name
        self.tag = _test_value.tag_for(type)

    def __str__(self):
        if self.name is not None:
            return self.name
        if self.owner is not None:
            op = self.owner.op
            if len(self.owner.outputs) == 1:
                return f"{op}.out"
            return f"{op}.{self.index}"
        return f"<{self.type}>"

    def __repr__(self):
        from symgraph.config import config

        # Theano's print_test_value: the test value under the name, when there is one
        if config.get("print_test_value") and "test_value" in vars(self.tag):
            return f"{self}\n{self.tag.test_value!r}"
        return str(self)

    def get_test_value(self):
        """This variable's test value (see ``symgraph.graph.test_value``); raises
        TestValueError when it has none."""
        return _test_value.get_test_value(self)

    def clone(self):
        """A new unowned Variable of the same type and name."""
        cp = type(self)(self.type, None, None, self.name)
        cp.tag = SimpleNamespace(**vars(self.tag))
        return cp

    def get_parents(self):
        return [self.owner] if self.owner is not None else []

    def eval(self, inputs_to_values=None):
        """Compile (cached per set of inputs) and run this variable's graph."""
        from symgraph.compile.function import function

        inputs_to_values = inputs_to_values or {}
        inputs = tuple(sorted(inputs_to_values, key=id))
        cache = self.__dict__.setdefault("_eval_cache", {})
        if inputs not in cache:
            cache[inputs] = function(list(inputs), self, on_unused_input="ignore")
        return cache[inputs](*[inputs_to_values[v] for v in inputs])

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_eval_cache", None)
        return state


class Constant(Variable):
    """A Variable with a fixed value, known when the graph is built."""

    def __init__(self, type, data, name=None):
        super().__init__(type, None, None, name)
        self.data = data

    def signature(self):
        """A hashable summary used to merge equal constants."""
        return (self.type, _data_signature(self.data))

    def equals(self, other):
        return isinstance(other, Constant) and self.type == other.type and \
            self.type.values_eq(self.data, other.data)

    def clone(self):
        cp = type(self)(self.type, self.data, self.name)
        cp.tag = SimpleNamespace(**vars(self.tag))
        return cp

    def __str__(self):
        if self.name is not None:
            return self.name
        text = str(self.data)
        return text if len(text) <= 20 else text[:17] + "..."


def _data_signature(data):
    try:
        import numpy as np

        arr = np.asarray(data)
        return (arr.dtype.str, arr.shape, hash(arr.tobytes()))
    except Exception:  # a non-array constant: fall back to identity
        return id(data)


class Apply:
    """One application of an Op to input Variables, producing output Variables.

    ``tag.trace`` holds the user's source line that built the node, and
    ``tag.rewrites`` the names of the rewrites that produced it, if any.
    """

    def __init__(self, op, inputs, outputs, trace=None):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.tag = SimpleNamespace(trace=trace if trace is not None else user_line(),
                                   rewrites=())
        for i, out in enumerate(self.outputs):
            if out.owner is not None and out.owner is not self:
                raise ValueError(f"output {i} of {op} already belongs to another node")
            out.owner = self
            out.index = i

    @property
    def out(self):
        """The single output (error when the node has several)."""
        if len(self.outputs) != 1:
            raise AttributeError(f"{self.op} has {len(self.outputs)} outputs; use .outputs")
        return self.outputs[0]

    def default_output(self):
        return self.outputs[getattr(self.op, "default_output", None) or 0]

    def clone(self):
        """A copy with the same inputs and fresh outputs."""
        new = Apply(self.op, self.inputs, [o.clone() for o in self.outputs], trace=self.tag.trace)
        new.tag.rewrites = self.tag.rewrites
        return new

    def clone_with_new_inputs(self, inputs, strict=True):
        """The same op applied to ``inputs``; rebuilt through make_node when types differ."""
        if all(a.type == b.type for a, b in zip(inputs, self.inputs)) and \
                len(inputs) == len(self.inputs):
            new = self.clone()
            new.inputs = list(inputs)
            return new
        if strict:
            new = self.op.make_node(*inputs)
            new.tag.trace = self.tag.trace
            new.tag.rewrites = self.tag.rewrites
            return new
        raise TypeError("input types differ")

    @property
    def nin(self):
        return len(self.inputs)

    @property
    def nout(self):
        return len(self.outputs)

    def __str__(self):
        return f"{self.op}({', '.join(str(i) for i in self.inputs)})"

    __repr__ = __str__


class Op(PropsValue):
    """An operation: builds Apply nodes and knows how to compute them.

    Subclasses implement ``make_node(*inputs) -> Apply`` and
    ``perform(node, inputs, output_storage)`` (the NumPy reference: write each
    result into ``output_storage[i][0]``); optionally ``grad`` or ``L_op``,
    ``R_op``, ``infer_shape(fgraph, node, input_shapes)``, ``destroy_map`` and
    ``view_map`` ({output index: [input indices]}), and native code hooks.
    """

    destroy_map = {}
    view_map = {}
    default_output = None

    def make_node(self, *inputs):
        raise NotImplementedError

    def __call__(self, *inputs, **kwargs):
        node = self.make_node(*inputs, **kwargs)
        mode = _test_value.test_values_enabled()
        if mode is not None:
            _test_value.compute_test_values(node, mode)
        if self.default_output is not None:
            return node.outputs[self.default_output]
        if len(node.outputs) == 1:
            return node.outputs[0]
        return node.outputs

    def perform(self, node, inputs, output_storage):
        raise NotImplementedError(f"{type(self).__name__} has no perform")

    def L_op(self, inputs, outputs, output_grads):
        return self.grad(inputs, output_grads)

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import grad_not_implemented

        return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]

    def R_op(self, inputs, eval_points):
        raise NotImplementedError(f"{self} does not implement R_op")

    def connection_pattern(self, node):
        """connection_pattern[i][j]: whether output j depends on input i."""
        return [[True] * len(node.outputs) for _ in node.inputs]

    def do_constant_folding(self, fgraph, node):
        return True


# ---------------------------------------------------------------------------
# Walking graphs


def ancestors(variables, blockers=()):
    """Every variable that ``variables`` depend on (them included), parents first."""
    blockers = set(blockers)
    seen, order = set(), []
    stack = list(reversed(list(variables)))
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        order.append(var)
        if var.owner is not None and var not in blockers:
            stack.extend(reversed(var.owner.inputs))
    return order


def graph_inputs(variables, blockers=()):
    """The variables without owner (or blocked) that ``variables`` depend on."""
    blockers = set(blockers)
    return [v for v in ancestors(variables, blockers) if v.owner is None or v in blockers]


def io_toposort(inputs, outputs, orderings=None):
    """Apply nodes between ``inputs`` and ``outputs`` in an order where each
    node comes after the nodes that compute its inputs.

    ``orderings`` maps a node to extra nodes that must come before it.
    """
    stop = set(inputs)
    orderings = orderings or {}
    order, done, visiting = [], set(), set()
    for out in outputs:
        if out.owner is None or out in stop:
            continue
        stack = [(out.owner, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded:
                visiting.discard(node)
                done.add(node)
                order.append(node)
                continue
            if node in visiting:
                raise ValueError(f"the graph has a cycle through {node}")
            visiting.add(node)
            stack.append((node, True))
            deps = [i.owner for i in node.inputs if i.owner is not None and i not in stop]
            deps.extend(orderings.get(node, ()))
            for dep in reversed(deps):
                if dep not in done:
                    stack.append((dep, False))
    return order


def clone_graph(inputs, outputs, copy_inputs=True, memo=None):
    """Copy the graph between ``inputs`` and ``outputs``.

    Returns ``(new_inputs, new_outputs, memo)``; ``memo`` maps every original
    variable to its copy.  Constants and unlisted graph inputs are kept as they are
    unless ``copy_inputs`` asks otherwise for the listed inputs.
    """
    memo = {} if memo is None else memo
    for inp in inputs:
        if inp not in memo:
            memo[inp] = inp.clone() if copy_inputs else inp
    for node in io_toposort(inputs, outputs):
        for inp in node.inputs:
            memo.setdefault(inp, inp)
        new = node.clone_with_new_inputs([memo[i] for i in node.inputs])
        for old_out, new_out in zip(node.outputs, new.outputs):
            new_out.name = old_out.name
            new_out.tag = type(old_out.tag)(**vars(old_out.tag))
            memo[old_out] = new_out
    for out in outputs:
        memo.setdefault(out, out)
    return [memo[i] for i in inputs], [memo[o] for o in outputs], memo


def clone_replace(outputs, replace=None):
    """Copy ``outputs``'s graph with the variables in ``replace`` substituted."""
    replace = dict(replace or {})
    single = isinstance(outputs, Variable)
    outs = [outputs] if single else list(outputs)
    memo = dict(replace)
    order = io_toposort(list(replace), outs)
    for node in order:
        new_inputs = [memo.get(i, i) for i in node.inputs]
        if all(a is b for a, b in zip(new_inputs, node.inputs)):
            for o in node.outputs:
                memo.setdefault(o, o)
            continue
        new = node.clone_with_new_inputs(new_inputs)
        for old_out, new_out in zip(node.outputs, new.outputs):
            new_out.name = old_out.name
            memo[old_out] = new_out
    result = [memo.get(o, o) for o in outs]
    return result[0] if single else result


def applys_between(inputs, outputs):
    return io_toposort(inputs, outputs)


def is_in_ancestors(node, var_node):
    """True when ``var_node`` is ``node`` or one of its ancestors' owners."""
    return any(v.owner is var_node for v in ancestors(node.inputs)) or node is var_node
