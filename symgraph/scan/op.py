"""The Scan op: a loop whose body is a symgraph graph.

The op holds the step graph (``inner_inputs`` -> ``inner_outputs``, closed:
every value it needs from outside is an input) and a ``ScanInfo`` describing
the roles of the inputs and outputs (see ``scan/info.py``).  ``scan()``
(``scan/api.py``) builds it from a step function; its gradient
(``scan/grad.py``) and R-operator (``scan/rop.py``) build further Scan nodes.

Execution: when a function that contains the node is compiled, the step graph
is compiled once into an inner function with the same mode (``prepare_node``).
``perform`` runs the loop in C when that function is all native
(``scan/native_loop.py``), else calls it once per step (``scan/loop.py``).
"""

import uuid

from symgraph.graph.basic import Apply, Op, Type, Variable, ancestors
from symgraph.scan.info import ScanInfo


class StateTraceType(Type):
    """The values a non-tensor state (a random generator) took before each
    step: a Python list, which the gradient reads to replay the steps."""

    __props__ = ()

    def filter(self, value, strict=False, allow_downcast=None):
        if not isinstance(value, list):
            raise TypeError(f"a scan state trace is a list, got {type(value).__name__}")
        return value

    def values_eq(self, a, b):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))

    variable_class = Variable

    def __str__(self):
        return "StateTrace"

    __repr__ = __str__


