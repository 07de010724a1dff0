"""The rewrite engine: tracks, patterns, the registry's queries, the driver's
bound, on_opt_error, optimizer_verbose and the destroy-handler revert path."""

import logging

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.graph.destroy import DestroyHandler
from symgraph.graph.fg import FunctionGraph, History
from symgraph.ops import scalar_basic as sb
from symgraph.ops import scalar_math as sm
from symgraph.ops.elemwise import DimShuffle, Elemwise
from symgraph.opt import (EquilibriumDriver, PatternRewriter, RewriteCycleError,
                          RewriteError, RewriteQueryError, node_rewriter, optimize)
from symgraph.opt.driver import RewriterIndex
from symgraph.opt.registry import RewriteRegistry
from symgraph.opt.rewriter import graph_rewriter

from opt_helpers import count_op, has_op


def _fg(inputs, outputs, **kwargs):
    return FunctionGraph(inputs, outputs if isinstance(outputs, list) else [outputs],
                         **kwargs)


def _matches(rewriter, node):
    return rewriter in list(RewriterIndex([rewriter]).candidates(node))


# -- tracks -----------------------------------------------------------------------------

def test_tracks_scalar_op_class_tuple_instance_function_and_predicate():
    x = T.dvector("x")
    log_node = T.log(x).owner
    exp_node = T.exp(x).owner
    noop = lambda fgraph, node: None  # noqa: E731
    for spec in (sm.Log, (Elemwise, sm.Log), sm.Log(), Elemwise(sm.Log()), T.log,
                 lambda node: isinstance(getattr(node.op, "scalar_op", None), sm.Log)):
        rw = node_rewriter([spec])(noop)
        assert _matches(rw, log_node), spec
        assert not _matches(rw, exp_node), spec
    assert _matches(node_rewriter(None)(noop), exp_node)
    assert _matches(node_rewriter([Elemwise])(noop), exp_node)
    ds = x.dimshuffle("x", 0).owner
    assert _matches(node_rewriter([DimShuffle])(noop), ds)
    assert not _matches(node_rewriter([DimShuffle])(noop), log_node)


def test_tracks_by_name_of_a_missing_op_is_inactive():
    x = T.dvector("x")
    rw = node_rewriter(["symgraph.ops.no_such_module:Op"])(lambda fg, node: None)
    assert not _matches(rw, T.exp(x).owner)
    rw = node_rewriter(["symgraph.ops.elemwise:Elemwise"])(lambda fg, node: None)
    assert _matches(rw, T.exp(x).owner)


def test_bad_track_is_a_clear_error():
    rw = node_rewriter([42])(lambda fg, node: None)
    with pytest.raises(TypeError, match="cannot track 42"):
        rw.resolved_tracks()


def test_node_rewriter_may_return_a_dict():
    x = T.dvector("x")
    y = T.exp(x)
    fg = _fg([x], T.log(y))

    @node_rewriter([sm.Exp])
    def exp_to_sin(fgraph, node):
        return {node.outputs[0]: T.sin(node.inputs[0])}

    counts = EquilibriumDriver([exp_to_sin]).run(fg)
    assert counts["exp_to_sin"] == 1
    assert has_op(fg, sm.Sin) and not has_op(fg, sm.Exp)
    assert fg.outputs[0].owner.inputs[0].owner.tag.rewrites == ("exp_to_sin",)


# -- patterns ---------------------------------------------------------------------------

def test_pattern_rewriter_matches_commutative_inputs_and_constants():
    rw = PatternRewriter((sb.Add, "x", 1), (T.log1p, "x"), name="test_pattern",
                         allow_multiple_clients=True)
    x = T.dvector("x")
    for expr in (x + 1, 1 + x):
        fg = _fg([x], T.exp(expr))
        EquilibriumDriver([rw]).run(fg)
        assert has_op(fg, sm.Log1p) and not has_op(fg, sb.Add)
    fg = _fg([x], x + 2)
    assert EquilibriumDriver([rw]).run(fg)["test_pattern"] == 0


