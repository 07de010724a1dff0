"""Advanced indexing in every form on the (emulated) device, against the CPU:
set_subtensor with index arrays (repeated indices: the last one wins),
slices and ints beside index arrays, arrays apart or of different ranks,
boolean masks, and their increments and gradients."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.backends.cuda.advanced import advanced_update_lowering
from symgraph.gpu import placement_report
from symgraph.ops.device_op import OnDevice
from tests.gpu.device_flags import DEVICE

_ADVANCED = {"AdvancedSubtensor", "AdvancedIncSubtensor"}


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _compile(inputs, outputs):
    """(device function, CPU function); every advanced indexing node of the
    device one runs on the device, as placement_report says."""
    with symgraph.config.change_flags(**DEVICE):
        dev = symgraph.function(inputs, outputs)
    cpu = symgraph.function(inputs, outputs)
    nodes = dev.maker.fgraph.toposort()
    on_device = {type(n.op.op).__name__ for n in nodes if isinstance(n.op, OnDevice)}
    assert on_device & _ADVANCED, on_device
    report = placement_report(dev)
    left = [str(node.op) for node, _ in report.cpu_nodes
            if type(node.op).__name__ in _ADVANCED]
    assert left == [], str(report)
    return dev, cpu


def _same(dev, cpu, *args, exact=True):
    got, want = dev(*args), cpu(*args)
    if not isinstance(got, (list, tuple)):
        got, want = [got], [want]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


def _same_error(dev, cpu, *args):
    """Both raise, with the CPU's message (x is named by its type on the
    device, where the node's input is x's transfer)."""
    with pytest.raises(Exception) as want:
        cpu(*args)
    with pytest.raises(type(want.value)) as got:
        dev(*args)
    want, got = str(want.value).splitlines()[0], str(got.value).splitlines()[0]
    if " of shape " in want:
        head, tail = want.split(" for ", 1)[0], want.split(" of shape ", 1)[1]
        assert got.startswith(head) and got.endswith(" of shape " + tail), (got, want)
    else:
        assert got.split(": ", 1)[1] == want.split(": ", 1)[1], (got, want)


# ---------------------------------------------------------------------------
# set_subtensor with index arrays


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "int8", "bool"])
def test_set_rows_last_repeated_index_wins(rng, dtype):
    x = T.tensor(dtype, shape=(None, None), name="x")
    v = T.tensor(dtype, shape=(None, None), name="v")
    i = T.lvector("i")
    dev, cpu = _compile([x, v, i], T.set_subtensor(x[i], v))
    a = (rng.random((6, 3)) * 10).astype(dtype)
    b = (rng.random((5, 3)) * 10 + 1).astype(dtype)
    idx = np.array([4, 0, -2, 4, 1])                   # 4 twice: the last one wins
    got = _same(dev, cpu, a, b, idx)[0]
    want = a.copy()
    want[idx] = b
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[4], b[3])
    _same(dev, cpu, a, b[:0], idx[:0])                 # empty index
    _same(dev, cpu, a, b[:1], idx[:1])                 # size 1
    _same(dev, cpu, a[::2], b[:3], np.array([2, 0, 2]))          # x not contiguous
    _same(dev, cpu, a[:, :0], b[:, :0], idx)           # rows of no elements
    _same_error(dev, cpu, a, b[:1], np.array([6]))
    _same_error(dev, cpu, a, b[:1], np.array([-7]))


def test_set_elements_repeated_many_times_larger_than_a_block(rng):
    x = T.fmatrix("x")
    v = T.fvector("v")
    i, j = T.lvectors("i", "j")
    s = T.fscalar("s")
    dev, cpu = _compile([x, v, i, j, s], [T.set_subtensor(x[i, j], v),
                                          T.set_subtensor(x[i, j], s)])   # a broadcast value
    a = rng.random((40, 30)).astype("f")
    n = 3000                                           # > one block, many repeats
    rows, cols = rng.integers(-40, 40, n), rng.integers(0, 30, n)
    vals = np.arange(n, dtype="f")
    got = _same(dev, cpu, a, vals, rows, cols, np.float32(7))
    want = a.copy()
    want[rows, cols] = vals
    np.testing.assert_array_equal(got[0], want)
    with pytest.raises(ValueError):
        dev(a, vals[:2], rows[:3], cols[:3], np.float32(0))      # the value's shape
    _same_error(dev, cpu, a, vals[:3], rows[:3], np.array([0, 30, 1]), np.float32(0))


# ---------------------------------------------------------------------------
# slices and ints beside index arrays; arrays apart or of different ranks


def test_gathers_with_slices_ints_and_arrays_apart(rng):
    x = T.ftensor3("x")
    i = T.lvector("i")
    m = T.lmatrix("m")
    outs = [x[1:3, i], x[i, 2:], x[::2, i], x[::-1, i, 1:], x[i, 1], x[1, :, i],
            x[i, :, i], x[m, :, i], x[:, m, i], x[i, ::-2, m]]
    dev, cpu = _compile([x, i, m], outs)
    a = rng.standard_normal((4, 5, 6)).astype("f")
    idx = np.array([3, -1, 0, 3])
    mat = np.array([[0, 2, 1, 3], [3, 3, -4, 0]])
    _same(dev, cpu, a, idx, mat)
    _same(dev, cpu, a[:, ::-1, ::-1], idx, mat)        # x with negative strides
    _same(dev, cpu, np.asfortranarray(a), idx, mat)
    _same(dev, cpu, a, idx[:0], np.zeros((2, 0), "int64"))        # empty
    _same(dev, cpu, a, idx[:1], mat[:1, :1])
    _same_error(dev, cpu, a, np.array([4]), mat)
    _same_error(dev, cpu, a, idx, np.zeros((2, 3), "int64"))       # no broadcast


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "uint8"])
def test_gathers_in_other_dtypes(rng, dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    i = T.lvector("i")
    mask = T.tensor("bool", shape=(None,), name="mask")
    dev, cpu = _compile([x, i, mask], [x[1:3, i], x[i, :, i], x[mask, ::-1]])
    a = (rng.standard_normal((4, 5, 4)) * 50).astype(dtype)
    _same(dev, cpu, a, np.array([3, -1, 0, 3]), np.array([True, False, True, True]))
    _same(dev, cpu, a[::-1], np.array([1]), np.zeros(4, bool))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "int32"])
def test_set_and_inc_with_slices_beside_arrays(rng, dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    i = T.lvector("i")
    v = T.tensor(dtype, shape=(None,), name="v")
    outs = [T.set_subtensor(x[1:3, i], v), T.inc_subtensor(x[1:3, i], v),
            T.set_subtensor(x[i, 2:], v), T.inc_subtensor(x[::2, i, ::-1], v),
            T.inc_subtensor(x[i, :, i], v[:5]), T.set_subtensor(x[i, 1, i], v[0])]
    dev, cpu = _compile([x, i, v], outs)
    a = (rng.standard_normal((4, 5, 6)) * 4).astype(dtype)
    idx = np.array([3, -1, 0, 3])                      # 3 repeated
    val = (rng.standard_normal(6) * 4).astype(dtype)
    exact = dtype not in ("float32", "float64")        # float atomics add in any order
    _same(dev, cpu, a, idx, val, exact=exact)
    _same(dev, cpu, a, idx[:0], val, exact=exact)
    _same(dev, cpu, a[:, :, ::-1], idx[:1], val, exact=exact)
    _same_error(dev, cpu, a, np.array([0, -5]), val)


def test_inc_without_atomics_is_the_cpu_exactly(rng):
    # float16 and int8 have no device atomic add: a thread per target adds
    # its repeated entries in the CPU's order
    x = T.tensor("float16", shape=(None, None), name="x")
    y = T.tensor("int8", shape=(None,), name="y")
    i = T.lvector("i")
    dev, cpu = _compile([x, y, i], [T.inc_subtensor(x[i], np.float16(0.1)),
                                    T.inc_subtensor(y[i], np.int8(100))])
    a = rng.standard_normal((7, 300)).astype("float16")
    b = np.arange(7, dtype="int8")
    idx = rng.integers(0, 7, 500)
    _same(dev, cpu, a, b, idx)


def test_deterministic_more_adds_float32_in_the_cpu_order(rng):
    x = T.fmatrix("x")
    v = T.fmatrix("v")
    i = T.lvector("i")
    with symgraph.config.change_flags(deterministic="more"):
        dev, cpu = _compile([x, v, i], T.inc_subtensor(x[i, 1:], v))
    a = rng.standard_normal((5, 40)).astype("f")
    idx = rng.integers(-5, 5, 700)                     # every row many times
    _same(dev, cpu, a, rng.standard_normal((700, 39)).astype("f"), idx)
    node = T.inc_subtensor(x[i, 1:], v).owner
    assert "atomicAdd" in advanced_update_lowering(node.op, node).source
    with symgraph.config.change_flags(deterministic="more"):
        assert "atomicAdd" not in advanced_update_lowering(node.op, node).source


# ---------------------------------------------------------------------------
# boolean masks


def test_masks_gather_set_and_inc(rng):
    x = T.fmatrix("x")
    mask = T.tensor("bool", shape=(None, None), name="mask")
    rows = T.tensor("bool", shape=(None,), name="rows")
    v = T.fvector("v")
    outs = [x[mask], x[rows], x[rows, 1:], T.set_subtensor(x[mask], v),
            T.inc_subtensor(x[rows], 2.0), T.set_subtensor(x[rows, ::2], 0.0),
            x[x > 0.5], T.grad(T.sum(x[mask] ** 2), x)]
    dev, cpu = _compile([x, mask, rows, v], outs)
    a = rng.standard_normal((5, 4)).astype("f")
    m = a > 0
    r = np.array([True, False, True, True, False])
    _same(dev, cpu, a, m, r, np.arange(m.sum(), dtype="f"), exact=False)
    none = np.zeros_like(m)
    _same(dev, cpu, a, none, r[::-1].copy(), np.zeros(0, "f"), exact=False)
    _same_error(dev, cpu, a, m[:4], r, np.arange(m[:4].sum(), dtype="f"))


# ---------------------------------------------------------------------------
# gradients through them


def test_gradients_through_slices_arrays_and_set(rng):
    x = T.fmatrix("x")
    v = T.fvector("v")
    i = T.lvector("i")
    picked = x[1:5, i]
    y = T.set_subtensor(x[i, 1:], v)
    cost = T.sum(T.tanh(picked) ** 2) + T.sum(y ** 3)
    dev, cpu = _compile([x, v, i], [cost] + T.grad(cost, [x, v]))
    a = rng.standard_normal((6, 4)).astype("f")
    _same(dev, cpu, a, rng.standard_normal(3).astype("f"), np.array([2, 0, 2, -1]), exact=False)


# ---------------------------------------------------------------------------
# random forms


def _random_index(rng, shape):
    """A random advanced index of an array of ``shape``: per dimension a whole
    or partial slice, an int, an index array (rank 1 or 2, broadcasting with
    the others) or, once, a boolean mask; at least one array or mask."""
    while True:
        index, has_mask, arrays = [], False, False
        for size in shape:
            kind = rng.choice(["all", "slice", "int", "array", "mask"])
            if kind == "all":
                index.append(slice(None))
            elif kind == "slice":
                step = int(rng.choice([1, 2, -1, -2]))
                index.append(slice(int(rng.integers(-size - 1, size + 1)),
                                   int(rng.integers(-size - 1, size + 1)), step))
            elif kind == "int" and size > 0:
                index.append(int(rng.integers(-size, size)))
            elif kind == "mask" and not has_mask:
                has_mask = True
                index.append(rng.random(size) < 0.5)
            elif size > 0:
                arrays = True
                index.append(rng.integers(-size, size, (3,) if rng.random() < 0.5 else (2, 3)))
            else:
                index.append(slice(None))
        if not (arrays or has_mask):
            continue
        try:
            np.zeros(shape)[tuple(index)]
        except IndexError:                       # arrays and the mask do not broadcast
            continue
        return tuple(index)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_forms_gather_set_and_inc(seed):
    rng = np.random.default_rng(seed)
    x = T.dtensor4("x")
    shape = (3, 4, 2, 5)
    outs, indices = [], []
    for _ in range(5):
        index = _random_index(rng, shape)
        indices.append(index)
        picked = x[index]
        outs += [picked, T.set_subtensor(picked, -picked * 2), T.inc_subtensor(picked, 1.5)]
    dev, cpu = _compile([x], outs)
    a = rng.standard_normal(shape)
    got = _same(dev, cpu, a, exact=False)
    for k, index in enumerate(indices):
        np.testing.assert_allclose(got[3 * k], a[index])
        want = a.copy()
        want[index] = -a[index] * 2
        np.testing.assert_allclose(got[3 * k + 1], want)
