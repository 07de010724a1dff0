"""Test values: Theano's ``compute_test_value`` debugging aid.

With the flag ``compute_test_value`` other than ``'off'``, every node is evaluated
with its op's NumPy ``perform`` as soon as it is built, on its inputs' test values
(``x.tag.test_value`` of inputs, the data of constants, the value of shared
variables), and its outputs get test values of their own.  A shape or dtype error
is then raised by the Python line that builds the faulty expression, not later by a
compiled function whose optimized graph no longer resembles it.

What happens to a node with an input that has no test value is the flag's value:
``'ignore'`` skips the node silently, ``'warn'`` skips it with a warning, ``'raise'``
raises :class:`TestValueError`, ``'pdb'`` raises as well after opening the debugger.
During compilation, the flag ``compute_test_value_opt`` takes the place of
``compute_test_value`` for the nodes that rewrites build.
"""

import copy
import sys
import warnings
from types import SimpleNamespace

import numpy as np

__all__ = ["TestValueError", "VariableTag", "get_test_value", "get_test_values",
           "compute_test_values", "test_values_enabled"]


class TestValueError(AttributeError):
    """A variable has no test value where one is needed (an AttributeError, as in
    Theano, so ``hasattr(x.tag, 'test_value')``-style code keeps working)."""

    __test__ = False  # not a pytest test class, whatever its name says


class VariableTag(SimpleNamespace):
    """A variable's ``tag``: a namespace that checks ``test_value`` against the
    variable's type when it is assigned, as Theano's tag did, so a value of the
    wrong rank or dtype is refused at the line that assigns it."""

    __slots__ = ("_var_type",)

    def __setattr__(self, name, value):
        var_type = getattr(self, "_var_type", None)
        if name == "test_value" and var_type is not None and value is not None:
            try:
                value = var_type.filter(value)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"test value {_short(value)} does not fit the variable's "
                                f"type {var_type}: {exc}") from None
        super().__setattr__(name, value)

    def __reduce__(self):
        # the type is kept through pickling and copying, so the check survives
        return _restored_tag, (getattr(self, "_var_type", None), dict(vars(self)))


def _restored_tag(var_type, attributes):
    tag = tag_for(var_type)
    for name, value in attributes.items():
        SimpleNamespace.__setattr__(tag, name, value)
    return tag


def tag_for(var_type):
    """A new :class:`VariableTag` that checks test values against ``var_type``."""
    tag = VariableTag()
    object.__setattr__(tag, "_var_type", var_type)
    return tag


def test_values_enabled():
    """The effective ``compute_test_value`` mode, or None when it is ``'off'``."""
    from symgraph.config import config

    mode = config.get("compute_test_value")
    return None if mode == "off" else mode


def _has_test_value(var):
    from symgraph.graph.basic import Constant

    return isinstance(var, Constant) or hasattr(var, "get_value") or \
        "test_value" in vars(var.tag)


def get_test_value(var):
    """The test value of ``var``: its ``tag.test_value``, a constant's data or a
    shared variable's value.  Python and NumPy values are returned as they are
    (Theano's ``theano.gof.op.get_test_value``).  Raises :class:`TestValueError`
    when ``var`` has none."""
    from symgraph.graph.basic import Constant, Variable

    if not isinstance(var, Variable):
        return var
    if isinstance(var, Constant):
        return var.data
    if hasattr(var, "get_value"):
        return var.get_value(borrow=True)
    try:
        return vars(var.tag)["test_value"]
    except KeyError:
        raise TestValueError(f"{var} has no test value{_origin(var)}") from None


def get_test_values(*variables):
    """The test values of ``variables`` as a list, or ``[]`` when test values are
    off or one of them has none (warning or raising as ``compute_test_value``
    says), so ``for v in get_test_values(x, y):`` runs only when they all exist."""
    mode = test_values_enabled()
    if mode is None:
        return []
    values = []
    for i, var in enumerate(variables):
        try:
            values.append(get_test_value(var))
        except TestValueError:
            if _missing(mode, f"argument {i} ({var}) has no test value", var) is None:
                return []
    return values


