"""In-place rewrites: let an op overwrite an input that nobody needs any more.

The last phase of the pipeline (``inplace``, tags ``fast_run`` and
``inplace``).  An ``Elemwise`` node (fused ``Composite`` ones included) gets
``inplace_pattern={output: input}`` and writes its result into that input's
buffer; ``IncSubtensor`` / ``AdvancedIncSubtensor`` get ``inplace=True`` and
update ``x`` itself instead of a copy.  No temporary is allocated for them,
and an update such as ``w <- w - lr * g`` writes straight into ``w``.

What may be overwritten is the destroy handler's decision
(``graph/destroy.py``): never a function input the caller owns (only shared
variables the function updates and ``In(x, mutable=True)`` inputs are
destroyable), never a constant, never a value that is also a function
output, and only once every other reader of the old value has run.  This
module proposes candidates, applies them with a History checkpoint, calls
``fgraph.validate()`` and reverts on InconsistencyError.  Cheap checks that
mirror the handler's rules come first, so that almost every proposal passes:
validating walks the whole graph.

Proposals are applied in batches (one per node, all its outputs at once,
validated once per batch); a batch that fails is split in halves until the
offending proposal is found alone and rejected, so the usual cost is a few
validations per graph rather than one per node.

The ``InputDestroyersLast`` feature schedules the nodes that overwrite a
function input (an updated shared variable, a mutable input) after every
node that does not depend on them, so that a call that raises on the way
(a shape mismatch, say) has not yet changed any shared value; only an error
inside or after those last nodes can leave a shared variable half updated.

``Gemm`` / ``Gemv`` / ``Ger`` (``ops/gemm.py``) get ``inplace=True`` and
write ``b * z + a * dot(x, y)`` into z's buffer: the SGD update of a dense
layer's weights then costs one BLAS call and no copy of the weights.
"""

import weakref

from symgraph.graph.basic import Constant
from symgraph.graph.fg import Feature, History, InconsistencyError
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter


# ---------------------------------------------------------------------------
# Building the in-place version of a node


def _elemwise_candidates(node):
    """For each output, the inputs it could overwrite; None when the node is
    not eligible.  Every output must get one: the native kernel ABI has one
    kind per node (INPLACE: every output k is the array of its input
    ``inplace_of[k]``), so a node goes in place all at once or not at all."""
    from symgraph.ops.elemwise import Elemwise

    op = node.op
    if not isinstance(op, Elemwise) or op.inplace_pattern:
        return None
    if type(op) is not Elemwise and not hasattr(op, "with_inplace_pattern"):
        return None  # an unknown subclass: its constructor may differ
    # Same dtype and static shape: an input that broadcasts (or whose static
    # shape says less than the output's) cannot hold the result.  Compared with
    # the outputs rebuilt from the inputs, which may say more than the node's
    # own when an input was replaced by a more specific variable (fusion
    # exposing an intermediate with the fused node's static shape).
    outputs = op.make_node(*node.inputs).outputs
    return [(o, [i for i, inp in enumerate(node.inputs) if inp.type == out.type])
            for o, out in enumerate(outputs)]


def _elemwise_build(node, pattern):
    """``node``'s op with ``pattern`` {output: input} as its inplace_pattern,
    applied to the node's inputs."""
    from symgraph.ops.elemwise import Elemwise

    op = node.op
    maker = getattr(op, "with_inplace_pattern", None)
    if maker is not None:  # a subclass that knows how to copy itself
        return maker(pattern)(*node.inputs)
    return Elemwise(op.scalar_op, inplace_pattern=pattern, name=op.name)(*node.inputs)


def _incsubtensor_candidates(node):
    from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
    from symgraph.ops.subtensor import IncSubtensor

    if type(node.op) not in (IncSubtensor, AdvancedIncSubtensor) or node.op.inplace:
        return None
    return [(0, [0])]


def _incsubtensor_build(node, pattern):
    op = node.op
    return type(op)(op.idx_list, op.set_instead_of_inc, inplace=True)(*node.inputs)


