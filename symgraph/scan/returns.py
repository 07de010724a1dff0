"""What a step function returns: outputs, shared-variable updates, a stop condition.

Theano accepts any of::

    outputs                       # a variable or a list of them
    updates                       # a dict (or list of (shared, expr) pairs)
    outputs, updates              # in either order
    ..., until(condition)         # the condition always last

``split_step_return`` turns these into ``(outputs, update pairs, condition)``.
"""

import numpy as np

from symgraph.graph.basic import Variable


class until:
    """A stop condition for scan: ``return outputs, until(cond)``.

    The loop stops after the first step whose ``cond`` (a scalar) is true; that
    step's outputs are kept.  ``n_steps`` is then the most steps it may run.
    """

    def __init__(self, condition):
        from symgraph.tensor.basic import as_tensor_variable

        condition = as_tensor_variable(condition)
        if condition.ndim != 0:
            raise TypeError(f"until: the condition must be a scalar, got {condition} with "
                            f"{condition.ndim} dimensions")
        self.condition = condition

    def __repr__(self):
        return f"until({self.condition})"


def _is_value(x):
    return isinstance(x, (Variable, np.ndarray, np.generic, int, float, bool))


def _is_update_pairs(x):
    from symgraph.compile.shared import SharedVariable

    return isinstance(x, (list, tuple)) and len(x) > 0 and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], SharedVariable)
        for p in x)


def _is_updates(x):
    return isinstance(x, dict) or _is_update_pairs(x) or \
        (isinstance(x, (list, tuple)) and len(x) == 0)


def _is_outputs(x):
    return _is_value(x) or (isinstance(x, (list, tuple)) and all(_is_value(e) for e in x))


def _outputs(x):
    return [x] if _is_value(x) else list(x)


def _updates(x):
    return list(x.items()) if isinstance(x, dict) else [tuple(p) for p in x]


def split_step_return(ret, where):
    """``(outputs, [(shared, expr)], condition or None)`` from a step's return value."""
    cond = None
    if isinstance(ret, until):
        return [], [], ret.condition
    if isinstance(ret, (list, tuple)) and ret and isinstance(ret[-1], until):
        cond = ret[-1].condition
        ret = ret[:-1]
        if len(ret) == 1 and not _is_value(ret[0]):
            ret = ret[0]
    if isinstance(ret, (list, tuple)) and any(isinstance(r, until) for r in ret):
        raise ValueError(f"{where}: the step function returned until(...) before other "
                         f"values; the condition must be the last thing returned "
                         f"(return outputs, updates, until(cond))")
    if ret is None:
        return [], [], cond
    if isinstance(ret, dict):
        return [], _updates(ret), cond
    if _is_value(ret):
        return [ret], [], cond
    if isinstance(ret, (list, tuple)):
        if _is_update_pairs(ret):
            return [], _updates(ret), cond
        if len(ret) == 2 and not _is_value(ret[1]) and _is_updates(ret[1]) and \
                _is_outputs(ret[0]):
            return _outputs(ret[0]), _updates(ret[1]), cond
        if len(ret) == 2 and not _is_value(ret[0]) and _is_updates(ret[0]) and \
                _is_outputs(ret[1]):
            return _outputs(ret[1]), _updates(ret[0]), cond
        if all(_is_value(r) for r in ret):
            return list(ret), [], cond
    raise TypeError(f"{where}: the step function returned {ret!r:.200}; it must return "
                    f"its outputs (a variable or a list), an updates dict, or both "
                    f"(outputs, updates), optionally followed by until(condition)")
