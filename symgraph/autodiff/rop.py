"""Forward mode: ``Rop(f, wrt, eval_points)``, the Jacobian of ``f`` times a vector.

Each node on a path from ``wrt`` to ``f`` is visited in topological order and
its ``op.R_op(inputs, eval_points)`` maps the directional derivatives of its
inputs to those of its outputs (``None`` meaning "does not depend on wrt").
An op without ``R_op`` is handled by the double-L-operator trick (PyTensor's
``use_op_rop_implementation=False``): its L_op ``g(u) = J^T u`` is linear in
``u``, so ``J v`` is the L-operator of ``g`` wrt ``u`` at ``v``.
"""

from symgraph.graph.basic import clone_replace, io_toposort

__all__ = ["Rop"]


def Rop(f, wrt, eval_points, disconnected_outputs="raise", return_disconnected="zero"):
    """The R-operator: the Jacobian of ``f`` wrt ``wrt`` times ``eval_points``.

    ``f``: a variable or a list/tuple of them (the result has this form);
    ``wrt`` and ``eval_points``: a variable or matching lists (one eval point of
    ``wrt[i]``'s shape per ``wrt[i]``).
    ``disconnected_outputs``: what to do when an element of ``f`` does not
    depend on ``wrt``: ``'raise'`` (ValueError), ``'warn'``, ``'ignore'``;
    ``return_disconnected``: ``'zero'`` (zeros of its shape) or ``'None'``.
    """
    from symgraph.gradient import (_as_list, _check_choice, _check_variables,
                                   _float_zeros_like, _report_disconnected)
    from symgraph.tensor.basic import as_tensor_variable

    _check_choice("Rop", "disconnected_outputs", disconnected_outputs, ("raise", "warn", "ignore"))
    _check_choice("Rop", "return_disconnected", return_disconnected, ("zero", "None"))
    f_list, pack = _as_list(f, "f")
    wrt_list = list(wrt) if isinstance(wrt, (list, tuple)) else [wrt]
    points = list(eval_points) if isinstance(eval_points, (list, tuple)) else [eval_points]
    if len(wrt_list) != len(points):
        raise ValueError(f"Rop: {len(wrt_list)} variables in wrt but {len(points)} "
                         f"eval points")
    f_list = [as_tensor_variable(fi) for fi in f_list]
    _check_variables("Rop", "wrt", wrt_list)
    direction = {w: _as_eval_point(w, v, pos)
                 for pos, (w, v) in enumerate(zip(wrt_list, points))}

    for node in io_toposort(list(direction), f_list):
        local = [direction.get(inp) for inp in node.inputs]
        if all(v is None for v in local):
            continue  # the node does not depend on wrt
        results = _node_rop(node, local)
        for out, r in zip(node.outputs, results):
            if r is not None:
                direction[out] = _conform(out, r, node)

    rval = []
    for fi in f_list:
        r = direction.get(fi)
        if r is None:
            _report_disconnected(
                disconnected_outputs, "disconnected_outputs", ValueError,
                f"Rop: {fi} does not depend on the variables in wrt (or only "
                f"through non-differentiable operations)")
            if return_disconnected == "zero":
                r = _float_zeros_like(fi)
        rval.append(r)
    return pack(rval)


def _as_eval_point(w, v, pos):
    from symgraph.ops.math import cast
    from symgraph.tensor.basic import as_tensor_variable

    v = as_tensor_variable(v)
    if hasattr(w.type, "ndim") and v.type.ndim != w.type.ndim:
        raise ValueError(f"Rop: eval point {pos} ({v}) has {v.type.ndim} dimensions, but "
                         f"wrt[{pos}] ({w}) has {w.type.ndim}")
    dtype = getattr(w.type, "dtype", None)
    if dtype is not None and dtype[:5] in ("float", "compl") and v.type.dtype != dtype:
        v = cast(v, dtype)
    return v


def _conform(out, r, node):
    """``r`` as the derivative of ``out``: its dtype; None for integer outputs."""
    from symgraph.gradient import _cast_like, _is_discrete, is_disconnected, is_null

    if is_disconnected(r) or _is_discrete(out):
        return None
    if is_null(r):
        raise NotImplementedError(f"Rop: the derivative of {node.op} (output {out.index}) "
                                  f"is not defined: {r.type.why_null}")
    if hasattr(out.type, "ndim") and r.type.ndim != out.type.ndim:
        raise ValueError(f"{node.op}.R_op returned a {r.type.ndim}-d result for its "
                         f"{out.type.ndim}-d output {out.index}")
    return _cast_like(r, out)


def _node_rop(node, eval_points):
    """The R_op of ``node``, or the double-L_op fallback when the op has none."""
    try:
        results = node.op.R_op(list(node.inputs), list(eval_points))
    except NotImplementedError:
        results = _rop_by_double_lop(node, eval_points)
    if results is None or len(results) != len(node.outputs):
        raise ValueError(f"{node.op}.R_op must return a list of one result (or None) "
                         f"per output ({len(node.outputs)}), got {results!r}")
    return list(results)


def _rop_by_double_lop(node, eval_points):
    """``J v`` for one node from its L_op: ``J v = d/du <v, J^T u>``.

    ``u`` is a dummy variable per float output; the result does not depend on
    its value, only on its shape, so it is replaced by the output itself.
    """
    from symgraph.gradient import (_is_float_dtype, _is_tensor, _lop, disconnected_grad_for,
                                   is_disconnected, is_null)

    dummies = [o.type() if _is_tensor(o) and _is_float_dtype(o.type.dtype) else None
               for o in node.outputs]
    ograds = [u if u is not None else disconnected_grad_for(o)
              for u, o in zip(dummies, node.outputs)]
    input_grads = node.op.L_op(list(node.inputs), list(node.outputs), ograds)
    seeds, points = [], []
    for i, (g, v) in enumerate(zip(input_grads, eval_points)):
        if v is None or g is None or is_disconnected(g):
            continue
        if is_null(g):
            raise NotImplementedError(
                f"Rop: {node.op} has no R_op, and the fallback through its gradient "
                f"failed: {g.type.why_null}")
        seeds.append(g)
        points.append(v)
    wanted = [u for u in dummies if u is not None]
    if not seeds or not wanted:
        return [None] * len(node.outputs)
    found = _lop(seeds, wanted, points, None, "ignore", "None")
    connected = [(u, r) for u, r in zip(wanted, found) if r is not None]
    by_dummy = {}
    if connected:
        replace = {u: o for u, o in zip(dummies, node.outputs) if u is not None}
        cloned = clone_replace([r for _, r in connected], replace)
        by_dummy = {u: r for (u, _), r in zip(connected, cloned)}
    return [by_dummy.get(u) if u is not None else None for u in dummies]
