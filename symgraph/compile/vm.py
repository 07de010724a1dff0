"""The Python VM: runs a scheduled FunctionGraph node by node.

Every variable has one storage cell (a one-element list).  Each step calls
the op's ``perform`` with its input values and its output cells.  Native code
(a later backend) plugs in by giving a node another thunk with the same
signature, so every graph runs whatever has native code.

``ifelse`` is lazy here as in the native runtime: a node that only one
branch of an IfElse needs (``ops.ifelse.branch_guards``) is skipped when its
condition, already computed, picks the other branch.
"""

import time

import numpy as np

from symgraph.compile.errors import reraise_with_node
from symgraph.graph.basic import Constant


class VM:
    """Executes ``order`` (a list of Apply nodes) over ``storage`` cells.

    ``checks`` is a list of callables ``check(node, input_values, output_values)``
    run after each node (NanGuardMode and DebugMode add theirs).  ``guard``
    (an UpdateGuard, see ``update_guard``) runs just before its node.
    """

    def __init__(self, fgraph, order, storage, checks=(), profile=None, guard=None):
        self.fgraph = fgraph
        self.order = order
        self.storage = storage
        self.checks = list(checks)
        self.profile = profile
        self.steps = []
        from symgraph.ops.ifelse import branch_guards

        branches = branch_guards(fgraph.outputs, order)
        #: per step: ((condition cell, truth), ...) that must all hold for it to run
        self.branch_conditions = []
        for node in order:
            if guard is not None and node is guard.node:
                self.steps.append((guard.perform, node, [storage[v] for v in guard.variables],
                                   None))
                self.branch_conditions.append(())
            self.steps.append((node.op.perform, node, [storage[v] for v in node.inputs],
                               [storage[v] for v in node.outputs]))
            self.branch_conditions.append(tuple((storage[cond], truth) for cond, truth
                                                in branches.get(node, ())))
        keep = set(fgraph.inputs) | {v for v in storage if isinstance(v, Constant)}
        # Intermediate cells are emptied after a call so that memory is freed
        # and no returned array is ever reused as an op's output buffer.
        self.temporaries = [cell for v, cell in storage.items() if v not in keep]

    def __call__(self):
        if self.checks or self.profile is not None:
            return self._run_checked()
        for (perform, node, in_cells, out_cells), conditions in zip(self.steps,
                                                                    self.branch_conditions):
            if conditions and not _taken(conditions):
                continue
            values = [c[0] for c in in_cells]
            try:
                perform(node, values, out_cells)
            except Exception as exc:
                _reraise(node, values, exc)

    def _run_checked(self):
        keep_copies = any(getattr(check, "needs_input_copies", False) for check in self.checks)
        for (perform, node, in_cells, out_cells), conditions in zip(self.steps,
                                                                    self.branch_conditions):
            if conditions and not _taken(conditions):
                continue
            values = [c[0] for c in in_cells]
            if out_cells is None:  # the update guard: no node of its own to check
                perform(node, values, out_cells)
                continue
            if keep_copies:
                self.input_copies = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                                     for v in values]
            start = time.perf_counter()
            try:
                perform(node, values, out_cells)
            except Exception as exc:
                _reraise(node, values, exc)
            if self.profile is not None:
                self.profile.record(node, time.perf_counter() - start)
            for check in self.checks:
                check(node, values, [c[0] for c in out_cells], vm=self)

    def clear_temporaries(self):
        for cell in self.temporaries:
            cell[0] = None


def _taken(conditions):
    """True when every (condition cell, truth) pair holds: the step's branch is taken."""
    return all(bool(cell[0]) == truth for cell, truth in conditions)


def _reraise(node, values, exc):
    """``exc`` named after ``node``, unless it already names its node (the
    update guard raises the error of a later node)."""
    if getattr(exc, "__symgraph_node__", None) is not None:
        raise exc
    reraise_with_node(node, values, exc)
