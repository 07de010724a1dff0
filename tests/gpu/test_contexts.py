"""Several devices in one process: Theano's contexts (``contexts=dev0->cuda0;
dev1->cuda1``), shared variables on each (``target=``), transfers between
them, placement by the inputs' context, memory per device, and the errors.

On the emulated device (CI) the devices are the emulated ones
(``gpu.emulate_devices``, 2 by default); on a GPU machine these tests need
two GPUs and are skipped with fewer."""

import pickle

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.compile.shared import GpuArraySharedVariable, TensorSharedVariable
from symgraph.config import ConfigError
from symgraph.ops.device_op import OnDevice
from symgraph.ops.transfer import GpuFromHost, GpuToGpu, HostFromGpu
from symgraph.tensor.gpu_contexts import ContextError
from tests.gpu.device_flags import REAL_GPU

#: Two contexts on two devices; device=cpu, as in Theano's multi-GPU tutorial.
TWO = {"device": "cpu", "gpu.emulate": not REAL_GPU, "contexts": "dev0->cuda0;dev1->cuda1"}

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _two_devices():
    if REAL_GPU:
        from symgraph.backends.cuda.device import driver_available

        if driver_available() < 2:
            pytest.skip("needs two GPUs")
    with symgraph.config.change_flags(**TWO):
        yield


def _inner(shared_var):
    return shared_var.get_value(borrow=True, return_internal_type=True)


def _ops(f):
    return [node.op for node in f.maker.fgraph.toposort()]


def test_the_flag_takes_theanos_syntax_and_refuses_what_it_cannot_read(tmp_path):
    from symgraph.config import parse_contexts

    assert parse_contexts(" dev0->cuda0 ; dev1 -> cuda1;") == {"dev0": "cuda0", "dev1": "cuda1"}
    assert symgraph.config.contexts == "dev0->cuda0;dev1->cuda1"
    # in THEANO_FLAGS' form (commas between flags) and in a .theanorc
    from symgraph.config import Config

    flags = Config(environ={"SYMGRAPH_FLAGS": "device=cuda,contexts=a->cuda1;b->cuda0"},
                   rc_paths=[])
    assert (flags.device, flags.contexts) == ("cuda", "a->cuda1;b->cuda0")
    rc = tmp_path / "theanorc"
    rc.write_text("[global]\ncontexts = dev0->cuda0;dev1->cuda1\n")
    assert Config(environ={}, rc_paths=[str(rc)]).contexts == "dev0->cuda0;dev1->cuda1"
    for bad, words in (("dev0=>cuda0", "mapping"), ("cuda0->cuda1", "cannot be"),
                       ("dev0->gpu1", "cuda0, cuda1"), ("dev0->cuda0;dev0->cuda1", "twice")):
        with pytest.raises(ConfigError, match="contexts") as info:
            symgraph.config.contexts = bad
        assert words in str(info.value)
    assert symgraph.config.contexts == "dev0->cuda0;dev1->cuda1"


def test_shared_variables_live_on_their_contexts_device():
    a_host = RNG.standard_normal((3, 4)).astype("f")
    a = symgraph.shared(a_host, target="dev0", name="a")
    b = symgraph.shared(np.arange(5), target="dev1", name="b")       # any dtype with a target
    c = symgraph.shared(a_host, name="c")                             # device=cpu: the host
    h = symgraph.shared(a_host, target="cpu", name="h")
    assert isinstance(a, GpuArraySharedVariable) and a.type.context_name == "dev0"
    assert isinstance(b, GpuArraySharedVariable) and b.type.context_name == "dev1"
    assert isinstance(c, TensorSharedVariable) and isinstance(h, TensorSharedVariable)
    assert (_inner(a).device, _inner(b).device) == (0, 1)
    np.testing.assert_array_equal(a.get_value(), a_host)
    np.testing.assert_array_equal(b.get_value(), np.arange(5))
    assert type(a.get_value()) is np.ndarray
    # a device array of the other device is moved where the variable lives
    a.set_value(symgraph.gpu.to_device(2 * a_host, "dev1"))
    assert _inner(a).device == 0
    np.testing.assert_array_equal(a.get_value(), 2 * a_host)
    a.set_value(a_host + 1)
    np.testing.assert_array_equal(a.get_value(), a_host + 1)
    copy = a.get_value(return_internal_type=True)
    assert copy.device == 0 and copy is not _inner(a)
    # pickled device arrays come back on their device
    back = pickle.loads(pickle.dumps(_inner(b)))
    assert back.device == 1 and (back.get() == np.arange(5)).all()


