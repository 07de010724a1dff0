"""The scalar ops' C, as a table per language: what the element-wise, reduction
and fused-loss generators ask of a scalar op.

Scalar ops (``symgraph/ops/scalar*.py``) hold only their semantics; their C
lives here, in ``scalar_base.py`` (the defaults and the helpers for writing
expressions) and one module per op family.  Each entry is registered for an
op class (:func:`c_method` for the six functions below, :func:`register_attrs`
for the data they read, such as a libm name) and found through the op's class
hierarchy, so a subclass inherits its base's C.

Languages: ``"c"`` is the CPU's C; a backend writing another C-family language
(``"cuda"``) registers only the entries that differ and runs its generators
under :func:`language`: at each class of the hierarchy its own entry is taken
first, then the C one, entry by entry.

The six functions (each takes the op first):

* ``c_input_dtypes(op, *dtypes)``: the dtype each input is converted to first.
* ``c_expr(op, inputs, in_dtypes, out_dtype)``: one element's expression, or None.
* ``c_body(op, inputs, in_dtypes, outputs, out_dtypes, error_flag=None)``:
  statements assigning the outputs, or None (default: from ``c_expr``).
* ``c_error(op, inputs, in_dtypes, out_dtype)``: ``(condition, message)`` or None.
* ``c_error_messages(op, in_dtypes)``: the messages ``c_body`` may flag.
* ``c_support(op)``: ``((key, code), ...)`` helpers the expressions call.
"""

import contextlib
import contextvars

__all__ = ["c_method", "register_attrs", "attr", "language", "current_language", "c_input_dtypes",
           "c_expr", "c_body", "c_error", "c_error_messages", "c_support", "METHODS"]

METHODS = ("c_input_dtypes", "c_expr", "c_body", "c_error", "c_error_messages", "c_support")

_METHODS = {}      # (language, class, name) -> function
_ATTRS = {}        # (language, class) -> {name: value}
_LANGUAGE = contextvars.ContextVar("symgraph_c_language", default="c")


def c_method(cls, name, language="c"):
    """Decorator: the function is ``name`` (one of :data:`METHODS`) of ``cls``'s
    C in ``language``."""
    if name not in METHODS:
        raise ValueError(f"c_method: {name!r} is not one of {METHODS}")

    def register(fn):
        _METHODS[(language, cls, name)] = fn
        return fn
    return register


def register_attrs(cls, language="c", **values):
    """Data that ``cls``'s C functions read through :func:`attr` (a libm name,
    a C operator)."""
    _ATTRS.setdefault((language, cls), {}).update(values)


@contextlib.contextmanager
def language(name):
    """Generate in C-family language ``name`` inside the block."""
    token = _LANGUAGE.set(name)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def current_language():
    """The language generators write now (``"c"`` unless :func:`language` says)."""
    return _LANGUAGE.get()


def _languages():
    lang = _LANGUAGE.get()
    return (lang, "c") if lang != "c" else ("c",)


def attr(op, name, default=None):
    """The value ``name`` registered for ``op``'s class or its nearest base."""
    _load_tables()
    for klass in type(op).__mro__:
        for lang in _languages():
            values = _ATTRS.get((lang, klass))
            if values is not None and name in values:
                return values[name]
    return default


def _method(op, name):
    _load_tables()
    for klass in type(op).__mro__:
        for lang in _languages():
            fn = _METHODS.get((lang, klass, name))
            if fn is not None:
                return fn
    return None


def _call(name, op, *args, **kwargs):
    fn = _method(op, name)
    if fn is None:     # not a scalar op: it has no C
        return None if name not in ("c_support", "c_error_messages") else ()
    return fn(op, *args, **kwargs)


def c_input_dtypes(op, *dtypes):
    """The dtype each input is converted to before ``c_expr`` sees it."""
    return _call("c_input_dtypes", op, *dtypes)


def c_expr(op, inputs, in_dtypes, out_dtype):
    """A C expression for one element, or None (no native code)."""
    return _call("c_expr", op, inputs, in_dtypes, out_dtype)


def c_body(op, inputs, in_dtypes, outputs, out_dtypes, error_flag=None):
    """C statements assigning each name of ``outputs``, or None."""
    return _call("c_body", op, inputs, in_dtypes, outputs, out_dtypes, error_flag=error_flag)


def c_error(op, inputs, in_dtypes, out_dtype):
    """``(condition, message)`` that makes the call fail as ``impl`` would, or None."""
    return _call("c_error", op, inputs, in_dtypes, out_dtype)


def c_error_messages(op, in_dtypes):
    """The messages of the errors ``c_body`` may flag for these input dtypes."""
    return _call("c_error_messages", op, in_dtypes)


def c_support(op):
    """((key, code), ...): C helpers the expressions call, emitted once per library."""
    return _call("c_support", op)


_loaded = False


def _load_tables():
    # The family modules import the ops and this module: loaded on first lookup.
    global _loaded
    if not _loaded:
        _loaded = True
        from symgraph.backends.c_family import (composite, math_extra, nnet_loss,  # noqa: F401
                                                scalar_base, scalar_basic, scalar_logic,
                                                scalar_math)
