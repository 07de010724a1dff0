"""Theano's convolution variants of ``nnet.abstract_conv``, composed from
``conv2d``/``conv3d``: ``separable_conv2d``, ``separable_conv3d`` (a
depthwise convolution, one group per input channel, then a 1x1 pointwise one)
and ``causal_conv1d`` (each output step sees only the input up to it)."""

__all__ = ["separable_conv2d", "separable_conv3d", "causal_conv1d"]


def _separable(conv, ndim, input, depthwise_filters, pointwise_filters, num_channels,
               input_shape, depthwise_filter_shape, pointwise_filter_shape, border_mode,
               subsample, filter_flip, filter_dilation):
    depthwise = conv(input, depthwise_filters, input_shape=input_shape,
                     filter_shape=depthwise_filter_shape, border_mode=border_mode,
                     subsample=subsample, filter_flip=filter_flip,
                     filter_dilation=filter_dilation, num_groups=num_channels)
    return conv(depthwise, pointwise_filters, filter_shape=pointwise_filter_shape,
                border_mode="valid", subsample=(1,) * ndim, filter_flip=filter_flip,
                filter_dilation=(1,) * ndim)


def separable_conv2d(input, depthwise_filters, pointwise_filters, num_channels,
                     input_shape=None, depthwise_filter_shape=None,
                     pointwise_filter_shape=None, border_mode="valid", subsample=(1, 1),
                     filter_flip=True, filter_dilation=(1, 1)):
    """Depthwise then pointwise 2D convolution (Theano's signature).

    ``depthwise_filters`` ``(num_channels * multiplier, 1, rows, cols)`` convolve
    each input channel separately (the border, stride and dilation apply here);
    ``pointwise_filters`` ``(out channels, num_channels * multiplier, 1, 1)``
    mix the channels.
    """
    from symgraph.tensor.nnet.abstract_conv import conv2d

    return _separable(conv2d, 2, input, depthwise_filters, pointwise_filters, num_channels,
                      input_shape, depthwise_filter_shape, pointwise_filter_shape,
                      border_mode, subsample, filter_flip, filter_dilation)


def separable_conv3d(input, depthwise_filters, pointwise_filters, num_channels,
                     input_shape=None, depthwise_filter_shape=None,
                     pointwise_filter_shape=None, border_mode="valid", subsample=(1, 1, 1),
                     filter_flip=True, filter_dilation=(1, 1, 1)):
    """``separable_conv2d`` for volumes (5-d inputs and filters)."""
    from symgraph.tensor.nnet.abstract_conv import conv3d

    return _separable(conv3d, 3, input, depthwise_filters, pointwise_filters, num_channels,
                      input_shape, depthwise_filter_shape, pointwise_filter_shape,
                      border_mode, subsample, filter_flip, filter_dilation)


def causal_conv1d(input, filters, filter_shape, input_shape=None, subsample=1,
                  filter_flip=True, filter_dilation=1, num_groups=1, unshared=False):
    """1D convolution of ``input`` ``(batch, channels, time)`` with ``filters``
    ``(out channels, channels / num_groups, width)`` padded on the left only, so
    that output step t depends on input steps <= t (Theano's signature;
    ``filter_shape[2]``, the width, must be an int)."""
    from symgraph.ops.join import concatenate
    from symgraph.ops.alloc import zeros
    from symgraph.tensor.basic import as_tensor_variable
    from symgraph.tensor.nnet.abstract_conv import conv2d

    if unshared:
        raise NotImplementedError("causal_conv1d: unshared filters are not supported")
    input, filters = as_tensor_variable(input), as_tensor_variable(filters)
    if input.ndim != 3 or filters.ndim != 3:
        raise ValueError(f"causal_conv1d: input and filters must be 3-d (batch, channels, "
                         f"time), got {input.type} and {filters.type}")
    left = int(filter_dilation) * (int(filter_shape[2]) - 1)
    if left:
        pad = zeros((input.shape[0], input.shape[1], left), dtype=input.dtype)
        input = concatenate([pad, input], axis=2)
    if input_shape is not None:
        input_shape = tuple(input_shape[:2]) + (
            None if input_shape[2] is None else input_shape[2] + left, 1)
    out = conv2d(input.dimshuffle(0, 1, 2, "x"), filters.dimshuffle(0, 1, 2, "x"),
                 input_shape=input_shape, filter_shape=tuple(filter_shape) + (1,),
                 border_mode="valid", subsample=(int(subsample), 1), filter_flip=filter_flip,
                 filter_dilation=(int(filter_dilation), 1), num_groups=num_groups)
    return out[:, :, :, 0]
