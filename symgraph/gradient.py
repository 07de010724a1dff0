"""Automatic differentiation (reverse and forward mode) and gradient checks.

This is the public module (Theano's ``theano.gradient``):

* reverse mode: ``grad``, ``Lop``, ``jacobian``, ``hessian`` (here);
* forward mode: ``Rop`` (``symgraph.autodiff.rop``);
* gradient-shaping ops: ``zero_grad``, ``disconnected_grad``, ``undefined_grad``,
  ``grad_clip``, ``grad_scale`` (``symgraph.autodiff.grad_ops``);
* checks: ``verify_grad``, ``numeric_grad``, ``GradientError``
  (``symgraph.autodiff.verify``);
* helpers for ops' ``grad`` methods: ``disconnected_grad_for``,
  ``grad_not_implemented``, ``grad_undefined``, ``is_disconnected``.

How ``grad`` works: it walks the graph from the cost back to the requested
variables, visiting only nodes that lie on a path between the two (following
each op's ``connection_pattern``), in reverse topological order.  Each node's
``op.L_op(inputs, outputs, output_grads)`` returns one gradient term per
input; the terms that reach a variable from its several clients are summed.
Gradients that do not exist are placeholders rather than zeros, so that no
useless computation is built: a ``DisconnectedType`` variable means "does not
depend on", a ``NullType`` one "undefined / not implemented" (and carries the
reason, reported if it reaches a requested variable).
"""

import warnings

import numpy as np

from symgraph.graph.basic import Variable, io_toposort
from symgraph.graph.null_type import DisconnectedType, NullType

__all__ = ["grad", "Lop", "Rop", "jacobian", "hessian", "verify_grad", "numeric_grad",
           "GradientError", "DisconnectedInputError", "NullTypeGradError",
           "zero_grad", "disconnected_grad", "undefined_grad", "grad_clip", "grad_scale",
           "disconnected_grad_for", "is_disconnected", "is_null", "grad_not_implemented",
           "grad_undefined", "subgraph_grad", "consider_constant", "format_as", "DisconnectedType"]


# Placeholders that ops' grad methods return: defined below the ops
# (graph/gradient_markers.py), so that ops need not import this module.
from symgraph.graph.gradient_markers import (  # noqa: E402
    disconnected_grad_for, grad_not_implemented, grad_undefined, is_disconnected, is_null)


# ---------------------------------------------------------------------------
# Errors


class DisconnectedInputError(ValueError):
    """``grad`` was asked for the gradient wrt a variable the cost does not depend on."""


class NullTypeGradError(TypeError):
    """A requested gradient is undefined or not implemented (a NullType reached it)."""


# ---------------------------------------------------------------------------
# dtype helpers


def _float_x():
    from symgraph.config import config

    return config.floatX


def _is_tensor(var):
    return hasattr(var.type, "dtype") and hasattr(var.type, "ndim")


def _is_float_dtype(dtype):
    return dtype is not None and np.dtype(dtype).kind in "fc"


def _is_discrete(var):
    return _is_tensor(var) and not _is_float_dtype(var.type.dtype)


def _float_zeros_like(x):
    """Zeros of x's shape, in x's dtype when it is a float, else in floatX."""
    from symgraph.ops.math import zeros_like

    dtype = x.type.dtype if _is_float_dtype(x.type.dtype) else _float_x()
    return zeros_like(x, dtype=dtype)


def _cast_like(term, var):
    """``term`` in ``var``'s dtype when that is a float dtype (the contract of grad)."""
    from symgraph.ops.math import cast

    if _is_tensor(var) and _is_float_dtype(var.type.dtype) and _is_tensor(term) and \
            term.type.dtype != var.type.dtype:
        return cast(term, var.type.dtype)
    return term


# ---------------------------------------------------------------------------
# Reverse mode


