"""What the GPU tests share: a function compiled for the device and for the
CPU, the names of the ops that run on the device, and the comparison of
their results."""

import numpy as np

import symgraph
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE


def device_and_cpu(inputs, outputs, **flags):
    """``function(inputs, outputs)`` compiled for the device and for the CPU,
    both under ``flags`` (float64 on the device without its warning)."""
    with symgraph.config.change_flags(**DEVICE, warn_float64="ignore", **flags):
        dev = symgraph.function(inputs, outputs)
    with symgraph.config.change_flags(**flags):
        cpu = symgraph.function(inputs, outputs)
    return dev, cpu


def device_op_names(f):
    """The class names of the ops ``f`` runs on the device."""
    return {type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
            if isinstance(n.op, OnDevice)}


def assert_same(got, want, tol):
    """Each result has the shape and dtype of its reference and its values to ``tol``."""
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype("f8"), w.astype("f8"), rtol=tol, atol=tol)