def test_a_function_computes_on_both_devices_and_transfers_between_them():
    x_host = RNG.standard_normal((4, 3)).astype("f")
    w_host = RNG.standard_normal((3, 5)).astype("f")
    v_host = RNG.standard_normal((4, 5)).astype("f")
    w = symgraph.shared(w_host, target="dev0", name="w")
    v = symgraph.shared(v_host, target="dev1", name="v")
    x = T.fmatrix("x")
    h = T.tanh(T.dot(x.transfer("dev0"), w))                       # on dev0
    y = T.exp(h.transfer("dev1")) * v                              # on dev1
    # a strided view (a transpose on dev0) crosses too: gathered before the copy
    z = (h.T.transfer("dev1") + 1).sum()
    f = symgraph.function([x], [y.transfer("cpu"), z.transfer("cpu"), h.transfer("dev1")])
    got_y, got_z, h_dev1 = f(x_host)
    want_h = np.tanh(x_host @ w_host)
    np.testing.assert_allclose(got_y, np.exp(want_h) * v_host, rtol=1e-5)
    np.testing.assert_allclose(got_z, (want_h.T + 1).sum(), rtol=1e-5)
    assert type(h_dev1).__name__ == "DeviceArray" and h_dev1.device == 1
    np.testing.assert_allclose(h_dev1.get(), want_h, rtol=1e-5)
    devices = {node.op.context_name for node in f.maker.fgraph.toposort()
               if isinstance(node.op, OnDevice)}
    assert devices == {"dev0", "dev1"}
    assert any(isinstance(op, GpuToGpu) for op in _ops(f))
    report = str(symgraph.gpu.placement_report(f))
    assert "dev0, dev1" in report and "peer  dev0 -> GpuArrayType<dev1>" in report


def test_every_step_runs_natively_with_linker_c():
    # the copy between devices is a native kernel, like the other transfers
    a = symgraph.shared(np.ones((2, 3), "f"), target="dev0")
    b = symgraph.shared(np.full((2, 3), 2, "f"), target="dev1")
    f = symgraph.function([], (a.transfer("dev1") * b).transfer("cpu"),
                          mode=symgraph.Mode(linker="c"))
    np.testing.assert_array_equal(f(), np.full((2, 3), 2, "f"))


def test_a_node_with_inputs_on_two_contexts_runs_on_the_first_ones():
    # Theano's rule: an explicit GpuToGpu copies the other input over
    a_host, b_host = np.arange(6, dtype="f").reshape(2, 3), np.ones((2, 3), "f")
    a = symgraph.shared(a_host, target="dev0", name="a")
    b = symgraph.shared(b_host, target="dev1", name="b")
    for first, second, where in ((a, b, "dev0"), (b, a, "dev1")):
        f = symgraph.function([], first + second)
        np.testing.assert_array_equal(f(), a_host + b_host)
        (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, OnDevice)]
        assert node.op.context_name == where
        (copy,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuToGpu)]
        assert copy.inputs[0] is second or copy.inputs[0].name == second.name


def test_gradients_flow_back_across_a_transfer_between_devices():
    a_host = RNG.standard_normal((3, 4)).astype("f")
    b_host = RNG.standard_normal((3, 4)).astype("f")
    a = symgraph.shared(a_host, target="dev0", name="a")
    b = symgraph.shared(b_host, target="dev1", name="b")
    cost = T.sum((a.transfer("dev1") * b) ** 2)
    grad_a, grad_b = symgraph.grad(cost, [a, b])
    f = symgraph.function([], [grad_a.transfer("cpu"), grad_b.transfer("cpu")])
    got_a, got_b = f()
    np.testing.assert_allclose(got_a, 2 * a_host * b_host ** 2, rtol=1e-5)
    np.testing.assert_allclose(got_b, 2 * a_host ** 2 * b_host, rtol=1e-5)
    # a's gradient is computed on dev1 and copied back to dev0, a's device
    assert grad_a.type.context_name == "dev0"


