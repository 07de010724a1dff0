"""Gathers, scatter-adds and fills on the emulated device, against NumPy."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE


def _device_names(f):
    return {type(n.op.op).__name__ for n in f.maker.fgraph.toposort()
            if isinstance(n.op, OnDevice)}


@pytest.fixture
def rng():
    return np.random.default_rng(9)


def test_gather_with_one_vector_per_dimension(rng):
    x = T.fmatrix("x")
    i, j = T.lvectors("i", "j")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, i, j], x[i, j] * 2)
    assert "AdvancedSubtensor" in _device_names(f)
    a = rng.random((5, 7)).astype("f")
    rows, cols = np.array([0, 4, -1, 2]), np.array([6, 0, 3, -7])
    np.testing.assert_allclose(f(a, rows, cols), a[rows, cols] * 2)
    np.testing.assert_allclose(f(a, rows[:1], cols), a[rows[:1], cols] * 2)   # broadcast
    assert f(a, rows[:0], cols[:0]).shape == (0,)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        f(a, np.array([5]), np.array([0]))


def test_scatter_add_accumulates_repeated_indices(rng):
    x = T.fmatrix("x")
    v = T.fvector("v")
    i, j = T.lvectors("i", "j")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, v, i, j], T.inc_subtensor(x[i, j], v))
    assert "AdvancedIncSubtensor" in _device_names(f)
    a = rng.random((4, 3)).astype("f")
    vals = rng.random(5).astype("f")
    rows, cols = np.array([0, 0, 3, -1, 1]), np.array([1, 1, 2, 2, 0])
    want = a.copy()
    np.add.at(want, (rows, cols), vals)
    np.testing.assert_allclose(f(a, vals, rows, cols), want, rtol=1e-6)
    assert (f(a, vals, rows, cols) != a).any() and a is not None


def test_the_gradient_of_picked_log_probabilities(rng):
    x = T.fmatrix("x")
    y = T.lvector("y")
    cost = -T.log(T.nnet.softmax(x) + 0)[T.arange(y.shape[0]), y].mean() + \
        (x[T.arange(y.shape[0]), y] ** 2).sum()
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, y], [cost, T.grad(cost, x)])
    cpu = symgraph.function([x, y], [cost, T.grad(cost, x)])
    a = rng.standard_normal((6, 5)).astype("f")
    t = rng.integers(0, 5, 6)
    for got, want in zip(f(a, t), cpu(a, t)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_alloc_broadcasts_a_device_value(rng):
    v = T.frow("v")
    n = T.lscalar("n")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([v, n], T.alloc(v * 2, n, 3) + 1)
    assert "Alloc" in _device_names(f)
    b = rng.random((1, 3)).astype("f")
    np.testing.assert_allclose(f(b, 4), np.broadcast_to(b * 2, (4, 3)) + 1)
    assert f(b, 0).shape == (0, 3)
    with pytest.raises(ValueError):
        f(b, -1)


def test_basic_inc_subtensor_and_set_subtensor(rng):
    x = T.fmatrix("x")
    v = T.fvector("v")
    i = T.iscalar("i")
    outs = [T.inc_subtensor(x[i:, 1], v), T.set_subtensor(x[::2], 5.0),
            T.grad(T.sum(x[1:3] ** 2), x)]
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, v, i], outs)
    assert "IncSubtensor" in _device_names(f) and f.native.python_nodes == []
    a = rng.random((5, 4)).astype("f")
    b = rng.random(3).astype("f")
    got = f(a, b, 2)
    w0 = a.copy()
    w0[2:, 1] += b
    w1 = a.copy()
    w1[::2] = 5
    w2 = np.zeros_like(a)
    w2[1:3] = 2 * a[1:3]
    for g, w in zip(got, [w0, w1, w2]):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(ValueError):
        f(a, np.ones(2, "f"), 2)


def test_rows_of_a_matrix_and_their_gradient_an_embedding_lookup(rng):
    table = T.fmatrix("table")
    words = T.lvector("words")
    picked = table[words]                              # (len(words), 4) rows
    cost = T.sum(T.tanh(picked) * np.arange(4, dtype="f"))
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([table, words], [picked, T.grad(cost, table)])
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= _device_names(f)
    a = rng.standard_normal((6, 4)).astype("f")
    w = np.array([5, 0, 5, -1, 2])                     # repeated rows accumulate
    rows, grad = f(a, w)
    np.testing.assert_allclose(rows, a[w], rtol=1e-6)
    want = np.zeros_like(a)
    np.add.at(want, w, (1 - np.tanh(a[w]) ** 2) * np.arange(4, dtype="f"))
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 0 with size 6"):
        f(a, np.array([6]))


def test_two_leading_index_vectors_of_a_3d_array_with_a_broadcast_increment(rng):
    x = T.ftensor3("x")
    i, j = T.lvectors("i", "j")
    y = T.frow("y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, i, j, y], [x[i, j], T.inc_subtensor(x[i, j], y)])
    a = rng.standard_normal((3, 4, 5)).astype("f")
    rows, cols, b = np.array([2, 0, 2]), np.array([1, 3, 1]), rng.random((1, 5)).astype("f")
    got, inc = f(a, rows, cols, b)
    np.testing.assert_allclose(got, a[rows, cols], rtol=1e-6)
    want = a.copy()
    np.add.at(want, (rows, cols), b)
    np.testing.assert_allclose(inc, want, rtol=1e-6)


def test_columns_and_inner_index_vectors_with_their_increments(rng):
    x = T.ftensor3("x")
    i, j = T.lvectors("i", "j")
    y = T.fmatrix("y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, i, j, y], [x[:, i], x[:, i, j], T.inc_subtensor(x[:, i], 1.5),
                                             T.inc_subtensor(x[:, i, j], y)])
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= _device_names(f)
    a = rng.standard_normal((2, 4, 3)).astype("f")
    rows, cols = np.array([3, 0, 3]), np.array([2, -1, 0])
    b = rng.standard_normal((2, 3)).astype("f")
    cols_picked, inner, inc_rows, inc_pairs = f(a, rows, cols, b)
    np.testing.assert_allclose(cols_picked, a[:, rows], rtol=1e-6)
    np.testing.assert_allclose(inner, a[:, rows, cols], rtol=1e-6)
    want = a.copy()
    np.add.at(want, (slice(None), rows), np.float32(1.5))
    np.testing.assert_allclose(inc_rows, want, rtol=1e-6)
    want = a.copy()
    np.add.at(want, (slice(None), rows, cols), b)
    np.testing.assert_allclose(inc_pairs, want, rtol=1e-6)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 2 with size 3"):
        f(a, rows, np.array([3, 0, 0]), b)


def test_a_matrix_of_ids_an_embedding_lookup_and_its_gradient(rng):
    # rnnslu's emb[idxs]: a (sentences, window) matrix of word ids picks rows
    emb = T.fmatrix("emb")
    ids = T.lmatrix("ids")
    picked = emb[ids]                                  # (3, 2, 4)
    cost = T.sum(T.tanh(picked) * np.arange(4, dtype="f"))
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([emb, ids], [picked, T.grad(cost, emb)])
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= _device_names(f)
    a = rng.standard_normal((6, 4)).astype("f")
    w = np.array([[5, 0], [5, -1], [2, 2]])            # repeated ids accumulate
    rows, grad = f(a, w)
    np.testing.assert_allclose(rows, a[w], rtol=1e-6)
    want = np.zeros_like(a)
    np.add.at(want, w, (1 - np.tanh(a[w]) ** 2) * np.arange(4, dtype="f"))
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-6)
    w_strided = np.arange(12).reshape(3, 4)[:, ::2] % 6           # not contiguous
    np.testing.assert_allclose(f(a, w_strided)[0], a[w_strided], rtol=1e-6)
    assert f(a, np.zeros((0, 3), "int64"))[0].shape == (0, 3, 4)
    with pytest.raises(IndexError, match="index -7 is out of bounds for axis 0 with size 6"):
        f(a, np.array([[0, -7]]))


def test_index_matrices_that_broadcast_on_inner_dimensions_with_increments(rng):
    x = T.ftensor3("x")
    i = T.lmatrix("i")
    j = T.lmatrix("j")
    y = T.fmatrix("y")
    with symgraph.config.change_flags(**DEVICE):
        f = symgraph.function([x, i, j, y], [x[:, i, j], T.inc_subtensor(x[:, i, j], y)])
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= _device_names(f)
    a = rng.standard_normal((2, 4, 5)).astype("f")
    rows = np.array([[3], [0], [3]])                   # (3, 1) against (1, 2): (3, 2)
    cols = np.array([[4, -5]])
    b = rng.standard_normal((3, 2)).astype("f")        # broadcast over the leading dim
    got, inc = f(a, rows, cols, b)
    np.testing.assert_allclose(got, a[:, rows, cols], rtol=1e-6)
    want = a.copy()
    np.add.at(want, (slice(None), rows, cols), b)
    np.testing.assert_allclose(inc, want, rtol=1e-6)
    with pytest.raises(IndexError, match="could not be broadcast together"):
        f(a, np.zeros((3, 2), "int64"), np.zeros((2, 2), "int64"), b)
    # the device and the CPU agree, on the CPU's own graph
    cpu = symgraph.function([x, i, j, y], [x[:, i, j], T.inc_subtensor(x[:, i, j], y)])
    for dev, host in zip(f(a, rows, cols, b), cpu(a, rows, cols, b)):
        np.testing.assert_allclose(dev, host, rtol=1e-6)
