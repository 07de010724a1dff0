"""Theano's ``tensor.nnet.blocksparse``: products of selected blocks.

A weight tensor ``W`` ``(iBlocks, oBlocks, iSize, oSize)`` is a grid of
``iSize x oSize`` blocks.  Each example ``b`` of a batch uses only the input
blocks ``inputIdx[b]`` and the output blocks ``outputIdx[b]``:

- ``SparseBlockGemv()(o, W, h, inputIdx, outputIdx)``:
  ``out[b, j] = o[b, j] + sum_i h[b, i] @ W[inputIdx[b, i], outputIdx[b, j]]``;
- ``SparseBlockOuter()(o, x, y, xIdx, yIdx, alpha)``: ``o`` with
  ``alpha * outer(x[b, i], y[b, j])`` added to block ``(xIdx[b, i],
  yIdx[b, j])`` for every ``b, i, j`` (repeated blocks accumulate);
- ``sparse_block_dot(W, h, inputIdx, b, outputIdx)``: the gemv with the
  output blocks' biases ``b[outputIdx]`` as ``o``.

Both ops compute in NumPy (``perform``); their gradients are built from the
two ops and from indexing, as Theano's were.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType, upcast

__all__ = ["SparseBlockGemv", "SparseBlockOuter", "sparse_block_gemv", "sparse_block_outer",
           "sparse_block_dot"]


def _check(var, ndim, kind, who, name, shape_doc):
    var = as_tensor_variable(var)
    dtypes = FLOAT_DTYPES if kind == "float" else INT_DTYPES
    if var.ndim != ndim or var.dtype not in dtypes:
        raise TypeError(f"{who}: {name} must be a {ndim}-d {kind} tensor {shape_doc}, got "
                        f"{var} of type {var.type}")
    return var


def _check_index_range(idx, limit, who, name, what):
    if idx.size and (idx.min() < 0 or idx.max() >= limit):
        raise IndexError(f"{who}: {name} holds block indices outside [0, {limit}) (the "
                         f"number of {what}): min {idx.min()}, max {idx.max()}")


class SparseBlockGemv(Op):
    """``o + h @ W`` over the selected blocks (see the module docstring).

    Inputs: ``o`` ``(batch, oWin, oSize)``, ``W`` ``(iBlocks, oBlocks, iSize,
    oSize)``, ``h`` ``(batch, iWin, iSize)``, ``inputIdx`` ``(batch, iWin)``,
    ``outputIdx`` ``(batch, oWin)``; output shaped as ``o``.  ``inplace`` is
    accepted for Theano's signature: the result is always a new array.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)

    def make_node(self, o, W, h, inputIdx, outputIdx):
        who = "SparseBlockGemv"
        o = _check(o, 3, "float", who, "o", "(batch, oWin, oSize)")
        W = _check(W, 4, "float", who, "W", "(iBlocks, oBlocks, iSize, oSize)")
        h = _check(h, 3, "float", who, "h", "(batch, iWin, iSize)")
        inputIdx = _check(inputIdx, 2, "integer", who, "inputIdx", "(batch, iWin)")
        outputIdx = _check(outputIdx, 2, "integer", who, "outputIdx", "(batch, oWin)")
        dtype = upcast(o.dtype, W.dtype, h.dtype)
        return Apply(self, [o, W, h, inputIdx, outputIdx],
                     [TensorType(dtype, shape=o.type.shape)()])

    def perform(self, node, inputs, output_storage):
        o, W, h, in_idx, out_idx = inputs
        who = "SparseBlockGemv"
        batch = o.shape[0]
        if not (h.shape[0] == in_idx.shape[0] == out_idx.shape[0] == batch):
            raise ValueError(f"{who}: the batch sizes differ: o {o.shape}, h {h.shape}, "
                             f"inputIdx {in_idx.shape}, outputIdx {out_idx.shape}")
        if h.shape[1] != in_idx.shape[1] or o.shape[1] != out_idx.shape[1]:
            raise ValueError(f"{who}: the windows differ: h {h.shape} vs inputIdx "
                             f"{in_idx.shape}, o {o.shape} vs outputIdx {out_idx.shape}")
        if W.shape[2] != h.shape[2] or W.shape[3] != o.shape[2]:
            raise ValueError(f"{who}: W's blocks {W.shape[2:]} do not fit h's block size "
                             f"{h.shape[2]} and o's {o.shape[2]}")
        _check_index_range(in_idx, W.shape[0], who, "inputIdx", "input blocks of W")
        _check_index_range(out_idx, W.shape[1], who, "outputIdx", "output blocks of W")
        blocks = W[in_idx[:, :, None], out_idx[:, None, :]]  # (batch, iWin, oWin, iS, oS)
        out = o + np.einsum("bix,bijxy->bjy", h, blocks)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True], [True], [False], [False]]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for
        from symgraph.ops.math import zeros_like

        o, W, h, in_idx, out_idx = inputs
        (go,) = output_grads
        g_W = sparse_block_outer(zeros_like(W), h, go, in_idx, out_idx)
        # h's gradient is a gemv through the transposed blocks, the roles of
        # the two index matrices swapped.
        g_h = sparse_block_gemv(zeros_like(h), W.dimshuffle(1, 0, 3, 2), go, out_idx, in_idx)
        return [go, g_W, g_h, disconnected_grad_for(in_idx), disconnected_grad_for(out_idx)]


