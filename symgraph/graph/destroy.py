"""The destroy handler: keeps in-place ops from corrupting values still needed.

An op that overwrites an input declares it in ``destroy_map``; an op whose
output aliases an input declares ``view_map``.  Following views back to the
variable that owns the memory (its root), the handler enforces that:

* no graph input is destroyed unless it was declared destroyable (a shared
  variable that the function updates), and no constant ever is;
* each root has at most one destroyer, and the destroyer reads the root
  through no other input (an element-wise kernel overwriting ``x`` while
  reading ``x.T`` would read values it already wrote);
* every other reader of the root or of its views runs before the destroyer
  (returned as orderings, so the schedule respects it); a reader that also
  needs the destroyer's result cannot, and makes the graph inconsistent.

For these checks a destroyer's output is a new value, not a view: chains of
in-place ops (``exp(x) + 1`` overwriting the exp's buffer, then ``* 2``
overwriting that) each destroy their own root.  ``view_root`` follows
destroyers too: it answers which buffer a variable's memory belongs to.
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

    def alias_root(self, var):
        """The variable whose value ``var`` is a view of (itself if not a view).

        Unlike ``view_root`` this stops at a destroyer's output: that output
        holds a new value, which a later in-place op may destroy in its turn.
        """
        while var.owner is not None:
            src = (getattr(var.owner.op, "view_map", {}) or {}).get(var.index)
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
                    root = self.alias_root(node.inputs[i])
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
            views = self._views_of(root)
            for view in views:
                if any(c == "output" for c, _ in fgraph.clients.get(view, [])):
                    raise InconsistencyError(
                        f"{nodes[0]} would overwrite {view}, a function output")
            _check_no_input_aliasing(nodes[0], views)
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
            # A reader that also needs the destroyer's result would have to run
            # both before and after it: the cycle makes validate() refuse.
            if readers:
                order.setdefault(destroyer, set()).update(readers)
        return order


def _check_no_input_aliasing(destroyer, views):
    """The destroyer may reach the memory it overwrites through one input only."""
    views = set(views)
    positions = [j for j, var in enumerate(destroyer.inputs) if var in views]
    if len(positions) > 1:
        raise InconsistencyError(
            f"{destroyer} overwrites memory that it also reads (or overwrites) through "
            f"another input: inputs {positions} share it")