def test_training_steps_update_shared_variables_on_both_devices():
    x_host = RNG.standard_normal((8, 3)).astype("f")
    w1_host = RNG.standard_normal((3, 4)).astype("f") * 0.5
    w2_host = RNG.standard_normal((4, 1)).astype("f") * 0.5
    w1 = symgraph.shared(w1_host, target="dev0", name="w1")
    w2 = symgraph.shared(w2_host, target="dev1", name="w2")
    x = T.fmatrix("x")
    hidden = T.tanh(T.dot(x.transfer("dev0"), w1))
    out = T.dot(hidden.transfer("dev1"), w2)
    cost = T.mean(out ** 2)
    g1, g2 = symgraph.grad(cost, [w1, w2])
    step = symgraph.function([x], cost.transfer("cpu"),
                             updates=[(w1, w1 - 0.1 * g1), (w2, w2 - 0.1 * g2)])
    n1, n2 = w1_host.astype("f8"), w2_host.astype("f8")
    for _ in range(3):
        got = step(x_host)
        hid = np.tanh(x_host @ n1)
        o = hid @ n2
        want = np.mean(o ** 2)
        d_o = 2 * o / o.size
        d_n2 = hid.T @ d_o
        d_n1 = x_host.T @ ((d_o @ n2.T) * (1 - hid ** 2))
        n1, n2 = n1 - 0.1 * d_n1, n2 - 0.1 * d_n2
        np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_allclose(w1.get_value(), n1, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w2.get_value(), n2, rtol=1e-4, atol=1e-6)
    assert (_inner(w1).device, _inner(w2).device) == (0, 1)


def test_each_device_has_its_own_memory_cache_and_counters():
    import gc

    # the earlier tests' garbage (functions hold cycles) is freed now, not
    # by a collection in the middle that would move the counters compared
    gc.collect()
    before0 = symgraph.gpu.memory_stats("dev0")
    before1 = symgraph.gpu.memory_stats("dev1")
    assert set(before0) == {"bytes_in_use", "bytes_cached", "device_mallocs", "device_frees"}
    assert symgraph.gpu.memory_stats("cuda1") == before1           # a device name works too
    big = symgraph.gpu.to_device(np.zeros((256, 1024), "f"), "dev1")   # 1 MiB on dev1
    after0 = symgraph.gpu.memory_stats("dev0")
    after1 = symgraph.gpu.memory_stats("dev1")
    assert after1["bytes_in_use"] >= before1["bytes_in_use"] + big.nbytes
    assert after0["bytes_in_use"] == before0["bytes_in_use"]
    assert big.device == 1
    del big
    freed = symgraph.gpu.memory_stats("dev1")
    assert freed["bytes_cached"] >= 2 ** 20 and freed["bytes_in_use"] == before1["bytes_in_use"]
    symgraph.gpu.empty_cache("dev1")
    assert symgraph.gpu.memory_stats("dev1")["bytes_cached"] == 0
    assert symgraph.gpu.memory_stats("dev0") == after0
    # a function's intermediate buffers come from the cache of their node's device
    a = symgraph.shared(np.ones((64, 64), "f"), target="dev1")
    f = symgraph.function([], T.sum(T.exp(a) * 2).transfer("cpu"))
    f()
    calls1 = symgraph.gpu.memory_stats("dev1")["device_mallocs"]
    calls0 = symgraph.gpu.memory_stats("dev0")["device_mallocs"]
    for _ in range(3):
        np.testing.assert_allclose(f(), 64 * 64 * 2 * np.e, rtol=1e-5)
    assert symgraph.gpu.memory_stats("dev1")["device_mallocs"] == calls1
    assert symgraph.gpu.memory_stats("dev0")["device_mallocs"] == calls0
    assert symgraph.gpu.contexts() == {"dev0": "cuda0", "dev1": "cuda1"}
    if not REAL_GPU:
        # emulated devices share the host's memory: peer access is on both ways
        assert symgraph.gpu.peer_access("dev0", "dev1")
        assert symgraph.gpu.peer_access("dev1", "cuda0")


