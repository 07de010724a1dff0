"""Theano's ``tensor.nnet.conv3d2d.conv3d``: 3D convolution in the
(batch, time, channels, rows, cols) layout.

Theano computed it as 2D convolutions summed along a diagonal of the time
axis; the result is the full 3D convolution (filters flipped in time, rows
and columns), which here is ``nnet.conv3d`` between two transposes.  As in
Theano, the time axis is ``'valid'`` only, and rows and columns share one
border mode (``'valid'`` or ``'full'``).
"""

from symgraph.tensor.nnet.abstract_conv import conv3d as _conv3d

__all__ = ["conv3d"]

_TO_NCDHW = (0, 2, 1, 3, 4)


def _static(shape, var, dim):
    size = shape[dim] if shape is not None else var.type.shape[dim]
    if size is None:
        raise NotImplementedError(f"conv3d2d.conv3d: border_mode 'full' needs the filters' "
                                  f"size in dimension {dim}; give filters_shape")
    return int(size)


def conv3d(signals, filters, signals_shape=None, filters_shape=None, border_mode="valid"):
    """Convolve ``signals`` ``(batch, time, in channels, rows, cols)`` with
    ``filters`` ``(out channels, time, in channels, rows, cols)``; the result
    is ``(batch, time out, out channels, rows out, cols out)``.

    ``signals_shape``/``filters_shape``: optional static shapes (5-tuples).
    ``border_mode``: ``'valid'``, or a tuple (time, rows, cols) whose time entry
    is ``'valid'`` and whose rows and cols entries are equal.
    """
    from symgraph.tensor.basic import as_tensor_variable

    signals, filters = as_tensor_variable(signals), as_tensor_variable(filters)
    if signals.ndim != 5 or filters.ndim != 5:
        raise TypeError(f"conv3d2d.conv3d: signals and filters must be 5-d, got "
                        f"{signals.type} and {filters.type}")
    modes = (border_mode,) * 3 if isinstance(border_mode, str) else tuple(border_mode)
    if len(modes) != 3 or modes[1] != modes[2]:
        raise NotImplementedError(f"conv3d2d.conv3d: border_mode {border_mode!r}: rows and "
                                  f"columns must share one mode")
    if modes[0] != "valid":
        raise NotImplementedError(f"conv3d2d.conv3d: the time axis is 'valid' only, as in "
                                  f"Theano, got {modes[0]!r}")
    if modes[1] == "valid":
        mode = "valid"
    elif modes[1] == "full":
        mode = (0, _static(filters_shape, filters, 3) - 1, _static(filters_shape, filters, 4) - 1)
    else:
        raise ValueError(f"conv3d2d.conv3d: border_mode {modes[1]!r}; use 'valid' or 'full'")

    def shape5(shape):
        return None if shape is None else tuple(shape[d] for d in _TO_NCDHW)

    out = _conv3d(signals.dimshuffle(*_TO_NCDHW), filters.dimshuffle(*_TO_NCDHW),
                  input_shape=shape5(signals_shape), filter_shape=shape5(filters_shape),
                  border_mode=mode)
    return out.dimshuffle(*_TO_NCDHW)
