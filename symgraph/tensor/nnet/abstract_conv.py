"""Theano's ``tensor.nnet.abstract_conv``: convolutions and their gradients.

``conv2d``/``conv3d`` build the abstract convolution op
(``symgraph.ops.conv.AbstractConv``); ``conv2d_grad_wrt_inputs`` and
``conv2d_grad_wrt_weights`` (and the 3D pair) build its gradients directly,
as Theano's did (a transposed convolution is ``conv2d_grad_wrt_inputs``).
The compiled graph replaces them by concrete ops whose algorithm and precision
come from the ``dnn.conv.*`` flags.

Layouts: inputs ``(batch, channels, *spatial)``, filters ``(filters,
channels / num_groups, *kernel)``.  ``border_mode``: ``'valid'`` (no
padding), ``'full'`` (every partial overlap), ``'half'`` (half the dilated
filter: the output keeps the input's size for odd filters and stride 1), an
int (the same pad on every axis) or a tuple of pads, one per axis.
``filter_flip=True`` is a true convolution (Theano's default), False a
cross-correlation (what most deep-learning libraries call convolution).
``input_shape``/``filter_shape`` are optional hints (ints or None per
dimension): they fill in static shapes and are checked against the real
shapes at run time.
"""

import warnings

from symgraph.graph.basic import Variable
from symgraph.ops.conv import (AbstractConv, AbstractConv2d, AbstractConv2d_gradInputs,
                               AbstractConv2d_gradWeights, AbstractConv3d,
                               AbstractConv3d_gradInputs, AbstractConv3d_gradWeights,
                               AbstractConvGradInputs, AbstractConvGradWeights,
                               get_conv_output_shape, get_conv_shape_1axis)
from symgraph.ops.conv import _pads_1axis, _per_axis
from symgraph.ops.shape import constant_int
from symgraph.tensor.basic import as_tensor_variable

__all__ = ["conv2d", "conv3d", "conv2d_grad_wrt_inputs", "conv2d_grad_wrt_weights",
           "conv2d_transpose",
           "conv3d_grad_wrt_inputs", "conv3d_grad_wrt_weights", "get_conv_output_shape",
           "get_conv_shape_1axis", "get_conv_gradweights_shape", "get_conv_gradinputs_shape",
           "AbstractConv", "AbstractConvGradInputs", "AbstractConvGradWeights",
           "AbstractConv2d", "AbstractConv3d", "AbstractConv2d_gradInputs",
           "AbstractConv3d_gradInputs", "AbstractConv2d_gradWeights",
           "AbstractConv3d_gradWeights"]


def _conv(convdim, input, filters, input_shape, filter_shape, border_mode, subsample,
          filter_flip, filter_dilation, num_groups, unshared):
    op = AbstractConv(convdim, imshp=input_shape, kshp=filter_shape, border_mode=border_mode,
                      subsample=subsample, filter_flip=filter_flip,
                      filter_dilation=filter_dilation, num_groups=num_groups,
                      unshared=unshared)
    return op(as_tensor_variable(input), as_tensor_variable(filters))


def conv2d(input, filters, input_shape=None, filter_shape=None, border_mode="valid",
           subsample=(1, 1), filter_flip=True, image_shape=None, filter_dilation=(1, 1),
           num_groups=1, unshared=False):
    """The 2D convolution of a batch of images with a set of filters.

    ``input`` ``(batch, channels, rows, cols)``; ``filters`` ``(n_filters,
    channels / num_groups, rows, cols)``; returns ``(batch, n_filters,
    out_rows, out_cols)`` (see ``get_conv_output_shape``).  ``subsample``:
    the strides; ``filter_dilation``: the spacing of the filter taps;
    ``num_groups``: channel groups, each seeing its own filters.
    ``image_shape`` is Theano's deprecated name of ``input_shape``.
    ``unshared`` (a filter per output position) is not supported.
    """
    if image_shape is not None:
        warnings.warn("conv2d: image_shape is deprecated; use input_shape",
                      DeprecationWarning, stacklevel=2)
        if input_shape is not None:
            raise ValueError("conv2d: give input_shape or image_shape, not both")
        input_shape = image_shape
    return _conv(2, input, filters, input_shape, filter_shape, border_mode, subsample,
                 filter_flip, filter_dilation, num_groups, unshared)


