"""Theano's compile names at Theano's paths: compile.ops, compile.builders,
DebugMode's error classes, Mode.requiring/including/excluding, In(autoname=),
function_dump."""

import os
import pickle

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import Apply, Op
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from tests.opt.opt_helpers import count_op


def test_compile_ops_paths():
    from symgraph.compile import ops

    x = T.dmatrix("x")

    @ops.as_op(itypes=[T.dmatrix], otypes=[T.dmatrix])
    def flip(a):
        return a[::-1].copy()

    assert isinstance(flip, ops.FromFunctionOp)
    shape_vec, size = ops.Shape()(x), ops.Shape_i(1)(x)
    spec = ops.specify_shape(x, (2, 3))
    assert isinstance(spec.owner.op, ops.SpecifyShape)
    f = symgraph.function([x], [flip(x), shape_vec, size, ops.shape_i(x, 0), spec * 1])
    value = np.arange(6.0).reshape(2, 3)
    got = f(value)
    np.testing.assert_array_equal(got[0], value[::-1])
    assert list(got[1]) == [2, 3] and got[2] == 3 and got[3] == 2
    with pytest.raises(Exception):
        f(np.zeros((3, 3)))  # specify_shape checks at run time


def test_shape_i_with_a_graph_uses_its_shape_inference():
    from symgraph.compile import ops
    from symgraph.graph.fg import FunctionGraph
    from symgraph.opt.utils import shape_feature

    x = T.dmatrix("x")
    y = T.dot(x, x.T)
    fgraph = FunctionGraph([x], [y], clone=False)
    shape_feature(fgraph)
    size = ops.shape_i(y, 0, fgraph)
    assert y not in symgraph.graph.basic.ancestors([size])
    assert symgraph.function([x], size)(np.zeros((4, 2))) == 4


def test_view_op_and_deep_copy_op():
    from symgraph.compile import ops

    x = T.dvector("x")
    f = symgraph.function([x], [ops.view_op(x) * 2, ops.deep_copy_op(x)])
    assert not any(isinstance(n.op, ops.ViewOp) for n in f.maker.fgraph.apply_nodes)
    value = np.array([1.0, 2.0])
    doubled, copied = f(value)
    np.testing.assert_array_equal(doubled, [2.0, 4.0])
    np.testing.assert_array_equal(copied, value)
    assert not np.shares_memory(copied, value)
    g = symgraph.function([x], symgraph.grad((ops.view_op(x) ** 2).sum() +
                                             ops.deep_copy_op(x).sum(), x))
    np.testing.assert_array_equal(g(value), 2 * value + 1)
    plain = symgraph.function([x], ops.view_op(x), mode=symgraph.Mode(optimizer=None))
    np.testing.assert_array_equal(plain(value), value)


def test_compile_builders_op_from_graph():
    from symgraph.compile.builders import OpFromGraph

    a, b = T.dscalars("a", "b")
    op = OpFromGraph([a, b], [a * b + 1])
    x, y = T.dscalars("x", "y")
    f = symgraph.function([x, y], [op(x, y), symgraph.grad(op(x, y), x)])
    assert [float(v) for v in f(2.0, 5.0)] == [11.0, 5.0]


# -- DebugMode's errors ----------------------------------------------------------------------

class _Doubler(Op):
    """A test op that breaks a DebugMode rule chosen by ``fault``."""

    __props__ = ("fault",)

    def __init__(self, fault):
        self.fault = fault

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        if self.fault == "destroy":
            x *= 2
            output_storage[0][0] = x.copy()
        elif self.fault == "view":
            output_storage[0][0] = x
        else:  # a wrong dtype
            output_storage[0][0] = (x * 2).astype("float32")


@pytest.mark.parametrize("fault, error", [("destroy", "BadDestroyMap"), ("view", "BadViewMap"),
                                          ("dtype", "InvalidValueError")])
def test_debugmode_raises_theano_error_classes(fault, error):
    from symgraph.compile import debugmode

    x = T.dvector("x")
    f = symgraph.function([x], _Doubler(fault)(x) + 1, mode=debugmode.DebugMode())
    with pytest.raises(getattr(debugmode, error)) as info:
        f(np.array([1.0, 2.0]))
    assert isinstance(info.value, debugmode.DebugModeError)