def test_device_cuda_works_together_with_contexts():
    with symgraph.config.change_flags(device="cuda", contexts="side->cuda1"):
        w_host = RNG.standard_normal((3, 3)).astype("f")
        w = symgraph.shared(w_host, name="w")                       # the default context
        s_host = RNG.standard_normal(3).astype("f")
        s = symgraph.shared(s_host, target="side", name="s")
        x = T.fmatrix("x")
        y = T.dot(x, w)                                             # no device input: cuda0
        f = symgraph.function([x], [y, (y.transfer("side") + s).transfer("cpu")])
        x_host = RNG.standard_normal((2, 3)).astype("f")
        got_y, got_z = f(x_host)
    assert w.type.context_name == "cuda0" and s.type.context_name == "side"
    np.testing.assert_allclose(got_y, x_host @ w_host, rtol=1e-5)
    np.testing.assert_allclose(got_z, x_host @ w_host + s_host, rtol=1e-5)
    contexts = {n.op.context_name for n in f.maker.fgraph.toposort() if isinstance(n.op, OnDevice)}
    assert contexts == {"cuda0", "side"}
    # the host-to-device transfer of x goes to the default context's device
    (to_device,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuFromHost)]
    assert to_device.op.context_name == "cuda0"
    assert sum(isinstance(n.op, HostFromGpu) for n in f.maker.fgraph.toposort()) == 2


def test_a_context_naming_a_device_that_does_not_exist_is_one_clear_error():
    from symgraph.backends.cuda.contexts import device_count

    missing = f"cuda{device_count()}"
    with symgraph.config.change_flags(contexts=f"far->{missing}"):
        with pytest.raises(ContextError) as info:
            symgraph.shared(np.ones(3, "f"), target="far")
    message = str(info.value)
    assert f"contexts (far->{missing})" in message and "does not exist" in message
    assert "cuda0, cuda1" in message
    if not REAL_GPU:
        assert "gpu.emulate_devices=2" in message
    with symgraph.config.change_flags(device=missing, contexts=""):
        with pytest.raises(ContextError, match=f"the flag device={missing} names {missing}"):
            v = T.fvector("v")
            symgraph.function([v], v * 2)


def test_unknown_context_names_and_the_default_context_without_a_device():
    with pytest.raises(ContextError, match="no context is named 'dev7'.*dev0 \\(cuda0\\)"):
        symgraph.shared(np.ones(3, "f"), target="dev7")
    with pytest.raises(ContextError, match="no context is named 'dev7'"):
        T.fvector("v").transfer("dev7")
    with pytest.raises(ContextError, match="default context"):
        T.fvector("v").transfer(None)
    # a name keeps its device: remapping a used one is refused
    T.fvector("v").transfer("dev1")
    with symgraph.config.change_flags(contexts="dev1->cuda0"):
        with pytest.raises(ContextError, match="keeps its device"):
            T.fvector("v").transfer("dev1")


@pytest.mark.skipif(REAL_GPU, reason="the number of emulated devices is the emulator's")
def test_the_emulated_device_offers_as_many_devices_as_its_flag_says():
    with symgraph.config.change_flags(**{"gpu.emulate_devices": 3},
                                      contexts="dev0->cuda0;third->cuda2"):
        t = symgraph.shared(np.arange(4, dtype="f"), target="third")
        f = symgraph.function([], (t.transfer("dev0") * 3).transfer("cpu"))
        np.testing.assert_array_equal(f(), np.arange(4) * 3)
    assert _inner(t).device == 2
    assert symgraph.gpu.memory_stats("cuda2")["bytes_in_use"] > 0


