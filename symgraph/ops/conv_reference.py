"""Convolution in NumPy: the reference that every convolution op's ``perform``
and every native algorithm is checked against.

Arrays are ``(N, C, *spatial)`` inputs and ``(K, C / groups, *kernel)``
filters with any number of spatial dimensions.  ``flip`` true is a true
convolution (the filters are flipped along every spatial axis, Theano's
``filter_flip=True``), false a cross-correlation.  ``pads`` are the zeros
added before (and, as the output size implies, after) each spatial dimension;
``resolve_pads`` turns Theano's border modes into them.

The work is one ``einsum`` per filter tap over strided slices of the padded
input, in float64 unless ``dtype`` says otherwise: simple enough to trust,
fast enough for tests.
"""

import numpy as np

__all__ = ["resolve_pads", "conv_output_shape", "conv_forward", "conv_backward_data",
           "conv_backward_filter"]


def resolve_pads(border_mode, kernel_shape, dilation):
    """The zeros added before each spatial dimension for ``border_mode``.

    ``'valid'``: none; ``'full'``: ``dil * (k - 1)``; ``'half'``: half the
    dilated filter, ``(dil * (k - 1) + 1) // 2`` (Theano's rule; it differs from
    ``dil * (k // 2)`` for an even ``k`` with ``dil > 1``); a tuple of ints: those.
    """
    if border_mode == "valid":
        return tuple(0 for _ in kernel_shape)
    if border_mode == "full":
        return tuple(d * (k - 1) for k, d in zip(kernel_shape, dilation))
    if border_mode == "half":
        return tuple((d * (k - 1) + 1) // 2 for k, d in zip(kernel_shape, dilation))
    return tuple(int(p) for p in border_mode)


def _out_len(i, k, stride, dil, pad):
    return (i + 2 * pad - dil * (k - 1) - 1) // stride + 1


def conv_output_shape(x_shape, w_shape, pads, stride, dilation):
    """The output shape ``(N, K, *spatial)`` of a convolution."""
    spatial = tuple(_out_len(i, k, s, d, p) for i, k, s, d, p in
                    zip(x_shape[2:], w_shape[2:], stride, dilation, pads))
    return (x_shape[0], w_shape[0]) + spatial


def _taps(kernel, dilation, stride, outs):
    """Per filter tap, the slices of the padded input it reads."""
    for offs in np.ndindex(*kernel):
        yield offs, tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                          for o, d, s, n in zip(offs, dilation, stride, outs))


def _oriented(w, flip):
    nd = w.ndim - 2
    return w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd] if flip else w


def conv_forward(x, w, pads, stride, dilation, groups=1, flip=True, dtype=np.float64):
    """``y[n, k] = sum_c x[n, c] (*) w[k, c]`` over each group."""
    x = np.asarray(x, dtype=dtype)
    w = _oriented(np.asarray(w, dtype=dtype), flip)
    shape = conv_output_shape(x.shape, w.shape, pads, stride, dilation)
    y = np.zeros(shape, dtype=dtype)
    if 0 in shape:
        return y
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    cg, kg = x.shape[1] // groups, w.shape[0] // groups
    for offs, sl in _taps(w.shape[2:], dilation, stride, shape[2:]):
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            tap = w[(slice(g * kg, (g + 1) * kg), slice(None)) + offs]
            y[:, g * kg:(g + 1) * kg] += np.einsum("nc...,kc->nk...", patch, tap)
    return y


def conv_backward_data(dy, w, x_spatial, pads, stride, dilation, groups=1, flip=True,
                       dtype=np.float64):
    """The gradient with respect to the input (spatial shape ``x_spatial``) of
    ``conv_forward``, given the output gradient ``dy``."""
    dy = np.asarray(dy, dtype=dtype)
    w = _oriented(np.asarray(w, dtype=dtype), flip)
    n, channels = dy.shape[0], w.shape[1] * groups
    padded = (n, channels) + tuple(i + 2 * p for i, p in zip(x_spatial, pads))
    dxp = np.zeros(padded, dtype=dtype)
    cg, kg = w.shape[1], w.shape[0] // groups
    if dy.size and w.size:
        for offs, sl in _taps(w.shape[2:], dilation, stride, dy.shape[2:]):
            for g in range(groups):
                tap = w[(slice(g * kg, (g + 1) * kg), slice(None)) + offs]
                dxp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl] += np.einsum(
                    "nk...,kc->nc...", dy[:, g * kg:(g + 1) * kg], tap)
    inner = tuple(slice(p, p + i) for p, i in zip(pads, x_spatial))
    return np.ascontiguousarray(dxp[(slice(None), slice(None)) + inner])


def conv_backward_filter(x, dy, w_spatial, pads, stride, dilation, groups=1, flip=True,
                         dtype=np.float64):
    """The gradient with respect to the filters (spatial shape ``w_spatial``)
    of ``conv_forward``, given the input ``x`` and the output gradient ``dy``."""
    x = np.asarray(x, dtype=dtype)
    dy = np.asarray(dy, dtype=dtype)
    n, channels = x.shape[:2]
    k = dy.shape[1]
    cg, kg = channels // groups, k // groups
    dw = np.zeros((k, cg) + tuple(w_spatial), dtype=dtype)
    if dw.size and dy.size:
        xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
        for offs, sl in _taps(tuple(w_spatial), dilation, stride, dy.shape[2:]):
            for g in range(groups):
                patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl].reshape(n, cg, -1)
                grad = dy[:, g * kg:(g + 1) * kg].reshape(n, kg, -1)
                dw[(slice(g * kg, (g + 1) * kg), slice(None)) + offs] = np.einsum(
                    "ncs,nks->kc", patch, grad)
    return _oriented(dw, flip).copy() if flip else dw
