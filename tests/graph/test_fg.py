"""The IR: ops as values, FunctionGraph bookkeeping, replace, history, destroy handler."""

import numpy as np
import pytest

import symgraph.tensor as T
from symgraph.graph.basic import Apply, Op, ancestors, clone_replace, graph_inputs, io_toposort
from symgraph.graph.destroy import DestroyHandler
from symgraph.graph.fg import FunctionGraph, History, InconsistencyError
from symgraph.ops.elemwise import Elemwise
from symgraph.ops.scalar_basic import Add, Mul
from symgraph.tensor.type import TensorType


class Double(Op):
    """A test op: 2 * x, optionally in place."""

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = inplace
        self.destroy_map = {0: [0]} if inplace else {}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        if self.inplace:
            inputs[0] *= 2
            out[0][0] = inputs[0]
        else:
            out[0][0] = inputs[0] * 2


def test_ops_compare_and_hash_by_props():
    assert Elemwise(Add(2)) == Elemwise(Add(2))
    assert hash(Elemwise(Add(2))) == hash(Elemwise(Add(2)))
    assert Elemwise(Add(2)) != Elemwise(Add(3))
    assert Elemwise(Add(2)) != Elemwise(Mul(2))
    assert Double(True) != Double(False)
    assert str(Double(True)) == "Double{inplace=True}"


def test_types_compare_by_dtype_and_shape():
    assert TensorType("float32", (False, True)) == TensorType("float32", shape=(None, 1))
    assert TensorType("float32", (False,)) != TensorType("float64", (False,))
    assert TensorType("float64", shape=(None, 3)).is_super(TensorType("float64", shape=(2, 3)))


def test_walks():
    x, y = T.dvectors("x", "y")
    z = (x + y) * x
    assert set(graph_inputs([z])) == {x, y}
    order = io_toposort([x, y], [z])
    assert [type(n.op.scalar_op) for n in order] == [Add, Mul]
    assert z in ancestors([z]) and x in ancestors([z])


def test_clone_replace_keeps_original():
    x, y = T.dvectors("x", "y")
    z = T.exp(x) + 1
    w = clone_replace(z, {x: y})
    assert y in graph_inputs([w]) and x not in graph_inputs([w])
    assert x in graph_inputs([z])


def test_fgraph_clients_and_replace():
    x, y = T.dvectors("x", "y")
    z = T.exp(x) * y
    fg = FunctionGraph([x, y], [z])
    fg.check_integrity()
    (mul_node,) = [n for n in fg.apply_nodes if isinstance(n.op.scalar_op, Mul)]
    exp_out = mul_node.inputs[0]
    new = T.log(fg.inputs[0])
    fg.replace(exp_out, new, reason="test_rewrite")
    fg.check_integrity()
    assert all(type(n.op.scalar_op).__name__ != "Exp" for n in fg.apply_nodes)
    assert new.owner.tag.rewrites == ("test_rewrite",)


def test_replace_carries_user_line_over():
    x = T.dvector("x")
    z = T.exp(x) + 1  # the user's line
    fg = FunctionGraph([x], [z])
    add_node = fg.outputs[0].owner
    new = fg.inputs[0] * 3
    fg.replace(fg.outputs[0], new, reason="r")
    assert "z = T.exp(x) + 1" in str(fg.outputs[0].owner.tag.trace)
    assert add_node.tag.trace == fg.outputs[0].owner.tag.trace


def test_replace_rejects_incompatible_types():
    x = T.dvector("x")
    fg = FunctionGraph([x], [x * 2])
    with pytest.raises(TypeError, match="incompatible type"):
        fg.replace(fg.outputs[0], T.dmatrix("m"), reason="bad")


def test_history_reverts():
    x = T.dvector("x")
    fg = FunctionGraph([x], [T.exp(x)])
    history = History()
    fg.attach_feature(history)
    before = fg.outputs[0]
    point = history.checkpoint()
    fg.replace(before, fg.inputs[0] * 2, reason="r")
    assert fg.outputs[0] is not before
    history.revert(point)
    assert fg.outputs[0] is before
    fg.check_integrity()


def test_destroy_handler_refuses_to_overwrite_inputs():
    x = T.dvector("x")
    fg = FunctionGraph([x], [Double(inplace=True)(x) + 1])
    with pytest.raises(InconsistencyError, match="overwrite input"):
        fg.attach_feature(DestroyHandler())
        fg.validate()


def test_destroy_handler_orders_readers_before_destroyer():
    x = T.dvector("x")
    a = T.exp(x)
    b = Double(inplace=True)(a)
    c = a + 1  # reads a, which b overwrites: must run before b
    fg = FunctionGraph([x], [b, c])
    fg.attach_feature(DestroyHandler())
    fg.validate()
    order = fg.toposort()
    reader = [n for n in order if isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, Add)]
    destroyer = [n for n in order if isinstance(n.op, Double)]
    assert order.index(reader[0]) < order.index(destroyer[0])


def test_destroyable_input_is_allowed():
    x = T.dvector("x")
    fg = FunctionGraph([x], [Double(inplace=True)(x)], clone=False)
    fg.attach_feature(DestroyHandler(destroyable_inputs=[x]))
    fg.validate()


def test_cycle_is_detected():
    x = T.dvector("x")
    y = T.exp(x)
    z = T.log(y)
    y.owner.inputs[0] = z  # hand-made cycle
    with pytest.raises(ValueError, match="cycle"):
        io_toposort([x], [z])


def test_nodes_record_user_line():
    x = T.dvector("x")
    y = T.exp(x)
    trace = y.owner.tag.trace
    assert trace.filename.endswith("test_fg.py")
    assert "y = T.exp(x)" in trace.text


def test_pickle_graph():
    import pickle

    x = T.dvector("x")
    y = T.exp(x) * 2
    y2 = pickle.loads(pickle.dumps(y))
    assert str(y2.owner.op) == str(y.owner.op)
    (x2,) = [v for v in graph_inputs([y2]) if v.name == "x"]
    assert np.allclose(y2.eval({x2: np.zeros(2)}), 2.0)