@pytest.mark.skipif(REAL_GPU, reason="needs a machine without a GPU")
def test_contexts_without_a_gpu_and_without_emulation_say_what_to_do():
    from symgraph.backends.cuda.backend import NoDeviceError
    from symgraph.backends.cuda.device import driver_available

    if driver_available():
        pytest.skip("this machine has a GPU")
    with symgraph.config.change_flags(**{"gpu.emulate": False}):
        with pytest.raises(NoDeviceError, match="the flag contexts=dev0->cuda0;dev1->cuda1 "
                                                "names devices.*gpu.emulate=True"):
            symgraph.shared(np.ones(3, "f"), target="dev0")


def test_a_device_node_refuses_an_input_of_another_context():
    # the rewrites never build one; a hand-made one is refused, not miscomputed
    from symgraph.ops.math import exp
    from symgraph.ops.transfer import gpu_from_host

    on_dev1 = gpu_from_host(T.fvector("v"), "dev1")
    node_op = OnDevice(exp(T.fvector()).owner.op, "dev0")
    with pytest.raises(TypeError, match="on the context dev1, the node runs on dev0"):
        node_op.make_node(on_dev1)


def test_a_device_input_given_another_devices_array_is_moved_to_its_context():
    from symgraph.tensor.gpu_type import GpuArrayType

    v = GpuArrayType("float32", shape=(None,), context_name="dev1")("v")
    # v[::-1] is a view of what the function was given (or a copy of it on
    # its device): its device says where the input was (the emulated devices
    # share the host's memory, so the values alone cannot tell)
    outs = [(v * 2).transfer("cpu"), (v + 1).transfer("dev1"), v[::-1].transfer("dev1")]
    f = symgraph.function([v], outs)
    for where in ("dev0", "dev1"):
        doubled, plus_one, reversed_ = f(symgraph.gpu.to_device(np.arange(3, dtype="f"), where))
        np.testing.assert_array_equal(doubled, [0, 2, 4])
        assert plus_one.device == 1 and (plus_one.get() == [1, 2, 3]).all()
        assert reversed_.device == 1 and (reversed_.get() == [2, 1, 0]).all()


def _blas_calls():
    import ctypes

    from symgraph.backends.cuda.device_memory import _library

    fn = _library(True).sg_cuda_emu_blas_calls
    fn.restype = ctypes.c_longlong
    return fn()


def _products_on_both_devices():
    """(f0, f1, want0, want1): a cuBLAS product on dev0 and one on dev1."""
    a_host = RNG.standard_normal((4, 3)).astype("f")
    b_host = RNG.standard_normal((3, 2)).astype("f")
    a0, b0 = symgraph.shared(a_host, target="dev0"), symgraph.shared(b_host, target="dev0")
    a1, b1 = symgraph.shared(a_host, target="dev1"), symgraph.shared(2 * b_host, target="dev1")
    with symgraph.config.change_flags(**{"gpu.cublas": True}):
        f0 = symgraph.function([], T.dot(a0, b0).transfer("cpu"))
        f1 = symgraph.function([], T.dot(a1, b1).transfer("cpu"))
    return f0, f1, a_host @ b_host, a_host @ (2 * b_host)


@pytest.mark.skipif(REAL_GPU, reason="the emulated cuBLAS checks its handle's device")
def test_each_thread_multiplies_with_the_cublas_handle_of_its_steps_device():
    # The kernels hold one cuBLAS table; a step must see its own device's
    # handle even when another thread showed another device's since.  (The
    # emulated cuBLAS refuses a handle of another device than the thread's,
    # where a GPU would multiply on the wrong device.)
    import threading

    f0, f1, want0, want1 = _products_on_both_devices()
    before = _blas_calls()
    np.testing.assert_allclose(f0(), want0, rtol=1e-5)
    got = []
    worker = threading.Thread(target=lambda: got.append(f1()))
    worker.start()
    worker.join()
    np.testing.assert_allclose(got[0], want1, rtol=1e-5)
    np.testing.assert_allclose(f0(), want0, rtol=1e-5)
    np.testing.assert_allclose(f1(), want1, rtol=1e-5)
    assert _blas_calls() == before + 4


