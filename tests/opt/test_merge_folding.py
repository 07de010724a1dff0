"""Merge (equal constants, common subexpressions) and constant folding."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.basic import Apply, Constant, Op
from symgraph.graph.fg import FunctionGraph
from symgraph.ops import scalar_math as sm
from symgraph.opt import constant_folding as cf
from symgraph.opt import optimize
from symgraph.opt.merge import merge

from opt_helpers import check_rewrite, count_op


def _constants(fgraph):
    return {id(v): v for v in fgraph.variables if isinstance(v, Constant)}


def test_equal_constants_become_one():
    x = T.dvector("x")
    a = T.constant(np.array([1.0, 2.0]), name="a")
    b = T.constant(np.array([1.0, 2.0]), name="b")
    c = T.constant(np.array([1.0, 3.0]), name="c")
    fg = FunctionGraph([x], [x * a, x * b, x * c])
    assert len(_constants(fg)) == 3
    assert merge(fg) >= 1
    assert len(_constants(fg)) == 2
    # The two products now share their inputs, so they merged too.
    assert fg.outputs[0] is fg.outputs[1]
    fg.check_integrity()


def test_constants_of_other_dtypes_stay_apart():
    x = T.dvector("x")
    fg = FunctionGraph([x], [x + T.constant(np.float64(1)), x + T.constant(np.float32(1))])
    merge(fg)
    assert len(_constants(fg)) == 2


def test_common_subexpressions_merge_transitively():
    x, y = T.dvectors("x", "y")
    left = T.log(T.exp(x) + y)
    right = T.log(T.exp(x) + y)
    out = left * right
    fg = check_rewrite([x, y], out, [np.arange(3.0), np.ones(3)],
                       mode=symgraph.Mode(optimizer="merge"))
    assert count_op(fg, sm.Exp) == 1 and count_op(fg, sm.Log) == 1


def test_different_ops_or_inputs_do_not_merge():
    x, y = T.dvectors("x", "y")
    fg = FunctionGraph([x, y], [T.exp(x), T.exp(y), T.log(x)])
    assert merge(fg) == 0
    assert count_op(fg, sm.Exp) == 2


def test_merge_is_a_fixed_point_in_one_walk():
    x = T.dvector("x")
    chain_a, chain_b = x, x
    for _ in range(5):
        chain_a, chain_b = T.exp(chain_a) + 1, T.exp(chain_b) + 1
    fg = FunctionGraph([x], [chain_a * chain_b])
    assert merge(fg) > 0
    assert merge(fg) == 0
    assert count_op(fg, sm.Exp) == 5


def test_constant_folding_computes_constant_subgraphs():
    x = T.dvector("x")
    c = T.exp(T.constant(np.array([0.0, 1.0]))) * 2
    out = x + c
    fg = check_rewrite([x], out, [np.ones(2)])
    assert count_op(fg, sm.Exp) == 0
    consts = [v for v in fg.variables if isinstance(v, Constant) and v.data.size == 2]
    np.testing.assert_allclose(consts[0].data, np.exp([0.0, 1.0]) * 2)


def test_folded_output_keeps_its_type():
    out = T.exp(T.constant(np.array([[0.0, 1.0]])))
    fg = FunctionGraph([], [out])
    optimize(fg)
    assert isinstance(fg.outputs[0], Constant)
    assert fg.outputs[0].dtype == out.dtype and fg.outputs[0].ndim == 2


class _NoFold(Op):
    """A test op that refuses constant folding (like a random draw)."""

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] + 1

    def do_constant_folding(self, fgraph, node):
        return False


class _Fails(_NoFold):
    """A test op whose computation raises: folding must leave it to run time."""

    def perform(self, node, inputs, out):
        raise ValueError("bad value")

    def do_constant_folding(self, fgraph, node):
        return True


def test_folding_skips_ops_that_refuse_and_computations_that_fail():
    c = T.constant(np.array([1.0, 2.0]))
    for op in (_NoFold(), _Fails()):
        fg = FunctionGraph([], [op(c)])
        optimize(fg)
        assert isinstance(fg.outputs[0].owner.op, type(op))


def test_folding_skips_huge_results(monkeypatch):
    monkeypatch.setattr(cf, "MAX_ELEMENTS", 4)
    small = T.exp(T.constant(np.zeros(4)))
    big = T.exp(T.constant(np.zeros(5)))
    fg = FunctionGraph([], [small, big])
    optimize(fg)
    assert isinstance(fg.outputs[0], Constant)
    assert not isinstance(fg.outputs[1], Constant)


def test_constant_folding_rewriter_can_be_called_directly():
    c = T.constant(np.array(3.0))
    node = T.exp(c).owner
    result = cf.constant_folding.transform(None, node)
    assert result[0].data == pytest.approx(np.exp(3.0))
