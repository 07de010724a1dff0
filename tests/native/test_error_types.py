"""Errors raised while a compiled function runs keep their exception type, and
name what the user wrote rather than the optimized graph's intermediates.

Every case runs under each linker: the native runtime (``c|py``, ``c``) must
raise what ``perform`` (``py``) raises.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.native.kernel import CKernel
from symgraph.graph.basic import Apply, Op
from symgraph.backends import register_lowering

LINKERS = ["py", "c|py", "c"]
# Shapes whose buffer exceeds any address space (but not int64 bytes), so the
# allocation fails whatever the machine's overcommit policy.
HUGE_ROWS, HUGE_COLS = 2 ** 40, 2 ** 20


def compile_(inputs, outputs, linker, **kwargs):
    return symgraph.function(inputs, outputs, mode=symgraph.Mode(linker=linker), **kwargs)


# -- allocation failures -------------------------------------------------------


@pytest.mark.parametrize("linker", LINKERS)
def test_an_output_too_large_to_allocate_raises_memory_error(linker):
    n = T.lscalar("n")
    big = T.alloc(np.float32(0), n, HUGE_COLS)
    f = compile_([n], big, linker)
    with pytest.raises(MemoryError) as info:
        f(HUGE_ROWS)
    text = str(info.value)
    assert "Unable to allocate" in text
    assert "Alloc" in text                                       # the node
    assert "big = T.alloc(np.float32(0), n, HUGE_COLS)" in text  # the user's line
    assert not text.startswith("MemoryError: ")
    np.testing.assert_array_equal(f(2), np.zeros((2, HUGE_COLS), "float32"))  # still usable


@pytest.mark.parametrize("linker", LINKERS)
def test_a_broadcast_result_too_large_to_allocate_raises_memory_error(linker):
    # Inputs of stride 0 hold one element each; their sum would be 2 PiB.
    x = T.dcol("x")
    y = T.drow("y")
    total = x + y
    f = compile_([x, y], total, linker)
    col = np.broadcast_to(np.zeros((1, 1)), (2 ** 24, 1))
    row = np.broadcast_to(np.zeros((1, 1)), (1, 2 ** 24))
    with pytest.raises(MemoryError) as info:
        f(col, row)
    assert "total = x + y" in str(info.value)


# A kernel's own workspace: BLAS copies an operand whose strides it cannot
# use (here stride 0: 8 GiB of workspace for one element of data).  The call
# runs in a child process whose address space is capped, so the allocation
# fails for certain and nothing large is ever touched.
_WORKSPACE_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np, symgraph, symgraph.tensor as T
    a, b = T.dmatrix("a"), T.dmatrix("b")
    fns = {linker: symgraph.function([a, b], T.dot(a, b), mode=symgraph.Mode(linker=linker))
           for linker in sys.argv[1:]}
    wide = np.broadcast_to(np.ones((1, 1)), (2 ** 15, 2 ** 15))
    narrow = np.ones((2 ** 15, 2))
    for f in fns.values():
        f(wide[:4, :4], narrow[:4])
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) for line in status if line.startswith("VmSize")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + 2 ** 30, resource.RLIM_INFINITY))
    for linker, f in fns.items():
        try:
            f(wide, narrow)
            print(linker, "no-error")
        except Exception as exc:
            print(linker, type(exc).__name__, "cannot allocate" in str(exc))
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_kernel_workspace_that_cannot_be_allocated_raises_memory_error():
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    env["SYMGRAPH_FLAGS"] = ",".join(
        f for f in [os.environ.get("SYMGRAPH_FLAGS", ""),
                    f"compiledir={symgraph.config.compiledir}"] if f)
    proc = subprocess.run([sys.executable, "-c", _WORKSPACE_SCRIPT, *LINKERS], env=env,
                          capture_output=True, text=True, cwd=str(root), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    # NumPy's dot copies too: perform fails on the same allocation.
    assert results == {"py": "MemoryError False", "c|py": "MemoryError True",
                       "c": "MemoryError True"}


# -- errors reported by kernels and by perform ------------------------------------

_KINDS = {
    "SG_ERR_VALUE": ValueError,
    "SG_ERR_INDEX": IndexError,
    "SG_ERR_TYPE": TypeError,
    "SG_ERR_MEMORY": MemoryError,
    "SG_ERR_RUNTIME": RuntimeError,
    "SG_ERR_ASSERTION": AssertionError,
}


class Fail(Op):
    """Copies a float64 vector; a vector of length 13 fails with ``kind``."""

    __props__ = ("kind",)

    def __init__(self, kind):
        self.kind = kind

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        if inputs[0].shape[0] == 13:
            raise _KINDS[self.kind]("thirteen elements")
        out[0][0] = inputs[0].copy()

    def cpu_lowering(self, node):
        return CKernel(source=f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    out_shapes[0] = in[0].shape[0];
    if (in[0].shape[0] == 13) SG_FAIL(err, {self.kind}, "thirteen elements");
    return 0;
}}
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    for (int64_t i = 0; i < in[0].shape[0]; i++)
        *(double *)(out[0].data + 8 * i) = *(double *)(in[0].data + in[0].strides[0] * i);
    return 0;
}}
""")


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_each_error_kind_keeps_its_type(linker, kind):
    x = T.dvector("x")
    failing = Fail(kind)(x)
    f = compile_([x], failing, linker)
    with pytest.raises(_KINDS[kind]) as info:
        f(np.zeros(13))
    assert type(info.value) is _KINDS[kind]
    assert "thirteen elements" in str(info.value)
    assert "failing = Fail(kind)(x)" in str(info.value)