def compute_test_values(node, mode):
    """Run ``node``'s ``perform`` on its inputs' test values and give its outputs
    theirs (``mode`` is the effective ``compute_test_value``)."""
    _fill_owners(node, mode)
    values = []
    for i, var in enumerate(node.inputs):
        if not _has_test_value(var):
            _missing(mode, f"cannot compute the test value of {node.op}: input {i} ({var}) "
                     "has no test value", var)
            return
        values.append(get_test_value(var))
    if node.op.destroy_map:  # an in-place op must not change the inputs' test values
        values = [np.array(v, copy=True) if isinstance(v, np.ndarray) else copy.deepcopy(v)
                  for v in values]
    storage = [[None] for _ in node.outputs]
    try:
        node.op.perform(node, values, storage)
    except NotImplementedError:
        _missing(mode, f"cannot compute the test value of {node.op}: it has no perform", None)
        return
    except Exception as exc:
        raise _failed(node, values, exc) from exc
    for out, cell in zip(node.outputs, storage):
        # Stored as computed: the op's own output is its value, even where a
        # declared static shape is looser than the array.
        SimpleNamespace.__setattr__(out.tag, "test_value", cell[0])


def _fill_owners(node, mode):
    """Give test values to the inputs of ``node`` that lack one but were computed
    by nodes built without ``Op.__call__`` (``op.make_node(...)`` directly, as
    rewrites and some helpers do), evaluating those nodes first, parents first."""
    pending = [v for v in node.inputs if v.owner is not None and not _has_test_value(v)]
    order, seen = [], set()
    while pending:  # iterative depth-first walk: graphs may be deeper than the stack
        var = pending[-1]
        owner = var.owner
        if id(owner) in seen:
            pending.pop()
            continue
        missing = [i for i in owner.inputs if i.owner is not None and not _has_test_value(i)
                   and id(i.owner) not in seen]
        if missing:
            pending.extend(missing)
            continue
        seen.add(id(owner))
        order.append(owner)
        pending.pop()
    for parent in order:
        if all(_has_test_value(i) for i in parent.inputs):
            compute_test_values(parent, mode)


def _missing(mode, message, var):
    """Act on a missing test value as ``mode`` says; returns None (the caller
    skips) or raises."""
    if mode == "ignore":
        return None
    if mode == "warn":
        warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())
        return None
    error = TestValueError(message + (_origin(var) if var is not None else ""))
    if mode == "pdb":
        import pdb

        try:
            raise error
        except TestValueError:
            pdb.post_mortem(sys.exc_info()[2])
    raise error


def _failed(node, values, exc):
    """``exc`` from ``perform`` on test values, as its own class, with the op and the
    inputs' shapes and dtypes in its message (the traceback already ends at the
    user's line that built the node)."""
    shapes = ", ".join(f"{np.shape(v)} {getattr(v, 'dtype', type(v).__name__)}"
                       for v in values)
    message = (f"{exc}\nWhile computing the test value of {node.op} on inputs of shapes "
               f"and dtypes: {shapes} (compute_test_value).")
    try:
        new = type(exc)(message)
    except Exception:  # an exception class whose constructor takes other arguments
        new = ValueError(message)
    return new


def _origin(var):
    owner = getattr(var, "owner", None)
    trace = getattr(owner.tag, "trace", None) if owner is not None else None
    return f"\n{var} was built at:\n  {trace}" if trace else ""


def _short(value):
    shape = np.shape(value) if isinstance(value, (np.ndarray, list, tuple)) else None
    return f"of shape {shape}" if shape is not None else repr(value)[:40]


def _user_stacklevel():
    # warnings.warn's stacklevel of the innermost frame outside symgraph
    from symgraph.graph.trace import _is_internal

    frame, level = sys._getframe(1), 1
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level
