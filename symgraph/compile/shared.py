"""Shared variables: state that lives between calls of compiled functions.

``shared(value)`` returns a variable whose value every function that uses it
reads at call time; ``updates=`` write new values after a call succeeds.
Borrow semantics are Theano's: ``borrow=True`` lets symgraph keep (and later
overwrite) the caller's array instead of a copy.
"""

import copy

import numpy as np

from symgraph.graph.basic import Type, Variable
from symgraph.tensor.var import _TensorOperators


class Container:
    """One storage cell that functions read and write: ``storage[0]``."""

    def __init__(self, value):
        self.storage = [value]


class SharedVariable(Variable):
    """A variable with a value kept between function calls."""

    def __init__(self, type, value, name=None, strict=False, borrow=False, allow_downcast=None):
        super().__init__(type, None, None, name)
        value = value if borrow else copy.deepcopy(value)
        if strict:
            value = type.filter(value, strict=True)
        else:
            value = type.filter(value, allow_downcast=allow_downcast)
        self.container = Container(value)

    def get_value(self, borrow=False, return_internal_type=False):
        """The current value; a copy unless ``borrow=True``."""
        value = self.container.storage[0]
        return value if borrow else copy.deepcopy(value)

    def set_value(self, value, borrow=False):
        """Store ``value`` (converted to the variable's type; copied unless borrow)."""
        value = self.type.filter(value if borrow else copy.deepcopy(value))
        self.container.storage[0] = value

    @property
    def value(self):
        return self.get_value(borrow=True)

    def clone(self):
        cp = type(self).__new__(type(self))
        cp.__dict__.update(self.__dict__)
        cp.owner, cp.index = None, None
        return cp


class TensorSharedVariable(_TensorOperators, SharedVariable):
    """A shared array: NumPy-like operators, like any tensor variable."""


class GpuArraySharedVariable(_TensorOperators, SharedVariable):
    """A shared array kept in a device's memory (``device=cuda``): functions
    read and update it there.  ``get_value()`` returns a host ndarray;
    ``get_value(borrow=True, return_internal_type=True)`` the device array
    itself; ``set_value`` takes either."""

    def get_value(self, borrow=False, return_internal_type=False):
        """The current value: a host ndarray, or the device array itself
        (``return_internal_type=True``; a copy unless ``borrow``)."""
        from symgraph.tensor.gpu_type import to_device, to_host

        value = self.container.storage[0]
        if return_internal_type:
            return value if borrow else to_device(to_host(value), self.type.context_name)
        return to_host(value)

    def _as_tensor_variable(self):
        from symgraph.ops.transfer import host_from_gpu

        return host_from_gpu(self)


class ObjectType(Type):
    """The type of a shared Python object that is not an array (a generator, ...)."""

    __props__ = ("cls",)

    def __init__(self, cls):
        self.cls = cls

    def filter(self, value, strict=False, allow_downcast=None):
        if not isinstance(value, self.cls):
            raise TypeError(f"expected a {self.cls.__name__}, got {type(value).__name__}")
        return value

    variable_class = Variable

    def values_eq(self, a, b):
        return a is b


#: Constructors registered with ``shared_constructor``, tried newest first.
_constructors = []


def shared_constructor(ctor, remove=False):
    """Register ``ctor`` (Theano's hook for new shared types): ``shared(value,
    name, strict, allow_downcast, borrow, **kwargs)`` calls the registered
    constructors, the most recent first, with those arguments, and uses the
    first result; a constructor raises TypeError for values it does not take.
    symgraph's own types come last.  ``remove=True`` unregisters ``ctor``.
    Returns ``ctor``, so that it works as a decorator."""
    if remove:
        if ctor in _constructors:
            _constructors.remove(ctor)
    elif ctor not in _constructors:
        _constructors.append(ctor)
    return ctor


