"""The destroy handler: keeps in-place ops from corrupting values still needed.

An op that overwrites an input declares it in ``destroy_map``; an op whose
output aliases an input declares ``view_map``.  Following views back to the
variable that owns the memory (its root), the handler enforces that:

* no graph input is destroyed unless it was declared destroyable (a shared
  variable that the function updates), and no constant ever is;
* each root has at most one destroyer;
* every other reader of the root or of its views runs before the destroyer
  (returned as orderings, so the schedule respects it).
"""

from symgraph.graph.fg import Feature, InconsistencyError


class DestroyHandler(Feature):
    """Validates in-place ops and orders readers before writers."""

    def __init__(self, destroyable_inputs=()):
        self.destroyable_inputs = set(destroyable_inputs)

    def on_attach(self, fgraph):
        self.fgraph = fgraph
        fgraph.destroy_handler = self

    def on_detach(self, fgraph):
        fgraph.destroy_handler = None

    def view_root(self, var):
        """The variable whose memory ``var`` aliases (itself if not a view)."""
        while var.owner is not None:
            vmap = getattr(var.owner.op, "view_map", {}) or {}
            dmap = getattr(var.owner.op, "destroy_map", {}) or {}
            src = vmap.get(var.index) or dmap.get(var.index)
            if not src:
                break
            var = var.owner.inputs[src[0]]
        return var

    def _views_of(self, root):
        """``root`` and every variable in the graph that aliases it."""
        result, stack = [root], [root]
        while stack:
            var = stack.pop()
            for node, i in self.fgraph.clients.get(var, []):
                if node == "output":
                    continue
                maps = dict(getattr(node.op, "view_map", {}) or {})
                for out_idx, ins in maps.items():
                    if i in ins:
                        out = node.outputs[out_idx]
                        result.append(out)
                        stack.append(out)
        return result

    def destroyers(self):
        """{root variable: [nodes that destroy it]}."""
        found = {}
        for node in self.fgraph.apply_nodes:
            for out_idx, ins in (getattr(node.op, "destroy_map", {}) or {}).items():
                for i in ins:
                    root = self.view_root(node.inputs[i])
                    found.setdefault(root, []).append(node)
        return found

    def validate(self, fgraph):
        from symgraph.graph.basic import Constant

        for root, nodes in self.destroyers().items():
            if len(set(nodes)) > 1:
                raise InconsistencyError(f"{root} is destroyed by several nodes: {nodes}")
            if isinstance(root, Constant):
                raise InconsistencyError(f"{nodes[0]} would overwrite constant {root}")
            if root.owner is None and root not in self.destroyable_inputs:
                raise InconsistencyError(
                    f"{nodes[0]} would overwrite input {root}, which the caller still owns")
            for view in self._views_of(root):
                if any(c == "output" for c, _ in fgraph.clients.get(view, [])):
                    raise InconsistencyError(
                        f"{nodes[0]} would overwrite {view}, a function output")
        try:
            fgraph.toposort()
        except ValueError as exc:
            raise InconsistencyError(str(exc)) from exc

    def orderings(self, fgraph):
        order = {}
        for root, nodes in self.destroyers().items():
            destroyer = nodes[0]
            readers = set()
            for view in self._views_of(root):
                for client, _ in fgraph.clients.get(view, []):
                    if client != "output" and client is not destroyer:
                        readers.add(client)
            # A reader that consumes the destroyer's own output must come after it.
            readers = {r for r in readers if not _depends_on(r, destroyer)}
            if readers:
                order.setdefault(destroyer, set()).update(readers)
        return order


def _depends_on(node, other):
    stack, seen = list(node.inputs), set()
    while stack:
        var = stack.pop()
        if var.owner is None or var.owner in seen:
            continue
        if var.owner is other:
            return True
        seen.add(var.owner)
        stack.extend(var.owner.inputs)
    return False
