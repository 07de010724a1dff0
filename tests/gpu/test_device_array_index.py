"""DeviceArray's basic indexing (views, as NumPy's and pygpu's), iteration,
truth value and item(), checked against NumPy on the host copy."""

import numpy as np
import pytest

import symgraph
import symgraph.gpu
import symgraph.tensor as T
from symgraph.gpu import to_device

from tests.gpu.device_flags import DEVICE


@pytest.fixture(scope="module")
def host():
    return np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)


def _on_device(value):
    with symgraph.config.change_flags(**DEVICE):
        return to_device(value)


KEYS = [
    0, -1, 1, (1, 2), (1, 2, 3), (-1, -3, -5), slice(None), slice(1, None),
    (slice(None), 1), (slice(None, None, -1),), (slice(None), slice(None, None, 2)),
    (Ellipsis, 1), (1, Ellipsis), (None, 1), (slice(None), None, slice(1, 3)),
    (Ellipsis, None), (slice(5, 9),), (slice(None), slice(3, 1)), (np.int64(1), np.int32(-1)),
    (1, slice(None, None, -2), slice(4, 0, -3)), (),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_is_numpys_view(host, key):
    a = _on_device(host)
    v = a[key]
    want = host[key]
    if not isinstance(want, np.ndarray):      # integers only: NumPy's 0-d view of them
        want = host[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
    assert isinstance(v, type(a)) and isinstance(v, symgraph.gpu.DeviceArray)
    assert v.shape == want.shape and v.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(v), want)
    # a view of the same memory at NumPy's offset and strides, the owner kept alive
    assert v.base is a
    if want.size:
        assert v.ptr - a.ptr == want.__array_interface__["data"][0] - host.ctypes.data
        assert all(s == w for s, w, n in zip(v.strides, want.strides, want.shape) if n > 1)


def test_views_of_views_keep_the_owner_and_outlive_it(host):
    a = _on_device(host)
    row = a[1][:, ::2][1]
    assert row.base is a
    del a
    np.testing.assert_array_equal(np.asarray(row), host[1][:, ::2][1])
    np.testing.assert_array_equal(row.copy().get(), host[1, 1, ::2])


@pytest.mark.parametrize("key, error, words", [
    ((0, 0, 0, 0), IndexError, "too many indices for array: array is 3-dimensional, but 4"),
    (2, IndexError, "index 2 is out of bounds for axis 0 with size 2"),
    ((0, -4), IndexError, "index -4 is out of bounds for axis 1 with size 3"),
    ((Ellipsis, Ellipsis), IndexError, "a single ellipsis"),
    ([0, 1], IndexError, "basic indexing only"),
    (np.array([0]), IndexError, "numpy.asarray(a)[key]"),
    (True, IndexError, "not bool"),
    ((0, 1.5), IndexError, "not float"),
    ((slice(None, None, 0),), ValueError, "slice step cannot be zero"),
])
def test_bad_keys_raise_numpys_errors(host, key, error, words):
    with pytest.raises(error) as info:
        _on_device(host)[key]
    assert words in str(info.value)


def test_too_many_new_axes(host):
    with pytest.raises(IndexError, match="at most"):
        _on_device(host)[(None,) * 40]


def test_iteration_gives_rows_as_numpy(host):
    a = _on_device(host)
    rows = list(a)
    assert len(rows) == 2
    for row, want in zip(rows, host):
        np.testing.assert_array_equal(np.asarray(row), want)
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        list(_on_device(np.float32(3)))


def test_truth_value_and_item_as_numpy():
    assert bool(_on_device(np.array([2.0], dtype=np.float32)))
    assert not _on_device(np.zeros((1, 1), dtype=np.float32))
    assert _on_device(np.arange(6, dtype=np.int32).reshape(2, 3))[1, 2].item() == 5
    assert _on_device(np.arange(6, dtype=np.int32)).item(4) == 4
    assert isinstance(_on_device(np.float64(1.5)).item(), float)
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        bool(_on_device(np.zeros(3, dtype=np.float32)))
    with pytest.raises(ValueError):
        _on_device(np.zeros(3, dtype=np.float32)).item()


def test_a_gradient_on_the_device_indexes_like_the_cpu_result():
    rng = np.random.default_rng(0)
    value = rng.standard_normal((3, 4)).astype(np.float32)
    x = T.matrix("x", dtype="float32")
    data = rng.standard_normal((5, 3)).astype(np.float32)
    results = []
    for flags in ({}, DEVICE):
        with symgraph.config.change_flags(**flags):
            w = symgraph.shared(value.copy(), name="w")
            g = symgraph.grad(T.tanh(T.dot(x, w)).sum(), w)
            results.append(symgraph.function([x], g)(data))
    cpu, dev = results
    assert isinstance(dev, symgraph.gpu.DeviceArray) and not isinstance(cpu, symgraph.gpu.DeviceArray)
    for key in ((1, 2), (slice(None), 3), (-1,)):
        np.testing.assert_allclose(np.asarray(dev[key]), cpu[key], rtol=1e-5, atol=1e-6)
    assert float(dev[1, 2]) == pytest.approx(float(cpu[1, 2]), rel=1e-5)
    assert dev[0, 0] == pytest.approx(cpu[0, 0], rel=1e-5)



def test_the_device_array_type_is_public_and_makes_nothing():
    assert not isinstance(np.zeros(3), symgraph.gpu.DeviceArray)
    with pytest.raises(TypeError, match="to_device"):
        symgraph.gpu.DeviceArray()