@pytest.mark.skipif(REAL_GPU, reason="switches the emulated device behind symgraph's back")
def test_a_step_selects_its_device_again_after_another_library_switched_it():
    # torch.cuda.set_device or CuPy's Device.use change the thread's current
    # device without telling symgraph: the next step must select its own.
    from symgraph.backends.cuda.device_memory import _library

    f0, f1, want0, want1 = _products_on_both_devices()
    np.testing.assert_allclose(f0(), want0, rtol=1e-5)
    assert _library(True).sg_cuda_emu_switch_device(1) == 0
    np.testing.assert_allclose(f0(), want0, rtol=1e-5)
    assert _library(True).sg_cuda_emu_switch_device(0) == 0
    np.testing.assert_allclose(f1(), want1, rtol=1e-5)
    np.testing.assert_allclose(f0(), want0, rtol=1e-5)


class Foreign:
    """Another GPU library's array (a CuPy one, say): only its
    ``__cuda_array_interface__``, over ``memory``'s."""

    def __init__(self, memory):
        self.memory = memory
        self.__cuda_array_interface__ = dict(memory.__cuda_array_interface__)


def test_another_librarys_array_on_another_device_is_copied_to_the_context():
    # A CuPy array on cuda1 given where dev0 is wanted must not be read in
    # place by dev0's kernels: it is copied over, as a DeviceArray would be.
    # (The emulated devices record which device each allocation is of and
    # answer CUDA's "which device is this pointer on" from that record.)
    src = symgraph.gpu.to_device(np.arange(6, dtype="f").reshape(2, 3), "dev1")
    for where, device in (("dev0", 0), ("dev1", 1)):
        got = symgraph.gpu.as_device_array(Foreign(src), where)
        assert got.device == device and (got.get() == src.get()).all()
        # used in place on its own device, copied to another
        assert (got.ptr == src.ptr) == (device == 1)
    # a function's input of dev0 given it
    from symgraph.tensor.gpu_type import GpuArrayType

    w = GpuArrayType("float32", shape=(None, None), context_name="dev0")("w")
    f = symgraph.function([w], (w * 2).transfer("cpu"))
    np.testing.assert_array_equal(f(Foreign(src)), 2 * src.get())


@pytest.mark.skipif(REAL_GPU, reason="switches the emulated device behind symgraph's back")
def test_the_array_interface_names_a_stream_only_on_the_current_device():
    # Stream 1 (the legacy default stream) means the consumer's current
    # device's: an array of another device has its device waited for by
    # symgraph, and says there is nothing to wait for (None).
    from symgraph.backends.cuda.device_memory import _library

    on0 = symgraph.gpu.to_device(np.arange(3, dtype="f"), "dev0")
    on1 = symgraph.gpu.to_device(np.arange(3, dtype="f"), "dev1")
    lib = _library(True)
    try:
        assert lib.sg_cuda_emu_switch_device(0) == 0
        assert on0.__cuda_array_interface__["stream"] == 1
        assert on1.__cuda_array_interface__["stream"] is None
        assert lib.sg_cuda_emu_switch_device(1) == 0
        assert on0.__cuda_array_interface__["stream"] is None
        assert on1.__cuda_array_interface__["stream"] == 1
    finally:
        lib.sg_cuda_emu_switch_device(0)
    face = on1.__cuda_array_interface__
    assert face["data"] == (on1.ptr, False) and face["shape"] == (3,)


@pytest.mark.skipif(REAL_GPU, reason="switches the emulated device behind symgraph's back")
def test_python_calls_on_another_devices_array_leave_the_thread_on_its_device():
    # The user's thread is on cuda1 (torch.cuda.set_device(1)); reading,
    # copying, pickling or making an array of cuda0 must not leave it on cuda0.
    from symgraph.backends.cuda.device_memory import _library

    lib = _library(True)
    on0 = symgraph.gpu.to_device(np.arange(3, dtype="f"), "dev0")
    a = symgraph.shared(np.ones(3, "f"), target="dev0")
    try:
        for call in (on0.get, on0.copy, lambda: pickle.dumps(on0),
                     lambda: symgraph.gpu.to_device(np.ones(2, "f"), "dev0"),
                     lambda: a.set_value(np.zeros(3, "f")), a.get_value):
            assert lib.sg_cuda_emu_switch_device(1) == 0
            call()
            assert lib.sg_cuda_emu_thread_device() == 1, call
    finally:
        lib.sg_cuda_emu_switch_device(0)


