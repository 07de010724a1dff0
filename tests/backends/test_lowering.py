"""The backend seam: lowering tables, fusion support, and ops that import no backend."""

import ast
from pathlib import Path

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends import lower, lowering_rule, register_lowering, registered_lowerings
from symgraph.backends import lowering as lowering_module
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.cpu.lowerings import cpu_kernel
from symgraph.graph.basic import Apply, Op
from symgraph.ops import blas, elemwise, nnet, pool_argmax, reduce
from symgraph.opt import fusion_support

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def toy_backend():
    """A second backend's table, removed after the test."""
    yield "toy"
    lowering_module._TABLES.pop("toy", None)
    fusion_support._SUPPORT.pop("toy", None)


class _Base(Op):
    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] * 2


class _Child(_Base):
    pass


class _Grandchild(_Child):
    pass


def test_rules_are_found_through_the_class_hierarchy(toy_backend):
    register_lowering(_Base, lambda op, node: "base", backend=toy_backend)
    register_lowering(_Grandchild, lambda op, node: "grandchild", backend=toy_backend)
    x = T.dvector("x")
    assert lower(_Base()(x).owner, toy_backend) == "base"
    assert lower(_Child()(x).owner, toy_backend) == "base"          # inherited
    assert lower(_Grandchild()(x).owner, toy_backend) == "grandchild"  # overridden
    assert lower(_Base()(x).owner, "no-such-backend") is None
    assert lowering_rule(_Child(), toy_backend) is registered_lowerings(toy_backend)[_Base]


def test_a_rule_by_name_is_imported_on_first_use_with_its_arguments(toy_backend):
    register_lowering(_Base, "builtins:max", backend=toy_backend, args=(3,))
    rule = lowering_rule(_Base(), toy_backend)
    assert "builtins:max" in repr(rule)
    assert rule(1, 2) == 3


@pytest.mark.parametrize("bad, error", [
    (("not a class", lambda op, node: None), TypeError),
    ((_Base, 42), TypeError),
    ((_Base, "no_colon_here"), ValueError),
])
def test_bad_registrations_are_refused(toy_backend, bad, error):
    with pytest.raises(error):
        register_lowering(*bad, backend=toy_backend)


def test_a_second_backend_needs_no_change_to_the_ops(toy_backend):
    """A backend is a table: the same graph lowers to the CPU backend's CKernel
    and to the toy backend's kernel, and the ops know of neither."""
    register_lowering(elemwise.Elemwise, lambda op, node: ("toy-loop", str(op)),
                      backend=toy_backend)
    x = T.dvector("x")
    node = (T.exp(x) * 2).owner
    assert isinstance(cpu_kernel(node), CKernel)
    assert lower(node, toy_backend) == ("toy-loop", str(node.op))
    assert not hasattr(node.op, "c_kernel")


def test_fusion_asks_the_backend(toy_backend):
    from symgraph.ops.scalar_basic import Add
    from symgraph.ops.scalar_math import Exp

    add, exp = Add(), Exp()
    assert fusion_support.can_fuse_elemwise(add, ("float64", "float64"))
    assert not fusion_support.can_fuse_elemwise(add, ("float64", "float64"),
                                                backend=toy_backend)  # none registered
    fusion_support.register_fusion_support(toy_backend, elemwise=lambda op, d: True,
                                           reduction=lambda op, d: False)
    assert fusion_support.can_fuse_elemwise(exp, ("float64",), backend=toy_backend)
    assert not fusion_support.can_fuse_reduction(exp, ("float64",), backend=toy_backend)


def test_the_cpu_table_covers_the_op_families():
    table = registered_lowerings("cpu")
    for cls in (elemwise.Elemwise, elemwise.DimShuffle, reduce.CAReduce, blas.Dot,
                nnet.Softmax, nnet.LogSoftmax, nnet.SoftmaxGrad,
                pool_argmax.MaxPoolWithArgmax, pool_argmax.MaxPoolGradFromArgmax):
        assert cls in table, cls
    # the rare second-order argmax gather has no kernel: Python perform
    assert lowering_rule(pool_argmax.MaxPoolArgmaxGather.__new__(
        pool_argmax.MaxPoolArgmaxGather), "cpu") is None


def test_functions_still_run_natively_through_the_table():
    x = T.dmatrix("x")
    f = symgraph.function([x], [T.nnet.softmax(x), T.exp(x).sum(axis=0), T.dot(x, x.T)])
    assert f.native is not None and not f.native.python_nodes
    v = np.arange(6.0).reshape(2, 3) / 7
    e = np.exp(v - v.max(axis=1, keepdims=True))
    got = f(v)
    np.testing.assert_allclose(got[0], e / e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got[2], v @ v.T)


def _imports(path):
    """Every module ``path`` imports, at any depth (function bodies too)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_ops_import_no_backend():
    found = set()
    for path in sorted((ROOT / "symgraph" / "ops").rglob("*.py")):
        for module in _imports(path):
            if module.startswith("symgraph.backends"):
                found.add((path.name, module))
    assert not found, sorted(found)


def test_rewrites_import_no_backend():
    found = set()
    for path in sorted((ROOT / "symgraph" / "opt").rglob("*.py")):
        for module in _imports(path):
            if module.startswith(("symgraph.compile", "symgraph.backends")):
                found.add((path.name, module))
    assert not found, sorted(found)
