"""FunctionGraph: a graph with fixed inputs and outputs that rewrites edit in place.

It tracks the clients of every variable (which nodes use it), lets features
watch every change (undo history, shape inference, destroy handling), and
offers one way to substitute a variable: ``replace``, which checks types,
records the reason and carries the user's source line over to new nodes.
"""

from symgraph.graph.basic import Apply, Constant, Variable, io_toposort


class InconsistencyError(Exception):
    """A change would leave the graph invalid (a feature's validate failed)."""


class Feature:
    """Base class for objects that watch a FunctionGraph's changes."""

    def on_attach(self, fgraph):
        pass

    def on_detach(self, fgraph):
        pass

    def on_import(self, fgraph, node, reason):
        pass

    def on_prune(self, fgraph, node, reason):
        pass

    def on_change_input(self, fgraph, node, i, old, new, reason):
        pass

    def validate(self, fgraph):
        pass

    def orderings(self, fgraph):
        return {}


class FunctionGraph:
    """A graph from ``inputs`` to ``outputs`` owned by a compile pipeline.

    ``clone=True`` (the default) copies the user's graph first so that
    rewrites never touch the variables the user holds.
    """

    def __init__(self, inputs, outputs, features=(), clone=True, update_mapping=None):
        if clone:
            from symgraph.graph.basic import clone_graph

            inputs, outputs, _ = clone_graph(list(inputs), list(outputs))
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.apply_nodes = set()
        self.variables = set()
        self.clients = {}
        self.features = []
        self.update_mapping = dict(update_mapping or {})
        self.profile = None
        for inp in self.inputs:
            if inp.owner is not None:
                raise ValueError(f"graph input {inp} is computed by {inp.owner}")
            self._add_variable(inp)
        for i, out in enumerate(self.outputs):
            self._import_var(out, reason="init")
            self.clients[out].append(("output", i))
        for feature in features:
            self.attach_feature(feature)

    # -- bookkeeping ------------------------------------------------------

    def _add_variable(self, var):
        if var not in self.variables:
            self.variables.add(var)
            self.clients.setdefault(var, [])

    def _import_var(self, var, reason):
        if var in self.variables:
            return
        if var.owner is None:
            if not isinstance(var, Constant) and var not in self.inputs:
                from symgraph.graph.errors import MissingInputError

                raise MissingInputError(
                    f"the graph needs input {var} ({var.type}) that is not in the "
                    f"function's inputs; add it to the inputs or give it through givens")
            self._add_variable(var)
            return
        self._import_node(var.owner, reason)

    def _new_nodes_in_order(self, node):
        # Walk up only until variables the graph already has, parents first.
        order, seen, stack = [], set(), [(node, False)]
        while stack:
            n, expanded = stack.pop()
            if expanded:
                order.append(n)
                continue
            if n in seen or n in self.apply_nodes:
                continue
            seen.add(n)
            stack.append((n, True))
            for inp in n.inputs:
                if inp.owner is not None and inp not in self.variables:
                    stack.append((inp.owner, False))
        return order

    def _import_node(self, node, reason):
        for new_node in self._new_nodes_in_order(node):
            if new_node in self.apply_nodes:
                continue
            for inp in new_node.inputs:
                if inp not in self.variables:
                    self._import_var(inp, reason)
            self.apply_nodes.add(new_node)
            for out in new_node.outputs:
                self._add_variable(out)
            for i, inp in enumerate(new_node.inputs):
                self.clients[inp].append((new_node, i))
            self.execute_callbacks("on_import", new_node, reason)

    def _prune_if_unused(self, var, reason):
        # Depth first, as a recursion would, but with an explicit stack: a
        # chain of thousands of dead nodes must not hit the recursion limit.
        node = self._prune_one(var, reason)
        frames = [[node, 0]] if node is not None else []
        while frames:
            frame = frames[-1]
            node, i = frame
            if i == len(node.inputs):
                frames.pop()
                continue
            frame[1] += 1
            inp = node.inputs[i]
            self.clients[inp].remove((node, i))
            child = self._prune_one(inp, reason)
            if child is not None:
                frames.append([child, 0])

    def _prune_one(self, var, reason):
        """Drop ``var``'s owner when nothing uses it; return the dropped node
        (whose inputs the caller releases), else None."""
        if self.clients.get(var) or var.owner is None:
            if var.owner is None and not self.clients.get(var) and var not in self.inputs:
                self.variables.discard(var)
                self.clients.pop(var, None)
            return None
        node = var.owner
        if node not in self.apply_nodes or any(self.clients.get(o) for o in node.outputs):
            return None
        self.apply_nodes.discard(node)
        for out in node.outputs:
            self.variables.discard(out)
            self.clients.pop(out, None)
        self.execute_callbacks("on_prune", node, reason)
        return node

    # -- changes ----------------------------------------------------------

    def change_node_input(self, node, i, new_var, reason=None):
        """Make input ``i`` of ``node`` (or output ``i`` when node is 'output') ``new_var``."""
        if node == "output":
            old = self.outputs[i]
            if old is new_var:
                return
            self.outputs[i] = new_var
        else:
            old = node.inputs[i]
            if old is new_var:
                return
            node.inputs[i] = new_var
        self._import_var(new_var, reason)
        self.clients[new_var].append((node, i))
        self.clients[old].remove((node, i))
        self.execute_callbacks("on_change_input", node, i, old, new_var, reason)
        self._prune_if_unused(old, reason)

    def replace(self, var, new_var, reason=None, verbose=None, import_missing=False):
        """Substitute ``new_var`` for ``var`` everywhere in the graph.

        The types must agree (``var.type`` may convert a more general
        ``new_var``); the new nodes inherit ``var``'s source line and the list of
        rewrites that produced it, with ``reason`` appended.
        """
        if var is new_var:
            return
        if var not in self.variables:
            return
        new_var = self._conform(var, new_var, reason)
        self._carry_trace(var, new_var, reason)
        if verbose is None:
            from symgraph.config import config

            verbose = config.optimizer_verbose
        if verbose:
            print(f"rewriting: {reason}: {var} -> {new_var}")
        for node, i in list(self.clients[var]):
            self.change_node_input(node, i, new_var, reason)

    def replace_all(self, pairs, reason=None):
        for var, new_var in pairs:
            self.replace(var, new_var, reason=reason)

    def replace_all_validate(self, pairs, reason=None):
        """Replace, then validate with every feature; undo and raise on failure."""
        history = self.get_feature(History)
        checkpoint = history.checkpoint() if history else None
        self.replace_all(pairs, reason)
        try:
            self.validate()
        except InconsistencyError:
            if history is None:
                raise
            history.revert(checkpoint)
            raise

    def _conform(self, var, new_var, reason):
        if new_var.type == var.type:
            return new_var
        converted = var.type.convert_variable(new_var)
        if converted is None:
            raise TypeError(
                f"rewrite {reason!r} tried to replace {var} of type {var.type} "
                f"by {new_var} of incompatible type {new_var.type}")
        return converted

    def _carry_trace(self, var, new_var, reason):
        old = var.owner
        if old is None:
            return
        rewrites = tuple(old.tag.rewrites) + ((str(reason),) if reason else ())
        stack = [new_var]
        seen = set()
        while stack:
            v = stack.pop()
            node = v.owner
            if node is None or node in self.apply_nodes or node in seen:
                continue
            seen.add(node)
            node.tag.trace = old.tag.trace
            node.tag.rewrites = rewrites
            stack.extend(node.inputs)

    # -- features ---------------------------------------------------------

    def attach_feature(self, feature):
        if feature in self.features:
            return
        self.features.append(feature)
        feature.on_attach(self)

    def remove_feature(self, feature):
        self.features.remove(feature)
        feature.on_detach(self)

    def ensure_feature(self, cls):
        """The attached feature of class ``cls``, attaching a new one first if none is."""
        feature = self.get_feature(cls)
        if feature is None:
            feature = cls()
            self.attach_feature(feature)
        return feature

    def get_feature(self, cls):
        for f in self.features:
            if isinstance(f, cls):
                return f
        return None

    def execute_callbacks(self, name, *args):
        for feature in self.features:
            getattr(feature, name)(self, *args)

    def validate(self):
        for feature in self.features:
            feature.validate(self)

    def orderings(self):
        merged = {}
        for feature in self.features:
            for node, before in feature.orderings(self).items():
                merged.setdefault(node, set()).update(before)
        return merged

    # -- queries ----------------------------------------------------------

    def toposort(self):
        """The nodes in an order that respects data and feature constraints."""
        return io_toposort(self.inputs, self.outputs, self.orderings())

    def __contains__(self, item):
        return item in self.variables or item in self.apply_nodes

    def clone(self):
        """A deep copy of this graph (features are not copied)."""
        from symgraph.graph.basic import clone_graph

        inputs, outputs, memo = clone_graph(self.inputs, self.outputs)
        fg = FunctionGraph(inputs, outputs, clone=False)
        fg.update_mapping = dict(self.update_mapping)
        return fg

    def check_integrity(self):
        """Assert that the client lists match the graph (used by tests)."""
        nodes = set(io_toposort(self.inputs, self.outputs))
        assert nodes == self.apply_nodes, "apply_nodes out of date"
        for node in nodes:
            for i, inp in enumerate(node.inputs):
                assert (node, i) in self.clients[inp], f"missing client {node}:{i}"

    def __str__(self):
        return f"FunctionGraph({', '.join(str(o) for o in self.outputs)})"


class History(Feature):
    """Records input changes so a rewrite's edits can be undone."""

    def on_attach(self, fgraph):
        self.fgraph = fgraph
        self.log = []

    def on_change_input(self, fgraph, node, i, old, new, reason):
        self.log.append((node, i, old, new))

    def checkpoint(self):
        return len(self.log)

    def revert(self, checkpoint):
        while len(self.log) > checkpoint:
            node, i, old, new = self.log.pop()
            self.fgraph.change_node_input(node, i, old, reason="revert")
            self.log.pop()  # the revert itself was logged


class ReplaceValidate(Feature):
    """Marker feature: rewrites validate after replacing (DestroyHandler needs it)."""