def test_pattern_rewriter_binds_names_consistently_and_checks_constraints():
    x, y = T.dvectors("x", "y")
    rw = PatternRewriter((sb.Sub, "a", "a"), (T.zeros_like, "a"), name="sub_self")
    fg = _fg([x, y], x - y)
    assert EquilibriumDriver([rw]).run(fg)["sub_self"] == 0
    fg = _fg([x], x - x)
    assert EquilibriumDriver([rw]).run(fg)["sub_self"] == 1
    never = PatternRewriter((sb.Sub, "a", "a"), (T.zeros_like, "a"), name="never",
                            constraints={"a": lambda v: False})
    fg = _fg([x], x - x)
    assert EquilibriumDriver([never]).run(fg)["never"] == 0


def test_pattern_rewriter_keeps_inner_nodes_with_other_clients():
    x = T.dvector("x")
    rw = PatternRewriter((sm.Log, (sm.Exp, "x")), "x", name="log_exp_single")
    e = T.exp(x)
    fg = _fg([x], [T.log(e), e])
    assert EquilibriumDriver([rw]).run(fg)["log_exp_single"] == 0


def test_pattern_rewriter_casts_to_the_output_dtype():
    x = T.ivector("x")
    rw = PatternRewriter((sm.Log, (sm.Exp, "x")), "x", name="log_exp")
    fg = _fg([x], T.log(T.exp(x)))
    EquilibriumDriver([rw]).run(fg)
    assert fg.outputs[0].dtype == "float64"
    assert has_op(fg, sb.Cast) and not has_op(fg, sm.Log)


# -- registry and queries -------------------------------------------------------------

def _registry():
    reg = RewriteRegistry()
    made = {}
    for name, tags in [("a", ("fast_run", "fast_compile")), ("b", ("fast_run",)),
                       ("c", ("special",))]:
        made[name] = node_rewriter(None, name=name)(lambda fg, node: None)
        reg.register(made[name], *tags, phase="canonicalize")
    return reg


def test_registry_selects_by_tag_and_name_and_excludes_both():
    reg = _registry()
    names = lambda entries: [e.name for e in entries]  # noqa: E731
    assert names(reg.select(["fast_run"])) == ["a", "b"]
    assert names(reg.select(["fast_compile"])) == ["a"]
    assert names(reg.select("fast_run:c")) == ["a", "b", "c"]
    assert names(reg.select(["fast_run"], ["b"])) == ["a"]
    assert names(reg.select(["fast_run", "special"], "fast_compile")) == ["b", "c"]
    assert names(reg.select(["canonicalize"])) == ["a", "b", "c"]  # the phase is a tag
    assert names(reg.select([], [])) == []


def test_registry_rejects_unknown_tags_listing_the_known_ones():
    reg = _registry()
    with pytest.raises(RewriteQueryError, match="'nope'.*Known tags: canonicalize, "
                                                "fast_compile, fast_run, special"):
        reg.select(["nope"])
    with pytest.raises(RewriteQueryError, match="cannot exclude 'nope'"):
        reg.select(["fast_run"], ["nope"])
    reg.select(["fast_run"], ["inplace", "gpu"])  # declared tags may be excluded


def test_registry_rejects_a_second_rewrite_under_a_taken_name():
    reg = _registry()
    other = node_rewriter(None, name="a")(lambda fg, node: None)
    with pytest.raises(ValueError, match="already registered"):
        reg.register(other, "fast_run", phase="canonicalize")


def test_including_cudnn_says_cudnn_is_not_available():
    x = T.dvector("x")
    with pytest.raises(RewriteQueryError, match="cuDNN rewrites are not available"):
        optimize(_fg([x], T.exp(x)), including=["cudnn"])
    with pytest.raises(RewriteQueryError, match="cuDNN rewrites are not available"):
        symgraph.function([x], T.exp(x), mode=symgraph.Mode(including=("cudnn",)))


def test_optimizer_including_flag_goes_through_the_mode():
    x = T.dvector("x")
    with symgraph.change_flags(optimizer_including="no_such_tag"):
        with pytest.raises(RewriteQueryError, match="no_such_tag"):
            symgraph.function([x], T.exp(x))


