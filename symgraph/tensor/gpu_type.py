"""The GPU tensor type: an array that lives in a device's memory.

``GpuArrayType(dtype, shape=..., context_name="cuda0")`` is TensorType's
counterpart on a device: the context is a device (``cuda1``) or a name of the
flag ``contexts`` (``tensor/gpu_contexts.py``), and the type's values are
arrays on that device.  Its values are device arrays: the classes a device
backend registers (:func:`register_device_array`), e.g. the emulated device's
arrays or PyCUDA's ``GPUArray``.  Graphs meet it only through the transfer ops
(``ops/transfer.py``) and the device nodes the ``gpu`` rewrites make: users
keep passing and receiving NumPy arrays.
"""

import numpy as np

from symgraph.graph.basic import Type, Variable
from symgraph.tensor.type import ALL_DTYPES, ArrayTypeProperties, TensorType
from symgraph.tensor.var import _TensorOperators

__all__ = ["GpuArrayType", "GpuArrayVariable", "register_device_array", "to_device",
           "to_host", "adopt", "is_device_array", "context_kind"]

#: context kind ("cuda") -> (array classes, put(ndarray, context_name), get(array))
_ARRAYS = {}
#: context kind -> adopt(foreign array, context_name): a device array over it
_ADOPT = {}


def register_device_array(kind, classes, put, get, adopt=None):
    """A backend's device arrays for contexts named ``kind``/``kind<N>`` (and
    the names of the flag ``contexts`` mapped to such devices): ``classes``
    (instances are values of a GpuArrayType), ``put(ndarray, context_name)``
    copying host data to the device, ``get(array)`` copying back to a new
    ndarray, ``adopt(value, context_name)`` wrapping another library's device
    array (one with ``__cuda_array_interface__``) without a copy, and
    returning one of ``classes`` as is when it is on the context's device
    (else a copy there); ``adopt(value, None)`` wraps it on the device its
    memory is on, with no copy (to read it)."""
    _ARRAYS[kind] = (tuple(classes), put, get)
    if adopt is not None:
        _ADOPT[kind] = adopt


def _foreign(value):
    """True for another GPU library's array (PyCUDA, CuPy, PyTorch, Numba)."""
    # symgraph's own arrays first: reading their interface may wait for their device
    return not is_device_array(value) and hasattr(value, "__cuda_array_interface__")


def context_kind(context_name):
    """The device kind of a context ('cuda' for 'cuda1' or a name of the flag
    ``contexts`` mapped to a CUDA device; None: the kind of 'cuda')."""
    from symgraph.tensor.gpu_contexts import device_of

    # a name of the flag contexts is of its device's kind
    return device_of(context_name or "cuda").rstrip("0123456789")


def _registered(context_name):
    try:
        return _ARRAYS[context_kind(context_name)]
    except KeyError:
        raise RuntimeError(f"no device backend handles the context {context_name!r} "
                           "(set the flag device=cuda, with gpu.emulate=True on a machine "
                           "without a GPU)") from None


def is_device_array(value):
    """True when ``value`` is an array of a registered device."""
    return any(isinstance(value, classes) for classes, _, _ in _ARRAYS.values())


def to_device(value, context_name):
    """``value`` (array-like) copied to the device of ``context_name``; a
    device array (symgraph's or another GPU library's) is copied on the
    devices (between two, a peer copy)."""
    if is_device_array(value) or _foreign(value):
        placed = adopt(value, context_name)
        return placed.copy() if placed is value or getattr(placed, "base", None) is value \
            else placed
    # asarray keeps a 0-d value 0-d (np.ascontiguousarray makes it 1-d)
    return _registered(context_name)[1](np.asarray(value, order="C"), context_name)


def adopt(value, context_name):
    """Another GPU library's array (``__cuda_array_interface__``) as a device
    array of ``context_name`` sharing its memory."""
    _registered(context_name)
    try:
        return _ADOPT[context_kind(context_name)](value, context_name)
    except KeyError:
        raise RuntimeError(f"the device backend of {context_name!r} cannot use other "
                           "libraries' arrays") from None


def to_host(value):
    """A device array copied to a new ndarray (an ndarray is returned as is)."""
    for classes, _, get in _ARRAYS.values():
        if isinstance(value, classes):
            return get(value)
    if _foreign(value) and _ADOPT:
        # read on its own device: a copy to another device first would start
        # that device's context for nothing
        return next(iter(_ADOPT.values()))(value, None).get()
    return np.asarray(value)