def shared(value, name=None, strict=False, allow_downcast=None, borrow=False, shape=None,
           broadcastable=None, **kwargs):
    """A shared variable holding ``value``.

    Arrays (and Python/NumPy numbers) get a TensorType with the value's dtype
    and no static shape, except where ``shape``/``broadcastable`` declare one
    (Theano's default: no dimension broadcastable).  Other objects get an
    ObjectType of their class.  Constructors registered with
    ``shared_constructor`` are tried first; ``kwargs`` go only to them, but
    ``target`` (Theano's) is symgraph's too: ``'cpu'`` keeps the value in host
    memory, a device or a name of the flag ``contexts`` (``'dev0'``) puts an
    array of any dtype on that device, None on the default context's;
    without it, float arrays go to the device of the flag ``device``.  A
    device array (symgraph's or another GPU library's) goes to ``target``,
    or without one to the default context (``device=cuda``).
    """
    from symgraph.tensor.type import TensorType

    if _constructors and not isinstance(value, Variable):
        extra = dict(kwargs)
        if shape is not None:
            extra["shape"] = shape
        if broadcastable is not None:
            extra["broadcastable"] = broadcastable
        for ctor in reversed(_constructors):
            try:
                return ctor(value, name=name, strict=strict, allow_downcast=allow_downcast,
                            borrow=borrow, **extra)
            except TypeError:
                continue
    target = kwargs.pop("target", _NO_TARGET)
    if kwargs:
        raise TypeError(f"shared() got unexpected keyword arguments {sorted(kwargs)} (no "
                        f"registered shared_constructor took them)")
    if isinstance(value, Variable):
        raise TypeError(f"shared() needs a value, not a symbolic variable ({value})")
    if isinstance(value, (np.ndarray, np.generic, int, float, bool, complex)):
        arr = np.asarray(value)
        if isinstance(value, float) and not isinstance(value, np.generic):
            from symgraph.config import config

            arr = arr.astype(config.floatX)
        if arr.dtype == object:
            raise TypeError("shared() cannot hold an object array")
        if not isinstance(value, np.ndarray):
            value, borrow = arr, True
        if broadcastable is not None:
            shape = tuple(1 if b else None for b in broadcastable)
        ttype = TensorType(str(arr.dtype), shape=shape or (None,) * arr.ndim)
        if target is _NO_TARGET:
            context = _device_context() if arr.dtype.kind == "f" else None
        else:
            context = _target_context(target)
        if context is not None:
            from symgraph.tensor.gpu_type import GpuArrayType

            # the copy to the device is the copy borrow=False asks for
            return GpuArraySharedVariable(GpuArrayType.like(ttype, context), value, name=name,
                                          strict=False, borrow=True,
                                          allow_downcast=allow_downcast)
        return TensorSharedVariable(ttype, value, name=name, strict=strict, borrow=borrow,
                                    allow_downcast=allow_downcast)
    if _is_device_value(value):
        context = _device_context() if target is _NO_TARGET else _target_context(target)
        if context is not None or target is not _NO_TARGET:
            return _device_shared(value, context, name, strict, borrow, allow_downcast, shape,
                                  broadcastable)
    return SharedVariable(ObjectType(type(value)), value, name=name, strict=strict,
                          borrow=borrow)


shared.constructors = _constructors  # Theano's attribute: the registered constructors


#: shared()'s target when none is given (None is Theano's default context)
_NO_TARGET = object()


def _is_device_value(value):
    """True for a device array: symgraph's, or another GPU library's."""
    from symgraph.tensor.gpu_type import _foreign, is_device_array

    return is_device_array(value) or _foreign(value)


def _device_shared(value, context, name, strict, borrow, allow_downcast, shape, broadcastable):
    """shared() of a device array (Theano's shared of a GpuArray, with a
    target or a default context): a shared variable on ``context`` (the
    array moved there if it is on another device), or in host memory
    (``context`` None: target='cpu')."""
    from symgraph.tensor.gpu_type import GpuArrayType, to_host
    from symgraph.tensor.type import TensorType

    if broadcastable is not None:
        shape = tuple(1 if b else None for b in broadcastable)
    ttype = TensorType(str(np.dtype(value.dtype)), shape=shape or (None,) * len(value.shape))
    if context is None:
        return TensorSharedVariable(ttype, to_host(value), name=name, strict=strict, borrow=True,
                                    allow_downcast=allow_downcast)
    return GpuArraySharedVariable(GpuArrayType.like(ttype, context), value, name=name,
                                  strict=strict, borrow=borrow, allow_downcast=allow_downcast)


def _target_context(target):
    """The context of an explicit ``target`` ('cpu': None), its device made
    ready; a clear error when no such context or device exists."""
    if target == "cpu":
        return None
    from symgraph.tensor.gpu_contexts import context_name

    context = context_name(target)
    from symgraph.backends.cuda.backend import ensure_device

    ensure_device(fallback=False)
    return context


def _device_context():
    """The device context float shared variables live on (``device=cuda``), or
    None; the device is made ready (or its absence reported) first."""
    from symgraph.opt.gpu_placement import device_context

    context = device_context()
    if context is not None:
        from symgraph.backends.cuda.backend import ensure_device

        if not ensure_device():
            return None                  # force_device=False: no GPU, host memory instead
    return context
