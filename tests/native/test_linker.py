"""The native linker and runtime, through test ops with hand-written kernels."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native.kernel import VIEW_OR_COPY, CKernel
from symgraph.backends.native.linker import NoNativeCodeError
from symgraph.graph.basic import Apply, Op
from symgraph.backends import register_lowering

SCALE_SOURCE = """
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    out_shapes[0] = in[0].shape[0];
    if (in[0].shape[0] == 13) SG_FAIL(err, SG_ERR_VALUE, "thirteen elements: %d", 13);
    return 0;
}
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    for (int64_t i = 0; i < in[0].shape[0]; i++)
        *(double *)(out[0].data + 8 * i) = FACTOR * *(double *)(in[0].data + in[0].strides[0] * i);
    return 0;
}
"""


class Scale(Op):
    """factor * x for float64 vectors, with a native kernel (``wrong`` breaks it)."""

    __props__ = ("factor", "wrong")

    def __init__(self, factor=2.0, wrong=False):
        self.factor = factor
        self.wrong = wrong

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        assert x.dtype == "float64" and x.ndim == 1
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        if inputs[0].shape[0] == 13:
            raise ValueError("thirteen elements: 13")
        out[0][0] = self.factor * inputs[0]

    def cpu_lowering(self, node):
        factor = self.factor + (1.0 if self.wrong else 0.0)
        return CKernel(source=f"#define FACTOR {factor!r}\n{SCALE_SOURCE}#undef FACTOR\n")


class _ViewOfInput(Op):
    """An op whose one output, of its input's type, views its input."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])


class Reverse(_ViewOfInput):
    """x[::-1] as a native view kernel."""

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0][::-1]

    def cpu_lowering(self, node):
        return CKernel(kind="view", view_of=(0,), source="""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    out[0].ndim = 1;
    out[0].shape[0] = in[0].shape[0];
    out[0].strides[0] = -in[0].strides[0];
    out[0].data = in[0].data + (in[0].shape[0] ? (in[0].shape[0] - 1) * in[0].strides[0] : 0);
    return 0;
}
""")


HEAD_SOURCE = """
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    out_shapes[0] = in[0].shape[0] / 2;
    return 0;
}
int SG_FN(view)(const sg_array *in, const int64_t *out_shapes, sg_array *out, sg_error *err) {
    if (in[0].shape[0] % 2) return SG_NO_VIEW;
    out[0].ndim = 1;
    out[0].shape[0] = out_shapes[0];
    out[0].strides[0] = in[0].strides[0];
    out[0].data = in[0].data;
    return 0;
}
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    for (int64_t i = 0; i < out[0].shape[0]; i++)
        *(double *)(out[0].data + 8 * i) = *(double *)(in[0].data + in[0].strides[0] * i);
    return 0;
}
"""