class Scan(Op):
    """A loop over a step graph (see ``scan/info.py`` for the input and output layout).

    ``inner_inputs``/``inner_outputs``: the step graph; ``info``: a ScanInfo;
    ``name``: shown in printing and errors; ``mode``: the mode of the inner
    function (None: the mode of the function that runs the node); ``labels``:
    ``{category: [text]}`` naming each entry as the user wrote it (for errors);
    ``defined_at``: the user's line that built the loop.
    """

    __props__ = ("info", "name", "key")

    def __init__(self, inner_inputs, inner_outputs, info, name=None, mode=None, profile=False,
                 labels=None, defined_at=None):
        if not isinstance(info, ScanInfo):
            raise TypeError("Scan needs a ScanInfo")
        if len(inner_inputs) != info.n_inner_inputs:
            raise ValueError(f"Scan: {len(inner_inputs)} inner inputs, the info says "
                             f"{info.n_inner_inputs}")
        if len(inner_outputs) != info.n_inner_outputs:
            raise ValueError(f"Scan: {len(inner_outputs)} inner outputs, the info says "
                             f"{info.n_inner_outputs}")
        self.inner_inputs = list(inner_inputs)
        self.inner_outputs = list(inner_outputs)
        self.info = info
        self.name = name
        # Two Scan ops are the same op only when they share their step graph (a
        # random key: unique across processes, so unpickled graphs never collide).
        self.key = uuid.uuid4().hex
        self.mode = mode
        self.profile = profile
        self.labels = labels or {}
        self.defined_at = defined_at
        self._default_inner = None

    def with_info(self, **changes):
        """The same step graph under a changed ScanInfo (e.g. another ``rec_keep``)."""
        return Scan(self.inner_inputs, self.inner_outputs, self.info.replace(**changes),
                    name=self.name, mode=self.mode, profile=self.profile, labels=self.labels,
                    defined_at=self.defined_at)

    def __str__(self):
        parts = [self.name or "scan_fn"]
        if self.info.as_while:
            parts.append("while")
        if any(self.info.rec_keep):
            parts.append("keep=" + ",".join(str(k) for k in self.info.rec_keep))
        return f"Scan{{{', '.join(parts)}}}"

    __repr__ = __str__

    def where(self):
        """How errors name this loop: its name and the user's line that built it."""
        return describe_scan(self.name, self.defined_at)

    def label(self, category, index):
        """The user's name for an entry: ``'sequences[1] (tap -2)'``..."""
        names = self.labels.get(category)
        if names and index < len(names):
            return names[index]
        return {"seq": "sequence", "rec": "recurrent output", "nitsot": "output",
                "state": "state", "nonseq": "non-sequence"}[category] + f" {index}"

    # -- building ------------------------------------------------------------

    def make_node(self, *inputs):
        """Check the outer inputs against the step's inputs (dtype, and one more
        dimension for sequences and initial buffers) and type the outputs."""
        from symgraph.tensor.basic import as_tensor_variable
        from symgraph.tensor.type import TensorType

        info = self.info
        if len(inputs) != info.n_outer_inputs:
            raise TypeError(f"{self} takes {info.n_outer_inputs} inputs, got {len(inputs)}")
        inputs = list(inputs)
        n_steps = as_tensor_variable(inputs[0])
        if n_steps.ndim != 0 or n_steps.dtype[:3] not in ("int", "uin"):
            raise TypeError(f"{self}: n_steps must be an integer scalar, got {n_steps.type}")
        inputs[0] = n_steps
        inner = self.inner_inputs
        for i in range(info.n_seqs):
            pos = info.outer_seq(i)
            inputs[pos] = _check_outer(self, inputs[pos], inner[info.inner_seq(i)], 1,
                                       self.label("seq", i))
        for k in range(info.n_rec):
            pos = info.outer_rec(k)
            inputs[pos] = _check_outer(self, inputs[pos], inner[info.inner_taps(k)[0]], 1,
                                       self.label("rec", k))
        for s in range(info.n_states):
            pos = info.outer_state(s)
            if inputs[pos].type != inner[info.inner_state(s)].type:
                raise TypeError(f"{self}: {self.label('state', s)} has type "
                                f"{inputs[pos].type}, the step expects "
                                f"{inner[info.inner_state(s)].type}")
        for m in range(info.n_nonseqs):
            pos = info.outer_nonseq(m)
            inputs[pos] = _check_outer(self, inputs[pos], inner[info.inner_nonseq(m)], 0,
                                       self.label("nonseq", m))
        outputs = []
        for k in range(info.n_rec):
            elem = inner[info.inner_taps(k)[0]].type
            outputs.append(TensorType(elem.dtype, shape=(None,) + elem.shape)())
        for j in range(info.n_nitsot):
            out = self.inner_outputs[info.inner_out_nitsot(j)].type
            outputs.append(TensorType(out.dtype, shape=(None,) + out.shape)())
        for s in range(info.n_states):
            outputs.append(inner[info.inner_state(s)].type())
        for s in range(info.n_states):
            outputs.append(StateTraceType()())
        return Apply(self, inputs, outputs)

    # -- running -------------------------------------------------------------

    def prepare_node(self, node, mode):
        """Compile the step graph for a function compiled with ``mode`` (once per
        compiled function: the inner function lives on the function's node)."""
        node.tag.scan_inner = self.compile_inner(self.mode if self.mode is not None else mode)

    def compile_inner(self, mode=None):
        """The step graph compiled into a symgraph function."""
        from symgraph.compile.function import function

        return function(self.inner_inputs, list(self.inner_outputs), mode=mode,
                        on_unused_input="ignore", profile=self.profile or None,
                        name=f"step function of {self.where()}")

    def inner_function(self, node):
        """The node's compiled step (compiled now with the default mode if the
        node was not prepared by a compiled function)."""
        fn = getattr(node.tag, "scan_inner", None)
        if fn is None:
            if self._default_inner is None:
                self._default_inner = self.compile_inner(self.mode)
            fn = self._default_inner
        return fn

    def native_loop(self, node, inner):
        """The NativeScan that runs ``inner`` in C (``scan/native_loop.py``),
        made once per compiled step function; None when the step needs Python."""
        from symgraph.scan import native_loop

        cached = getattr(node.tag, "scan_loop", None)
        if cached is None or cached[0] is not inner:
            cached = node.tag.scan_loop = (inner, native_loop.native_loop(self, inner))
        return cached[1] if native_loop.enabled else None

    def perform(self, node, inputs, output_storage):
        from symgraph.scan.loop import ScanProfile, run_scan

        inner = self.inner_function(node)
        loop = self.native_loop(node, inner)
        if not self.profile:
            if loop is None or loop.run(node, inputs, output_storage) is None:
                run_scan(self, node, inputs, output_storage, inner)
            return
        stats = getattr(node.tag, "scan_profile", None)
        if stats is None or stats.inner is not inner:
            stats = node.tag.scan_profile = ScanProfile(self, inner)
        stats.run(node, inputs, output_storage, loop)

    def debug_inner_graph(self, node):
        """``(inner inputs, inner outputs, outer variable feeding each inner
        input)`` for debugprint: the compiled step when the node belongs to a
        compiled function, else the step graph as built."""
        fn = getattr(node.tag, "scan_inner", None)
        fgraph = fn.maker.fgraph if fn is not None else None
        inputs = list(fgraph.inputs) if fgraph is not None else self.inner_inputs
        outputs = list(fgraph.outputs) if fgraph is not None else self.inner_outputs
        sources = [node.inputs[self.info.inner_to_outer_input(i)]
                   for i in range(len(self.inner_inputs))]
        return inputs, outputs, sources

    def do_constant_folding(self, fgraph, node):
        return False

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_default_inner"] = None
        return state

    # -- shapes ----------------------------------------------------------------

    def infer_shape(self, fgraph, node, input_shapes):
        from symgraph.scan.shapes import scan_infer_shape

        return scan_infer_shape(self, node, input_shapes)

    # -- gradients ---------------------------------------------------------------

    def connection_pattern(self, node):
        """Output j depends on input i when a path through the step graph and
        the recurrences (a fixed point over the taps) joins them."""
        info = self.info
        deps = self.inner_dependencies()
        reach = _outer_reach(info, deps)
        pattern = [[False] * len(node.outputs) for _ in node.inputs]
        for out_index, inputs in reach.items():
            for i in inputs:
                pattern[i][out_index] = True
        return pattern

    def inner_dependencies(self):
        """For each inner output, the set of inner input indices it depends on."""
        cached = getattr(self, "_deps", None)
        if cached is None:
            index = {var: i for i, var in enumerate(self.inner_inputs)}
            cached = []
            for out in self.inner_outputs:
                cached.append({index[v] for v in ancestors([out]) if v in index})
            self._deps = cached
        return cached

    def L_op(self, inputs, outputs, output_grads):
        """Backpropagation through time as a backward scan (``scan/grad.py``)."""
        from symgraph.scan.grad import scan_grad

        return scan_grad(self, inputs, outputs, output_grads)

    def R_op(self, inputs, eval_points):
        """The outputs' tangents, computed by a tangent scan (``scan/rop.py``)."""
        from symgraph.scan.rop import scan_rop

        return scan_rop(self, inputs, eval_points)


