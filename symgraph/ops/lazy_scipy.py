"""SciPy, loaded when an op first computes with it rather than when symgraph is imported.

``import scipy.special`` alone costs 150-300 ms (it pulls in SciPy's array-API
layer), ``import scipy.linalg`` another 40 ms or more, and most programs never
evaluate a special function or a decomposition in Python: their graphs run as
native code.  So the ops that use SciPy name the function here, and the module
is imported the first time the function is read.

Nothing that identifies an op changes: ``ufunc`` is a class attribute, never
part of ``__props__``, of an instance's ``__dict__`` or of a pickle, so
equality, hashing, pickles and cache keys are the same in a process that has
imported SciPy and one that has not.
"""

import importlib

__all__ = ["ScipyFunction", "special", "linalg"]


class ScipyFunction:
    """A class attribute standing for ``module.name`` of SciPy (for example
    ``ScipyFunction("scipy.special", "erf")``), imported on first read.

    Read on a class or an instance it gives the function itself, so that code
    written for ``ufunc = scipy.special.erf`` (calls, ``ufunc.reduce``) works
    unchanged.
    """

    __slots__ = ("module", "name", "_function")

    def __init__(self, module, name):
        self.module, self.name = module, name
        self._function = None

    def __get__(self, instance, owner=None):
        function = self._function
        if function is None:
            function = getattr(importlib.import_module(self.module), self.name)
            self._function = function
        return function

    def __repr__(self):
        return f"ScipyFunction({self.module}.{self.name})"


def special():
    """The ``scipy.special`` module (imported on the first call)."""
    import scipy.special

    return scipy.special


def linalg():
    """The ``scipy.linalg`` module (imported on the first call)."""
    import scipy.linalg

    return scipy.linalg
