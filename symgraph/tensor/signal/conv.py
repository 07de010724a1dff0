"""Theano's ``tensor.signal.conv.conv2d``: the 2D convolution of one image
or a stack of images (2-d or 3-d) with one filter or a stack of filters,
without channels; a reshaping of ``nnet.conv2d``."""

from symgraph.tensor.basic import as_tensor_variable

__all__ = ["conv2d"]


def conv2d(input, filters, image_shape=None, filter_shape=None, border_mode="valid",
           subsample=(1, 1), **kargs):
    """Convolve ``input`` (rows, cols) or (n_images, rows, cols) with
    ``filters`` (rows, cols) or (n_filters, rows, cols).  The result is
    (out_rows, out_cols), (n_images, ...), (n_filters, ...) or
    (n_images, n_filters, out_rows, out_cols): a dimension of the inputs
    that is absent stays absent.  ``border_mode`` 'valid' or 'full'."""
    from symgraph.tensor.nnet.abstract_conv import conv2d as nnet_conv2d

    input, filters = as_tensor_variable(input), as_tensor_variable(filters)
    if input.ndim not in (2, 3) or filters.ndim not in (2, 3):
        raise TypeError(f"signal.conv2d: input and filters must be 2-d or 3-d, got "
                        f"{input.type} and {filters.type}")
    if kargs:
        raise TypeError(f"signal.conv2d: unexpected arguments {sorted(kargs)}")
    images = input.dimshuffle(0, "x", 1, 2) if input.ndim == 3 else \
        input.dimshuffle("x", "x", 0, 1)
    kernels = filters.dimshuffle(0, "x", 1, 2) if filters.ndim == 3 else \
        filters.dimshuffle("x", "x", 0, 1)
    out = nnet_conv2d(images, kernels, border_mode=border_mode, subsample=subsample)
    keep = [d for d, present in ((0, input.ndim == 3), (1, filters.ndim == 3)) if present]
    return out.dimshuffle(keep + [2, 3])