def test_bad_thunk_output_names_the_node():
    from symgraph.compile import debugmode
    from symgraph.compile.debug_checks import compare_with_perform

    x = T.dvector("x")
    node = T.exp(x).owner
    with pytest.raises(debugmode.BadThunkOutput, match="native code gives"):
        compare_with_perform(node, [np.zeros(2)], [np.array([1.0, 2.0])])
    compare_with_perform(node, [np.zeros(2)], [np.ones(2)])  # equal: no error
    assert issubclass(debugmode.BadOptimization, debugmode.DebugModeError)
    assert issubclass(debugmode.StochasticOrder, debugmode.DebugModeError)


def test_debugmode_raises_bad_optimization_when_the_graphs_disagree():
    from symgraph.compile import debugmode

    x = T.dvector("x")
    f = symgraph.function([x], x * 2, mode="DebugMode")
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])
    with pytest.raises(debugmode.BadOptimization, match="differs between the optimized"):
        f._compare_with_reference([np.array([1.0])], [np.array([2.0])])


# -- Mode ----------------------------------------------------------------------------------------

def test_mode_requiring_including_excluding():
    x = T.dvector("x")
    out = T.log(1 + T.exp(x)) * 1
    base = symgraph.Mode(optimizer="fast_run")
    only_stable = base.requiring("stabilize")
    f = symgraph.function([x], out, mode=only_stable)
    assert count_op(f.maker.fgraph, sm.Softplus) == 1
    assert count_op(f.maker.fgraph, sb.Mul) == 1   # x * 1 stays: canonicalize not required
    assert "requiring=('stabilize',)" in repr(only_stable)
    f = symgraph.function([x], out, mode=base.excluding("stabilize"))
    assert count_op(f.maker.fgraph, sm.Softplus) == 0
    # The unsafe rewrites lack the required fast_run tag: x * 0 stays.
    f = symgraph.function([x], x / 2.0 * 2.0 + 0 * x,
                          mode=base.including("unsafe").requiring("fast_run"))
    assert count_op(f.maker.fgraph, sb.TrueDiv) == 0 and count_op(f.maker.fgraph, sb.Mul) == 1
    f = symgraph.function([x], x / 2.0 * 2.0 + 0 * x, mode=base.including("unsafe"))
    assert count_op(f.maker.fgraph, sb.Mul) == 0
    with pytest.raises(Exception, match="no rewrite has this tag"):
        symgraph.function([x], out, mode=base.requiring("no_such_tag"))
    assert base.require_tags == () and base.include_tags == ()


def test_in_autoname():
    x = T.dvector("x")
    named = symgraph.function([symgraph.In(x)], x * 2)
    np.testing.assert_array_equal(named(x=np.ones(2)), [2.0, 2.0])
    unnamed = symgraph.function([symgraph.In(x, autoname=False)], x * 2)
    assert symgraph.In(x, autoname=False).name is None
    np.testing.assert_array_equal(unnamed(np.ones(2)), [2.0, 2.0])
    with pytest.raises(TypeError):
        unnamed(x=np.ones(2))


def test_function_dump_round_trip(tmp_path):
    from symgraph.compile.function_dump import function_dump

    x = T.dvector("x")
    w = symgraph.shared(np.ones(2), name="w")
    x.tag.unpicklable = lambda: None
    path = os.path.join(tmp_path, "f.pkl")
    function_dump(path, [x], (x * w).sum(), updates=[(w, w + x)],
                  extra_tag_to_remove=["unpicklable"])
    with open(path, "rb") as f:
        args = pickle.load(f)
    g = symgraph.function(**args)
    assert float(g(np.array([1.0, 2.0]))) == 3.0
    assert not hasattr(x.tag, "unpicklable")


def test_tensor_io_load(tmp_path):
    from symgraph.tensor import io

    stored = os.path.join(tmp_path, "stored-array.npy")
    numpy_value = np.arange(6, dtype="int64").reshape(1, 6)
    np.save(stored, numpy_value)
    path = io.generic_string("path")
    x = io.load(path, "int64", (True, False))
    assert x.type.broadcastable == (True, False)
    f = symgraph.function([path], x * 2)
    np.testing.assert_array_equal(f(stored), numpy_value * 2)
    mapped = symgraph.function([], io.load(stored, "int64", (True, False), mmap_mode="r") + 1)
    np.testing.assert_array_equal(mapped(), numpy_value + 1)
    with pytest.raises(TypeError, match="holds a 2-d int64 array"):
        symgraph.function([path], io.load(path, "float32", (True, False)))(stored)
    np.save(stored, np.zeros((2, 6), dtype="int64"))
    with pytest.raises(ValueError, match="declared broadcastable"):
        f(stored)
    with pytest.raises(TypeError, match="file path"):
        f(3)