def _blas_update_candidates(node):
    from symgraph.ops.gemm import Gemm, Gemv, Ger

    op = _device_inner(node.op)
    if type(op) not in (Gemm, Gemv, Ger) or op.inplace:
        return None
    # The result has z's type (make_node takes z's dtype, and z must have the
    # result's shape at run time), so z's buffer always fits it.
    return [(0, [0])]


def _blas_update_build(node, pattern):
    from symgraph.ops.device_op import OnDevice

    op = node.op
    if isinstance(op, OnDevice):     # the device's kernels write z in place too
        return OnDevice(type(op.op)(inplace=True), op.context_name,
                        op.host_inputs)(*node.inputs)
    return type(op)(inplace=True)(*node.inputs)


def _device_inner(op):
    """The op a device node wraps, or ``op`` itself."""
    from symgraph.ops.device_op import OnDevice

    return op.op if isinstance(op, OnDevice) else op


# name -> (candidates(node) -> [(output, [inputs it could overwrite])] or None,
#          build(node, {output: input}) -> the new node's outputs)
_BUILDERS = {
    "inplace_elemwise": (_elemwise_candidates, _elemwise_build),
    "inplace_incsubtensor": (_incsubtensor_candidates, _incsubtensor_build),
    "inplace_blas_update": (_blas_update_candidates, _blas_update_build),
}


# ---------------------------------------------------------------------------
# Cheap checks that mirror the destroy handler's rules


def _view_sources(var):
    """The variables ``var`` directly aliases through its owner's view_map."""
    if var.owner is None:
        return []
    src = (getattr(var.owner.op, "view_map", {}) or {}).get(var.index) or []
    return [var.owner.inputs[k] for k in src]


def _roots(var):
    """Every variable whose value ``var`` may be a view of (IfElse(as_view)
    aliases either branch, so there can be several)."""
    roots, stack, seen = set(), [var], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        sources = _view_sources(v)
        if sources:
            stack.extend(sources)
        else:
            roots.add(v)
    return roots


def _views(fgraph, root):
    """``root`` and every variable of the graph that is a view of it."""
    result, stack = {root}, [root]
    while stack:
        var = stack.pop()
        for client, _ in fgraph.clients.get(var, ()):
            if client == "output":
                continue
            for out_idx, ins in (getattr(client.op, "view_map", {}) or {}).items():
                out = client.outputs[out_idx]
                if out not in result and any(client.inputs[k] is var for k in ins):
                    result.add(out)
                    stack.append(out)
    return result


class _PassState:
    """What one round knows: destroyed roots, topological positions."""

    def __init__(self, fgraph):
        self.fgraph = fgraph
        self.handler = fgraph.destroy_handler
        self.order = fgraph.toposort()
        self.position = {node: k for k, node in enumerate(self.order)}
        self.claimed = set()
        for node in self.order:
            for ins in (getattr(node.op, "destroy_map", {}) or {}).values():
                for k in ins:
                    self.claimed |= _roots(node.inputs[k])

    def root_to_overwrite(self, node, i):
        """The root ``node.inputs[i]`` aliases when overwriting it passes the
        destroy handler's rules that are cheap to check, else None."""
        fgraph = self.fgraph
        var = node.inputs[i]
        if isinstance(var, Constant):
            return None
        roots = _roots(var)
        if len(roots) != 1:
            return None
        (root,) = roots
        if isinstance(root, Constant) or root in self.claimed:
            return None
        if root.owner is None and root not in self.handler.destroyable_inputs:
            return None
        views = _views(fgraph, root)
        readers = set()
        for view in views:
            for client, _ in fgraph.clients.get(view, ()):
                if client == "output":
                    return None  # the caller gets this value: it must survive
                if client is not node:
                    readers.add(client)
        if sum(1 for v in node.inputs if v in views) > 1:
            return None  # the node reads that memory through another input too
        if readers and self._reaches(node, readers):
            return None  # a reader needs the old value and this node's result
        return root

    def _reaches(self, node, targets):
        """Whether a node of ``targets`` depends on ``node`` (a forward walk
        bounded by the topological position of the last target)."""
        limit = max(self.position.get(t, len(self.order)) for t in targets)
        stack, seen = list(node.outputs), set()
        while stack:
            var = stack.pop()
            for client, _ in self.fgraph.clients.get(var, ()):
                if client == "output" or client in seen:
                    continue
                if client in targets:
                    return True
                seen.add(client)
                if self.position.get(client, len(self.order)) < limit:
                    stack.extend(client.outputs)
        return False

    def priority(self, node, o, i):
        """Sort key for overwriting ``node.inputs[i]`` with output ``o``: first
        the shared variable that this output updates (its buffer stays the
        shared value), then inputs that only this node reads (no ordering to
        add)."""
        fgraph = self.fgraph
        var = node.inputs[i]
        own = False
        for client, k in fgraph.clients.get(node.outputs[o], ()):
            if client == "output" and k in fgraph.update_mapping:
                own = own or fgraph.inputs[fgraph.update_mapping[k]] is var
        others = sum(1 for c, _ in fgraph.clients.get(var, ()) if c is not node)
        return (not own, others, i)


