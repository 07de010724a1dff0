"""Lazy ifelse in the native runtime: what only the branch not taken needs is
not run (a Python op that counts its calls, a kernel that would fail), in a
function and inside a scan's step; what both branches or the rest of the
graph need still runs."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ifelse import ifelse
from symgraph.ops.from_graph import as_op
from symgraph.ops.ifelse import branch_guards

#: The native runtime whatever the flags say (a test run in DebugMode runs
#: each node's perform too, which would count as calls and loop in Python).
NATIVE = symgraph.Mode(linker="c|py", optimizer="fast_run")


def _function(*args, **kwargs):
    return symgraph.function(*args, mode=NATIVE, **kwargs)


def _counting(name, calls, fn):
    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def op(a):
        calls[name] += 1
        return fn(a)

    return op


def test_the_branch_not_taken_is_not_computed():
    calls = {"then": 0, "else": 0, "shared": 0}
    then_op = _counting("then", calls, lambda a: a * 2)
    else_op = _counting("else", calls, lambda a: a - 1)
    shared_op = _counting("shared", calls, lambda a: a + 10)
    c = T.dscalar("c")
    x = T.dvector("x")
    both = shared_op(x)      # read by both branches: computed whichever is taken
    out = ifelse(T.gt(c, 0), T.exp(then_op(x)) + both, else_op(x) * 3 + both)
    f = _function([c, x], [out, both.sum()])
    xv = np.array([0.5, -1.0])
    got, total = f(np.array(1.0), xv)
    np.testing.assert_allclose(got, np.exp(xv * 2) + xv + 10)
    assert calls == {"then": 1, "else": 0, "shared": 1}
    got, _ = f(np.array(-2.0), xv)
    np.testing.assert_allclose(got, (xv - 1) * 3 + xv + 10)
    assert calls == {"then": 1, "else": 1, "shared": 2}
    for _ in range(3):
        f(np.array(-2.0), xv)
    assert calls == {"then": 1, "else": 4, "shared": 5}


def test_a_native_kernel_that_would_fail_is_skipped():
    x = T.dvector("x")
    i = T.lscalar("i")
    # x[i] raises IndexError when i is out of range: only the taken branch reads it.
    out = ifelse(T.lt(i, x.shape[0]), x[i] * 2, T.constant(-1.0))
    f = _function([x, i], out)
    assert f(np.arange(3.0), np.array(2)) == 4.0
    assert f(np.arange(3.0), np.array(7)) == -1.0
    g = _function([x, i], x[i] * 2)
    with pytest.raises(IndexError):
        g(np.arange(3.0), np.array(7))


def test_nested_ifelse_and_a_value_used_outside_the_branch():
    calls = {"inner": 0, "outer_else": 0}
    inner_op = _counting("inner", calls, lambda a: a + 1)
    else_op = _counting("outer_else", calls, lambda a: -a)
    a, b = T.dscalar("a"), T.dscalar("b")
    x = T.dvector("x")
    inner = ifelse(T.gt(b, 0), inner_op(x), x * 0)
    out = ifelse(T.gt(a, 0), inner * 2, else_op(x))
    f = _function([a, b, x], out)
    xv = np.array([1.0, 2.0])
    np.testing.assert_allclose(f(np.array(1.0), np.array(1.0), xv), (xv + 1) * 2)
    np.testing.assert_allclose(f(np.array(1.0), np.array(-1.0), xv), 0 * xv)
    np.testing.assert_allclose(f(np.array(-1.0), np.array(1.0), xv), -xv)
    assert calls == {"inner": 1, "outer_else": 1}
    # The graph says which nodes each branch guards.
    order = f.maker.fgraph.toposort()
    guards = branch_guards(f.maker.fgraph.outputs, order)
    inner_node = next(n for n in order if n.op is inner_op)
    assert {truth for _, truth in guards[inner_node]} == {True}
    assert len(guards[inner_node]) == 2     # the inner condition and the outer one


def test_lazy_inside_a_scan_step():
    calls = {"big": 0}
    big = _counting("big", calls, lambda a: a * 100)
    m = T.dmatrix("m")
    total, _ = symgraph.scan(lambda row, acc: acc + ifelse(T.gt(row.sum(), 0), big(row).sum(),
                                                           row.sum()),
                             sequences=m, outputs_info=T.constant(0.0))
    f = _function([m], total[-1])
    mv = np.array([[1.0, 0.5], [-2.0, 0.0], [3.0, 1.0], [-4.0, 1.0], [-5.0, -1.0]])
    np.testing.assert_allclose(f(mv), 150 - 2 + 400 - 3 - 6)
    assert calls == {"big": 2}


def test_the_python_vm_gives_the_same_results():
    c = T.dscalar("c")
    x = T.dvector("x")
    out = ifelse(T.gt(c, 0), T.exp(x), x * 3)
    f = symgraph.function([c, x], out, mode=symgraph.Mode(linker="py"))
    g = _function([c, x], out)
    for cv in (1.0, -1.0):
        np.testing.assert_allclose(f(np.array(cv), np.ones(2)), g(np.array(cv), np.ones(2)))


def test_the_python_vm_skips_the_branch_not_taken_too():
    calls = {"then": 0, "else": 0}
    then_op = _counting("then", calls, lambda a: a * 2)
    else_op = _counting("else", calls, lambda a: a - 1)
    c = T.dscalar("c")
    x = T.dvector("x")
    f = symgraph.function([c, x], ifelse(c > 0, then_op(x), else_op(x)),
                          mode=symgraph.Mode(linker="py", optimizer="fast_run"))
    a = np.arange(3.0)
    np.testing.assert_allclose(f(1.0, a), a * 2)
    assert calls == {"then": 1, "else": 0}
    np.testing.assert_allclose(f(-1.0, a), a - 1)
    assert calls == {"then": 1, "else": 1}
