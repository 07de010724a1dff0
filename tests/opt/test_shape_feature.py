"""ShapeFeature: symbolic shapes from infer_shape, static sizes, fallbacks."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import Apply, Constant, Op
from symgraph.graph.fg import FunctionGraph
from symgraph.ops.shape import Shape_i
from symgraph.opt import ShapeFeature
from symgraph.opt.shape_feature import ShapeError


def _shapes(fgraph, var, inputs, values):
    feature = ShapeFeature()
    fgraph.attach_feature(feature)
    shape = feature.shape_of(var)
    f = symgraph.function(inputs, list(shape), mode=symgraph.Mode(optimizer=None),
                          on_unused_input="ignore")
    return feature, shape, tuple(int(v) for v in f(*values))


def test_shapes_follow_infer_shape_without_computing_the_value():
    x, y = T.dmatrices("x", "y")
    out = T.exp(x).dot(y.T) + 1
    fg = FunctionGraph([x, y], [out], clone=False)
    values = [np.ones((2, 3)), np.ones((4, 3))]
    feature, shape, got = _shapes(fg, out, [x, y], values)
    assert got == (2, 4)
    assert not feature.depends_on_value(out)
    # Only the inputs' shapes are read: no exp, no dot in the shape graph.
    from symgraph.graph.basic import ancestors

    ops = {str(v.owner.op) for v in ancestors(shape) if v.owner is not None}
    assert ops == {"Shape_i{i=0}"}, ops


def test_static_sizes_are_constants():
    x = T.tensor("float64", shape=(2, None), name="x")
    fg = FunctionGraph([x], [T.exp(x)], clone=False)
    feature = ShapeFeature()
    fg.attach_feature(feature)
    first, second = feature.shape_of(fg.outputs[0])
    assert isinstance(first, Constant) and int(first.data) == 2
    assert isinstance(second.owner.op, Shape_i)
    c = T.constant(np.zeros((3, 5)))
    assert [int(s.data) for s in feature.shape_of(c)] == [3, 5]


class _NoShape(Op):
    """An op without infer_shape: its shape must be read from its value."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0].copy()


class _BadShape(_NoShape):
    def infer_shape(self, fgraph, node, input_shapes):
        return [()]


class _NotImplementedShape(_NoShape):
    def infer_shape(self, fgraph, node, input_shapes):
        raise NotImplementedError


@pytest.mark.parametrize("op", [_NoShape(), _NotImplementedShape()])
def test_fallback_reads_the_shape_of_the_value(op):
    x = T.dmatrix("x")
    out = T.exp(op(x))
    fg = FunctionGraph([x], [out], clone=False)
    feature, shape, got = _shapes(fg, out, [x], [np.ones((2, 5))])
    assert got == (2, 5)
    assert feature.depends_on_value(out.owner.inputs[0])


def test_wrong_infer_shape_is_a_clear_error():
    x = T.dmatrix("x")
    out = _BadShape()(x)
    fg = FunctionGraph([x], [out], clone=False)
    feature = ShapeFeature()
    fg.attach_feature(feature)
    with pytest.raises(ShapeError, match="_BadShape.*infer_shape gave"):
        feature.shape_of(out)


def test_memory_is_cleared_when_the_graph_changes():
    x = T.dvector("x")
    out = T.exp(x)
    fg = FunctionGraph([x], [out * 2])
    feature = ShapeFeature()
    fg.attach_feature(feature)
    feature.shape_of(fg.outputs[0])
    assert feature._memo
    fg.replace(fg.outputs[0].owner.inputs[0], T.log(fg.inputs[0]))
    assert not feature._memo


def test_shape_of_a_non_tensor_is_an_error():
    from symgraph.graph.null_type import NullType

    feature = ShapeFeature()
    with pytest.raises(TypeError, match="not a tensor"):
        feature.shape_of(NullType()())


def test_shared_checker_uses_the_feature():
    helpers = pytest.importorskip("helpers")
    x = T.dmatrix("x")
    v = T.dvector("v")
    out = T.exp(x) * v + T.sum(x, axis=0) if hasattr(T, "sum") else T.exp(x) * v
    helpers.check_infer_shape(out, [x, v], [np.ones((2, 3)), np.ones(3)])
