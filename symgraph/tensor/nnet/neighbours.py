"""Theano's ``tensor.nnet.neighbours``: ``images2neibs`` (the patches of a
batch of images, one per row) and ``neibs2images`` (back, for patches that do
not overlap).

Both are compositions of indexing and reshapes, so they are differentiable
and need no op of their own.  Modes: 'valid' (the patches must tile the
image exactly), 'ignore_borders' (incomplete patches dropped), 'half' and
'full' (zero padding of half or all of the patch less one), and
'wrap_centered' (patches centred on each step, wrapping around the edges;
odd patch sizes and a step of (1, 1) only, as in Theano).
"""

from symgraph.ops import math as _m
from symgraph.ops.alloc import arange, zeros
from symgraph.ops.subtensor import set_subtensor
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["images2neibs", "neibs2images"]

_MODES = ("valid", "ignore_borders", "wrap_centered", "half", "full")


def _pair(value, who):
    value = tuple(value)
    if len(value) != 2:
        raise ValueError(f"images2neibs: {who} must have 2 entries, got {value!r}")
    return value


def images2neibs(ten4, neib_shape, neib_step=None, mode="valid"):
    """The patches of ``neib_shape`` taken every ``neib_step`` (default:
    ``neib_shape``) from the last two dimensions of the 4-d ``ten4``, as a
    matrix: one flattened patch per row, ordered by image, channel, patch
    row, patch column."""
    ten4 = as_tensor_variable(ten4)
    if ten4.ndim != 4:
        raise TypeError(f"images2neibs: ten4 must be 4-d, got {ten4.type}")
    if mode not in _MODES:
        raise ValueError(f"images2neibs: mode must be one of {_MODES}, got {mode!r}")
    h, w = _pair(neib_shape, "neib_shape")
    sh, sw = _pair(neib_step if neib_step is not None else neib_shape, "neib_step")
    rows, cols = ten4.shape[2], ten4.shape[3]
    x = ten4
    if mode in ("half", "full"):
        ph, pw = (h // 2, w // 2) if mode == "half" else (h - 1, w - 1)
        padded = zeros((x.shape[0], x.shape[1], rows + 2 * ph, cols + 2 * pw), dtype=x.dtype)
        x = set_subtensor(padded[:, :, ph:ph + rows, pw:pw + cols], x)
        rows, cols = rows + 2 * ph, cols + 2 * pw
    if mode == "wrap_centered":
        if h % 2 == 0 or w % 2 == 0 or (sh, sw) != (1, 1):
            raise NotImplementedError("images2neibs: wrap_centered needs odd patch sizes "
                                      "and a step of (1, 1)")
        n_r, n_c = rows, cols
        r_idx = _m.mod(arange(n_r).dimshuffle(0, "x") + arange(h).dimshuffle("x", 0) - h // 2,
                       rows)
        c_idx = _m.mod(arange(n_c).dimshuffle(0, "x") + arange(w).dimshuffle("x", 0) - w // 2,
                       cols)
    else:
        if mode == "valid":
            from symgraph.ops.assert_op import assert_op

            ok = _m.and_(_m.eq(_m.mod(rows - h, sh), 0), _m.eq(_m.mod(cols - w, sw), 0))
            x = assert_op(x, _m.and_(ok, _m.and_(_m.ge(rows, h), _m.ge(cols, w))),
                          msg="images2neibs: in mode 'valid' the patches must tile the image "
                              "exactly; use mode='ignore_borders'")
        n_r = _m.maximum(_m.int_div(rows - h, sh) + 1, 0)
        n_c = _m.maximum(_m.int_div(cols - w, sw) + 1, 0)
        r_idx = (arange(n_r) * sh).dimshuffle(0, "x") + arange(h).dimshuffle("x", 0)
        c_idx = (arange(n_c) * sw).dimshuffle(0, "x") + arange(w).dimshuffle("x", 0)
    patches = x[:, :, r_idx.dimshuffle(0, "x", 1, "x"), c_idx.dimshuffle("x", 0, "x", 1)]
    return patches.reshape((x.shape[0] * x.shape[1] * n_r * n_c, h * w), ndim=2)


def neibs2images(neibs, neib_shape, original_shape, mode="valid"):
    """The images that ``images2neibs(images, neib_shape)`` (steps equal to the
    patch, mode 'valid' or 'ignore_borders') cut into ``neibs``; with
    'ignore_borders' the rows and columns that no patch covered are zero."""
    neibs = as_tensor_variable(neibs)
    if neibs.ndim != 2:
        raise TypeError(f"neibs2images: neibs must be a matrix, got {neibs.type}")
    if mode not in ("valid", "ignore_borders"):
        raise NotImplementedError(f"neibs2images: mode {mode!r} is not supported; use "
                                  f"'valid' or 'ignore_borders'")
    h, w = _pair(neib_shape, "neib_shape")
    shape = list(original_shape) if isinstance(original_shape, (list, tuple)) else \
        [original_shape[i] for i in range(4)]
    n_r, n_c = _m.int_div(shape[2], h), _m.int_div(shape[3], w)
    blocks = neibs.reshape((shape[0], shape[1], n_r, n_c, h, w), ndim=6)
    image = blocks.dimshuffle(0, 1, 2, 4, 3, 5).reshape(
        (shape[0], shape[1], n_r * h, n_c * w), ndim=4)
    if mode == "valid":
        return image
    full = zeros(shape, dtype=neibs.dtype)
    return set_subtensor(full[:, :, :n_r * h, :n_c * w], image)
