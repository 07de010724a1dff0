"""Helpers shared by the op test modules: compile-and-run, infer_shape checks,
gradient checks, sample values and odd memory layouts."""

import numpy as np

import symgraph
import symgraph.gradient
import symgraph.tensor as T
from tests.helpers import check_infer_shape


def run(inputs, outputs, *values):
    """Compile ``outputs`` and call the function on ``values``."""
    single = not isinstance(outputs, (list, tuple))
    outs = [outputs] if single else list(outputs)
    res = symgraph.function(list(inputs), outs, on_unused_input="ignore")(*values)
    return res[0] if single else res


def direct_infer_shape(outputs, inputs, values):
    """Each output node's own infer_shape, evaluated, equals the real shape."""
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    reals = run(inputs, list(outputs), *values)
    for out, real in zip(outputs, reals):
        node = out.owner
        in_shapes = [tuple(T.shape_i(i, d) for d in range(i.ndim)) for i in node.inputs]
        shapes = node.op.infer_shape(None, node, in_shapes)[out.index]
        assert len(shapes) == out.ndim
        got = run(inputs, list(shapes), *values) if shapes else []
        assert tuple(int(s) for s in got) == np.shape(real), (out, got, np.shape(real))


def check_shapes(outputs, inputs, values):
    """infer_shape checked directly and through the shared ShapeFeature checker."""
    direct_infer_shape(outputs, inputs, values)
    check_infer_shape(outputs, inputs, values)


def verify_grad(fn, values):
    """``symgraph.gradient.verify_grad`` with a fixed generator."""
    symgraph.gradient.verify_grad(fn, values, rng=np.random.default_rng(0))


def sample(dtype, shape, rng):
    """Random values of ``dtype``: bools, small integers (-5..5) or normal floats."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def odd_layouts(arr):
    """The same values as C-contiguous, Fortran-ordered and negative-stride arrays."""
    yield arr
    yield np.asfortranarray(arr)
    flipped = arr[::-1].copy()[::-1]
    assert flipped.strides[0] <= 0 or arr.shape[0] <= 1
    yield flipped