# ---------------------------------------------------------------------------
# Applying and validating


# Proposals the destroy handler rejected, per graph: trying them again in the
# driver's next pass would only cost another validation (constraints only
# grow during this phase, so a rejected proposal stays rejected).
_REJECTED = weakref.WeakKeyDictionary()


def _history(fgraph):
    return fgraph.ensure_feature(History)


def _apply(fgraph, batch, build, name, verbose):
    """Make every proposal ``(node, pattern)`` of ``batch``, then validate
    once; revert everything and return False when the destroy handler refuses."""
    history = _history(fgraph)
    checkpoint = history.checkpoint()
    try:
        for node, pattern in batch:
            if node not in fgraph.apply_nodes:
                continue
            new_outputs = build(node, pattern)
            if not isinstance(new_outputs, (list, tuple)):
                new_outputs = [new_outputs]
            if verbose:
                print(f"rewrite {name}: {node} -> {new_outputs[0].owner}")
            for old, new in zip(node.outputs, new_outputs):
                fgraph.replace(old, new, reason=name, verbose=False)
        # Always validated: the driver's shortcut (no validation while no node
        # destroys anything) does not apply to the nodes made here.
        fgraph.validate()
    except InconsistencyError:
        history.revert(checkpoint)
        return False
    return True


def _apply_bisecting(fgraph, batch, build, name, verbose, rejected):
    """Apply as much of ``batch`` as validates; record the (node, output,
    input) choices of proposals that fail on their own in ``rejected``.
    Returns the number applied."""
    if not batch:
        return 0
    if _apply(fgraph, batch, build, name, verbose):
        return len(batch)
    if len(batch) == 1:
        node, pattern = batch[0]
        rejected.update((node, o, i) for o, i in pattern.items())
        return 0
    mid = len(batch) // 2
    return (_apply_bisecting(fgraph, batch[:mid], build, name, verbose, rejected)
            + _apply_bisecting(fgraph, batch[mid:], build, name, verbose, rejected))


def _proposals(fgraph, candidates, rejected):
    """One round's batch: for each eligible node (topological order), a
    pattern {output: input} whose every choice passes the cheap checks."""
    state = _PassState(fgraph)
    batch = []
    for node in state.order:
        choices = candidates(node)
        if not choices:
            continue
        pattern, roots = {}, set()
        for o, inputs in choices:
            ranked = sorted((i for i in inputs if (node, o, i) not in rejected and
                             i not in pattern.values()),
                            key=lambda i, o=o: state.priority(node, o, i))
            for i in ranked:
                root = state.root_to_overwrite(node, i)
                if root is not None and root not in roots:
                    pattern[o] = i
                    roots.add(root)
                    break
            else:
                break  # this output has nothing to overwrite: leave the node alone
        if len(pattern) == len(choices):
            state.claimed |= roots
            batch.append((node, pattern))
    return batch


