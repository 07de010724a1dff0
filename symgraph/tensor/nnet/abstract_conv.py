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
from symgraph.ops.conv import _border_mode, _pads_1axis, _per_axis
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


# ---------------------------------------------------------------------------
# Theano's internals: the base class, the gradient ops and shape helpers

#: Theano's names of the base class and of the gradient ops with ``convdim``
#: as their first argument (symgraph's classes, not copies).
from symgraph.ops.conv import BaseAbstractConv  # noqa: E402

AbstractConv_gradWeights = AbstractConvGradWeights
AbstractConv_gradInputs = AbstractConvGradInputs


def get_conv_gradweights_shape_1axis(image_shape, top_shape, border_mode, subsample,
                                     dilation):
    """The kernel size along one axis that an image size and an output size
    imply, or None when an argument is None or the answer is ambiguous
    (``subsample != 1``; ``'half'``, whose pads depend on the kernel)."""
    if any(v is None for v in (image_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if subsample != 1 or border_mode == "half":
        return None
    if border_mode == "full":
        # top = image + dilated kernel - 1
        span = top_shape - image_shape
    else:
        before, after, _ = _pads_1axis(border_mode, 1, dilation)
        span = image_shape + before + after - top_shape
    if _negative_int(span) or (_known_int(span) and _known_int(dilation) and span % dilation):
        raise ValueError(f"get_conv_gradweights_shape_1axis: no kernel gives an output of "
                         f"{top_shape} from an input of {image_shape} (border_mode="
                         f"{border_mode!r}, dilation={dilation})")
    return span // dilation + 1


def get_conv_gradinputs_shape_1axis(kernel_shape, top_shape, border_mode, subsample,
                                    dilation):
    """The image size along one axis that a kernel size and an output size
    imply, or None when an argument is None or ``subsample != 1`` (then
    several image sizes give the same output)."""
    if any(v is None for v in (kernel_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if subsample != 1:
        return None
    before, after, dil_kernel = _pads_1axis(border_mode, kernel_shape, dilation)
    return top_shape + dil_kernel - 1 - before - after


def check_conv_gradinputs_shape(image_shape, kernel_shape, output_shape, border_mode,
                                subsample, filter_dilation=None):
    """Whether a convolution of an image of ``image_shape`` by filters of
    ``kernel_shape`` gives ``output_shape`` (full shapes; a None or a
    non-constant symbolic entry is taken to agree).  Used to check the
    ``input_shape`` given to a transposed convolution."""
    image_shape, kernel_shape, output_shape = (tuple(s) for s in (image_shape, kernel_shape,
                                                                  output_shape))
    if not len(image_shape) == len(kernel_shape) == len(output_shape):
        raise ValueError(f"check_conv_gradinputs_shape: the shapes must have the same "
                         f"length, got {image_shape}, {kernel_shape} and {output_shape}")
    convdim = len(image_shape) - 2
    border_mode = _border_mode(border_mode, convdim, "check_conv_gradinputs_shape")
    computed = get_conv_output_shape(image_shape, kernel_shape, border_mode, subsample,
                                     filter_dilation)
    for given, found in zip(output_shape, computed):
        given, found = _as_known(given), _as_known(found)
        if given is not None and found is not None and given != found:
            return False
    return True


def assert_conv_shape(shape):
    """``shape`` (the entries of a convolution's output shape), checked: the
    first two entries must be >= 0 and the spatial ones > 0.  Known ints are
    checked now (ValueError); symbolic entries are wrapped in an Assert that
    checks them at run time.  Returns a tuple."""
    from symgraph.ops.assert_op import Assert
    from symgraph.ops.math import ge, gt

    out = []
    for i, entry in enumerate(shape):
        spatial = i >= 2
        known = _as_known(entry)
        if known is not None:
            if known < 0 or (spatial and known == 0):
                raise ValueError(f"The convolution would produce an invalid shape (dim[{i}]: "
                                 f"{known} {'<=' if spatial else '<'} 0).")
            out.append(entry)
            continue
        entry = as_tensor_variable(entry)
        check = Assert(f"The convolution would produce an invalid shape (dim[{i}] "
                       f"{'<=' if spatial else '<'} 0).")
        out.append(check(entry, gt(entry, 0) if spatial else ge(entry, 0)))
    return tuple(out)


def assert_shape(x, expected_shape, msg="Unexpected shape."):
    """``x``, with a run-time check that its shape is ``expected_shape``
    (None entries are not checked): an AssertionError with ``msg``
    otherwise.  Only when the flag ``conv.assert_shape`` is True (its default
    is False, as in Theano); else ``x`` is returned unchanged."""
    from symgraph.config import config
    from symgraph.ops.assert_op import Assert
    from symgraph.ops.math import eq

    x = as_tensor_variable(x)
    if not config.conv.assert_shape:
        return x
    if len(expected_shape) != x.ndim:
        raise ValueError(f"assert_shape: {x} has {x.ndim} dimensions but the expected shape "
                         f"{tuple(expected_shape)} has {len(expected_shape)}")
    tests = [eq(x.shape[i], e) for i, e in enumerate(expected_shape) if e is not None]
    return Assert(msg)(x, *tests) if tests else x


def border_mode_to_pad(mode, convdim, kshp):
    """The padding of a border mode as ``convdim`` pairs ``(before, after)``:
    ``'valid'``, ``'full'`` (kernel - 1), ``'half'`` (kernel // 2), an int, or
    a tuple with an int or an ``(before, after)`` pair per axis.  ``kshp``:
    the kernel's spatial sizes (used by ``'full'`` and ``'half'``)."""
    if isinstance(mode, str):
        if mode not in ("valid", "full", "half"):
            raise ValueError(f"border_mode_to_pad: invalid border mode {mode!r}")
        return tuple(_pads_1axis(mode, int(kshp[i]), 1)[:2] for i in range(convdim))
    if _known_int(mode):
        mode = (mode,) * convdim
    if not isinstance(mode, (tuple, list)) or len(mode) != convdim:
        raise ValueError(f"border_mode_to_pad: border mode {mode!r} must be a string, an int "
                         f"or a tuple of {convdim} entries")
    pads = []
    for m in mode:
        pair = tuple(m) if isinstance(m, (tuple, list)) else (m, m)
        if len(pair) != 2 or not all(_known_int(p) and p >= 0 for p in pair):
            raise ValueError(f"border_mode_to_pad: border mode {mode!r} must hold "
                             f"non-negative ints or pairs of them")
        pads.append(tuple(int(p) for p in pair))
    return tuple(pads)


def _known_int(value):
    import numbers

    import numpy as np

    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def _negative_int(value):
    return _known_int(value) and value < 0


def _as_known(value):
    """An int, or None for None and for a symbolic value that is not constant."""
    if value is None or _known_int(value):
        return value
    return constant_int(value) if isinstance(value, Variable) else int(value)


# ---------------------------------------------------------------------------
# Bilinear upsampling


def bilinear_kernel_1D(ratio, normalize=True):
    """The 1D kernel of bilinear upsampling by ``ratio`` (an int or an int
    scalar): the triangle ``1, 2, ..., ratio, ..., 2, 1`` (length ``2 ratio -
    1``), divided by ``ratio`` when ``normalize``; dtype ``floatX``."""
    from symgraph.config import config
    from symgraph.ops.alloc import arange
    from symgraph.ops.join import concatenate
    from symgraph.ops.math import cast

    rising = arange(1, ratio + 1, dtype=config.floatX)
    kern = concatenate([rising, rising[-2::-1]])
    if normalize:
        kern = kern / cast(as_tensor_variable(ratio), config.floatX)
    return kern


def bilinear_kernel_2D(ratio, normalize=True):
    """The 2D kernel of bilinear upsampling: the outer product of the rows'
    and the columns' 1D kernels.  ``ratio``: one int for both axes, or a
    pair ``(rows, cols)``."""
    rows, cols = ratio if isinstance(ratio, tuple) else (ratio, ratio)
    vertical = bilinear_kernel_1D(rows, normalize).dimshuffle(0, "x")
    horizontal = bilinear_kernel_1D(cols, normalize).dimshuffle("x", 0)
    return vertical * horizontal


def _interpolate_axis(x, axis, up, down, out_len):
    """Bilinear resampling along ``axis``: output ``o`` reads the input at
    coordinate ``(o * down - (up - 1) // 2) / up``, the edges repeated
    beyond the ends.  This is where Theano's transposed convolution by the
    triangle kernel (over the input with its edges repeated once) puts its
    samples, so the two agree, the asymmetry for even ratios included."""
    from symgraph.config import config
    from symgraph.ops.alloc import arange
    from symgraph.ops.math import cast, clip

    size = x.shape[axis]
    numer = arange(out_len) * down - (up - 1) // 2
    low = numer // up
    weight = cast(numer - low * up, config.floatX) / cast(as_tensor_variable(up),
                                                          config.floatX)
    first = clip(low, 0, size - 1)
    second = clip(low + 1, 0, size - 1)
    index = (slice(None),) * axis
    pattern = ["x"] * x.ndim
    pattern[axis] = 0
    weight = weight.dimshuffle(pattern)
    return x[index + (first,)] * (1 - weight) + x[index + (second,)] * weight


def _reduced_fraction(pair, who):
    from math import gcd

    if not (isinstance(pair, tuple) and len(pair) == 2 and all(_known_int(v) and v > 0
                                                               for v in pair)):
        raise ValueError(f"{who}: a fractional ratio must be a pair (numerator, "
                         f"denominator) of positive ints, got {pair!r}")
    div = gcd(int(pair[0]), int(pair[1]))
    return int(pair[0]) // div, int(pair[1]) // div


def frac_bilinear_upsampling(input, frac_ratio):
    """Bilinear upsampling of a 4D ``(batch, channels, rows, cols)`` tensor by
    a fractional ratio: ``frac_ratio`` is one ``(numerator, denominator)``
    pair for both axes or a pair of such pairs ``(rows, cols)``.  An axis of
    ``n`` entries and reduced ratio ``p / q`` becomes ``(n p - 1) // q + 1``
    entries (Theano's sizes and sample positions)."""
    who = "frac_bilinear_upsampling"
    x = as_tensor_variable(input)
    if x.ndim != 4:
        raise TypeError(f"{who}: input must be a 4D tensor (batch, channels, rows, cols), "
                        f"got {x} of type {x.type}")
    if not isinstance(frac_ratio, tuple):
        raise ValueError(f"{who}: frac_ratio must be a tuple, got {frac_ratio!r}")
    if isinstance(frac_ratio[0], tuple):
        if len(frac_ratio) != 2:
            raise ValueError(f"{who}: frac_ratio must hold one pair per axis (rows, cols), "
                             f"got {frac_ratio!r}")
        ratios = [_reduced_fraction(fr, who) for fr in frac_ratio]
    else:
        ratios = [_reduced_fraction(frac_ratio, who)] * 2
    out = x
    for axis, (up, down) in zip((2, 3), ratios):
        length = (x.shape[axis] * up - 1) // down + 1
        out = _interpolate_axis(out, axis, up, down, length)
    return out


def bilinear_upsampling(input, ratio=None, frac_ratio=None, batch_size=None,
                        num_input_channels=None, use_1D_kernel=True):
    """Bilinear upsampling of a 4D ``(batch, channels, rows, cols)`` tensor:
    by the int ``ratio`` (an int or an int scalar, possibly symbolic) the
    result is ``(batch, channels, rows * ratio, cols * ratio)``; or by
    ``frac_ratio`` (see ``frac_bilinear_upsampling``, which needs
    ``use_1D_kernel=False``, as in Theano).  The edges are repeated beyond the
    ends; for an even ratio the last row and column are repeated once more
    than the first (Theano's asymmetry, kept).  ``batch_size``,
    ``num_input_channels`` and ``use_1D_kernel`` (same values either way)
    are accepted for Theano's signature."""
    who = "bilinear_upsampling"
    if ratio is not None and frac_ratio is not None:
        raise ValueError(f"{who}: can't use ratio and frac_ratio together")
    if ratio is None and frac_ratio is None:
        raise ValueError(f"{who}: no ratio (or frac_ratio) provided")
    if frac_ratio is not None:
        if use_1D_kernel:
            raise ValueError(f"{who}: fractional ratios need use_1D_kernel=False")
        return frac_bilinear_upsampling(input, frac_ratio)
    x = as_tensor_variable(input)
    if x.ndim != 4:
        raise TypeError(f"{who}: input must be a 4D tensor (batch, channels, rows, cols), "
                        f"got {x} of type {x.type}")
    known = _as_known(ratio)
    if known is not None and known < 1:
        raise ValueError(f"{who}: ratio must be a positive int, got {ratio!r}")
    if known is None:
        ratio = as_tensor_variable(ratio)
        if ratio.ndim != 0 or not ratio.dtype.startswith(("int", "uint")):
            raise TypeError(f"{who}: ratio must be an int or an int scalar, got {ratio} of "
                            f"type {ratio.type}")
    else:
        ratio = known
    out = x
    for axis in (2, 3):
        out = _interpolate_axis(out, axis, ratio, 1, x.shape[axis] * ratio)
    return out


__all__ += ["BaseAbstractConv", "AbstractConv_gradWeights", "AbstractConv_gradInputs",
            "get_conv_gradweights_shape_1axis", "get_conv_gradinputs_shape_1axis",
            "check_conv_gradinputs_shape", "assert_conv_shape", "assert_shape",
            "border_mode_to_pad", "bilinear_kernel_1D", "bilinear_kernel_2D",
            "bilinear_upsampling", "frac_bilinear_upsampling"]