def grad(cost, wrt, consider_constant=None, disconnected_inputs="raise", add_names=True,
         known_grads=None, return_disconnected="zero", null_gradients="raise"):
    """The symbolic gradient of the scalar ``cost`` with respect to ``wrt``.

    ``cost``: a 0-d variable, or None when ``known_grads`` seeds the gradient.
    ``wrt``: a variable, or a list/tuple of them (the result has the same form).
    ``consider_constant``: variables through which no gradient flows.
    ``disconnected_inputs``: what to do when the cost does not depend on an
    element of ``wrt``: ``'raise'`` (DisconnectedInputError), ``'warn'``,
    ``'ignore'``.
    ``add_names``: name the gradients ``(dcost/dx)`` when both have names.
    ``known_grads``: {variable: its gradient}; these are taken as the whole
    gradient of that variable (not added to what flows through it).
    ``return_disconnected``: the value returned for a disconnected ``wrt``:
    ``'zero'`` (zeros of its shape; the placeholder for a non-tensor), ``'None'``,
    or ``'Disconnected'`` (the placeholder variable).
    ``null_gradients``: ``'raise'`` (NullTypeGradError when a gradient is
    undefined or not implemented) or ``'return'`` (return the NullType variable).

    The gradient with respect to an integer (or bool) variable is zeros in
    floatX: such a variable cannot change by an infinitesimal amount.
    """
    from symgraph.tensor.basic import as_tensor_variable, constant

    if cost is None and not known_grads:
        raise ValueError("grad: give a cost, or known_grads to start from")
    _check_choice("grad", "disconnected_inputs", disconnected_inputs, ("raise", "warn", "ignore"))
    _check_choice("grad", "return_disconnected", return_disconnected,
                  ("zero", "None", "Disconnected"))
    _check_choice("grad", "null_gradients", null_gradients, ("raise", "return"))
    if cost is not None:
        if not isinstance(cost, Variable):
            cost = as_tensor_variable(cost)
        if isinstance(cost.type, NullType):
            raise ValueError(f"grad: the cost {cost} is a NullType (undefined) variable: "
                             f"{cost.type.why_null}")
        if not _is_tensor(cost) or cost.type.ndim != 0:
            raise TypeError(f"grad: the cost must be a scalar (0-d), but {cost} has type "
                            f"{cost.type}{_ndim_hint(cost)}; sum it or take one element")

    wrt_list, pack = _as_list(wrt, "wrt")
    _check_variables("grad", "wrt", wrt_list)
    constants = _as_var_set(consider_constant, "consider_constant")

    grad_dict = {}
    if cost is not None:
        if known_grads and cost in known_grads:
            grad_dict[cost] = _check_known_grad(cost, known_grads[cost])
        else:
            dtype = cost.type.dtype if _is_float_dtype(cost.type.dtype) else _float_x()
            grad_dict[cost] = constant(1, dtype=dtype)
    for var, g_var in (known_grads or {}).items():
        if var is cost:
            continue
        grad_dict[var] = _check_known_grad(var, g_var)

    outputs = list(grad_dict)
    consumers = _consumers_on_paths(outputs, wrt_list, constants)

    cost_name = cost.name if (add_names and cost is not None) else None
    results = _backpropagate(consumers, grad_dict, wrt_list, cost_name)

    rval = []
    for var, g in zip(wrt_list, results):
        if is_null(g) and null_gradients == "raise":
            raise NullTypeGradError(f"grad: the gradient with respect to {var} is not "
                                    f"defined: {g.type.why_null}")
        if is_disconnected(g):
            _report_disconnected(
                disconnected_inputs, "disconnected_inputs", DisconnectedInputError,
                f"grad was asked for the gradient with respect to {var}, which the cost "
                f"does not depend on (it is not part of the cost's graph, or is used "
                f"only through non-differentiable operations)")
            if return_disconnected == "zero" and _is_tensor(var):
                g = _float_zeros_like(var)
            elif return_disconnected == "None":
                g = None
        rval.append(g)
    return pack(rval)


