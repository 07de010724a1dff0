"""IfElse: choose between two lists of values on a scalar condition.

``ifelse(cond, then_branch, else_branch)`` returns ``then_branch`` when the
scalar ``cond`` is non-zero and ``else_branch`` otherwise; unlike
``T.switch`` the condition is one scalar, not an element-wise mask, and the
branches may have different shapes.

Evaluation is lazy with the native runtime (linkers ``c|py`` and ``c``): the
nodes that only the branch not taken needs are not run (``branch_guards``
says which, the runtime skips them), inside a scan's step too.  ``perform``
reads only the chosen branch's values.  The Python VM (linker ``py``) still
computes both branches.
"""

import copy

import numpy as np

from symgraph.graph.basic import Apply, Op, Variable
from symgraph.tensor.basic import as_tensor_variable, constant, is_python_scalar
from symgraph.tensor.type import TensorType

__all__ = ["IfElse", "ifelse", "branch_guards"]


class IfElse(Op):
    """Inputs ``(cond, *then_values, *else_values)`` with ``n_outs`` values per
    branch; output ``i`` is ``then_values[i]`` if ``cond`` else ``else_values[i]``.

    ``as_view=True`` returns the chosen input itself (no copy); the default
    copies it, so that the output never aliases an input.
    """

    __props__ = ("n_outs", "as_view")

    def __init__(self, n_outs, as_view=False, name=None):
        if n_outs < 1:
            raise ValueError("IfElse needs at least one output")
        self.n_outs = int(n_outs)
        self.as_view = bool(as_view)
        self.name = name
        if self.as_view:
            # The output aliases whichever branch is taken.
            self.view_map = {i: [1 + i, 1 + self.n_outs + i] for i in range(self.n_outs)}

    def __str__(self):
        text = f"IfElse{{n_outs={self.n_outs}{', as_view' if self.as_view else ''}}}"
        return f"{text}({self.name})" if self.name else text

    __repr__ = __str__

    def make_node(self, cond, *branches):
        if len(branches) != 2 * self.n_outs:
            raise TypeError(f"{self}: expected {self.n_outs} then-values and {self.n_outs} "
                            f"else-values, got {len(branches)} values")
        cond = _as_condition(cond, self)
        thens, elses = _pair_branches(branches[:self.n_outs], branches[self.n_outs:], self)
        outputs = [_common_type(t, e, i, self)() for i, (t, e) in enumerate(zip(thens, elses))]
        return Apply(self, [cond] + thens + elses, outputs)

    def perform(self, node, inputs, output_storage):
        cond, values = inputs[0], inputs[1:]
        chosen = values[:self.n_outs] if cond else values[self.n_outs:]
        for storage, value in zip(output_storage, chosen):
            if not self.as_view:
                value = value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value)
            storage[0] = value

    def infer_shape(self, fgraph, node, input_shapes):
        cond = node.inputs[0]
        n = self.n_outs
        results = []
        for i, out in enumerate(node.outputs):
            then_shape, else_shape = input_shapes[1 + i], input_shapes[1 + n + i]
            dims, differing = [], []
            for d, (ts, es) in enumerate(zip(then_shape, else_shape)):
                if out.type.shape[d] is not None:
                    dims.append(constant(out.type.shape[d], dtype="int64"))
                elif _same_size(ts, es):
                    dims.append(ts)
                else:
                    dims.append(None)
                    differing.append((d, ts, es))
            if differing:
                picked = ifelse(cond, [ts for _, ts, _ in differing],
                                [es for _, _, es in differing])
                for (d, _, _), value in zip(differing, picked):
                    dims[d] = value
            results.append(tuple(dims))
        return results

    def connection_pattern(self, node):
        n = self.n_outs
        pattern = [[False] * n]
        for branch in range(2):
            for i in range(n):
                pattern.append([j == i for j in range(n)])
        return pattern

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for, is_disconnected

        cond = inputs[0]
        n = self.n_outs
        thens, elses = inputs[1:1 + n], inputs[1 + n:]
        then_grads, else_grads = [], []
        for t, e, g in zip(thens, elses, output_grads):
            if g is None or is_disconnected(g) or getattr(g.type, "is_null", False):
                then_grads.append(disconnected_grad_for(t))
                else_grads.append(disconnected_grad_for(e))
                continue
            zero = _zeros_like(g)
            then_grads.append(_as_type_of(ifelse(cond, g, zero), t))
            else_grads.append(_as_type_of(ifelse(cond, zero, g), e))
        return [disconnected_grad_for(cond)] + then_grads + else_grads

    def R_op(self, inputs, eval_points):
        cond = inputs[0]
        n = self.n_outs
        results = []
        for i in range(n):
            t, e = inputs[1 + i], inputs[1 + n + i]
            et, ee = eval_points[1 + i], eval_points[1 + n + i]
            if et is None and ee is None:
                results.append(None)
                continue
            et = _zeros_like(t) if et is None else et
            ee = _zeros_like(e) if ee is None else ee
            results.append(ifelse(cond, et, ee))
        return results


def branch_guards(outputs, order):
    """``{node: ((condition, truth), ...)}``: the nodes of ``order`` (a schedule
    computing ``outputs``) that run only when each of their conditions has
    the truth given, because only the branches of IfElse nodes need them.

    A node is guarded by IfElse node ``I``'s then-branch when every path from
    it to an output goes through ``I``'s then-values (likewise else), and
    only when it is scheduled after ``I``'s condition is computed (the
    runtime reads the condition before the node; a node scheduled earlier
    just runs)."""
    position = {node: i for i, node in enumerate(order)}
    guards = {}
    for node in order:
        if not isinstance(node.op, IfElse):
            continue
        n = node.op.n_outs
        cond = node.inputs[0]
        after = position[cond.owner] if cond.owner in position else -1
        for truth, cut in ((True, range(1, 1 + n)), (False, range(1 + n, 1 + 2 * n))):
            needed = _needed_without(outputs, node, set(cut))
            for other in order[after + 1:]:
                if other not in needed:
                    guards.setdefault(other, []).append((cond, truth))
    return {node: tuple(g) for node, g in guards.items()}