def describe_scan(name, defined_at):
    """``"scan 'name' (built at file:line)"``: how errors name a loop."""
    text = f"scan {name!r}" if name else "scan"
    if defined_at is not None:
        text += f" (built at {defined_at.filename}:{defined_at.lineno})"
    return text


def _check_outer(op, var, placeholder, extra_dims, label):
    """``var`` (an outer input) checked against the inner ``placeholder``:
    same dtype, ``extra_dims`` more dimensions."""
    from symgraph.tensor.basic import as_tensor_variable

    if not isinstance(var, Variable):
        var = as_tensor_variable(var)
    ptype = placeholder.type
    if isinstance(var.type, StateTraceType) and extra_dims == 1:
        return var   # the gradient replays a state's values as a sequence
    if not hasattr(ptype, "ndim"):
        if var.type != ptype:
            raise TypeError(f"{op}: {label} has type {var.type}, the step expects {ptype}")
        return var
    if var.type.dtype != ptype.dtype or var.type.ndim != ptype.ndim + extra_dims:
        raise TypeError(f"{op}: {label} has type {var.type}; the step expects "
                        f"{'entries of ' if extra_dims else ''}type {ptype}")
    return var


def _outer_reach(info, deps):
    """{outer output index: set of outer input indices its values depend on}.

    A recurrent output depends on its initial value and on whatever its step
    value depends on, through the other recurrences too (a fixed point)."""
    direct = []
    for j, d in enumerate(deps):
        outer = set()
        feeds = set()
        for i in d:
            owner = info.tap_owner(i)
            if owner is not None:
                feeds.add(("rec", owner[0]))
            elif info.n_seqs + info.n_taps <= i < info.n_seqs + info.n_taps + info.n_states:
                feeds.add(("state", i - info.n_seqs - info.n_taps))
            outer.add(info.inner_to_outer_input(i))
        direct.append((outer, feeds))

    rec = {k: {info.outer_rec(k)} for k in range(info.n_rec)}
    state = {s: {info.outer_state(s)} for s in range(info.n_states)}

    def closure(j):
        outer, feeds = direct[j]
        result = set(outer)
        for kind, idx in feeds:
            result |= rec[idx] if kind == "rec" else state[idx]
        return result

    changed = True
    while changed:
        changed = False
        for k in range(info.n_rec):
            new = rec[k] | closure(info.inner_out_rec(k))
            if new != rec[k]:
                rec[k], changed = new, True
        for s in range(info.n_states):
            new = state[s] | closure(info.inner_out_state(s))
            if new != state[s]:
                state[s], changed = new, True
    reach = {}
    for k in range(info.n_rec):
        reach[info.out_rec(k)] = rec[k]
    for j in range(info.n_nitsot):
        reach[info.out_nitsot(j)] = closure(info.inner_out_nitsot(j))
    for s in range(info.n_states):
        reach[info.out_state(s)] = state[s]
        reach[info.out_state_trace(s)] = state[s]
    return reach


def scan_apply(op, inputs):
    """The outputs of ``op`` applied to ``inputs`` (always a list)."""
    return list(op.make_node(*inputs).outputs)


__all__ = ["Scan", "ScanInfo", "StateTraceType", "scan_apply"]
