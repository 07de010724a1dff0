"""In and Out: how function() treats each input and output."""

from symgraph.graph.basic import Variable


class In:
    """An input of function() with options.

    ``value``: a default used when the caller leaves the input out;
    ``name``: the keyword to pass it by (default: the variable's name);
    ``update``: an expression whose value replaces ``value`` after each call
    (Theano's state inputs); ``mutable``: the function may overwrite the array;
    ``borrow``: the function may keep a reference to it; ``allow_downcast``:
    accept lossy conversions; ``implicit``: not passed by the caller;
    ``autoname``: when ``name`` is None, take the variable's name (Theano's
    default, True); False leaves the input unnamed (positional only).
    """

    def __init__(self, variable, name=None, value=None, update=None, mutable=False,
                 borrow=False, allow_downcast=None, implicit=False, strict=False,
                 autoname=True):
        if not isinstance(variable, Variable):
            raise TypeError(f"In() needs a symbolic variable, got {type(variable).__name__}")
        self.variable = variable
        self.autoname = autoname
        self.name = name if name is not None or not autoname else variable.name
        self.value = value
        self.has_default = value is not None
        self.update = update
        self.mutable = mutable
        self.borrow = borrow
        self.allow_downcast = allow_downcast
        self.implicit = implicit
        self.strict = strict

    def __repr__(self):
        return f"In({self.variable})"


class Out:
    """An output of function(); ``borrow=True`` lets a later call overwrite the
    returned array (faster: no copy)."""

    def __init__(self, variable, borrow=False):
        if not isinstance(variable, Variable):
            raise TypeError(f"Out() needs a symbolic variable, got {type(variable).__name__}")
        self.variable = variable
        self.borrow = borrow

    def __repr__(self):
        return f"Out({self.variable})"
