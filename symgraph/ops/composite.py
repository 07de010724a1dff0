"""Composite: a scalar op made of a small graph of scalar ops (Theano's Composite).

Element-wise fusion (``symgraph.opt.fusion``) replaces a region of Elemwise
nodes by one ``Elemwise(Composite(...))``: one loop, no temporaries.  The
inner graph is a value:

* ``nin``: the number of inputs;
* ``nodes``: ``((scalar_op, args), ...)`` in topological order;
* ``outputs``: the refs of the outputs.

A *ref* names a value: ``("i", k)`` input k, ``("n", j, o)`` output o of
inner node j, ``("c", dtype, text)`` a scalar constant (``text`` is the repr
of the Python value, so that NaN constants compare equal too).  Equal inner
graphs give equal (and equally hashed) composites, so merge and the compile
cache see them as one.

The inner graph is dtype-generic, as every ScalarOp: each inner node's dtype
follows from the composite's input dtypes by the members' own rules, so it is
exactly the dtype the unfused node had.  Python (``impl``) and C (``c_body``)
both round every inner value to that dtype, so results do not change when
nodes are fused: int overflow wraps where it wrapped, float32 stays float32.
"""

import numpy as np

from symgraph.ops.scalar import ScalarOp

__all__ = ["Composite", "composite_from_nodes"]


def _literal_value(dtype, text):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return text == "True"
    if kind in "iu":
        return int(text)
    return float(text)


def literal_ref(value, dtype):
    """The ref of a scalar constant ``value`` of ``dtype``."""
    dtype = str(dtype)
    value = np.asarray(value, dtype=dtype).reshape(()).item()
    return ("c", dtype, repr(value))


class Composite(ScalarOp):
    """A scalar op whose element function is a graph of other scalar ops.

    Build one with ``composite_from_nodes`` (from Elemwise nodes) or directly
    from the description in the module docstring.  Several outputs are
    allowed; Composites inside the description are inlined.
    """

    __props__ = ("nin", "nodes", "outputs")

    def __init__(self, nin, nodes, outputs):
        flat_nodes, flat_outputs = _inline(tuple(nodes), tuple(outputs))
        self.nin = int(nin)
        self.nodes = flat_nodes
        self.outputs = flat_outputs
        self.nout = len(self.outputs)
        if self.nout == 0:
            raise ValueError("Composite: needs at least one output")
        self._dtype_cache = {}
        self._str = None

    name = "composite"

    # -- dtypes ----------------------------------------------------------------

    def inner_dtypes(self, *dtypes):
        """Per inner node, its output dtypes, for the input ``dtypes``."""
        dtypes = tuple(str(d) for d in dtypes)
        cached = self._dtype_cache.get(dtypes)
        if cached is None:
            if len(dtypes) != self.nin:
                raise TypeError(f"{self} takes {self.nin} inputs, got {len(dtypes)}")
            cached = []
            for op, args in self.nodes:
                ins = [self._ref_dtype(r, dtypes, cached) for r in args]
                cached.append(tuple(str(d) for d in op.output_dtypes(*ins)))
            cached = tuple(cached)
            self._dtype_cache[dtypes] = cached
        return cached

    @staticmethod
    def _ref_dtype(ref, dtypes, node_dtypes):
        if ref[0] == "i":
            return dtypes[ref[1]]
        if ref[0] == "n":
            return node_dtypes[ref[1]][ref[2]]
        return ref[1]

    def output_dtypes(self, *dtypes):
        inner = self.inner_dtypes(*dtypes)
        return [self._ref_dtype(r, [str(d) for d in dtypes], inner) for r in self.outputs]

    def output_dtype(self, *dtypes):  # noqa: D401 - ScalarOp's rule, first output
        return self.output_dtypes(*dtypes)[0]

    # -- Python ------------------------------------------------------------------

    def impl(self, *inputs):
        """Evaluate the inner nodes in order, each as its Elemwise would:
        inputs cast to the member's compute dtype, results to its dtype."""
        inputs = [np.asarray(x) for x in inputs]
        dtypes = [str(x.dtype) for x in inputs]
        inner = self.inner_dtypes(*dtypes)
        values = []
        for (op, args), out_dtypes in zip(self.nodes, inner):
            arrays = [self._ref_value(r, inputs, values) for r in args]
            compute = op.compute_dtype(*[str(a.dtype) for a in arrays])
            if compute is not None:
                arrays = [np.asarray(a, dtype=compute) for a in arrays]
            result = op.impl(*arrays)
            if op.nout == 1:
                result = (result,)
            values.append(tuple(np.asarray(r).astype(dt, copy=False)
                                for r, dt in zip(result, out_dtypes)))
        shape = np.broadcast_shapes(*[x.shape for x in inputs]) if inputs else ()
        outs = []
        for ref in self.outputs:
            value = self._ref_value(ref, inputs, values)
            if value.shape != shape:  # an output that depends on constants only
                value = np.broadcast_to(value, shape).copy()
            outs.append(value)
        return outs[0] if self.nout == 1 else tuple(outs)

    @staticmethod
    def _ref_value(ref, inputs, values):
        if ref[0] == "i":
            return inputs[ref[1]]
        if ref[0] == "n":
            return values[ref[1]][ref[2]]
        return np.asarray(_literal_value(ref[1], ref[2]), dtype=ref[1])

    def grad(self, inputs, outputs, output_grads):
        raise TypeError(f"{self} has no gradient: Composite ops are made by element-wise "
                        f"fusion, which runs after gradients are built; take the gradient "
                        f"of the unfused graph")

    # -- printing ----------------------------------------------------------------

    def __str__(self):
        if self._str is None:
            self._str = f"Composite{{{_render(self)}}}"
        return self._str

    __repr__ = __str__


