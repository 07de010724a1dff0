"""Other GPU libraries' arrays in and out: DeviceArray exports CUDA's array
interface (version 3), and anything that has one (PyCUDA's GPUArray, CuPy,
PyTorch, Numba) is used in place by functions, shared variables and
``symgraph.gpu.as_device_array``; ``to_pycuda`` hands a DeviceArray to PyCUDA.

The foreign arrays here are stand-ins that describe a DeviceArray's memory
through the interface only, so the same tests run on the emulated device and
on a GPU."""

import copy
import sys
import types

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.backends.cuda import device_memory
from tests.gpu.device_flags import DEVICE, REAL_GPU


@pytest.fixture
def device():
    with symgraph.config.change_flags(**DEVICE):
        yield


class Foreign:
    """Another library's device array: memory (kept alive here) and its
    ``__cuda_array_interface__``, nothing else."""

    def __init__(self, memory, **changes):
        self.memory = memory
        face = dict(memory.__cuda_array_interface__)
        face.update(changes)
        self.__cuda_array_interface__ = face


def test_device_arrays_export_the_interface(device):
    host = np.arange(12, dtype="f").reshape(3, 4)
    a = symgraph.gpu.to_device(host)
    face = a.__cuda_array_interface__
    assert face == {"shape": (3, 4), "typestr": "<f4", "data": (a.ptr, False),
                    "strides": None, "version": 3, "stream": 1}
    empty = symgraph.gpu.to_device(np.zeros((0, 3), "i8"))
    assert empty.__cuda_array_interface__["data"] == (0, False)
    assert empty.__cuda_array_interface__["typestr"] == "<i8"


def test_a_foreign_array_is_used_in_place(device):
    host = np.arange(12, dtype="f").reshape(3, 4)
    memory = symgraph.gpu.to_device(host)
    theirs = Foreign(memory)
    a = symgraph.gpu.as_device_array(theirs)
    assert type(a) is type(memory) and a.base is theirs and a.ptr == memory.ptr
    assert (a.get() == host).all() and (np.asarray(a) == host).all()
    assert symgraph.gpu.as_device_array(a) is a
    # every other column, described by explicit byte strides
    columns = symgraph.gpu.as_device_array(Foreign(memory, shape=(3, 2), strides=(16, 8)))
    assert (columns.get() == host[:, ::2]).all()
    assert columns.__cuda_array_interface__["strides"] == (16, 8)
    # copies are contiguous device arrays of their own
    for dup in (columns.copy(), copy.copy(columns), copy.deepcopy(columns)):
        assert dup.base is None and dup.ptr != memory.ptr and dup.strides == (8, 4)
        assert (dup.get() == host[:, ::2]).all()
    # to_device copies a foreign array on the device
    copied = symgraph.gpu.to_device(theirs)
    assert copied.ptr != memory.ptr and (copied.get() == host).all()


def test_shared_variables_take_foreign_arrays(device):
    host = np.arange(6, dtype="f")
    memory = symgraph.gpu.to_device(host)
    w = symgraph.shared(np.zeros(6, "f"), name="w")
    w.set_value(Foreign(memory), borrow=True)
    step = symgraph.function([], [], updates=[(w, w * 2 + 1)])
    step()
    symgraph.gpu.synchronize()
    # borrowed: the function updates the other library's memory itself when
    # it writes in place, or rebinds w; either way w holds the new values
    assert (w.get_value() == host * 2 + 1).all()
    w.set_value(Foreign(memory), borrow=False)            # a copy: memory is left alone
    before = memory.get()
    step()
    assert (memory.get() == before).all()
    assert (w.get_value() == before * 2 + 1).all()
    f = symgraph.function([], w.sum())
    assert float(f()) == pytest.approx(float((before * 2 + 1).sum()))


def test_functions_read_foreign_device_inputs(device):
    from symgraph.tensor.gpu_type import GpuArrayType

    x = GpuArrayType("float32", shape=(None,), context_name="cuda0")("x")
    f = symgraph.function([x], T.exp(x.transfer("cpu")) * 2)
    host = np.linspace(-1, 1, 7).astype("f")
    got = f(Foreign(symgraph.gpu.to_device(host)))
    np.testing.assert_allclose(got, np.exp(host) * 2, rtol=1e-6)
    # a host array for a device input is copied there, never handed to a kernel
    np.testing.assert_allclose(f(host), np.exp(host) * 2, rtol=1e-6)
    np.testing.assert_allclose(f(symgraph.gpu.to_device(host)), np.exp(host) * 2, rtol=1e-6)


def test_bad_foreign_arrays_are_refused_clearly(device):
    memory = symgraph.gpu.to_device(np.zeros(4, "f"))
    with pytest.raises(TypeError, match="read-only Foreign"):
        symgraph.gpu.as_device_array(Foreign(memory, data=(memory.ptr, True)))
    with pytest.raises(TypeError, match="version 1"):
        symgraph.gpu.as_device_array(Foreign(memory, version=1))
    with pytest.raises(TypeError, match="mask"):
        symgraph.gpu.as_device_array(Foreign(memory, mask=object()))
    with pytest.raises(ValueError, match="multiples of its element size"):
        symgraph.gpu.as_device_array(Foreign(memory, data=(memory.ptr + 2, False)))
    with pytest.raises(TypeError, match="not a device array"):
        symgraph.gpu.as_device_array(object())
    w = symgraph.shared(np.zeros(4, "f"), name="w")
    with pytest.raises(TypeError, match="dtype float32"):
        w.set_value(Foreign(symgraph.gpu.to_device(np.zeros(4, "f8"))), borrow=True)


@pytest.mark.skipif(REAL_GPU, reason="a made-up stream handle is only harmless on the "
                    "emulated device")
def test_work_on_the_foreign_stream_is_waited_for(device, monkeypatch):
    memory = symgraph.gpu.to_device(np.ones(3, "f"))
    lib = device_memory._library(True)
    waited = []
    real = lib.sg_cuda_stream_wait

    class Spy:
        def __getattr__(self, name):
            return getattr(lib, name)

        def sg_cuda_stream_wait(self, stream):
            waited.append(stream)
            return real(stream)

    monkeypatch.setattr(device_memory, "_library", lambda emulated: Spy())
    for stream in (None, 1, 2, 0x7F00):
        symgraph.gpu.as_device_array(Foreign(memory, stream=stream))
    assert waited == [0x7F00]


def test_to_pycuda_shares_the_memory(device, monkeypatch):
    made = []

    class GPUArray:
        def __init__(self, shape, dtype, allocator=None, base=None, gpudata=None,
                     strides=None, order="C"):
            made.append(dict(shape=shape, dtype=dtype, base=base, gpudata=gpudata,
                             strides=strides))

    pycuda = types.ModuleType("pycuda")
    pycuda.gpuarray = types.SimpleNamespace(GPUArray=GPUArray)
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    a = symgraph.gpu.to_device(np.ones((2, 3), "f"))
    symgraph.gpu.to_pycuda(a)
    assert made == [dict(shape=(2, 3), dtype=np.dtype("f"), base=a, gpudata=a.ptr,
                         strides=(12, 4))]
    monkeypatch.setitem(sys.modules, "pycuda", None)
    with pytest.raises(ImportError, match=r"symgraph\[gpu\]"):
        symgraph.gpu.to_pycuda(a)