class GpuArrayType(ArrayTypeProperties, Type):
    """An array type on a device: ``GpuArrayType('float32', shape=(None, 1),
    context_name='cuda0')`` (``broadcastable`` may be given instead of ``shape``)."""

    __props__ = ("dtype", "shape", "context_name")

    def __init__(self, dtype, broadcastable=None, shape=None, context_name="cuda0", name=None):
        dtype = str(np.dtype(dtype))
        if dtype not in ALL_DTYPES:
            raise TypeError(f"unsupported dtype {dtype!r}; use one of {', '.join(ALL_DTYPES)}")
        if shape is None:
            if broadcastable is None:
                raise TypeError("GpuArrayType needs broadcastable or shape")
            shape = tuple(1 if b else None for b in broadcastable)
        self.dtype = dtype
        self.shape = tuple(None if s is None else int(s) for s in shape)
        self.context_name = context_name
        self.name = name

    @classmethod
    def like(cls, tensor_type, context_name):
        """The device counterpart of a TensorType."""
        return cls(tensor_type.dtype, shape=tensor_type.shape, context_name=context_name)

    def tensor_type(self):
        """The TensorType of the same dtype and shape (the host side)."""
        return TensorType(self.dtype, shape=self.shape)

    def clone(self, dtype=None, shape=None, broadcastable=None):
        """A copy with the dtype or the shape changed (same context)."""
        if broadcastable is not None:
            shape = tuple(1 if b else None for b in broadcastable)
        return GpuArrayType(dtype or self.dtype, shape=self.shape if shape is None else shape,
                            context_name=self.context_name)

    def __str__(self):
        if self.name:
            return self.name
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        trailing = "," if self.ndim == 1 else ""
        return f"GpuArrayType<{self.context_name}>({self.dtype}, ({dims}{trailing}))"

    __repr__ = __str__

    def filter(self, value, strict=False, allow_downcast=None):
        """``value`` as a device array of this type, or TypeError.  Host values
        are copied to the device unless ``strict``."""
        classes = _registered(self.context_name)[0]
        if _foreign(value) or isinstance(value, classes):
            # another GPU library's array: used in place, as a DeviceArray is;
            # a DeviceArray of another device: copied to this context's device
            value = adopt(value, self.context_name)
        if not isinstance(value, classes):
            if strict:
                raise TypeError(f"expected a device array on {self.context_name}, got "
                                f"{type(value).__name__}")
            value = to_device(self.tensor_type().filter(to_host(value), strict=False,
                                                        allow_downcast=allow_downcast),
                              self.context_name)
        if str(value.dtype) != self.dtype:
            raise TypeError(f"expected a device array of dtype {self.dtype}, got {value.dtype}")
        if value.ndim != self.ndim:
            raise TypeError(f"wrong number of dimensions: expected {self.ndim}, "
                            f"got {value.ndim} with shape {value.shape}")
        for dim, (want, got) in enumerate(zip(self.shape, value.shape)):
            if want is not None and want != got:
                raise TypeError(f"dimension {dim} must have size {want} "
                                f"(the type {self} says so), got shape {value.shape}")
        return value

    def values_eq(self, a, b):
        return np.array_equal(to_host(a), to_host(b))

    def values_eq_approx(self, a, b):
        return self.tensor_type().values_eq_approx(to_host(a), to_host(b))

    def make_variable(self, name=None):
        return GpuArrayVariable(self, name=name)

    def convert_variable(self, var):
        """``var`` as this type: itself, or a host tensor of the same dtype and
        rank copied to this type's device; None when it cannot be."""
        if var.type == self:
            return var
        if isinstance(var.type, GpuArrayType) and var.type.context_name == self.context_name \
                and self.tensor_type().convert_variable(var.type.tensor_type()()) is not None:
            return var
        if isinstance(var.type, TensorType) and var.type.dtype == self.dtype \
                and var.type.ndim == self.ndim:
            from symgraph.ops.transfer import gpu_from_host

            return gpu_from_host(var, self.context_name)
        return None


class GpuArrayVariable(_TensorOperators, Variable):
    """A variable of a GpuArrayType: what transfers and device nodes produce.
    Its operators work as a host tensor's (through a copy back, which the
    ``gpu`` rewrites remove when the result stays on the device)."""

    @property
    def ndim(self):
        return self.type.ndim

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def broadcastable(self):
        return self.type.broadcastable

    def _as_tensor_variable(self):
        # a device variable used where a host tensor is expected: Theano's
        # implicit copy back; the gpu rewrites remove it when the user stays
        # on the device
        from symgraph.ops.transfer import host_from_gpu

        return host_from_gpu(self)
