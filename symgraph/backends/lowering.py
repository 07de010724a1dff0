"""Lowering tables, one per backend: op class -> the rule that turns a node
into that backend's kernel.

A rule is called as ``rule(op, node)`` and returns the backend's kernel (for
the CPU backend a ``CKernel``) or None when this node has no kernel there (a
dtype it does not handle, say): the node then runs its Python ``perform``.
It is looked up through the op's class hierarchy, so one registration covers
the subclasses (every ``CAReduce``), and a subclass may override it.

A rule may be given as ``"package.module:function"``: the module is imported
the first time a node needs it, so that importing symgraph does not import
every code generator of every backend.
"""

import importlib
import threading

__all__ = ["register_lowering", "lowering_rule", "lower", "registered_lowerings"]

_TABLES = {}        # backend -> {op class: rule}
_LOCK = threading.Lock()


class _LazyRule:
    """A rule named ``"module:function"`` (with leading arguments ``bound``),
    imported on first use."""

    def __init__(self, target, bound):
        module, sep, name = target.partition(":")
        if not sep or not module or not name:
            raise ValueError(f"a lowering rule given by name is 'module:function', "
                             f"not {target!r}")
        self.module, self.name, self.bound = module, name, tuple(bound)
        self._fn = None

    def __call__(self, op, node):
        if self._fn is None:
            self._fn = getattr(importlib.import_module(self.module), self.name)
        return self._fn(*self.bound, op, node)

    def __repr__(self):
        bound = "".join(f", {b!r}" for b in self.bound)
        return f"<lowering {self.module}:{self.name}{bound}>"


class _BoundRule:
    def __init__(self, fn, bound):
        self.fn, self.bound = fn, tuple(bound)

    def __call__(self, op, node):
        return self.fn(*self.bound, op, node)

    def __repr__(self):
        return f"<lowering {getattr(self.fn, '__qualname__', self.fn)}{self.bound!r}>"


def register_lowering(op_class, rule, backend="cpu", args=()):
    """Register ``rule`` as ``backend``'s lowering of ``op_class`` nodes.

    ``rule``: a callable ``rule(op, node) -> kernel | None``, or the string
    ``"module:function"`` of one, imported on first use.  ``args`` are passed
    before ``op`` and ``node`` (one generator serving several op classes).
    A later registration for the same class and backend replaces the earlier.
    Returns ``rule``, so that it can be used as a decorator's result.
    """
    if not isinstance(op_class, type):
        raise TypeError(f"register_lowering: {op_class!r} is not an op class")
    if isinstance(rule, str):
        entry = _LazyRule(rule, args)
    elif callable(rule):
        entry = _BoundRule(rule, args) if args else rule
    else:
        raise TypeError(f"register_lowering: the rule for {op_class.__name__} must be "
                        f"callable or 'module:function', not {rule!r}")
    with _LOCK:
        _TABLES.setdefault(backend, {})[op_class] = entry
    return rule


def lowering_rule(op, backend="cpu"):
    """The rule ``backend`` registered for ``op``'s class or its nearest base
    class, or None."""
    table = _TABLES.get(backend)
    if not table:
        return None
    for cls in type(op).__mro__:
        rule = table.get(cls)
        if rule is not None:
            return rule
    return None


def lower(node, backend="cpu"):
    """``node`` lowered by ``backend``: its kernel, or None (no rule for its
    op, or the rule declined this node)."""
    rule = lowering_rule(node.op, backend)
    return None if rule is None else rule(node.op, node)


def registered_lowerings(backend="cpu"):
    """{op class: rule} of ``backend`` (a copy)."""
    with _LOCK:
        return dict(_TABLES.get(backend, {}))
