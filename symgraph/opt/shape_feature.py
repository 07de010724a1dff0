"""ShapeFeature: symbolic shapes of the variables of a FunctionGraph.

``shape_of(var)`` is a tuple of int64 scalar variables, one per dimension,
computed from the ops' ``infer_shape(fgraph, node, input_shapes)`` all the way
from the graph inputs, so that asking for the shape of an intermediate result
does not force computing it.  Where the type knows a size statically, the
entry is a constant; where an op has no ``infer_shape`` (or it raises
NotImplementedError), the entry falls back to ``shape_i(var, i)``, which does
need ``var``.

Shapes are computed lazily and remembered until the graph changes (any
change clears the memory: an expression built before a replacement could
refer to variables the graph no longer holds).
"""

import numpy as np

from symgraph.graph.basic import Constant
from symgraph.graph.fg import Feature
from symgraph.tensor.gpu_type import GpuArrayType
from symgraph.tensor.type import TensorType

#: The types whose variables have a shape the feature tracks.
_ARRAY_TYPES = (TensorType, GpuArrayType)


class ShapeError(ValueError):
    """An op's infer_shape returned something that is not a shape of its output."""


class ShapeFeature(Feature):
    """Gives ``shape_of(var)``: symbolic int64 sizes of any tensor variable."""

    def __init__(self):
        self.fgraph = None
        self._memo = {}
        self._fallback = set()

    # -- Feature callbacks -------------------------------------------------

    def on_attach(self, fgraph):
        self.fgraph = fgraph
        fgraph.shape_feature = self
        self._forget()

    def on_detach(self, fgraph):
        if getattr(fgraph, "shape_feature", None) is self:
            fgraph.shape_feature = None
        self.fgraph = None
        self._forget()

    def on_change_input(self, fgraph, node, i, old, new, reason):
        self._forget()

    def on_prune(self, fgraph, node, reason):
        self._forget()

    def _forget(self):
        self._memo.clear()
        self._fallback.clear()

    # -- queries -----------------------------------------------------------

    def shape_of(self, var):
        """``var``'s shape: a tuple of int64 scalar variables (constants where known)."""
        if not isinstance(var.type, _ARRAY_TYPES):
            raise TypeError(f"shape_of: {var} of type {var.type} is not a tensor")
        todo = [var]
        while todo:
            v = todo[-1]
            if v in self._memo:
                todo.pop()
                continue
            node = v.owner
            if node is None or not hasattr(node.op, "infer_shape"):
                self._memo[v] = self._fallback_shape(v)
                todo.pop()
                continue
            missing = [i for i in node.inputs
                       if isinstance(i.type, _ARRAY_TYPES) and i not in self._memo]
            if missing:
                todo.extend(missing)
                continue
            self._infer(node)
            todo.pop()
        return self._memo[var]

    def shape_i(self, var, i):
        """Dimension ``i`` of ``var``'s shape (an int64 scalar variable)."""
        return self.shape_of(var)[i]

    def depends_on_value(self, var):
        """True when ``shape_of(var)`` needs ``var`` itself (no infer_shape for it)."""
        self.shape_of(var)
        return var in self._fallback

    # -- building shapes -----------------------------------------------------

    def _fallback_shape(self, var):
        from symgraph.ops.shape import shape_i
        from symgraph.tensor.basic import constant

        if isinstance(var, Constant):
            return tuple(constant(s, dtype="int64") for s in np.shape(var.data))
        shape = tuple(shape_i(var, d) for d in range(var.ndim))
        if any(s is None for s in var.type.shape):
            self._fallback.add(var)
        return shape

    def _infer(self, node):
        input_shapes = [self._memo.get(i) if isinstance(i.type, _ARRAY_TYPES) else None
                        for i in node.inputs]
        try:
            shapes = node.op.infer_shape(self.fgraph, node, input_shapes)
        except NotImplementedError:
            shapes = None
        except Exception as exc:
            if not _warned_shape_error(node, exc):
                raise
            shapes = None
        for pos, out in enumerate(node.outputs):
            if not isinstance(out.type, _ARRAY_TYPES):
                continue
            if shapes is None:
                self._memo[out] = self._fallback_shape(out)
            else:
                self._memo[out] = self._checked(node, out, shapes[pos])

    def _checked(self, node, out, shape):
        from symgraph.ops.math import cast
        from symgraph.tensor.basic import as_tensor_variable, constant

        if shape is None or len(shape) != out.ndim:
            raise ShapeError(f"{node.op}.infer_shape gave {shape!r} for output {out} of "
                             f"{out.ndim} dimensions")
        result = []
        for static, size in zip(out.type.shape, shape):
            if static is not None:
                result.append(constant(static, dtype="int64"))
                continue
            if isinstance(size, (int, np.integer)):
                result.append(constant(int(size), dtype="int64"))
                continue
            size = as_tensor_variable(size)
            if size.ndim != 0 or not (size.dtype.startswith("int") or
                                      size.dtype.startswith("uint")):
                raise ShapeError(f"{node.op}.infer_shape gave {size} of type {size.type} "
                                 f"as a size; sizes are int scalars")
            result.append(cast(size, "int64"))
        return tuple(result)


def _warned_shape_error(node, exc):
    """Theano's ``on_shape_error``: an ``infer_shape`` that fails raises (symgraph's
    default, so a broken op is found: False here), or with ``warn`` its outputs'
    shapes are read at run time instead, after a warning (True)."""
    import warnings

    from symgraph.config import config

    if config.get("on_shape_error") != "warn":
        return False
    warnings.warn(f"{node.op}.infer_shape failed ({type(exc).__name__}: {exc}); its "
                  "output shapes are read at run time (on_shape_error=warn)", stacklevel=2)
    return True