def _needed_without(outputs, ifelse_node, cut):
    """The nodes computing ``outputs`` when ``ifelse_node``'s inputs at the
    positions ``cut`` (one branch) are not needed."""
    needed, stack = set(), [v.owner for v in outputs if v.owner is not None]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        for i, var in enumerate(node.inputs):
            if var.owner is not None and not (node is ifelse_node and i in cut):
                stack.append(var.owner)
    return needed


def _as_condition(cond, op):
    cond = as_tensor_variable(cond)
    if cond.ndim != 0:
        raise TypeError(f"{op}: the condition must be a scalar, got {cond} with "
                        f"{cond.ndim} dimensions (use T.switch for element-wise choice)")
    return cond


def _pair_branches(thens, elses, op):
    """Tensor variables for both branches; a Python number or array becomes a
    constant of the other branch's dtype when that branch is symbolic."""
    out_then, out_else = [], []
    for i, (t, e) in enumerate(zip(thens, elses)):
        if not isinstance(t, Variable) and isinstance(e, Variable):
            e = as_tensor_variable(e)
            t = _constant_like(t, e, i, "then", op)
        elif not isinstance(e, Variable) and isinstance(t, Variable):
            t = as_tensor_variable(t)
            e = _constant_like(e, t, i, "else", op)
        else:
            t, e = as_tensor_variable(t), as_tensor_variable(e)
        out_then.append(t)
        out_else.append(e)
    return out_then, out_else


def _constant_like(value, other, i, branch, op):
    arr = np.asarray(value)
    if arr.dtype == object or not is_python_scalar(value) and \
            not np.can_cast(arr.dtype, other.dtype, "same_kind"):
        raise TypeError(f"{op}: the {branch} value {i} ({value!r}) does not have the dtype "
                        f"{other.dtype} of the other branch; cast it")
    with np.errstate(all="ignore"):
        converted = arr.astype(other.dtype)
    if not np.array_equal(converted, arr, equal_nan=arr.dtype.kind in "fc"):
        raise TypeError(f"{op}: the {branch} value {i} ({value!r}) cannot be stored exactly "
                        f"as {other.dtype}, the other branch's dtype")
    return constant(converted)


def _common_type(t, e, i, op):
    """The output type of pair ``i``: both branches' type, or the more general
    one when they differ only in static shape."""
    if not isinstance(t.type, TensorType) or not isinstance(e.type, TensorType):
        if t.type == e.type:
            return t.type
        raise TypeError(f"{op}: output {i} has then-branch type {t.type} and else-branch "
                        f"type {e.type}")
    if t.dtype != e.dtype:
        raise TypeError(f"{op}: output {i} has a then-branch of dtype {t.dtype} ({t}) and "
                        f"an else-branch of dtype {e.dtype} ({e}); cast one of them so "
                        f"the dtypes match")
    if t.ndim != e.ndim:
        raise TypeError(f"{op}: output {i} has a {t.ndim}-d then-branch ({t}) and a "
                        f"{e.ndim}-d else-branch ({e}); both must have the same rank")
    shape = tuple(a if a == b else None for a, b in zip(t.type.shape, e.type.shape))
    return TensorType(t.dtype, shape=shape)


def _same_size(a, b):
    """True when two symbolic sizes are known to be equal without running."""
    if a is b:
        return True
    data_a, data_b = getattr(a, "data", None), getattr(b, "data", None)
    return data_a is not None and data_b is not None and int(data_a) == int(data_b)


def _zeros_like(x):
    from symgraph.ops.math import zeros_like

    return zeros_like(x)


def _as_type_of(grad, x):
    """``grad`` with ``x``'s static shape where the output type was more general."""
    if grad.type == x.type:
        return grad
    converted = x.type.convert_variable(grad)
    return grad if converted is None else converted


def ifelse(condition, then_branch, else_branch, name=None):
    """``then_branch`` if the scalar ``condition`` is non-zero, else ``else_branch``.

    Each branch is a variable or a list (tuple) of variables of equal length;
    a list gives a list back, a tuple a tuple, a single variable a variable.
    The branches' dtypes and ranks must match (Python numbers are converted to
    the other branch's dtype); where static shapes differ, the result's type
    is the more general one.  With the native runtime only the branch taken
    is computed (what the other one alone needs is skipped); the Python VM
    computes both.
    """
    kind = type(then_branch) if isinstance(then_branch, (list, tuple)) else None
    if (kind is None) != (not isinstance(else_branch, (list, tuple))):
        raise TypeError("ifelse: then_branch and else_branch must both be lists (or "
                        "tuples) or both single values")
    thens = list(then_branch) if kind else [then_branch]
    elses = list(else_branch) if kind else [else_branch]
    if len(thens) != len(elses):
        raise ValueError(f"ifelse: then_branch has {len(thens)} values but else_branch "
                         f"has {len(elses)}")
    if not thens:
        raise ValueError("ifelse: the branches are empty")
    outs = IfElse(len(thens), name=name).make_node(condition, *thens, *elses).outputs
    if kind is None:
        return outs[0]
    return kind(outs)