def _inline(nodes, outputs):
    """Replace inner Composites by their members (refs renumbered)."""
    if not any(isinstance(op, Composite) for op, _ in nodes):
        return nodes, outputs
    flat = []
    where = []  # per old node: the refs of its outputs in the flat list

    def remap(ref):
        return where[ref[1]][ref[2]] if ref[0] == "n" else ref

    for op, args in nodes:
        args = tuple(remap(r) for r in args)
        if not isinstance(op, Composite):
            flat.append((op, args))
            where.append([("n", len(flat) - 1, o) for o in range(op.nout)])
            continue
        start = len(flat)

        def inner_ref(ref, args=args, start=start):
            if ref[0] == "i":
                return args[ref[1]]
            if ref[0] == "n":
                return ("n", start + ref[1], ref[2])
            return ref

        for inner_op, inner_args in op.nodes:
            flat.append((inner_op, tuple(inner_ref(r) for r in inner_args)))
        where.append([inner_ref(r) for r in op.outputs])
    return tuple(flat), tuple(remap(r) for r in outputs)


# -- building from Elemwise nodes ---------------------------------------------------

def composite_from_nodes(nodes, inputs, outputs, literals=None):
    """The Composite computing ``outputs`` from ``inputs`` through ``nodes``.

    ``nodes``: Elemwise Apply nodes in topological order; ``inputs``: the
    outer variables (in the order of the composite's inputs); ``outputs``:
    variables among the nodes' outputs; ``literals``: {variable: (value,
    dtype)} for scalar constants written into the code instead of inputs.
    """
    literals = literals or {}
    refs = {var: ("i", k) for k, var in enumerate(inputs)}
    for var, (value, dtype) in literals.items():
        refs[var] = literal_ref(value, dtype)
    described = []
    for j, node in enumerate(nodes):
        args = []
        for var in node.inputs:
            if var not in refs:
                raise ValueError(f"composite_from_nodes: {var} (input of {node}) is "
                                 f"neither an input, a literal nor an earlier node's output")
            args.append(refs[var])
        described.append((node.op.scalar_op, tuple(args)))
        for o, out in enumerate(node.outputs):
            refs[out] = ("n", j, o)
    return Composite(len(inputs), described, [refs[v] for v in outputs])


# -- printing --------------------------------------------------------------------

_INFIX = {"add": (" + ", 1), "sub": (" - ", 1), "mul": ("*", 2), "true_div": ("/", 2),
          "lt": (" < ", 0), "gt": (" > ", 0), "le": (" <= ", 0), "ge": (" >= ", 0),
          "eq": (" == ", 0), "neq": (" != ", 0)}
_MAX_STR = 400


def _render(comp):
    """A readable formula: ``exp(-(i0*i0))*i1 + tanh(i2)*0.5``.  Inner values
    used more than once are named (``t3=...;``), so that the text stays
    linear in the size of the graph."""
    uses = {}
    for _, args in comp.nodes:
        for r in args:
            if r[0] == "n":
                uses[r[:2]] = uses.get(r[:2], 0) + 1
    for r in comp.outputs:
        if r[0] == "n":
            uses[r[:2]] = uses.get(r[:2], 0) + 1
    texts = []   # per node: (text, precedence)
    lets = []
    for j, (op, args) in enumerate(comp.nodes):
        parts = [_ref_text(r, texts) for r in args]
        text, prec = _op_text(op, parts)
        if uses.get(("n", j), 0) > 1 or op.nout > 1:
            lets.append(f"t{j}={text}")
            text, prec = f"t{j}", 9
        texts.append((text, prec, op.nout > 1))
        if sum(len(t) for t in lets) > _MAX_STR:
            break
    else:
        outs = ", ".join(_ref_text(r, texts)[0] for r in comp.outputs)
        full = "; ".join(lets + [outs])
        if len(full) <= _MAX_STR:
            return full
    ops = sorted({op.name for op, _ in comp.nodes})
    return f"{len(comp.nodes)} nodes: {', '.join(ops)}"


def _ref_text(ref, texts):
    if ref[0] == "i":
        return (f"i{ref[1]}", 9)
    if ref[0] == "n":
        text, prec, multi = texts[ref[1]]
        return (f"{text}[{ref[2]}]" if multi else text), prec
    value = _literal_value(ref[1], ref[2])
    return (str(np.asarray(value, dtype=ref[1]).reshape(())), 9)


def _op_text(op, parts):
    infix = _INFIX.get(op.name)
    if infix is not None and len(parts) >= 2:
        sym, prec = infix
        shown = []
        for pos, (text, p) in enumerate(parts):
            # a right operand of - and / needs parentheses at equal precedence
            tight = pos > 0 and op.name in ("sub", "true_div")
            shown.append(f"({text})" if p < prec or (tight and p == prec) else text)
        return sym.join(shown), prec
    if op.name == "neg":
        text, p = parts[0]
        return (f"-({text})" if p < 3 else f"-{text}"), 3
    return f"{op.name}({', '.join(t for t, _ in parts)})", 9