@pytest.mark.skipif(REAL_GPU, reason="counts the emulated device's waits")
def test_symgraph_never_reads_its_own_arrays_interface():
    # The interface of an array of another device than the thread's waits for
    # that device: function inputs and copies must not read it for every call.
    import ctypes

    from symgraph.backends.cuda.device_memory import _library
    from symgraph.tensor.gpu_type import GpuArrayType

    lib = _library(True)
    waits = lib.sg_cuda_emu_interface_waits
    waits.restype = ctypes.c_longlong
    v = GpuArrayType("float32", shape=(None,), context_name="dev1")("v")
    f = symgraph.function([v], (v + 1).transfer("dev1"))
    on1 = symgraph.gpu.to_device(np.arange(3, dtype="f"), "dev1")
    try:
        before = waits()
        for _ in range(2):
            assert lib.sg_cuda_emu_switch_device(0) == 0
            assert (f(on1).get() == [1, 2, 3]).all()
        assert lib.sg_cuda_emu_switch_device(0) == 0
        assert symgraph.gpu.to_device(on1, "dev0").device == 0
        assert waits() == before
    finally:
        lib.sg_cuda_emu_switch_device(0)


def test_shared_takes_a_device_array_with_a_target():
    # Theano's shared(gpuarray, target=...): a shared variable on the target's
    # device (moved there from another), or in host memory for 'cpu'
    host = np.arange(6, dtype="f").reshape(2, 3)
    on1 = symgraph.gpu.to_device(host, "dev1")
    moved = symgraph.shared(on1, target="dev0", name="moved")
    same = symgraph.shared(on1, target="dev1", borrow=True)
    copied = symgraph.shared(on1, target="dev1")
    kept = symgraph.shared(on1, target="cpu")
    assert isinstance(moved, GpuArraySharedVariable) and moved.type.context_name == "dev0"
    assert _inner(moved).device == 0 and _inner(same) is on1
    assert _inner(copied).device == 1 and _inner(copied).ptr != on1.ptr
    assert isinstance(kept, TensorSharedVariable)
    for var in (moved, same, copied, kept):
        np.testing.assert_array_equal(var.get_value(), host)
    f = symgraph.function([], (moved * 2).transfer("cpu"))
    np.testing.assert_array_equal(f(), 2 * host)


def test_a_transfer_to_a_device_that_does_not_exist_names_the_users_line():
    import inspect

    from symgraph.backends.cuda.contexts import device_count

    # far past what any test made ready (a device made ready stays usable)
    missing = f"cuda{device_count() + 8}"
    x = T.fvector("x")
    y = (x.transfer(missing) * 2).transfer("cpu")             # the line the error names
    line = inspect.currentframe().f_lineno - 1
    with symgraph.config.change_flags(on_opt_error="ignore"), \
            pytest.raises(ContextError) as info:
        symgraph.function([x], y)
    message = str(info.value)
    assert message.startswith(f"{missing} does not exist: this process can use cuda0, cuda1")
    assert f"GpuFromHost{{context_name='{missing}'}}(x)" in message
    assert f"test_contexts.py:{line}" in message


def test_a_scalar_goes_to_a_device_as_a_scalar():
    # a learning rate: 0-d on the host, 0-d on the device (not shape (1,))
    lr = symgraph.shared(np.float32(0.5), target="dev1", name="lr")
    assert lr.type.ndim == 0 and _inner(lr).shape == () and _inner(lr).device == 1
    w = symgraph.shared(np.ones(3, "f"), target="dev1", name="w")
    step = symgraph.function([], [], updates=[(w, w - lr * w)])
    step()
    np.testing.assert_allclose(w.get_value(), 0.5)
    lr.set_value(np.float32(0.25))
    assert lr.get_value() == np.float32(0.25) and lr.get_value().shape == ()
    assert symgraph.gpu.to_device(np.array(2, "f"), "dev0").shape == ()


