"""The names of Theano's ``tensor`` module (basic.txt) that symgraph added
for the audit: compositions, variable methods, constant reading, and the
submodules ``xlogx``, ``utils``, ``elemwise``, ``raw_random``."""

import math

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T

RNG = np.random.RandomState(5)
M = RNG.rand(3, 4) - 0.5


def f(inputs, outputs):
    return symgraph.function(inputs, outputs, on_unused_input="ignore")


def test_compositions_against_numpy():
    x, y = T.dmatrix(), T.dmatrix()
    a = T.lmatrix()
    idx = RNG.randint(0, 2, size=(3, 4))
    outs = [T.ptp(x), T.ptp(x, 1), T.choose(a, [x, y]), T.choose(a, [x, y], mode="wrap"),
            T.largest(x, y, 0.1), T.smallest(x, y), T.horizontal_stack(x, y),
            T.vertical_stack(x, y), T.cov(x), T.cov(x, rowvar=False, bias=True),
            T.divmod(x, 0.3)[0], T.divmod(x, 0.3)[1], T.norm(x, 3), T.norm(x, np.inf, axis=1),
            T.tensor_copy(x), T.isnan_(x), T.isinf_(x)]
    got = f([x, y, a], outs)(M, M * 2, idx)
    Y = M * 2
    expect = [np.ptp(M), np.ptp(M, 1), np.choose(idx, [M, Y]), np.choose(idx, [M, Y], mode="wrap"),
              np.maximum(np.maximum(M, Y), 0.1), np.minimum(M, Y), np.hstack([M, Y]),
              np.vstack([M, Y]), np.cov(M), np.cov(M, rowvar=False, bias=True),
              np.floor_divide(M, 0.3), np.mod(M, 0.3), (np.abs(M) ** 3).sum() ** (1 / 3),
              np.abs(M).max(axis=1), M, np.isnan(M), np.isinf(M)]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_batched_tensordot_and_topk():
    x, y = T.dtensor3(), T.dtensor3()
    xv, yv = RNG.rand(2, 3, 4), RNG.rand(2, 4, 5)
    got = f([x, y], T.batched_tensordot(x, y, [[2], [1]]))(xv, yv)
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", xv, yv))
    got = f([x, y], T.batched_tensordot(x, y, 1))(xv, yv)
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", xv, yv))
    v = T.dvector()
    data = np.array([3.0, 9.0, 1.0, 7.0])
    top, arg = f([v], list(T.topk_and_argtopk(v, 2)))(data)
    np.testing.assert_array_equal(top, [9.0, 7.0])
    np.testing.assert_array_equal(arg, [1, 3])
    np.testing.assert_array_equal(f([v], T.topk(v, -2))(data), [1.0, 3.0])
    np.testing.assert_array_equal(f([v], T.argtopk(v, 1))(data), [1])
    with pytest.raises(ValueError):
        T.topk(v, 0)


def test_permutations():
    p = T.lvector()
    perm = np.array([2, 0, 3, 1])
    np.testing.assert_array_equal(f([p], T.inverse_permutation(p))(perm), np.argsort(perm))
    x = T.dmatrix()
    rows = RNG.rand(2, 4)
    got = f([x, p], T.permute_row_elements(x, p))(rows, perm)
    np.testing.assert_array_equal(got, rows[:, perm])
    got = f([x, p], T.permute_row_elements(x, p, inverse=1))(rows, perm)
    np.testing.assert_array_equal(got[:, perm], rows)


def test_complex_constructors():
    x, y = T.dvector(), T.dvector()
    re, im = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    got = f([x, y], T.complex(x, y))(re, im)
    np.testing.assert_allclose(got, re + 1j * im)
    assert got.dtype == np.complex128
    got = f([x, y], T.complex_from_polar(x, y))(re, im)
    np.testing.assert_allclose(got, re * np.exp(1j * im))


def test_get_scalar_constant_value():
    assert T.get_scalar_constant_value(T.constant(3.0)) == 3.0
    assert T.get_scalar_constant_value(np.int64(4)) == 4
    assert T.get_scalar_constant_value(T.constant(2) * 3 + 1) == 7
    assert T.get_scalar_constant_value(T.TensorType("float64", shape=(5, None))().shape[0]) == 5
    assert T.constant(np.full((2, 2), 1.5)).get_scalar_constant_value() == 1.5
    with pytest.raises(T.NotScalarConstantError):
        T.get_scalar_constant_value(T.dscalar())
    with pytest.raises(T.NotScalarConstantError):
        T.get_scalar_constant_value(T.constant([1.0, 2.0]))
    with pytest.raises(T.EmptyConstantError):
        T.get_scalar_constant_value(T.constant(np.zeros(0)))
    assert T.get_vector_length(T.dtensor3().shape) == 3
    with pytest.raises(ValueError):
        T.get_vector_length(T.dvector())