def _check_choice(who, option, value, choices):
    """Raise ValueError unless ``value`` is one of ``choices`` (an option of ``who``)."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"{who}: {option} must be {listed}, got {value!r}")


def _report_disconnected(policy, option, error_class, message):
    """Act on a disconnected variable as the ``option`` of the caller says:
    ``policy`` 'raise' (``error_class``), 'warn', or 'ignore'.  A warning points at
    the caller's caller (the user's line)."""
    if policy == "raise":
        raise error_class(f"{message}; pass {option}='ignore' or 'warn' to allow it")
    if policy == "warn":
        warnings.warn(message, stacklevel=3)


def _ndim_hint(var):
    return f" ({var.type.ndim}-d)" if _is_tensor(var) else ""


def _as_list(value, what):
    """(list of elements, function that gives a result the same form as ``value``)."""
    if isinstance(value, (set, frozenset)):
        raise TypeError(f"{what} must be a variable, a list or a tuple, not a set "
                        f"(its order would be arbitrary)")
    if isinstance(value, list):
        return list(value), list
    if isinstance(value, tuple):
        return list(value), tuple
    return [value], lambda rval: rval[0]


def _check_variables(who, what, elements):
    """Raise TypeError naming the first of ``elements`` (the ``what`` argument of
    ``who``) that is not a symbolic Variable."""
    for pos, elem in enumerate(elements):
        if not isinstance(elem, Variable):
            raise TypeError(f"{who}: element {pos} of {what} is a {type(elem).__name__}, "
                            f"not a symbolic Variable")


def _as_var_set(variables, what):
    if variables is None:
        return set()
    variables = [variables] if isinstance(variables, Variable) else list(variables)
    _check_variables("grad", what, variables)
    return set(variables)


def _check_known_grad(var, g_var):
    from symgraph.tensor.basic import as_tensor_variable

    if not isinstance(g_var, Variable):
        g_var = as_tensor_variable(g_var)
    if isinstance(g_var.type, (NullType, DisconnectedType)):
        return g_var
    if not _is_tensor(g_var) or not _is_float_dtype(g_var.type.dtype):
        raise TypeError(f"grad: the known gradient of {var} must be a float tensor (or a "
                        f"NullType/DisconnectedType placeholder), got {g_var} of type "
                        f"{g_var.type}")
    if _is_tensor(var) and g_var.type.ndim != var.type.ndim:
        raise ValueError(f"grad: the known gradient of {var} has {g_var.type.ndim} "
                         f"dimensions, but {var} has {var.type.ndim}")
    return _cast_like(g_var, var)


def _connection_pattern(node):
    """The op's connection pattern, checked: pattern[i][j] = output j depends on input i."""
    pattern = node.op.connection_pattern(node)
    if len(pattern) != len(node.inputs) or \
            any(len(row) != len(node.outputs) for row in pattern):
        raise ValueError(f"{node.op}.connection_pattern must have one row per input "
                         f"({len(node.inputs)}) of one entry per output "
                         f"({len(node.outputs)}), got {pattern}")
    return [[bool(c) for c in row] for row in pattern]


def _consumers_on_paths(outputs, wrt, constants):
    """{variable: {node: [input positions]}} for the variables on a path from an
    element of ``wrt`` to an element of ``outputs`` (paths follow connection
    patterns and stop at ``constants``)."""
    consumers = {}
    seen = set()
    stack = list(outputs)
    while stack:  # downward: every true ancestor of the outputs
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        if var in constants or var.owner is None:
            continue
        node = var.owner
        pattern = _connection_pattern(node)
        out_idx = var.index
        for i, inp in enumerate(node.inputs):
            if not pattern[i][out_idx]:
                continue
            positions = consumers.setdefault(inp, {}).setdefault(node, [])
            if i not in positions:
                positions.append(i)
            stack.append(inp)

    reached = set()
    stack = [w for w in wrt if w in consumers]
    while stack:  # upward: keep the variables that depend on an element of wrt
        var = stack.pop()
        if var in reached or var not in consumers:
            continue
        reached.add(var)
        for node, positions in consumers[var].items():
            pattern = _connection_pattern(node)
            for i in positions:
                stack.extend(o for j, o in enumerate(node.outputs) if pattern[i][j])
    return {var: nodes for var, nodes in consumers.items() if var in reached}