# The native backend's lowering of this test op (ops themselves hold no code).
register_lowering(Fail, Fail.cpu_lowering)


class NeedsShape(ValueError):
    """An exception class whose constructor does not take a message."""

    def __init__(self, shape, limit):
        super().__init__(shape, limit)
        self.shape = shape

    def __str__(self):
        return f"shape {self.shape} is over the limit"


class RaisesCustom(Op):
    """Raises NeedsShape, which cannot be rebuilt from a message alone."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        raise NeedsShape(inputs[0].shape, 3)


@pytest.mark.parametrize("linker", ["py", "c|py"])
def test_an_exception_with_its_own_constructor_keeps_its_base_type(linker):
    x = T.dvector("x")
    custom = RaisesCustom()(x)
    f = compile_([x], custom, linker)
    with pytest.raises(ValueError) as info:
        f(np.zeros(4))
    text = str(info.value)
    assert "shape (4,) is over the limit" in text
    assert "custom = RaisesCustom()(x)" in text
    assert info.value.shape == (4,)  # the original's attributes come along
    assert isinstance(info.value.__cause__, NeedsShape)


class AtPosition(IndexError):
    """An exception class whose constructor builds the message it prints."""

    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


class RaisesAtPosition(Op):
    """Raises AtPosition."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        raise AtPosition("bad entry", 7)


@pytest.mark.parametrize("linker", ["py", "c|py"])
def test_an_exception_whose_constructor_builds_its_message_keeps_its_class(linker):
    x = T.dvector("x")
    f = compile_([x], RaisesAtPosition()(x), linker)
    with pytest.raises(AtPosition) as info:
        f(np.zeros(4))
    assert str(info.value).startswith("bad entry at 7\nApply node")


# -- naming the user's expressions -------------------------------------------------


def _picked(x, y):
    # the picked probabilities, scaled: the tutorial's -log(...).mean() of them
    # becomes the fused cross-entropy, whose own errors are tested below
    p = T.nnet.softmax(x)
    return p[T.arange(y.shape[0]), y] * 2.0


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("labels, axis", [([0, 1, 2, 0], 0), ([0, 1, 5], 1)])
def test_advanced_index_error_names_the_user_expression(linker, labels, axis):
    x = T.dmatrix("x")
    y = T.ivector("y")
    f = compile_([x, y], _picked(x, y), linker)
    with pytest.raises(IndexError) as info:
        f(np.ones((3, 4)), np.array(labels, dtype="int32"))
    text = str(info.value)
    first = text.splitlines()[0]
    assert f"out of bounds for axis {axis}" in first
    assert "Softmax{axis=1}.out" not in text                # no internal name ...
    assert "Softmax{axis=1}(x)" in first                    # ... but the user's expression
    assert "p = T.nnet.softmax(x)" in text                  # and the line that built it
    assert "input 2 'y'" in text
    assert "y.shape[0]" in text                             # arange's length, as written


@pytest.mark.parametrize("linker", LINKERS)
def test_the_tutorial_cost_reports_targets_against_rows(linker):
    """-log(softmax(x)[arange(n), y]).mean() runs as the fused cross-entropy:
    too many labels, or a label out of range, is said in the user's terms."""
    x = T.dmatrix("x")
    y = T.ivector("y")
    p = T.nnet.softmax(x)
    f = compile_([x, y], -T.log(p[T.arange(y.shape[0]), y]).mean(), linker)
    with pytest.raises(ValueError, match="the targets have 4 entries but there are 3 rows"):
        f(np.ones((3, 4)), np.array([0, 1, 2, 0], dtype="int32"))
    with pytest.raises(IndexError):
        f(np.ones((3, 4)), np.array([0, 1, 5], dtype="int32"))


@pytest.mark.parametrize("linker", LINKERS)
def test_a_shape_mismatch_names_the_intermediate_by_its_inputs(linker):
    x = T.dmatrix("x")
    z = T.dmatrix("z")
    probs = T.nnet.softmax(x)
    total = probs + z
    f = compile_([x, z], total, linker)
    with pytest.raises(ValueError) as info:
        f(np.ones((3, 4)), np.ones((2, 4)))
    text = str(info.value)
    assert "Softmax{axis=1}.out" not in text
    assert "input 0 Softmax{axis=1}(x)" in text
    assert "probs = T.nnet.softmax(x)" in text
    assert "total = probs + z" in text


def test_describe_variable():
    from symgraph.compile.errors import describe_variable

    x = T.dmatrix("x")
    y = T.dvector("y")
    assert describe_variable(x) == "x"
    assert describe_variable(T.exp(x) + y) == "(exp(x) + y)"
    assert describe_variable(y.shape[0]) == "y.shape[0]"
    named = T.exp(x)
    named.name = "ex"
    assert describe_variable(named) == "ex"
    deep = x
    for _ in range(30):
        deep = T.exp(deep) + y
    assert describe_variable(deep) == "Elemwise{add}.out (computed from x, y)"
    doubled = x
    for _ in range(60):  # written out as a tree: 2**60 leaves
        doubled = doubled + doubled
    assert describe_variable(doubled) == "Elemwise{add}.out (computed from x)"


@pytest.mark.parametrize("linker", ["py", "c|py"])
def test_intermediates_with_the_same_graph_name_are_told_apart(linker):
    x = T.dmatrix("x")
    z = T.dmatrix("z")
    f = compile_([x, z], T.nnet.softmax(x) + T.nnet.softmax(z), linker)
    with pytest.raises(ValueError) as info:
        f(np.ones((3, 4)), np.ones((2, 4)))
    text = str(info.value)
    assert "input 0 Softmax{axis=1}(x)" in text
    assert "input 1 Softmax{axis=1}(z)" in text