class SparseBlockOuter(Op):
    """``o`` plus ``alpha`` times the outer products of the selected block
    pairs (see the module docstring).

    Inputs: ``o`` ``(xBlocks, yBlocks, xSize, ySize)``, ``x`` ``(batch, xWin,
    xSize)``, ``y`` ``(batch, yWin, ySize)``, ``xIdx`` ``(batch, xWin)``,
    ``yIdx`` ``(batch, yWin)``, ``alpha`` a scalar (1 when omitted); output
    shaped as ``o``.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace=False):
        self.inplace = bool(inplace)

    def make_node(self, o, x, y, xIdx, yIdx, alpha=None):
        who = "SparseBlockOuter"
        o = _check(o, 4, "float", who, "o", "(xBlocks, yBlocks, xSize, ySize)")
        x = _check(x, 3, "float", who, "x", "(batch, xWin, xSize)")
        y = _check(y, 3, "float", who, "y", "(batch, yWin, ySize)")
        xIdx = _check(xIdx, 2, "integer", who, "xIdx", "(batch, xWin)")
        yIdx = _check(yIdx, 2, "integer", who, "yIdx", "(batch, yWin)")
        dtype = upcast(o.dtype, x.dtype, y.dtype)
        alpha = as_tensor_variable(np.asarray(1, dtype=dtype) if alpha is None else alpha)
        if alpha.ndim != 0:
            raise TypeError(f"{who}: alpha must be a scalar, got {alpha} of type {alpha.type}")
        return Apply(self, [o, x, y, xIdx, yIdx, alpha],
                     [TensorType(dtype, shape=o.type.shape)()])

    def perform(self, node, inputs, output_storage):
        o, x, y, x_idx, y_idx, alpha = inputs
        who = "SparseBlockOuter"
        if not (x.shape[0] == y.shape[0] == x_idx.shape[0] == y_idx.shape[0]):
            raise ValueError(f"{who}: the batch sizes differ: x {x.shape}, y {y.shape}, xIdx "
                             f"{x_idx.shape}, yIdx {y_idx.shape}")
        if x.shape[1] != x_idx.shape[1] or y.shape[1] != y_idx.shape[1]:
            raise ValueError(f"{who}: the windows differ: x {x.shape} vs xIdx {x_idx.shape}, "
                             f"y {y.shape} vs yIdx {y_idx.shape}")
        if o.shape[2] != x.shape[2] or o.shape[3] != y.shape[2]:
            raise ValueError(f"{who}: o's blocks {o.shape[2:]} do not fit x's block size "
                             f"{x.shape[2]} and y's {y.shape[2]}")
        _check_index_range(x_idx, o.shape[0], who, "xIdx", "row blocks of o")
        _check_index_range(y_idx, o.shape[1], who, "yIdx", "column blocks of o")
        out = np.array(o, dtype=node.outputs[0].dtype, copy=True)
        products = alpha * np.einsum("bix,bjy->bijxy", x, y)
        # add.at, not +=: a block selected twice must receive both products.
        np.add.at(out, (x_idx[:, :, None], y_idx[:, None, :]), products)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True], [True], [False], [False], [True]]

    def grad(self, inputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        o, x, y, x_idx, y_idx, alpha = inputs
        (go,) = output_grads
        # The gradient blocks each (b, i, j) term was added to:
        # (batch, xWin, yWin, xSize, ySize).
        picked = go[x_idx.dimshuffle(0, 1, "x"), y_idx.dimshuffle(0, "x", 1)]
        g_x = alpha * (picked * y.dimshuffle(0, "x", 1, "x", 2)).sum(axis=(2, 4))
        g_y = alpha * (picked * x.dimshuffle(0, 1, "x", 2, "x")).sum(axis=(1, 3))
        g_alpha = (picked * x.dimshuffle(0, 1, "x", 2, "x")
                   * y.dimshuffle(0, "x", 1, "x", 2)).sum()
        return [go, g_x, g_y, disconnected_grad_for(x_idx), disconnected_grad_for(y_idx),
                g_alpha]


def sparse_block_gemv(o, W, h, inputIdx, outputIdx):
    """``SparseBlockGemv()(o, W, h, inputIdx, outputIdx)``."""
    return SparseBlockGemv()(o, W, h, inputIdx, outputIdx)


def sparse_block_outer(o, x, y, xIdx, yIdx, alpha=None):
    """``SparseBlockOuter()(o, x, y, xIdx, yIdx, alpha)``."""
    return SparseBlockOuter()(o, x, y, xIdx, yIdx, alpha)


def sparse_block_dot(W, h, inputIdx, b, outputIdx):
    """The selected blocks of ``h @ W`` plus the output blocks' biases.

    ``W`` ``(iBlocks, oBlocks, iSize, oSize)``; ``h`` ``(batch, iWin,
    iSize)``; ``inputIdx`` ``(batch, iWin)``; ``b`` ``(oBlocks, oSize)``;
    ``outputIdx`` ``(batch, oWin)``.  Returns ``(batch, oWin, oSize)``.  A
    single example may be given without its batch axis (``h`` a matrix, the
    indices vectors); the result then keeps a batch axis of 1, as Theano's.
    """
    h, inputIdx, outputIdx = (as_tensor_variable(v) for v in (h, inputIdx, outputIdx))
    b = as_tensor_variable(b)
    if inputIdx.ndim != h.ndim - 1 or outputIdx.ndim != inputIdx.ndim:
        raise TypeError(f"sparse_block_dot: inputIdx and outputIdx need one dimension less "
                        f"than h ({h.ndim}-d), got {inputIdx.ndim}-d and {outputIdx.ndim}-d")
    if h.ndim == 2:
        h = h.dimshuffle("x", 0, 1)
        inputIdx = inputIdx.dimshuffle("x", 0)
        outputIdx = outputIdx.dimshuffle("x", 0)
    if b.ndim != 2:
        raise TypeError(f"sparse_block_dot: b must be a matrix (oBlocks, oSize), got {b} of "
                        f"type {b.type}")
    return SparseBlockGemv()(b[outputIdx], W, h, inputIdx, outputIdx)