def test_excluding_a_rewrite_by_name_or_a_phase_by_tag():
    x = T.dvector("x")
    out = T.log(1 + x)
    fg = _fg([x], out)
    optimize(fg, excluding="local_log1p")
    assert not has_op(fg, sm.Log1p)
    fg = _fg([x], out)
    optimize(fg, excluding=["stabilize"])
    assert not has_op(fg, sm.Log1p)
    fg = _fg([x], out)
    counts = optimize(fg)
    assert counts["local_log1p"] == 1 and has_op(fg, sm.Log1p)


def test_optimizer_values():
    x = T.dvector("x")

    def build():
        a, b = T.exp(x), T.exp(x)
        return _fg([x], T.log(1 + (a + b) * 1))

    fg = build()
    optimize(fg, optimizer=None)
    assert count_op(fg, sm.Exp) == 2
    fg = build()
    optimize(fg, optimizer="None")
    assert count_op(fg, sm.Exp) == 2
    fg = build()
    optimize(fg, optimizer="merge")
    assert count_op(fg, sm.Exp) == 1 and count_op(fg, sb.Mul) == 1
    fg = build()
    optimize(fg, optimizer="fast_compile")  # merge and cheap canonicalizations
    assert count_op(fg, sm.Exp) == 1 and count_op(fg, sb.Mul) == 0
    assert not has_op(fg, sm.Log1p)
    fg = build()
    optimize(fg, optimizer="fast_run")
    assert has_op(fg, sm.Log1p)
    with pytest.raises(ValueError, match="unknown optimizer"):
        optimize(build(), optimizer="fastest")


def test_optimizer_none_can_still_include_a_rewrite_by_name():
    x = T.dvector("x")
    fg = _fg([x], T.log(1 + x))
    optimize(fg, optimizer=None, including="local_log1p")
    assert has_op(fg, sm.Log1p)


# -- the driver ---------------------------------------------------------------------------

@node_rewriter([sm.Exp])
def exp_to_sin(fgraph, node):
    return [T.sin(node.inputs[0])]


@node_rewriter([sm.Sin])
def sin_to_exp(fgraph, node):
    return [T.exp(node.inputs[0])]


def test_rewrites_that_undo_each_other_stop_with_a_clear_message():
    x = T.dvector("x")
    fg = _fg([x], T.exp(x))
    driver = EquilibriumDriver([exp_to_sin, sin_to_exp], name="pingpong", max_passes=30)
    with pytest.raises(RewriteCycleError, match=r"phase 'pingpong' did not reach a fixed "
                                                r"point.*(exp_to_sin|sin_to_exp).*"
                                                r"(sin_to_exp|exp_to_sin)"):
        driver.run(fg)
    fg.check_integrity()


def test_cycle_only_warns_when_on_opt_error_is_warn(caplog):
    x = T.dvector("x")
    fg = _fg([x], T.exp(x))
    driver = EquilibriumDriver([exp_to_sin, sin_to_exp], name="pingpong", max_passes=10)
    with symgraph.change_flags(on_opt_error="warn"), caplog.at_level(logging.WARNING):
        driver.run(fg)
    assert "exp_to_sin" in caplog.text and "fixed point" in caplog.text


@node_rewriter([sm.Exp])
def broken(fgraph, node):
    raise ZeroDivisionError("oops")


def test_failing_rewrite_raises_with_its_name():
    x = T.dvector("x")
    fg = _fg([x], T.exp(x))
    with symgraph.change_flags(on_opt_error="raise"):
        with pytest.raises(RewriteError, match="rewrite 'broken' failed on.*"
                                               "ZeroDivisionError: oops") as info:
            EquilibriumDriver([broken]).run(fg)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert "test_engine.py" in str(info.value)  # the user's line that built the node