def _backpropagate(consumers, grad_dict, wrt, cost_name):
    """The gradient of each element of ``wrt`` (placeholders included).

    Nodes are visited in reverse topological order, so a node's output
    gradients are complete (every client has contributed) when it is visited.
    Iterative, not recursive: deep graphs do not hit Python's recursion limit.
    """
    nodes = {node for per_var in consumers.values() for node in per_var}
    term_dict = {}

    def total_grad(var):
        if var not in grad_dict:
            grad_dict[var] = _sum_terms(var, consumers.get(var, {}), term_dict, cost_name)
        return grad_dict[var]

    roots = [v for v in grad_dict] + [o for n in nodes for o in n.outputs]
    for node in reversed(io_toposort([], roots)):
        if node in nodes:
            output_grads = [total_grad(o) for o in node.outputs]
            term_dict[node] = _node_input_grads(node, output_grads)
    return [total_grad(w) for w in wrt]


def _sum_terms(var, node_to_positions, term_dict, cost_name):
    """Add up the gradient terms that ``var``'s clients send it."""
    from symgraph.ops.math import add

    null_terms, terms = [], []
    for node, positions in node_to_positions.items():
        for i in positions:
            term = term_dict[node][i]
            if is_null(term):
                null_terms.append(term)
            elif not is_disconnected(term):
                terms.append(term)
    if null_terms:
        return null_terms[0]
    if not terms:
        return disconnected_grad_for(var)
    if _is_discrete(var):
        # An integer cannot move by an infinitesimal amount: its gradient is zero.
        total = _float_zeros_like(var)
    else:
        total = terms[0] if len(terms) == 1 else add(*terms)
        total = _cast_like(total, var)
    if cost_name is not None and var.name is not None and total.name is None:
        total.name = f"(d{cost_name}/d{var.name})"
    return total


def _node_input_grads(node, output_grads):
    """One gradient term per input of ``node``, from its outputs' gradients."""
    pattern = _connection_pattern(node)
    outputs_connected = [not is_disconnected(g) for g in output_grads]
    outputs_null = [is_null(g) for g in output_grads]
    inputs_connected = [any(p and c for p, c in zip(row, outputs_connected))
                        for row in pattern]
    # An input whose every connected output has an undefined gradient.
    only_null = [not any(p and c and not n for p, c, n in
                         zip(row, outputs_connected, outputs_null)) for row in pattern]

    if not any(inputs_connected):
        return [disconnected_grad_for(x) for x in node.inputs]
    if all(only_null):
        return [_first_null(row, output_grads) if connected else disconnected_grad_for(x)
                for x, row, connected in zip(node.inputs, pattern, inputs_connected)]

    ograds = [_output_grad_for_op(o, g) for o, g in zip(node.outputs, output_grads)]
    input_grads = node.op.L_op(list(node.inputs), list(node.outputs), ograds)
    if input_grads is None:
        raise TypeError(f"{node.op}.grad/L_op returned None instead of a list of "
                        f"gradients, one per input")
    input_grads = list(input_grads)
    if len(input_grads) != len(node.inputs):
        raise ValueError(f"{node.op}.grad/L_op returned {len(input_grads)} gradient terms "
                         f"for its {len(node.inputs)} inputs")
    terms = []
    for i, (x, term) in enumerate(zip(node.inputs, input_grads)):
        if not inputs_connected[i]:
            # The connection pattern rules: an op may return zeros here because it
            # was given zeros for an output the cost does not depend on.
            terms.append(disconnected_grad_for(x))
            continue
        if only_null[i]:
            terms.append(_first_null(pattern[i], output_grads))
            continue
        term = _check_term(node, i, x, term)
        if not is_disconnected(term) and any(
                p and n for p, n in zip(pattern[i], outputs_null)):
            term = _first_null(pattern[i], output_grads)  # undefined stays undefined
        terms.append(term)
    return terms


def _first_null(row, output_grads):
    return next(g for p, g in zip(row, output_grads) if p and is_null(g))


def _output_grad_for_op(output, g):
    """What the op's L_op receives for ``output``: its gradient in its dtype, or
    zeros where a float output's gradient is a placeholder (so that ops need not
    handle placeholders); non-float outputs keep the placeholder."""
    if is_disconnected(g) or is_null(g):
        # For an undefined gradient too: the inputs it reaches become undefined
        # afterwards, whatever the op computes from these zeros.
        if _is_tensor(output) and _is_float_dtype(output.type.dtype):
            return _float_zeros_like(output)
        return g
    return _cast_like(g, output)


