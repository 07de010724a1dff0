"""The backend protocol (registry, key parts, lowering per backend) and the
runtime's allocator interface (c_src/sg_allocator.h)."""

import ctypes
import sysconfig

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cpu.backend import CPU, CpuBackend
from symgraph.backends.lowering import register_lowering
from symgraph.backends.native import linker
from symgraph.backends.native.allocator import HOST, Allocator
from symgraph.backends.native.c_sources import C_SRC
from symgraph.backends.native.cache import environment_parts
from symgraph.backends.native.runtime import load_runtime
from symgraph.backends.protocol import (Backend, get_backend, register_backend,
                                        registered_backends)
from symgraph.ops import elemwise


def test_the_cpu_backend_is_registered_and_host_allocated():
    assert get_backend("cpu") is CPU
    assert registered_backends()["cpu"] is CPU
    assert CPU.allocator is HOST
    assert CPU.available()


def test_an_unknown_backend_names_the_registered_ones():
    with pytest.raises(KeyError, match=r"no backend named 'tpu'.*'cpu'"):
        get_backend("tpu")


def test_register_backend_checks_what_it_is_given():
    with pytest.raises(TypeError, match="is not a Backend"):
        register_backend(object())

    class Nameless(CpuBackend):
        name = ""

    with pytest.raises(ValueError, match="Nameless has no name"):
        register_backend(Nameless())


def test_cache_keys_take_the_backends_own_parts():
    parts = environment_parts()
    for name, value in CPU.key_parts().items():
        assert parts[name] == value

    class OtherTarget(CpuBackend):
        name = "other-target"

        def key_parts(self, openmp=False):
            return {**super().key_parts(openmp), "cpu": "another cpu"}

    assert environment_parts(backend=OtherTarget())["cpu"] == "another cpu"


def test_a_second_backend_lowers_only_what_it_registered():
    class Toy(CpuBackend):
        name = "toy-backend"

    toy = register_backend(Toy())
    register_lowering(elemwise.Elemwise, "symgraph.backends.cpu.elemwise.loop:elemwise_lowering",
                      backend=toy.name)
    x = T.dmatrix("x")
    add = (x + 1).owner
    dot = T.dot(x, x).owner
    assert linker.node_kernel(add, toy) is not None
    assert linker.node_kernel(dot, toy) is None          # no rule in the toy's table
    assert linker.node_kernel(dot, CPU) is not None


def test_backend_is_abstract():
    class Incomplete(Backend):
        name = "incomplete"

    with pytest.raises(TypeError):
        Incomplete()


# A counting allocator in C: the host's functions, counting the buffers it makes.
_COUNTING = r"""
#include <Python.h>
#include "sg_kernel.h"
#include "sg_allocator.h"

static const sg_allocator *host;
static long made;

static PyObject *empty(void *ctx, int t, int n, const int64_t *s) {
    (void)ctx; made++; return host->empty(host->ctx, t, n, s);
}
static int describe(void *ctx, PyObject *b, sg_array *d) {
    (void)ctx; (void)b; (void)d; return 0;   /* arrays are the host's to describe */
}
static int fits(void *ctx, PyObject *b, int t, int n, const int64_t *s) {
    (void)ctx; return host->fits(host->ctx, b, t, n, s);
}
static PyObject *view(void *ctx, PyObject *b, const sg_array *d, int t) {
    (void)ctx; return host->view(host->ctx, b, d, t);
}

__attribute__((visibility("default"))) sg_allocator counting = {
    SG_ALLOCATOR_ABI, "counting", 0, empty, describe, fits, view};
__attribute__((visibility("default"))) sg_allocator wrong_abi = {
    99, "wrong", 0, empty, describe, fits, view};
__attribute__((visibility("default"))) void setup(const sg_allocator *h) { host = h; made = 0; }
__attribute__((visibility("default"))) long buffers_made(void) { return made; }
"""


@pytest.fixture(scope="module")
def counting_lib(tmp_path_factory):
    from symgraph.backends.cpu.compiler import compile_library

    out = tmp_path_factory.mktemp("allocator") / "counting.so"
    compile_library(_COUNTING, out, include_dirs=(sysconfig.get_paths()["include"], str(C_SRC)))
    lib = ctypes.PyDLL(str(out))
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)

    def capsule(name):
        return capsule_new(ctypes.addressof(ctypes.c_char.in_dll(lib, name)),
                           b"symgraph.allocator", None)

    host = get_pointer(load_runtime().host_allocator(), b"symgraph.allocator")
    lib.setup.argtypes = (ctypes.c_void_p,)
    lib.setup(host)
    lib.buffers_made.restype = ctypes.c_long
    return lib, capsule


def test_steps_allocate_through_their_backends_allocator(counting_lib, monkeypatch):
    lib, capsule = counting_lib
    monkeypatch.setattr(CPU, "allocator", Allocator("counting", capsule("counting")))
    x = T.dmatrix("x")
    # two compute steps: an element-wise loop and the matrix product
    f = symgraph.function([x], T.dot(T.exp(x) + 1, x))
    value = np.arange(12.0).reshape(3, 4) / 10
    before = lib.buffers_made()
    np.testing.assert_allclose(f(value[:, :3]), np.dot(np.exp(value[:, :3]) + 1, value[:, :3]))
    made = lib.buffers_made() - before
    assert made >= 2
    # the intermediate buffer is reused on the next call: only the returned output is new
    f(value[:, :3])
    assert lib.buffers_made() - before - made < made


def test_the_runtime_refuses_an_allocator_of_another_abi(counting_lib):
    _, capsule = counting_lib
    with pytest.raises(ValueError, match="allocator wrong: ABI 99"):
        load_runtime().register_allocator(capsule("wrong_abi"))
    with pytest.raises(ValueError):    # not a capsule of the right name
        load_runtime().register_allocator(ctypes.pythonapi.PyCapsule_New(
            ctypes.addressof(ctypes.c_char.in_dll(counting_lib[0], "counting")),
            b"something.else", None))


def test_host_allocator_registers_as_number_zero():
    assert HOST.capsule() is None
    assert HOST.runtime_number(load_runtime()) == 0
