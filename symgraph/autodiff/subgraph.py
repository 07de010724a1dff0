"""Theano's ``subgraph_grad`` (backpropagation through one segment of a
graph at a time), ``consider_constant`` and the ``format_as`` helper."""

__all__ = ["subgraph_grad", "consider_constant", "format_as"]


def consider_constant(x):
    """``x``, but taken as a constant by ``grad``: the gradient through it is
    zero (Theano's ConsiderConstant; the same as ``zero_grad``)."""
    from symgraph.autodiff.grad_ops import zero_grad

    return zero_grad(x)


def format_as(use_list, use_tuple, outputs):
    """``outputs`` as a list (``use_list``), a tuple (``use_tuple``), or, when
    neither, its only element (a list or tuple of one element) or itself."""
    if use_list and use_tuple:
        raise ValueError("format_as: use_list and use_tuple cannot both be true")
    if use_list or use_tuple:
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        return outputs if use_list else tuple(outputs)
    if isinstance(outputs, (list, tuple)):
        if len(outputs) != 1:
            raise ValueError(f"format_as: expected one output, got {len(outputs)}")
        return outputs[0]
    return outputs


def subgraph_grad(wrt, end, start=None, cost=None, details=False):
    """The gradients with respect to ``wrt`` and ``end`` of the part of the
    graph between ``end`` and ``start`` (a dict {variable: its known
    gradient}) and/or ``cost``, with ``end`` held constant so that the
    backpropagation stops there.  Returns ``(wrt_grads, end_grads)``, and with
    ``details`` also the gradients from ``start`` and from ``cost`` apart."""
    from symgraph.gradient import grad

    if cost is None and start is None:
        raise ValueError("subgraph_grad: give cost, start or both")
    wrt, end = list(wrt), list(end)
    params = list(dict.fromkeys(wrt + end))
    start_grads = cost_grads = None
    if start is not None:
        if not isinstance(start, dict):
            raise TypeError(f"subgraph_grad: start must be a dict, got {type(start).__name__}")
        start_grads = list(grad(None, params, known_grads=start, consider_constant=end,
                                disconnected_inputs="ignore"))
    if cost is not None:
        cost_grads = list(grad(cost, params, consider_constant=end,
                               disconnected_inputs="ignore"))
    if start_grads is None:
        grads = cost_grads
    elif cost_grads is None:
        grads = start_grads
    else:
        grads = [a + b for a, b in zip(start_grads, cost_grads)]
    by_var = dict(zip(params, grads))
    wrt_grads = [by_var[v] for v in wrt]
    end_grads = [by_var[v] for v in end]
    if details:
        return wrt_grads, end_grads, start_grads, cost_grads
    return wrt_grads, end_grads