def _check_term(node, i, x, term):
    """Validate the gradient term an op returned for its input ``i``."""
    if term is None:
        raise TypeError(f"{node.op}.grad returned None for the gradient of its input {i} "
                        f"({x}); return disconnected_grad_for(x), grad_undefined(...) or "
                        f"grad_not_implemented(...) instead")
    if not isinstance(term, Variable):
        raise TypeError(f"{node.op}.grad returned a {type(term).__name__} for the gradient "
                        f"of its input {i} ({x}), not a symbolic Variable")
    if is_null(term) or is_disconnected(term):
        return term
    if _is_discrete(x):
        return term  # replaced by zeros when the terms are summed
    if _is_tensor(term) and _is_tensor(x):
        if term.type.ndim != x.type.ndim:
            raise ValueError(f"{node.op}.grad returned a {term.type.ndim}-d gradient for "
                             f"its input {i} ({x}), which is {x.type.ndim}-d")
        if not _is_float_dtype(term.type.dtype):
            raise TypeError(f"{node.op}.grad returned an integer-valued gradient (dtype "
                            f"{term.type.dtype}) for its input {i} ({x})")
    return term


def Lop(f, wrt, eval_points, consider_constant=None, disconnected_inputs="raise"):
    """The L-operator: ``eval_points`` times the Jacobian of ``f`` wrt ``wrt``.

    ``f`` and ``eval_points`` are variables or matching lists of them (one
    eval point of ``f[i]``'s shape per ``f[i]``); the result has ``wrt``'s form.
    Unlike ``grad``'s known_grads, an ``f[i]`` that is also an ancestor of
    another ``f[j]``, or appears twice, gets the sum of what reaches it: the
    result is exactly ``sum_i eval_points[i] . d f[i] / d wrt``.
    """
    return _lop(f, wrt, eval_points, consider_constant, disconnected_inputs, "zero")


def _lop(f, wrt, eval_points, consider_constant, disconnected_inputs, return_disconnected):
    from symgraph.autodiff.grad_ops import seed_identity
    from symgraph.tensor.basic import as_tensor_variable

    f_list = list(f) if isinstance(f, (list, tuple)) else [f]
    points = list(eval_points) if isinstance(eval_points, (list, tuple)) else [eval_points]
    if len(f_list) != len(points):
        raise ValueError(f"Lop: {len(f_list)} expressions but {len(points)} eval points")
    known = {}
    for pos, (fi, v) in enumerate(zip(f_list, points)):
        fi = as_tensor_variable(fi)
        v = as_tensor_variable(v)
        if v.type.ndim != fi.type.ndim:
            raise ValueError(f"Lop: eval point {pos} ({v}) has {v.type.ndim} dimensions, "
                             f"but f[{pos}] ({fi}) has {fi.type.ndim}")
        if not _is_float_dtype(v.type.dtype):
            from symgraph.ops.math import cast

            v = cast(v, fi.type.dtype if _is_float_dtype(fi.type.dtype) else _float_x())
        # A fresh identity node per seed: its gradient flows into f[i] and adds up
        # with whatever else reaches f[i].
        known[seed_identity(fi)] = v
    return grad(None, wrt, consider_constant=consider_constant, known_grads=known,
                disconnected_inputs=disconnected_inputs,
                return_disconnected=return_disconnected)