class Head(_ViewOfInput):
    """x[:n // 2] as a native "view or copy" kernel: a view for even lengths only."""

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0][:inputs[0].shape[0] // 2]

    def cpu_lowering(self, node):
        return CKernel(kind=VIEW_OR_COPY, view_of=(0,), source=HEAD_SOURCE)


class NoCode(Op):
    """An op without native code."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] + 1


@pytest.fixture(autouse=True)
def private_compiledir(tmp_path_factory):
    path = tmp_path_factory.mktemp("compiledir")
    with symgraph.config.change_flags(compiledir=str(path)):
        yield


def compile_(inputs, outputs, linker="c|py", **kwargs):
    return symgraph.function(inputs, outputs, mode=symgraph.Mode(linker=linker), **kwargs)

# The native backend's lowering of these test ops (ops themselves hold no code).
register_lowering(Scale, Scale.cpu_lowering)
register_lowering(Reverse, Reverse.cpu_lowering)
register_lowering(Head, Head.cpu_lowering)



def test_native_step_runs_and_matches_perform():
    x = T.dvector("x")
    f = compile_([x], Scale(3.0)(x))
    assert f.native is not None
    np.testing.assert_allclose(f(np.arange(4.0)), 3 * np.arange(4.0))
    np.testing.assert_allclose(f(np.arange(8.0)[::-2]), 3 * np.arange(8.0)[::-2])


def test_mixed_native_and_python_steps():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(NoCode()(Scale(3.0)(x))))
    np.testing.assert_allclose(f(np.ones(3)), 2 * (3 * np.ones(3) + 1))


def test_linker_c_refuses_nodes_without_native_code():
    x = T.dvector("x")
    with pytest.raises(NoNativeCodeError, match="NoCode"):
        compile_([x], NoCode()(x), linker="c")


def test_view_kernel_output_is_a_view_and_is_copied_for_the_user():
    x = T.dvector("x")
    y = Scale(1.0)(x)
    f = compile_([x], [Reverse()(y), y])
    rev, y_val = f(np.arange(3.0))
    np.testing.assert_array_equal(rev, [2.0, 1.0, 0.0])
    assert np.shares_memory(rev, y_val)  # a view of the intermediate, as NumPy would give
    g = compile_([x], Reverse()(x))
    arr = np.arange(3.0)
    out = g(arr)
    out[0] = 100.0
    assert arr[2] == 2.0  # the function's input is never aliased by an output


def test_returned_output_is_not_overwritten_by_a_later_call():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(x))
    first = f(np.ones(3))
    second = f(np.full(3, 5.0))
    np.testing.assert_array_equal(first, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(second, [10.0, 10.0, 10.0])


def test_intermediate_buffers_are_reused_across_calls():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(Scale(3.0)(x)))
    f(np.ones(4))
    slot = f.native.slot_of[f.maker.fgraph.outputs[0].owner.inputs[0]]
    address = f.native.program.slot(slot).ctypes.data  # no reference kept
    f(np.ones(4))
    # A fresh buffer would be allocated before the old one is freed: another address.
    assert f.native.program.slot(slot).ctypes.data == address


def test_kernel_error_names_node_and_user_line():
    x = T.dvector("x")
    y = Scale(2.0)(x)  # the failing node
    f = compile_([x], y)
    with pytest.raises(ValueError) as info:
        f(np.zeros(13))
    assert "thirteen elements" in str(info.value)
    assert "y = Scale(2.0)(x)" in str(info.value)
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])  # still usable


def test_inputs_that_need_conversion_take_the_python_path():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(x))
    np.testing.assert_allclose(f([1, 2]), [2.0, 4.0])
    np.testing.assert_allclose(f(np.array([1, 2], dtype="int32")), [2.0, 4.0])
    with pytest.raises(TypeError, match="position 0"):
        f(np.zeros((2, 2)))


def test_trust_input_skips_checks():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(x), trust_input=True)
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])


def test_updates_and_shared_through_the_runtime():
    w = symgraph.shared(np.ones(3), name="w")
    f = compile_([], Scale(2.0)(w), updates=[(w, Scale(3.0)(w))])
    np.testing.assert_allclose(f(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(w.get_value(), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(f(), [6.0, 6.0, 6.0])


def test_debug_mode_catches_a_wrong_kernel():
    x = T.dvector("x")
    good = symgraph.function([x], Scale(2.0)(x), mode=symgraph.compile.DebugMode())
    np.testing.assert_allclose(good(np.ones(2)), [2.0, 2.0])
    bad = symgraph.function([x], Scale(2.0, wrong=True)(x), mode=symgraph.compile.DebugMode())
    with pytest.raises(AssertionError, match="native code gives"):
        bad(np.ones(2))


def test_profile_times_native_steps():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(NoCode()(x)), profile=True)
    f(np.ones(3))
    f(np.ones(3))
    text = f.profile.summary(file="str")
    assert "Scale" in text and "NoCode" in text
    assert all(calls == 2 for calls in f.profile.node_calls.values())


def test_second_function_reuses_cached_kernels():
    from symgraph.backends.cpu.compiler import COMPILE_STATS

    x = T.dvector("x")
    compile_([x], Scale(7.0)(x))
    before, _ = COMPILE_STATS.snapshot()
    y = T.dvector("y")
    compile_([y], NoCode()(Scale(7.0)(y)))  # the same kernel in another function
    after, _ = COMPILE_STATS.snapshot()
    assert before == after


def test_view_or_copy_kernel_decides_on_each_call():
    x = T.dvector("x")
    y = Scale(1.0)(x)
    f = compile_([x], [Head()(y), y])
    held = []
    for n in (4, 5, 6, 3, 8):
        head, y_val = f(np.arange(float(n)))
        np.testing.assert_array_equal(head, np.arange(float(n // 2)))
        assert np.shares_memory(head, y_val) == (n % 2 == 0)
        held.append((n, head))
    for n, head in held:  # no later call wrote into an output the user holds
        np.testing.assert_array_equal(head, np.arange(float(n // 2)))


def test_view_or_copy_slot_reuses_copies_and_keeps_no_view():
    x = T.dvector("x")
    f = compile_([x], Scale(2.0)(Head()(Scale(1.0)(x))))
    slot = f.native.slot_of[f.maker.fgraph.outputs[0].owner.inputs[0]]
    f(np.ones(5))
    address = f.native.program.slot(slot).ctypes.data
    np.testing.assert_array_equal(f(np.ones(5)), [2.0, 2.0])
    assert f.native.program.slot(slot).ctypes.data == address
    np.testing.assert_array_equal(f(np.ones(4)), [2.0, 2.0])
    assert f.native.program.slot(slot) is None  # a view: released with its base


def test_view_or_copy_kernel_under_debug_mode():
    x = T.dvector("x")
    f = symgraph.function([x], Head()(Scale(1.0)(x)) + 1.0, mode=symgraph.compile.DebugMode())
    for n in (4, 5):
        np.testing.assert_array_equal(f(np.zeros(n)), np.ones(n // 2))


def test_runtime_refuses_malformed_view_or_copy_steps():
    from symgraph.backends.native.runtime import load_runtime

    program = load_runtime().Program
    inputs = ((0, np.dtype("float64").num, 1, ()),)

    def step(kind, *view):
        return ((0, 1, 1, kind, (0,), (1,), (np.dtype("float64").num,), (1,), (0,)) + view,)

    with pytest.raises(ValueError, match="view function"):
        program(2, inputs, step(3), (1,))
    with pytest.raises(ValueError, match="view function"):
        program(2, inputs, step(3, 0), (1,))
    with pytest.raises(ValueError, match="unknown kernel kind"):
        program(2, inputs, step(9), (1,))
