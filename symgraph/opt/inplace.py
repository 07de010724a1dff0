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

Proposals are applied in batches (at most one new in-place output per node,
validated once per batch); a batch that fails is split in halves until the
offending proposal is found alone and rejected, so the usual cost is a few
validations per graph rather than one per node.

The ``InputDestroyersLast`` feature schedules the nodes that overwrite a
function input (an updated shared variable, a mutable input) after every
node that does not depend on them, so that a call that raises on the way
(a shape mismatch, say) has not yet changed any shared value; only an error
inside or after those last nodes can leave a shared variable half updated.

Not done here: an in-place ``Gemm`` (``z <- alpha * x @ y + beta * z`` in z's
buffer) belongs with the Gemm op (``ops/gemm.py``) once it has an ``inplace``
prop; adding it is a third entry in ``_BUILDERS`` below.
"""

import weakref

from symgraph.config import config
from symgraph.graph.basic import Constant
from symgraph.graph.fg import Feature, History, InconsistencyError
from symgraph.opt.registry import register
from symgraph.opt.rewriter import graph_rewriter


# ---------------------------------------------------------------------------
# Building the in-place version of a node


def _elemwise_candidates(node):
    """(output, input) pairs an Elemwise node could make in place, untried."""
    from symgraph.ops.elemwise import Elemwise

    op = node.op
    if not isinstance(op, Elemwise) or _elemwise_with(op, {}) is None:
        return []
    done = dict(op.inplace_pattern)
    taken = set(done.values())
    pairs = []
    for o, out in enumerate(node.outputs):
        if o in done:
            continue
        for i, inp in enumerate(node.inputs):
            # Same dtype and static shape: an input that broadcasts (or whose
            # static shape says less than the output's) cannot hold the result.
            if i not in taken and inp.type == out.type:
                pairs.append((o, i))
    return pairs


def _elemwise_with(op, extra):
    """``op`` with ``extra`` {output: input} added to its inplace_pattern."""
    from symgraph.ops.elemwise import Elemwise

    pattern = dict(op.inplace_pattern)
    pattern.update(extra)
    maker = getattr(op, "with_inplace_pattern", None)
    if maker is not None:  # a subclass that knows how to copy itself
        return maker(pattern)
    if type(op) is not Elemwise:
        return None  # an unknown subclass: its constructor may differ
    return Elemwise(op.scalar_op, inplace_pattern=pattern, name=op.name)


def _elemwise_build(node, o, i):
    return _elemwise_with(node.op, {o: i})(*node.inputs)


def _incsubtensor_candidates(node):
    from symgraph.ops.advanced_subtensor import AdvancedIncSubtensor
    from symgraph.ops.subtensor import IncSubtensor

    if type(node.op) not in (IncSubtensor, AdvancedIncSubtensor) or node.op.inplace:
        return []
    return [(0, 0)]


def _incsubtensor_build(node, o, i):
    op = node.op
    return type(op)(op.idx_list, op.set_instead_of_inc, inplace=True)(*node.inputs)


# name -> (candidates(node) -> [(out, in)], build(node, out, in) -> new outputs)
_BUILDERS = {
    "inplace_elemwise": (_elemwise_candidates, _elemwise_build),
    "inplace_incsubtensor": (_incsubtensor_candidates, _incsubtensor_build),
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

    def allows(self, node, i):
        """Whether overwriting ``node.inputs[i]`` passes the handler's rules
        that are cheap to check; claims the root when it does."""
        fgraph = self.fgraph
        var = node.inputs[i]
        if isinstance(var, Constant):
            return False
        roots = _roots(var)
        if len(roots) != 1:
            return False
        (root,) = roots
        if isinstance(root, Constant) or root in self.claimed:
            return False
        if root.owner is None and root not in self.handler.destroyable_inputs:
            return False
        views = _views(fgraph, root)
        readers = set()
        for view in views:
            for client, _ in fgraph.clients.get(view, ()):
                if client == "output":
                    return False  # the caller gets this value: it must survive
                if client is not node:
                    readers.add(client)
        if sum(1 for v in node.inputs if v in views) > 1:
            return False  # the node reads that memory through another input too
        if readers and self._reaches(node, readers):
            return False  # a reader needs the old value and this node's result
        self.claimed.add(root)
        return True

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

    def priority(self, node, i):
        """Sort key: inputs that only this node reads first (no ordering to add)."""
        var = node.inputs[i]
        others = sum(1 for c, _ in self.fgraph.clients.get(var, ()) if c is not node)
        return (others, i)


# ---------------------------------------------------------------------------
# Applying and validating


# Proposals the destroy handler rejected, per graph: trying them again in the
# driver's next pass would only cost another validation (constraints only
# grow during this phase, so a rejected proposal stays rejected).
_REJECTED = weakref.WeakKeyDictionary()


def _history(fgraph):
    history = fgraph.get_feature(History)
    if history is None:
        history = History()
        fgraph.attach_feature(history)
    return history


def _apply(fgraph, batch, build, name, verbose):
    """Make every proposal of ``batch`` in place, then validate once; revert
    everything and return False when the destroy handler refuses."""
    history = _history(fgraph)
    checkpoint = history.checkpoint()
    try:
        for node, o, i in batch:
            new_outputs = build(node, o, i)
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
    """Apply as much of ``batch`` as validates; record the proposals that fail
    on their own in ``rejected``.  Returns the number applied."""
    if not batch:
        return 0
    if _apply(fgraph, batch, build, name, verbose):
        return len(batch)
    if len(batch) == 1:
        node, o, i = batch[0]
        rejected.add((node, o, i))
        return 0
    mid = len(batch) // 2
    return (_apply_bisecting(fgraph, batch[:mid], build, name, verbose, rejected)
            + _apply_bisecting(fgraph, batch[mid:], build, name, verbose, rejected))


def _proposals(fgraph, candidates, rejected):
    """One round's batch: for each node (topological order), its best
    proposal that passes the cheap checks."""
    state = _PassState(fgraph)
    batch = []
    for node in state.order:
        pairs = [(o, i) for o, i in candidates(node) if (node, o, i) not in rejected]
        if not pairs:
            continue
        pairs.sort(key=lambda p: (p[0],) + state.priority(node, p[1]))
        for o, i in pairs:
            if state.allows(node, i):
                batch.append((node, o, i))
                break
    return batch


def _run(fgraph, name, verbose):
    if getattr(fgraph, "destroy_handler", None) is None:
        return 0  # nobody would check or order the overwrites: stay safe
    if fgraph.get_feature(InputDestroyersLast) is None:
        fgraph.attach_feature(InputDestroyersLast())
    candidates, build = _BUILDERS[name]
    rejected = _REJECTED.setdefault(fgraph, set())
    total = 0
    while True:  # each round adds at most one in-place output per node
        batch = _proposals(fgraph, candidates, rejected)
        if not batch:
            return total
        applied = _apply_bisecting(fgraph, batch, build, name, verbose, rejected)
        total += applied
        if not applied and all(p in rejected for p in batch):
            # Everything failed alone; the next round proposes other inputs.
            continue


@graph_rewriter(name="inplace_elemwise")
def inplace_elemwise(fgraph, verbose=False):
    """Let element-wise nodes write their result into an input's buffer."""
    return _run(fgraph, "inplace_elemwise", verbose or config.optimizer_verbose)


@graph_rewriter(name="inplace_incsubtensor")
def inplace_incsubtensor(fgraph, verbose=False):
    """Let (Advanced)IncSubtensor update ``x`` itself instead of a copy."""
    return _run(fgraph, "inplace_incsubtensor", verbose or config.optimizer_verbose)


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
        early = fgraph.apply_nodes - late
        return {d: set(early) for d in last} if early else {}


def _destroys(node):
    return bool(getattr(node.op, "destroy_map", None))


def _overwrites_input(node):
    for ins in node.op.destroy_map.values():
        for k in ins:
            if any(r.owner is None and not isinstance(r, Constant)
                   for r in _roots(node.inputs[k])):
                return True
    return False