def jacobian(expression, wrt, consider_constant=None, disconnected_inputs="raise"):
    """The Jacobian of ``expression`` with respect to ``wrt``.

    The expression is flattened (as Theano's jacobian): for each element of
    ``wrt`` the result has shape ``(expression.size,) + wrt.shape``, row ``i``
    being the gradient of the ``i``-th element.  A 0-d expression gives its
    gradient.

    When the expression's size is known when the graph is built and small
    (at most ``_UNROLL_LIMIT`` elements), the rows are built one by one and
    stacked; otherwise (an unknown size, as Theano always did, or a large
    one) a ``scan`` over the rows computes them.
    """
    from symgraph.ops.join import stack
    from symgraph.tensor.basic import as_tensor_variable, constant

    expression = as_tensor_variable(expression)
    wrt_list, pack = _as_list(wrt, "wrt")
    if expression.type.ndim == 0:
        return pack([grad(expression, w, consider_constant=consider_constant,
                          disconnected_inputs=disconnected_inputs) for w in wrt_list])
    _check_variables("jacobian", "wrt", wrt_list)
    shape = expression.type.shape
    if any(s is None for s in shape) or int(np.prod(shape)) > _UNROLL_LIMIT:
        return pack(_jacobian_by_scan(expression, wrt_list, consider_constant,
                                      disconnected_inputs))
    size = int(np.prod(shape))
    if size == 0:
        raise ValueError(f"jacobian: {expression} has no elements (shape {shape})")
    dtype = expression.type.dtype if _is_float_dtype(expression.type.dtype) else _float_x()
    rows = []
    for i in range(size):
        seed = np.zeros(size, dtype=dtype)
        seed[i] = 1
        # Only the first row reports disconnected inputs (once, not size times).
        rows.append(grad(None, wrt_list, consider_constant=consider_constant,
                         known_grads={expression: constant(seed.reshape(shape))},
                         disconnected_inputs=disconnected_inputs if i == 0 else "ignore"))
    return pack([stack([row[k] for row in rows]) for k in range(len(wrt_list))])


#: Static sizes up to this are unrolled by jacobian; larger ones use a scan.
_UNROLL_LIMIT = 32


def _jacobian_by_scan(expression, wrt_list, consider_constant, disconnected_inputs):
    """The rows of the Jacobian computed by a scan over the flattened
    expression's indices (Theano's way): one list entry per element of wrt."""
    from symgraph.ops.alloc import arange
    from symgraph.scan import scan

    flat = expression.flatten()
    # Disconnected inputs are reported here, once, rather than from inside the loop.
    probe = grad(flat.sum(), wrt_list, consider_constant=consider_constant,
                 disconnected_inputs=disconnected_inputs, return_disconnected="Disconnected")

    def row(i, flat_, *ws):
        # flat_ and ws are the outer variables themselves (scan passes non-sequences
        # as they are), so grad sees the whole graph from wrt to the expression.
        return [grad(flat_[i], w, consider_constant=consider_constant,
                     disconnected_inputs="ignore") for w in ws]

    rows, _ = scan(row, sequences=arange(flat.shape[0]), non_sequences=[flat] + wrt_list,
                   return_list=True, name="jacobian")
    del probe
    return rows


def hessian(cost, wrt, consider_constant=None, disconnected_inputs="raise"):
    """The Hessian of the scalar ``cost`` with respect to each vector in ``wrt``.

    Each element of ``wrt`` must be 1-d; the result for it is an ``(n, n)``
    matrix, computed as the Jacobian of the gradient (a scan over its entries
    when ``n`` is not known when the graph is built, as in Theano).
    """
    from symgraph.ops.shape import specify_shape

    wrt_list, pack = _as_list(wrt, "wrt")
    out = []
    for w in wrt_list:
        if not isinstance(w, Variable) or not _is_tensor(w) or w.type.ndim != 1:
            raise TypeError(f"hessian: each element of wrt must be a vector (1-d), "
                            f"got {w}{' of type ' + str(w.type) if hasattr(w, 'type') else ''}")
        g = grad(cost, w, consider_constant=consider_constant,
                 disconnected_inputs=disconnected_inputs)
        if w.type.shape[0] is not None:
            g = specify_shape(g, w.type.shape)
        # w may reach the cost only linearly: no second-order dependency is fine.
        out.append(jacobian(g, w, consider_constant=consider_constant,
                            disconnected_inputs="ignore"))
    return pack(out)


# The other public names live in helper modules; they import this module's
# names lazily (inside functions), so importing them here is not a cycle.
from symgraph.autodiff.grad_ops import (  # noqa: E402
    disconnected_grad, grad_clip, grad_scale, undefined_grad, zero_grad)
from symgraph.autodiff.rop import Rop  # noqa: E402
from symgraph.autodiff.verify import GradientError, numeric_grad, verify_grad  # noqa: E402
from symgraph.autodiff.subgraph import consider_constant, format_as, subgraph_grad  # noqa: E402,F401
from symgraph.ops.from_graph import register_gradient as _register  # noqa: E402

_register(grad)