def test_a_pointer_is_reported_on_the_device_it_was_allocated_on():
    # CUDA's answer (cudaPointerGetAttributes): on the emulated devices it
    # comes from their record of allocations, as on a GPU from the driver.
    from symgraph.backends.cuda.device_memory import pointer_device

    on0 = symgraph.gpu.to_device(np.arange(8, dtype="f"), "dev0")
    on1 = symgraph.gpu.to_device(np.arange(8, dtype="f"), "dev1")
    assert pointer_device(on0.ptr) == 0 and pointer_device(on1.ptr) == 1
    # inside the allocation too (a view's address), not only at its start
    assert pointer_device(on1[3:].ptr) == 1
    host = np.arange(4, dtype="f")
    assert pointer_device(host.ctypes.data) == -1


def test_another_librarys_array_is_read_on_its_own_device():
    # numpy.asarray-like reads (to_host) of a CuPy array on cuda1 wrap it
    # where it is: no copy to cuda0 first, whose memory stays untouched.
    from symgraph.tensor.gpu_type import to_host

    src = symgraph.gpu.to_device(np.arange(6, dtype="f").reshape(2, 3), "dev1")
    symgraph.gpu.to_device(np.zeros(1, dtype="f"), "dev0")       # cuda0 in use
    symgraph.gpu.empty_cache("dev0")            # so that a copy there would allocate
    before = symgraph.gpu.memory_stats("dev0")
    got = to_host(Foreign(src[:, 1:]))
    np.testing.assert_array_equal(got, np.arange(6, dtype="f").reshape(2, 3)[:, 1:])
    assert symgraph.gpu.memory_stats("dev0") == before


@pytest.mark.skipif(REAL_GPU, reason="the emulated devices' check (a GPU with peer access "
                    "reads the memory across)")
def test_a_kernel_given_another_devices_memory_fails_on_the_emulated_device():
    # trust_input skips the copy of an input to its context's device: the
    # kernel of dev0 then gets cuda1's memory, which a GPU without peer
    # access cannot read.  The emulated devices refuse it and name the node.
    from symgraph.tensor.gpu_type import GpuArrayType

    w = GpuArrayType("float32", shape=(None,), context_name="dev0")("w")
    f = symgraph.function([w], (w * 2 + 1).transfer("cpu"))
    on1 = symgraph.gpu.to_device(np.arange(5, dtype="f"), "dev1")
    np.testing.assert_array_equal(f(on1), np.arange(5) * 2 + 1)      # copied over
    f.trust_input = True
    with pytest.raises(RuntimeError) as info:
        f(on1)
    words = str(info.value)
    assert "points into memory of device 1, and the kernel runs on device 0" in words
    assert "GpuElemwise" in words
    # the device stays usable
    f.trust_input = False
    np.testing.assert_array_equal(f(on1), np.arange(5) * 2 + 1)


def test_a_transfer_to_another_context_keeps_its_work_there_with_device_cuda():
    # With device=cuda the default device's host round trips are cut early
    # (so the CPU rewrites see whole expressions), but a transfer to another
    # context is where the user placed the work: it must stay on dev1.
    with symgraph.config.change_flags(device="cuda", contexts="dev1->cuda1"):
        x = T.fmatrix("x")
        w = symgraph.shared(np.ones((3, 2), "f"), name="w")           # on cuda0
        y = T.exp(x.transfer("dev1")) * 2
        f = symgraph.function([x], [y.transfer("cpu"), T.dot(x, w)])
    data = RNG.standard_normal((4, 3)).astype("f")
    got_y, got_d = f(data)
    np.testing.assert_allclose(got_y, np.exp(data) * 2, rtol=1e-5)
    np.testing.assert_allclose(got_d, data @ np.ones((3, 2), "f"), rtol=1e-5)
    devices = {node.op.context_name for node in f.maker.fgraph.toposort()
               if isinstance(node.op, OnDevice)}
    assert devices == {"dev1", "cuda0"}, devices