def conv3d(input, filters, input_shape=None, filter_shape=None, border_mode="valid",
           subsample=(1, 1, 1), filter_flip=True, filter_dilation=(1, 1, 1), num_groups=1):
    """The 3D convolution of a batch of volumes with a set of filters.

    ``input`` ``(batch, channels, depth, rows, cols)``; ``filters``
    ``(n_filters, channels / num_groups, depth, rows, cols)``; the other
    arguments as ``conv2d``'s, with three entries per tuple.
    """
    return _conv(3, input, filters, input_shape, filter_shape, border_mode, subsample,
                 filter_flip, filter_dilation, num_groups, False)


# ---------------------------------------------------------------------------
# Shapes of the gradients (Theano's helpers)


def get_conv_gradweights_shape(image_shape, top_shape, border_mode, subsample,
                               filter_dilation=None, num_groups=1):
    """The filters' shape ``(K, C / num_groups, *kernel)`` that an image and an
    output gradient imply (None where unknown or ambiguous: ``subsample > 1``,
    or ``'half'``, whose pads depend on the kernel size)."""
    convdim = len(image_shape) - 2
    dilation = filter_dilation or (1,) * convdim
    channels = None if image_shape[1] is None else image_shape[1] // num_groups
    kernel = []
    for i, mode in enumerate(_per_axis(border_mode, convdim)):
        i_len, o_len, d = image_shape[2 + i], top_shape[2 + i], dilation[i]
        if i_len is None or o_len is None or subsample[i] != 1 or mode == "half":
            kernel.append(None)
        elif mode == "full":
            kernel.append((o_len - i_len) // d + 1)  # o = i + dilated k - 1
        else:
            before, after, _ = _pads_1axis(mode, 1, d)
            kernel.append((i_len + before + after - o_len) // d + 1)
    return (top_shape[1], channels) + tuple(kernel)


def get_conv_gradinputs_shape(kernel_shape, top_shape, border_mode, subsample,
                              filter_dilation=None, num_groups=1):
    """The image shape ``(N, C, *spatial)`` that filters and an output gradient
    imply (None where unknown or ambiguous: ``subsample > 1``)."""
    convdim = len(kernel_shape) - 2
    dilation = filter_dilation or (1,) * convdim
    channels = None if kernel_shape[1] is None else kernel_shape[1] * num_groups
    spatial = []
    for i, mode in enumerate(_per_axis(border_mode, convdim)):
        k_len, o_len = kernel_shape[2 + i], top_shape[2 + i]
        if k_len is None or o_len is None or subsample[i] != 1:
            spatial.append(None)
            continue
        before, after, dil_kernel = _pads_1axis(mode, k_len, dilation[i])
        spatial.append(o_len - 1 + dil_kernel - before - after)
    return (top_shape[0], channels) + tuple(spatial)


# ---------------------------------------------------------------------------
# The gradients as functions


def _full_shape(shape, convdim, name, who):
    """A full shape argument (a sequence or a symbolic int vector) as
    ``(hint, spatial)``: the hint holds the ints known when the graph is built
    (None elsewhere); ``spatial`` the last ``convdim`` entries, which must be
    given."""
    if isinstance(shape, Variable) or hasattr(shape, "ndim"):
        vec = as_tensor_variable(shape)
        if vec.ndim != 1 or vec.type.shape[0] not in (None, convdim + 2):
            raise ValueError(f"{who}: {name} must have {convdim + 2} entries, got {vec.type}")
        entries = [vec[i] for i in range(convdim + 2)]
    elif isinstance(shape, (tuple, list)):
        entries = list(shape)
    else:
        raise TypeError(f"{who}: {name} must be a tuple of {convdim + 2} sizes, got "
                        f"{shape!r}")
    if len(entries) != convdim + 2:
        raise ValueError(f"{who}: {name} must have {convdim + 2} entries, got {shape!r}")
    if any(e is None for e in entries[2:]):
        raise ValueError(f"{who}: the spatial sizes of {name} must be given, got {shape!r}")
    hint = tuple(None if e is None else constant_int(e) for e in entries)
    return hint, entries[2:]


def _grad_inputs(convdim, who, output_grad, filters, input_shape, filter_shape, border_mode,
                 subsample, filter_flip, filter_dilation, num_groups, unshared):
    hint, spatial = _full_shape(input_shape, convdim, "input_shape", who)
    op = AbstractConvGradInputs(convdim, imshp=hint, kshp=filter_shape,
                                border_mode=border_mode, subsample=subsample,
                                filter_flip=filter_flip, filter_dilation=filter_dilation,
                                num_groups=num_groups, unshared=unshared)
    return op(as_tensor_variable(filters), as_tensor_variable(output_grad), spatial)


def _grad_weights(convdim, who, input, output_grad, filter_shape, input_shape, border_mode,
                  subsample, filter_flip, filter_dilation, num_groups, unshared):
    hint, spatial = _full_shape(filter_shape, convdim, "filter_shape", who)
    op = AbstractConvGradWeights(convdim, imshp=input_shape, kshp=hint,
                                 border_mode=border_mode, subsample=subsample,
                                 filter_flip=filter_flip, filter_dilation=filter_dilation,
                                 num_groups=num_groups, unshared=unshared)
    return op(as_tensor_variable(input), as_tensor_variable(output_grad), spatial)


def conv2d_grad_wrt_inputs(output_grad, filters, input_shape, filter_shape=None,
                           border_mode="valid", subsample=(1, 1), filter_flip=True,
                           filter_dilation=(1, 1), num_groups=1, unshared=False):
    """The gradient of ``conv2d(input, filters, ...)`` with respect to
    ``input``, given the gradient ``output_grad`` of its output: a transposed
    convolution.

    ``input_shape`` ``(batch, channels, rows, cols)``: a tuple (ints, int
    scalars, or None for the first two) or an int vector; the spatial sizes
    must be given, since with strides several input sizes give one output
    size.  The other arguments as ``conv2d``'s.
    """
    return _grad_inputs(2, "conv2d_grad_wrt_inputs", output_grad, filters, input_shape,
                        filter_shape, border_mode, subsample, filter_flip, filter_dilation,
                        num_groups, unshared)


def conv2d_grad_wrt_weights(input, output_grad, filter_shape, input_shape=None,
                            border_mode="valid", subsample=(1, 1), filter_flip=True,
                            filter_dilation=(1, 1), num_groups=1, unshared=False):
    """The gradient of ``conv2d(input, filters, ...)`` with respect to
    ``filters``, given the gradient ``output_grad`` of its output.

    ``filter_shape`` ``(n_filters, channels / num_groups, rows, cols)``: a
    tuple (ints, int scalars, or None for the first two) or an int vector;
    the spatial sizes must be given.  The other arguments as ``conv2d``'s.
    """
    return _grad_weights(2, "conv2d_grad_wrt_weights", input, output_grad, filter_shape,
                         input_shape, border_mode, subsample, filter_flip, filter_dilation,
                         num_groups, unshared)


def conv2d_transpose(input, filters, output_shape, filter_shape=None, border_mode="valid",
                     input_dilation=(1, 1), filter_flip=True, filter_dilation=(1, 1),
                     num_groups=1, unshared=False):
    """The transposed 2D convolution (a "deconvolution"): the gradient of a
    ``conv2d`` with respect to its input, applied to ``input``.

    ``filters`` ``(input channels, output channels, rows, cols)``: the
    channels in the reverse order of ``conv2d``'s.  ``output_shape`` ``(batch,
    channels, rows, cols)``; its spatial sizes are required (ints or int
    scalars).  ``border_mode``, ``filter_flip`` and ``filter_dilation`` are
    those of the forward convolution (its padding crops this output);
    ``input_dilation`` is the forward convolution's ``subsample``.
    """
    return _grad_inputs(2, "conv2d_transpose", input, filters, output_shape, filter_shape,
                        border_mode, input_dilation, filter_flip, filter_dilation, num_groups,
                        unshared)


def conv3d_grad_wrt_inputs(output_grad, filters, input_shape, filter_shape=None,
                           border_mode="valid", subsample=(1, 1, 1), filter_flip=True,
                           filter_dilation=(1, 1, 1), num_groups=1):
    """``conv2d_grad_wrt_inputs`` for ``conv3d``: 5-d tensors and shapes."""
    return _grad_inputs(3, "conv3d_grad_wrt_inputs", output_grad, filters, input_shape,
                        filter_shape, border_mode, subsample, filter_flip, filter_dilation,
                        num_groups, False)


def conv3d_grad_wrt_weights(input, output_grad, filter_shape, input_shape=None,
                            border_mode="valid", subsample=(1, 1, 1), filter_flip=True,
                            filter_dilation=(1, 1, 1), num_groups=1):
    """``conv2d_grad_wrt_weights`` for ``conv3d``: 5-d tensors and shapes."""
    return _grad_weights(3, "conv3d_grad_wrt_weights", input, output_grad, filter_shape,
                         input_shape, border_mode, subsample, filter_flip, filter_dilation,
                         num_groups, False)


from symgraph.tensor.nnet.conv_variants import (  # noqa: E402,F401  (Theano's path)
    causal_conv1d, separable_conv2d, separable_conv3d)

__all__ += ["causal_conv1d", "separable_conv2d", "separable_conv3d"]