def test_failing_rewrite_warns_or_is_ignored_and_others_still_run(caplog):
    x = T.dvector("x")
    for mode in ("warn", "ignore"):
        fg = _fg([x], T.exp(x))
        caplog.clear()
        with symgraph.change_flags(on_opt_error=mode), caplog.at_level(logging.WARNING):
            counts = EquilibriumDriver([broken, exp_to_sin]).run(fg)
        assert counts["exp_to_sin"] == 1
        assert ("broken" in caplog.text) == (mode == "warn")


def test_replacement_of_another_dtype_is_a_rewrite_error():
    x = T.dvector("x")

    @node_rewriter([sm.Exp])
    def to_float32(fgraph, node):
        return [T.cast(node.inputs[0], "float32")]

    with pytest.raises(RewriteError, match="to_float32.*keep the dtype"):
        EquilibriumDriver([to_float32]).run(_fg([x], T.exp(x)))


def test_verbose_prints_the_rewrite_the_old_node_and_the_new_one(capsys):
    x = T.dvector("x")
    fg = _fg([x], T.log(1 + x))
    optimize(fg, verbose=True)
    printed = capsys.readouterr().out
    assert "rewrite local_log1p: Elemwise{log}(" in printed
    assert "-> Elemwise{log1p}(x)" in printed
    with symgraph.change_flags(optimizer_verbose=True):
        optimize(_fg([x], T.log(1 + x)))
    assert "local_log1p" in capsys.readouterr().out


def test_graph_rewriter_changes_are_counted():
    calls = []

    @graph_rewriter
    def count_calls(fgraph):
        calls.append(1)
        return 1 if len(calls) < 3 else 0

    x = T.dvector("x")
    counts = EquilibriumDriver([], [count_calls]).run(_fg([x], T.exp(x)))
    assert counts["count_calls"] == 2 and len(calls) == 3


def test_rejected_replacement_is_reverted_with_a_destroy_handler():
    x, y = T.dvectors("x", "y")
    fg = _fg([x, y], T.exp(x + y))
    fg.attach_feature(History())
    fg.attach_feature(DestroyHandler())
    before = [str(n) for n in fg.toposort()]

    @node_rewriter([sb.Add])
    def add_inplace(fgraph, node):
        # Overwrites the graph input x, which the caller owns: the destroy
        # handler must refuse, and the driver must undo the replacement.
        return [Elemwise(sb.Add(2), inplace_pattern={0: 0})(*node.inputs)]

    counts = EquilibriumDriver([add_inplace]).run(fg)
    assert counts["add_inplace"] == 0
    assert [str(n) for n in fg.toposort()] == before
    fg.check_integrity()


def test_compiled_function_values_unchanged_through_the_pipeline():
    x = T.dmatrix("x")
    v = T.dvector("v")
    out = T.log(1 + T.exp(x) * 1) + (v + 0).dimshuffle("x", 0) * 2 * 3
    f = symgraph.function([x, v], out)
    g = symgraph.function([x, v], out, mode=symgraph.Mode(optimizer=None))
    a, b = np.random.default_rng(0).normal(size=(2, 3)), np.arange(3.0)
    np.testing.assert_allclose(f(a, b), g(a, b))


def test_no_validation_while_nothing_destroys(monkeypatch):
    # Validating walks the whole graph: doing it for every replacement made
    # compiling quadratic.  Before the inplace phase nothing can be invalid.
    calls = []
    monkeypatch.setattr(DestroyHandler, "validate",
                        lambda self, fgraph: calls.append(1))
    x = T.dvector("x")
    fg = _fg([x], T.log(1 + x * 1))
    fg.attach_feature(History())
    fg.attach_feature(DestroyHandler())
    counts = optimize(fg)
    assert counts["local_log1p"] == 1 and calls == []


def test_merge_leaves_nodes_that_destroy_their_input_apart():
    from symgraph.opt.merge import merge

    x, y = T.dvectors("x", "y")
    inplace = Elemwise(sb.Add(2), inplace_pattern={0: 0})
    e = T.exp(x)
    fg = _fg([x, y], [inplace(e, y), inplace(e, y)])  # no destroy handler: allowed
    merge(fg)
    assert count_op(fg, sb.Add) == 2
