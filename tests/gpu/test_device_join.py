"""Concatenation and eye on the emulated device, against NumPy."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE



def test_join_along_each_axis_with_strided_inputs():
    x, y = T.fmatrices("x", "y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [T.concatenate([x, y * 2], axis=0),
                                       T.concatenate([x, x, y], axis=1)])
    names = [type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
             if isinstance(n.op, OnDevice)]
    assert names.count("Join") == 2
    rng = np.random.default_rng(1)
    a = rng.random((3, 8)).astype("f")[:, ::2]
    b = rng.random((3, 4)).astype("f")
    got = f(a, b)
    np.testing.assert_allclose(got[0], np.concatenate([a, b * 2], axis=0))
    np.testing.assert_allclose(got[1], np.concatenate([a, a, b], axis=1))
    with pytest.raises(ValueError, match="input 1 has size"):
        f(a, np.ones((4, 5), "f"))


def test_eye_on_the_device():
    n, m, k = T.lscalars("n", "m", "k")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([n, m, k], T.eye(n, m, k, dtype="float32") * 3)
    assert any(isinstance(node.op, OnDevice) and type(node.op.op).__name__ == "Eye"
               for node in f.maker.fgraph.toposort())
    for args in [(3, 5, 1), (4, 4, 0), (2, 6, -1), (0, 3, 0)]:
        np.testing.assert_array_equal(f(*args), np.eye(*args, dtype="f") * 3)
    with pytest.raises(ValueError, match="negative size"):
        f(-1, 2, 0)


def test_split_gives_device_views_with_host_sizes():
    x = T.fmatrix("x")
    sizes = T.lvector("sizes")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, sizes], [p * 2 for p in T.split(x, sizes, 3, axis=1)])
    assert any(isinstance(n.op, OnDevice) and type(n.op.op).__name__ == "Split"
               for n in f.maker.fgraph.toposort())
    a = np.arange(18, dtype="f").reshape(2, 9)
    for got, want in zip(f(a, np.array([2, 3, 4])), np.split(a, [2, 5], axis=1)):
        np.testing.assert_array_equal(got, want * 2)
    with pytest.raises(ValueError, match="do not add up"):
        f(a, np.array([2, 3, 3]))
