"""Theano's ``nnet.blocksparse``: values against NumPy loops, gradients by
finite differences."""

import numpy as np
import pytest

import symgraph
import symgraph.tensor as T
from symgraph.gradient import verify_grad
from symgraph.tensor.nnet.blocksparse import (SparseBlockGemv, SparseBlockOuter,
                                              sparse_block_dot)

RNG = np.random.default_rng(0)
I_BLOCKS, O_BLOCKS, I_SIZE, O_SIZE, BATCH, I_WIN, O_WIN = 4, 5, 3, 2, 2, 3, 2
W_V = RNG.normal(size=(I_BLOCKS, O_BLOCKS, I_SIZE, O_SIZE))
H_V = RNG.normal(size=(BATCH, I_WIN, I_SIZE))
B_V = RNG.normal(size=(O_BLOCKS, O_SIZE))
# A repeated input block in the first example, to test accumulation.
IN_IDX = np.array([[0, 2, 2], [3, 1, 0]], dtype=np.int32)
OUT_IDX = np.array([[4, 1], [0, 3]], dtype=np.int32)


def _gemv_loop(o, W, h, in_idx, out_idx):
    out = o.copy()
    for b in range(h.shape[0]):
        for j in range(out_idx.shape[1]):
            for i in range(in_idx.shape[1]):
                out[b, j] += h[b, i] @ W[in_idx[b, i], out_idx[b, j]]
    return out


def _outer_loop(o, x, y, x_idx, y_idx, alpha):
    out = o.copy()
    for b in range(x.shape[0]):
        for i in range(x_idx.shape[1]):
            for j in range(y_idx.shape[1]):
                out[x_idx[b, i], y_idx[b, j]] += alpha * np.outer(x[b, i], y[b, j])
    return out


def test_sparse_block_dot_matches_a_loop():
    W, h, b = T.tensor4(dtype="float64"), T.tensor3(dtype="float64"), T.dmatrix()
    i_idx, o_idx = T.imatrix(), T.imatrix()
    f = symgraph.function([W, h, i_idx, b, o_idx], sparse_block_dot(W, h, i_idx, b, o_idx))
    out = f(W_V, H_V, IN_IDX, B_V, OUT_IDX)
    np.testing.assert_allclose(out, _gemv_loop(B_V[OUT_IDX], W_V, H_V, IN_IDX, OUT_IDX))


def test_sparse_block_dot_of_one_example():
    W, h, b = T.tensor4(dtype="float64"), T.dmatrix(), T.dmatrix()
    i_idx, o_idx = T.ivector(), T.ivector()
    out = symgraph.function([W, h, i_idx, b, o_idx], sparse_block_dot(W, h, i_idx, b, o_idx))(
        W_V, H_V[0], IN_IDX[0], B_V, OUT_IDX[0])
    assert out.shape == (1, O_WIN, O_SIZE)
    np.testing.assert_allclose(out, _gemv_loop(B_V[OUT_IDX[:1]], W_V, H_V[:1], IN_IDX[:1],
                                               OUT_IDX[:1]))


def test_sparse_block_outer_accumulates_repeated_blocks():
    o, x, y = T.tensor4(dtype="float64"), T.tensor3(dtype="float64"), T.tensor3(dtype="float64")
    xi, yi, alpha = T.imatrix(), T.imatrix(), T.dscalar()
    o_v = RNG.normal(size=(I_BLOCKS, O_BLOCKS, I_SIZE, O_SIZE))
    y_v = RNG.normal(size=(BATCH, O_WIN, O_SIZE))
    f = symgraph.function([o, x, y, xi, yi, alpha], SparseBlockOuter()(o, x, y, xi, yi, alpha))
    out = f(o_v, H_V, y_v, IN_IDX, OUT_IDX, 0.5)
    np.testing.assert_allclose(out, _outer_loop(o_v, H_V, y_v, IN_IDX, OUT_IDX, 0.5))
    g = symgraph.function([o, x, y, xi, yi], SparseBlockOuter()(o, x, y, xi, yi))
    np.testing.assert_allclose(g(o_v, H_V, y_v, IN_IDX, OUT_IDX),
                               _outer_loop(o_v, H_V, y_v, IN_IDX, OUT_IDX, 1.0))


def test_gemv_gradients():
    o_v = RNG.normal(size=(BATCH, O_WIN, O_SIZE))
    verify_grad(lambda o, W, h: SparseBlockGemv()(o, W, h, IN_IDX, OUT_IDX),
                [o_v, W_V, H_V], rng=1)
    verify_grad(lambda W, h, b: sparse_block_dot(W, h, IN_IDX, b, OUT_IDX),
                [W_V, H_V, B_V], rng=2)


def test_outer_gradients():
    o_v = RNG.normal(size=(I_BLOCKS, O_BLOCKS, I_SIZE, O_SIZE))
    y_v = RNG.normal(size=(BATCH, O_WIN, O_SIZE))
    verify_grad(lambda o, x, y, a: SparseBlockOuter()(o, x, y, IN_IDX, OUT_IDX, a),
                [o_v, H_V, y_v, np.array(0.7)], rng=3)


def test_errors_name_the_input():
    W, h = T.tensor4(dtype="float64"), T.tensor3(dtype="float64")
    with pytest.raises(TypeError, match="inputIdx must be a 2-d integer tensor"):
        SparseBlockGemv()(T.tensor3(dtype="float64"), W, h, T.dmatrix(), T.imatrix())
    with pytest.raises(TypeError, match="W must be a 4-d float tensor"):
        SparseBlockGemv()(T.tensor3(dtype="float64"), h, h, T.imatrix(), T.imatrix())
    with pytest.raises(TypeError, match="one dimension less"):
        sparse_block_dot(W, h, T.ivector(), T.dmatrix(), T.imatrix())
    i_idx, o_idx = T.imatrix(), T.imatrix()
    f = symgraph.function([W, h, i_idx, o_idx],
                          sparse_block_dot(W, h, i_idx, np.zeros((O_BLOCKS, O_SIZE)), o_idx))
    bad = IN_IDX.copy()
    bad[0, 0] = I_BLOCKS
    with pytest.raises(IndexError, match=r"inputIdx holds block indices outside \[0, 4\)"):
        f(W_V, H_V, bad, OUT_IDX)