def test_variable_methods():
    x = T.dmatrix()
    sq = np.abs(M[:, :3]) + 0.5
    methods = [x.exp(), x.log(), x.sqrt(), x.floor(), x.ceil(), x.trunc(), x.tanh(),
               x.arcsinh(), x.deg2rad(), x.diagonal(), x.trace(), x.norm(2), x.norm(1, axis=0),
               x.ptp(axis=0), x.cumsum(axis=1), x.cumprod(), x.zeros_like(), x.ones_like(),
               x.fill(2.0), x.swapaxes(0, 1), x.nonzero_values(), x.real, x.imag, x.conj(),
               x.var(corrected=True), x.nonzero(return_matrix=True)]
    got = f([x], methods)(sq)
    expect = [np.exp(sq), np.log(sq), np.sqrt(sq), np.floor(sq), np.ceil(sq), np.trunc(sq),
              np.tanh(sq), np.arcsinh(sq), np.deg2rad(sq), np.diagonal(sq), np.trace(sq),
              np.sqrt((sq ** 2).sum()), np.abs(sq).sum(0), np.ptp(sq, 0), np.cumsum(sq, 1),
              np.cumprod(sq), np.zeros_like(sq), np.ones_like(sq), np.full_like(sq, 2.0), sq.T,
              sq[sq != 0], sq, np.zeros_like(sq), sq, sq.var(),
              np.array(np.nonzero(sq))]
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    assert isinstance(math.floor(x), type(x)) and isinstance(math.trunc(x), type(x))
    q, r = divmod(x, 2)
    assert q.owner is not None and r.owner is not None
    v = T.dvector()
    got = f([v], [v.searchsorted(v * 2.5), v.compress(v > 1)])(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(got[0], [2, 3, 3])
    np.testing.assert_array_equal(got[1], [2.0, 3.0])
    ix = T.lvector()
    np.testing.assert_array_equal(f([ix, v], ix.choose([v, -v]))(np.array([0, 1, 0]),
                                                               np.array([1.0, 2.0, 3.0])),
                                  [1.0, -2.0, 3.0])
    with pytest.raises(NotImplementedError):
        x.norm(0)


def test_xlogx_module():
    x, y = T.dvector(), T.dvector()
    data = np.array([0.0, 0.5, 2.0])
    np.testing.assert_allclose(f([x], T.xlogx.xlogx(x))(data), [0.0, 0.5 * np.log(0.5),
                                                                 2 * np.log(2)])
    got = f([x, y], T.xlogx.xlogy0(x, y))(data, np.array([0.0, 3.0, 4.0]))
    np.testing.assert_allclose(got, [0.0, 0.5 * np.log(3), 2 * np.log(4)])


def test_utils_module():
    from symgraph.graph.fg import FunctionGraph
    from symgraph.tensor.utils import hash_from_ndarray, shape_of_variables

    a = np.arange(6.0).reshape(2, 3)
    assert hash_from_ndarray(a) == hash_from_ndarray(a.copy())
    assert hash_from_ndarray(a) != hash_from_ndarray(a.T)
    x = T.dmatrix("x")
    y = x[1:, :2] * 2
    fg = FunctionGraph([x], [y], clone=False)
    shapes = shape_of_variables(fg, {x: (4, 5)})
    assert shapes[y] == (3, 2)


def test_modules_and_aliases():
    from symgraph.tensor import elemwise, raw_random
    from symgraph.tensor.shared_randomstreams import RandomStreams

    assert raw_random.RandomStreamsBase is RandomStreams
    assert elemwise.Elemwise is T.Elemwise and elemwise.DimShuffle is T.DimShuffle
    assert "float32" in T.float_dtypes and "int8" in T.discrete_dtypes
    assert set(T.all_dtypes) == set(T.discrete_dtypes) | set(T.continuous_dtypes)
    for name in ("jacobian", "hessian", "consider_constant", "numeric_grad",
                 "grad_not_implemented", "grad_undefined"):
        assert callable(getattr(T, name))
    with pytest.raises(AttributeError):
        T.no_such_name  # noqa: B018
    x = T.dvector()
    np.testing.assert_array_equal(
        f([x], [T.advanced_subtensor1(x, [2, 0]), T.advanced_inc_subtensor1(x, 1.0, [0, 0]),
                T.advanced_set_subtensor1(x, 5.0, [1])])(np.array([1.0, 2.0, 3.0]))[1],
        [3.0, 2.0, 3.0])