def _run(fgraph, name, verbose):
    if getattr(fgraph, "destroy_handler", None) is None:
        return 0  # nobody would check or order the overwrites: stay safe
    if fgraph.get_feature(InputDestroyersLast) is None:
        fgraph.attach_feature(InputDestroyersLast())
    candidates, build = _BUILDERS[name]
    rejected = _REJECTED.setdefault(fgraph, set())
    total = 0
    while True:
        # Every proposal ends applied (the node is done) or rejected (its
        # choices are not proposed again), so the rounds end.
        batch = _proposals(fgraph, candidates, rejected)
        if not batch:
            return total
        total += _apply_bisecting(fgraph, batch, build, name, verbose, rejected)


@graph_rewriter(name="inplace_elemwise")
def inplace_elemwise(fgraph, verbose=False):
    """Let element-wise nodes write their result into an input's buffer."""
    return _run(fgraph, "inplace_elemwise", verbose)


@graph_rewriter(name="inplace_incsubtensor")
def inplace_incsubtensor(fgraph, verbose=False):
    """Let (Advanced)IncSubtensor update ``x`` itself instead of a copy."""
    return _run(fgraph, "inplace_incsubtensor", verbose)


@graph_rewriter(name="inplace_blas_update")
def inplace_blas_update(fgraph, verbose=False):
    """Let Gemm, Gemv and Ger write their result into z's buffer."""
    return _run(fgraph, "inplace_blas_update", verbose)


# The BLAS updates first: when an element-wise node and a Gemm could both
# take a weight's buffer, the Gemm's copy is the expensive one to avoid.
register(inplace_blas_update, "fast_run", "inplace", phase="inplace")
register(inplace_elemwise, "fast_run", "inplace", phase="inplace")
register(inplace_incsubtensor, "fast_run", "inplace", phase="inplace")


# ---------------------------------------------------------------------------
# Scheduling: overwrite the caller's memory last


class InputDestroyersLast(Feature):
    """Orders each node that overwrites a function input (through views) after
    every node that neither depends on such a node nor is one.

    A call that raises before those nodes leaves every shared variable as it
    was, as the Function promises; they are typically the last step of an
    update (``w - lr * g`` written into ``w``).
    """

    def on_attach(self, fgraph):
        self.destroyers = {n for n in fgraph.apply_nodes if _destroys(n)}

    def on_import(self, fgraph, node, reason):
        if _destroys(node):
            self.destroyers.add(node)

    def on_prune(self, fgraph, node, reason):
        self.destroyers.discard(node)

    def orderings(self, fgraph):
        last = [d for d in self.destroyers if d in fgraph.apply_nodes and
                _overwrites_input(d)]
        if not last:
            return {}
        late, stack = set(last), list(last)
        while stack:  # everything downstream of them stays after them anyway
            node = stack.pop()
            for out in node.outputs:
                for client, _ in fgraph.clients.get(out, ()):
                    if client != "output" and client not in late:
                        late.add(client)
                        stack.append(client)
        # The early nodes that no early node reads stand for all of them (the
        # rest come before those through the data): k x sinks orderings, not
        # k x nodes.
        sinks = set()
        for node in fgraph.apply_nodes:
            if node not in late and not any(
                    c != "output" and c not in late
                    for out in node.outputs for c, _ in fgraph.clients.get(out, ())):
                sinks.add(node)
        return {d: sinks for d in last} if sinks else {}


def _destroys(node):
    return bool(getattr(node.op, "destroy_map", None))


def _overwrites_input(node):
    for ins in node.op.destroy_map.values():
        for k in ins:
            if any(r.owner is None and not isinstance(r, Constant)
                   for r in _roots(node.inputs[k])):
                return True
    return False
