"""Theano's ``tensor.io.load``: an array read from a ``.npy`` file when the
function runs, the file's path a symbolic string.

    path = T.io.generic_string("path")   # Theano: theano.Variable(theano.gof.Generic())
    x = T.io.load(path, "int64", (False,))
    f = symgraph.function([path], x * 2)
    f("stored-array.npy")

``LoadFromDisk`` checks the array's dtype and rank against what the graph
declared (a mismatch is an error naming the file), and ``mmap_mode`` is
NumPy's (``'r'`` maps the file read-only and gives a view of it).
"""

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Type, Variable
from symgraph.tensor.type import TensorType

__all__ = ["PathType", "generic_string", "LoadFromDisk", "load"]


class PathType(Type):
    """The type of a file path: a ``str`` or ``os.PathLike`` value."""

    __props__ = ()
    variable_class = Variable
    constant_class = Constant

    def filter(self, value, strict=False, allow_downcast=None):
        import os

        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
        raise TypeError(f"{self}: expected a file path (str), got {type(value).__name__}")

    def __str__(self):
        return "PathType"

    __repr__ = __str__


def generic_string(name=None):
    """A symbolic path (Theano wrote ``Variable(Generic())``)."""
    return PathType()(name)


class LoadFromDisk(Op):
    """Reads ``numpy.load(path, mmap_mode)``; the result must have ``dtype`` and
    the rank of ``broadcastable`` (its True entries: size 1)."""

    __props__ = ("dtype", "broadcastable", "mmap_mode")

    def __init__(self, dtype, broadcastable, mmap_mode=None):
        self.dtype = str(np.dtype(dtype))
        self.broadcastable = tuple(bool(b) for b in broadcastable)
        if mmap_mode not in (None, "c", "r"):
            raise ValueError(f"LoadFromDisk: mmap_mode {mmap_mode!r}; use None, 'r' or 'c' "
                             f"(a loaded array must not be written back to its file)")
        self.mmap_mode = mmap_mode

    def make_node(self, path):
        if isinstance(path, str):
            path = PathType().make_constant(path)
        if not isinstance(path, Variable) or not isinstance(path.type, PathType):
            raise TypeError(f"{self}: the path must be a string or a symbolic path "
                            f"(tensor.io.generic_string), got {path!r}")
        shape = tuple(1 if b else None for b in self.broadcastable)
        return Apply(self, [path], [TensorType(self.dtype, shape=shape)()])

    def perform(self, node, inputs, output_storage):
        (path,) = inputs
        path = node.inputs[0].type.filter(path)  # a clear error for a value that is no path
        value = np.load(path, mmap_mode=self.mmap_mode)
        if value.dtype != np.dtype(self.dtype) or value.ndim != len(self.broadcastable):
            raise TypeError(f"{self}: {path} holds a {value.ndim}-d {value.dtype} array; the "
                            f"graph expects {len(self.broadcastable)}-d {self.dtype}")
        bad = [d for d, b in enumerate(self.broadcastable) if b and value.shape[d] != 1]
        if bad:
            raise ValueError(f"{self}: {path} has shape {value.shape}, but dimension {bad[0]} "
                             f"is declared broadcastable (size 1)")
        output_storage[0][0] = value

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        return [disconnected_grad_for(inputs[0])]

    def connection_pattern(self, node):
        return [[False]]


def load(path, dtype, broadcastable, mmap_mode=None):
    """The array stored at ``path`` (a ``.npy`` file), read when the function runs."""
    return LoadFromDisk(dtype, broadcastable, mmap_mode)(path)
