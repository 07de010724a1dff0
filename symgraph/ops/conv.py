"""Abstract convolution ops: ``AbstractConv``, ``AbstractConvGradInputs`` and
``AbstractConvGradWeights`` (Theano's ``theano.tensor.nnet.abstract_conv``).

The three ops are the user-facing form of a convolution and of its two
gradients, with ``convdim`` (2 or 3) spatial dimensions:

* ``AbstractConv(img, kern)``: ``img`` ``(N, C, *spatial)``, ``kern``
  ``(K, C / num_groups, *kernel)``, output ``(N, K, *out)``;
* ``AbstractConvGradInputs(kern, topgrad, shape)``: the gradient with respect
  to ``img``, whose spatial shape ``shape`` (an int vector) is given because
  several input sizes give one output size when ``subsample > 1``;
* ``AbstractConvGradWeights(img, topgrad, shape)``: the gradient with respect
  to ``kern``, of spatial shape ``shape``.

They say *what* to compute, not how: ``perform`` is the NumPy reference
(``ops/conv_reference.py``, in float64, cast to the output dtype), and the
rewrites of ``opt/conv_concrete.py`` replace them by concrete ops that carry an
algorithm and a precision.  Being separate ops is what lets the backward flags
(``dnn.conv.algo_bwd_*``) choose for the gradients.

Parameters (``__props__``), normalized so that equal convolutions merge:
``border_mode`` is ``'valid'``, ``'full'``, ``'half'`` (half the dilated
filter: ``(dil * (k - 1) + 1) // 2``, Theano's rule) or a tuple of ``convdim``
non-negative pads; ``subsample`` and ``filter_dilation`` are tuples of
positive ints; ``filter_flip`` true is a true convolution (filters flipped),
false a cross-correlation; ``imshp``/``kshp`` are optional shape hints (ints
or None per dimension, None when nothing is known), checked at build time
against static shapes and at run time (through ``specify_shape`` on the
inputs, so that the check survives the rewrite to a concrete op).

Theano's class names are kept as aliases: ``AbstractConv2d(...)`` builds an
``AbstractConv`` with ``convdim=2`` (the same class, so the rewrites and the
merge of equal nodes see one op), and ``isinstance(op, AbstractConv2d)`` is
true for exactly those.
"""

import numbers

import numpy as np

from symgraph.graph.basic import Apply, Constant, Op, Variable
from symgraph.ops import conv_reference as ref
from symgraph.tensor.basic import as_tensor_variable, constant
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType, upcast

__all__ = ["AbstractConv", "AbstractConvGradInputs", "AbstractConvGradWeights",
           "AbstractConv2d", "AbstractConv3d", "AbstractConv2d_gradInputs",
           "AbstractConv3d_gradInputs", "AbstractConv2d_gradWeights",
           "AbstractConv3d_gradWeights", "get_conv_shape_1axis", "get_conv_output_shape"]

BORDER_MODES = ("valid", "full", "half")


# ---------------------------------------------------------------------------
# Output shapes (Theano's helpers; they work on ints and on symbolic scalars)


def _pads_1axis(border_mode, kernel_shape, dilation):
    """``(pad before, pad after, dilated kernel size)`` along one axis."""
    dil_kernel = (kernel_shape - 1) * dilation + 1
    if border_mode == "half":
        return dil_kernel // 2, dil_kernel // 2, dil_kernel
    if border_mode == "full":
        return dil_kernel - 1, dil_kernel - 1, dil_kernel
    if border_mode == "valid":
        return 0, 0, dil_kernel
    before, after = border_mode if isinstance(border_mode, tuple) else (border_mode,) * 2
    if any(_is_int(p) and p < 0 for p in (before, after)):
        raise ValueError(f"border_mode {border_mode!r} has a negative pad")
    return before, after, dil_kernel


def _per_axis(border_mode, convdim):
    """One border mode per spatial axis."""
    return border_mode if isinstance(border_mode, tuple) else (border_mode,) * convdim


def get_conv_shape_1axis(image_shape, kernel_shape, border_mode, subsample, dilation=1):
    """The output size along one axis, or None when an argument is None.

    ``border_mode`` is ``'valid'``, ``'full'``, ``'half'``, a pad, or a pair
    ``(before, after)`` of pads.  Works on ints and on int scalar variables.
    """
    if any(v is None for v in (image_shape, kernel_shape, border_mode, subsample, dilation)):
        return None
    before, after, dil_kernel = _pads_1axis(border_mode, kernel_shape, dilation)
    span = image_shape + before + after - dil_kernel
    if not (_is_int(subsample) and subsample == 1):
        span = span // subsample
    return span + 1


def get_conv_output_shape(image_shape, kernel_shape, border_mode, subsample,
                          filter_dilation=None):
    """The output shape ``(N, K, *out)`` of a convolution (None where unknown).

    ``image_shape`` ``(N, C, *spatial)``, ``kernel_shape`` ``(K, C', *kernel)``;
    ``border_mode`` one mode for every axis or a tuple with one per axis.
    """
    convdim = len(image_shape) - 2
    dilation = filter_dilation or (1,) * convdim
    kernel = tuple(kernel_shape[-convdim:])
    out = tuple(get_conv_shape_1axis(image_shape[2 + i], kernel[i], mode, subsample[i],
                                     dilation[i])
                for i, mode in enumerate(_per_axis(border_mode, convdim)))
    return (image_shape[0], kernel_shape[0]) + out


# ---------------------------------------------------------------------------
# Parameter normalization


def _is_int(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def _int_tuple(value, convdim, name, who, minimum):
    """``value`` (a sequence of ``convdim`` ints >= ``minimum``) as a tuple."""
    if not isinstance(value, (tuple, list)) or len(value) != convdim or \
            not all(_is_int(v) for v in value):
        raise ValueError(f"{who}: {name} must be a tuple of {convdim} ints, got {value!r}")
    if any(v < minimum for v in value):
        raise ValueError(f"{who}: every entry of {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in value)


def _border_mode(mode, convdim, who):
    """``mode`` normalized: a name of BORDER_MODES, or a tuple of pads."""
    if isinstance(mode, str):
        if mode not in BORDER_MODES:
            raise ValueError(f"{who}: border_mode must be one of {', '.join(BORDER_MODES)}, "
                             f"an int or a tuple of {convdim} ints, got {mode!r}")
        return mode
    if _is_int(mode):
        mode = (mode,) * convdim
    if isinstance(mode, (tuple, list)) and len(mode) == convdim and \
            any(isinstance(m, (tuple, list)) for m in mode):
        pairs = [m if isinstance(m, (tuple, list)) else (m, m) for m in mode]
        if any(len(p) != 2 or p[0] != p[1] for p in pairs):
            raise ValueError(f"{who}: asymmetric padding {mode!r} is not supported; pad "
                             f"the input yourself and use the smaller symmetric pads")
        mode = tuple(p[0] for p in pairs)
    if not isinstance(mode, (tuple, list)) or len(mode) != convdim or \
            not all(_is_int(m) for m in mode):
        raise ValueError(f"{who}: border_mode must be one of {', '.join(BORDER_MODES)}, an "
                         f"int or a tuple of {convdim} ints, got {mode!r}")
    if any(m < 0 for m in mode):
        raise ValueError(f"{who}: border_mode pads must be >= 0, got {tuple(mode)!r}")
    return tuple(int(m) for m in mode)


def _shape_hint(hint, convdim, name, who):
    """A shape hint as a tuple of ints and Nones (None when nothing is known)."""
    if hint is None:
        return None
    if not isinstance(hint, (tuple, list)) or len(hint) != convdim + 2:
        raise ValueError(f"{who}: {name} must be None or a tuple of {convdim + 2} entries, "
                         f"got {hint!r}")
    out = []
    for entry in hint:
        if entry is not None and not _is_int(entry):
            from symgraph.ops.shape import constant_int

            known = constant_int(entry) if isinstance(entry, Variable) else None
            if known is None:
                raise ValueError(f"{who}: {name} entries must be ints, constant int scalars "
                                 f"or None, got {entry!r}")
            entry = known
        if entry is not None and entry < 0:
            raise ValueError(f"{who}: {name} has a negative size: {tuple(hint)!r}")
        out.append(None if entry is None else int(entry))
    return None if all(e is None for e in out) else tuple(out)


def _static_vector(vec, length):
    """The ints a shape vector always holds (None where unknown)."""
    from symgraph.ops.join import MakeVector
    from symgraph.ops.shape import Shape, constant_int
    from symgraph.ops.subtensor import SliceSpec, Subtensor

    if isinstance(vec, Constant):
        return [int(v) for v in np.asarray(vec.data).reshape(-1)]
    owner = vec.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        return [constant_int(s) for s in owner.inputs]
    if owner is not None and isinstance(owner.op, Subtensor) and len(owner.inputs) == 1 and \
            len(owner.op.idx_list) == 1 and isinstance(owner.op.idx_list[0], SliceSpec):
        src = owner.inputs[0].owner
        if src is not None and isinstance(src.op, Shape):
            entry = owner.op.idx_list[0]
            return list(src.inputs[0].type.shape[slice(*entry)])
    return [None] * length


# ---------------------------------------------------------------------------
# The ops


class BaseAbstractConv(Op):
    """The parameters and checks shared by the three abstract convolution ops
    (Theano's ``BaseAbstractConv``); see the module docstring."""

    __props__ = ("convdim", "border_mode", "subsample", "filter_flip", "filter_dilation",
                 "num_groups", "imshp", "kshp")

    def __init__(self, convdim, imshp=None, kshp=None, border_mode="valid", subsample=None,
                 filter_flip=True, filter_dilation=None, num_groups=1, unshared=False):
        name = type(self).__name__
        if convdim not in (2, 3) or isinstance(convdim, bool):
            raise ValueError(f"{name}: convdim must be 2 or 3, got {convdim!r}")
        self.convdim = int(convdim)
        who = self._name()
        if unshared:
            raise NotImplementedError(f"{who}: unshared convolution is not supported")
        self.border_mode = _border_mode(border_mode, convdim, who)
        self.subsample = _int_tuple((1,) * convdim if subsample is None else subsample,
                                    convdim, "subsample", who, 1)
        self.filter_dilation = _int_tuple((1,) * convdim if filter_dilation is None
                                          else filter_dilation, convdim, "filter_dilation",
                                          who, 1)
        if not isinstance(filter_flip, (bool, np.bool_)):
            raise TypeError(f"{who}: filter_flip must be a bool, got {filter_flip!r}")
        self.filter_flip = bool(filter_flip)
        if not _is_int(num_groups) or num_groups < 1:
            raise ValueError(f"{who}: num_groups must be a positive int, got {num_groups!r}")
        self.num_groups = int(num_groups)
        self.imshp = _shape_hint(imshp, convdim, "imshp", who)
        self.kshp = _shape_hint(kshp, convdim, "kshp", who)
        self._check_channels(self.imshp or (None,) * (convdim + 2),
                             self.kshp or (None,) * (convdim + 2), "the hints")

    # -- naming ---------------------------------------------------------------

    _theano_name = "AbstractConv{}d"

    def _name(self):
        return self._theano_name.format(self.convdim)

    def __str__(self):
        params = [f"border_mode={self.border_mode!r}", f"subsample={self.subsample!r}",
                  f"filter_flip={self.filter_flip!r}",
                  f"filter_dilation={self.filter_dilation!r}",
                  f"num_groups={self.num_groups!r}"]
        params += [f"{h}={getattr(self, h)!r}" for h in ("imshp", "kshp")
                   if getattr(self, h) is not None]
        return f"{self._name()}{{{', '.join(params)}}}"

    __repr__ = __str__

    def _like(self, cls):
        """An op of class ``cls`` with this op's parameters."""
        return cls(self.convdim, imshp=self.imshp, kshp=self.kshp,
                   border_mode=self.border_mode, subsample=self.subsample,
                   filter_flip=self.filter_flip, filter_dilation=self.filter_dilation,
                   num_groups=self.num_groups)

    # -- geometry -------------------------------------------------------------

    def pads(self, kernel_spatial):
        """The zeros added before (and after) each spatial dimension, as ints,
        for filters of spatial shape ``kernel_spatial``."""
        return ref.resolve_pads(self.border_mode, tuple(int(k) for k in kernel_spatial),
                                self.filter_dilation)

    def _out_spatial(self, img_spatial, kern_spatial):
        """The output's spatial sizes (None where unknown; ints or variables)."""
        modes = self.border_mode if isinstance(self.border_mode, tuple) else \
            (self.border_mode,) * self.convdim
        return tuple(get_conv_shape_1axis(i, k, m, s, d) for i, k, m, s, d in
                     zip(img_spatial, kern_spatial, modes, self.subsample,
                         self.filter_dilation))

    def _check_channels(self, img_shape, kern_shape, where):
        """Errors for channel counts and groups that cannot work (None: unknown)."""
        c, k, cg = img_shape[1], kern_shape[0], kern_shape[1]
        g = self.num_groups
        if c is not None and c % g:
            raise ValueError(f"{self._name()}: the image has {c} channels, which "
                             f"num_groups={g} does not divide ({where})")
        if k is not None and k % g:
            raise ValueError(f"{self._name()}: there are {k} filters, which "
                             f"num_groups={g} does not divide ({where})")
        if c is not None and cg is not None and c != cg * g:
            raise ValueError(f"{self._name()}: the image has {c} channels but the filters "
                             f"expect {cg} per group x {g} groups = {cg * g} ({where})")

    def _check_sizes(self, img_shape, kern_shape, where):
        """An error when the dilated filters exceed the padded image (or a
        derived output size is negative); unknown sizes pass."""
        spatial = self._out_spatial(img_shape[2:], kern_shape[2:])
        for axis, (size, i, k) in enumerate(zip(spatial, img_shape[2:], kern_shape[2:])):
            if isinstance(size, numbers.Integral) and size < 1 and i is not None:
                dil = self.filter_dilation[axis] * (k - 1) + 1
                pad = self.pads([k if j == axis else 1 for j in range(self.convdim)])[axis]
                raise ValueError(f"{self._name()}: along spatial axis {axis} the filters "
                                 f"(size {k}, dilated {dil}) are larger than the padded "
                                 f"image (size {i} + 2 x {pad}) ({where})")

    def _float_inputs(self, *named):
        """The tensors cast to their common float dtype (ints alone: floatX),
        each checked to have ``convdim + 2`` dimensions."""
        from symgraph.ops.math import cast

        tensors = []
        for value, name in named:
            var = as_tensor_variable(value)
            if var.dtype not in FLOAT_DTYPES and var.dtype not in INT_DTYPES + ("bool",):
                raise TypeError(f"{self._name()}: {name} {var} must be real, got dtype "
                                f"{var.dtype}")
            if var.ndim != self.convdim + 2:
                raise TypeError(f"{self._name()}: {name} must be a {self.convdim + 2}-d "
                                f"tensor, got {var} of type {var.type}")
            tensors.append(var)
        floats = [t.dtype for t in tensors if t.dtype in FLOAT_DTYPES]
        if floats:
            dtype = upcast(*floats)
        else:
            from symgraph.config import config

            dtype = config.floatX
        return [cast(t, dtype) for t in tensors]

    def _shape_input(self, shape, name):
        """``shape`` as an int64 vector of ``convdim`` entries and their known ints."""
        from symgraph.ops.shape import as_shape_vector

        if isinstance(shape, Variable) and shape.ndim == 1 and \
                shape.type.shape[0] not in (None, self.convdim):
            raise ValueError(f"{self._name()}: {name} must have {self.convdim} entries, got "
                             f"{shape} of type {shape.type}")
        if isinstance(shape, (tuple, list)) and len(shape) != self.convdim:
            raise ValueError(f"{self._name()}: {name} must have {self.convdim} entries, got "
                             f"{shape!r}")
        vec = as_shape_vector(shape, f"{self._name()} {name}")
        if vec.type.shape[0] != self.convdim:
            raise ValueError(f"{self._name()}: {name} must have {self.convdim} entries, got "
                             f"{vec.type.shape[0]}")
        known = _static_vector(vec, self.convdim)
        if any(k is not None and k < 0 for k in known):
            raise ValueError(f"{self._name()}: {name} has a negative size: {known}")
        return vec, known

    @staticmethod
    def _hinted(var, hint):
        """``var`` declared (and checked at run time) to have the hinted shape."""
        if hint is None:
            return var
        from symgraph.ops.shape import specify_shape

        return specify_shape(var, hint)

    @staticmethod
    def _merge_static(*candidates):
        """Per dimension, the first known size among ``candidates``."""
        return tuple(next((c for c in dims if isinstance(c, numbers.Integral)), None)
                     for dims in zip(*candidates))

    def _check_hint(self, hint_name, what, shape):
        """An error when the run-time ``shape`` contradicts a hint."""
        hint = getattr(self, hint_name)
        if hint is not None and any(h is not None and h != s for h, s in zip(hint, shape)):
            raise ValueError(f"{self._name()}: {what} {tuple(shape)} does not match the "
                             f"hint {hint_name}={hint}")

    def _check_top(self, img_shape, kern_shape, top_shape):
        """An error when the output gradient's shape is not the forward output's."""
        expected = get_conv_output_shape(img_shape, kern_shape, self.border_mode,
                                         self.subsample, self.filter_dilation)
        if tuple(expected) != tuple(top_shape):
            raise ValueError(f"{self._name()}: an image of shape {tuple(img_shape)} and "
                             f"filters of shape {tuple(kern_shape)} give an output of shape "
                             f"{tuple(expected)}, but the output gradient has shape "
                             f"{tuple(top_shape)}")

    @staticmethod
    def _sum_terms(terms):
        """The sum of the terms that are not None (None when all are)."""
        terms = [t for t in terms if t is not None]
        if not terms:
            return None
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]

    @staticmethod
    def _known_shape(node, symbolic):
        """The output shape: the static sizes of its type where known, else
        ``symbolic``'s entries."""
        return [tuple(constant(s, dtype="int64") if s is not None else v
                      for s, v in zip(node.outputs[0].type.shape, symbolic))]

    def connection_pattern(self, node):
        # The first two inputs are data; a third is a shape, with no gradient.
        return [[True]] * 2 + [[False]] * (len(node.inputs) - 2)

    def R_op(self, inputs, eval_points):
        # Each of the three ops is bilinear in its first two inputs.
        a, b, *shape = inputs
        e_a, e_b = eval_points[:2]
        return [self._sum_terms([None if e_a is None else self(e_a, b, *shape),
                                 None if e_b is None else self(a, e_b, *shape)])]

    def _compute(self, fn, *args, out_dtype):
        """A reference function's result in the output dtype (float64 inside)."""
        return np.asarray(fn(*args, dtype=np.float64)).astype(out_dtype, copy=False)


class AbstractConv(BaseAbstractConv):
    """The convolution ``(img, kern) -> out`` (Theano's ``AbstractConv``):
    ``out[n, k] = sum over c of img[n, c] (*) kern[k, c]`` within each group."""

    def make_node(self, img, kern):
        img, kern = self._float_inputs((img, "the image"), (kern, "the filters"))
        img, kern = self._hinted(img, self.imshp), self._hinted(kern, self.kshp)
        self._check_channels(img.type.shape, kern.type.shape, "static shapes")
        self._check_sizes(img.type.shape, kern.type.shape, "static shapes")
        out = (img.type.shape[0], kern.type.shape[0]) + \
            self._out_spatial(img.type.shape[2:], kern.type.shape[2:])
        return Apply(self, [img, kern], [TensorType(img.dtype, shape=out)()])

    def perform(self, node, inputs, output_storage):
        img, kern = inputs
        self._check_channels(img.shape, kern.shape, "run time")
        self._check_sizes(img.shape, kern.shape, "run time")
        output_storage[0][0] = self._compute(
            ref.conv_forward, img, kern, self.pads(kern.shape[2:]), self.subsample,
            self.filter_dilation, self.num_groups, self.filter_flip,
            out_dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        img_shape, kern_shape = input_shapes
        spatial = self._out_spatial(img_shape[2:], kern_shape[2:])
        return self._known_shape(node, (img_shape[0], kern_shape[0]) + spatial)

    def L_op(self, inputs, outputs, output_grads):
        img, kern = inputs
        (top,) = output_grads
        d_img = self._like(AbstractConvGradInputs)(kern, top, img.shape[2:])
        d_kern = self._like(AbstractConvGradWeights)(img, top, kern.shape[2:])
        return [d_img, d_kern]


class AbstractConvGradInputs(BaseAbstractConv):
    """The gradient of ``AbstractConv`` with respect to its image:
    ``(kern, topgrad, shape) -> d img``, ``shape`` the image's spatial shape
    (Theano's ``AbstractConv_gradInputs``)."""

    _theano_name = "AbstractConv{}d_gradInputs"

    def make_node(self, kern, topgrad, shape):
        kern, topgrad = self._float_inputs((kern, "the filters"),
                                           (topgrad, "the output gradient"))
        shape, known = self._shape_input(shape, "the image's spatial shape")
        kern = self._hinted(kern, self.kshp)
        imshp = self.imshp or (None,) * (self.convdim + 2)
        for axis, (hint, given) in enumerate(zip(imshp[2:], known)):
            if hint is not None and given is not None and hint != given:
                raise ValueError(f"{self._name()}: the image's spatial shape {known} "
                                 f"contradicts imshp={self.imshp} on spatial axis {axis}")
        img_shape = self._merge_static(
            (topgrad.type.shape[0], None if kern.type.shape[1] is None
             else kern.type.shape[1] * self.num_groups) + tuple(known), imshp)
        top_hint = get_conv_output_shape(img_shape, kern.type.shape, self.border_mode,
                                         self.subsample, self.filter_dilation)
        self._check_channels(img_shape, kern.type.shape, "static shapes")
        self._check_sizes(img_shape, kern.type.shape, "static shapes")
        topgrad = self._hinted(topgrad, None if all(t is None for t in top_hint)
                               else top_hint)
        return Apply(self, [kern, topgrad, shape], [TensorType(kern.dtype, shape=img_shape)()])

    def perform(self, node, inputs, output_storage):
        kern, topgrad, shape = inputs
        img_shape = (topgrad.shape[0], kern.shape[1] * self.num_groups) + \
            tuple(int(s) for s in shape)
        self._check_hint("imshp", "the image's shape", img_shape)
        self._check_channels(img_shape, kern.shape, "run time")
        self._check_sizes(img_shape, kern.shape, "run time")
        self._check_top(img_shape, kern.shape, topgrad.shape)
        output_storage[0][0] = self._compute(
            ref.conv_backward_data, topgrad, kern, img_shape[2:], self.pads(kern.shape[2:]),
            self.subsample, self.filter_dilation, self.num_groups, self.filter_flip,
            out_dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        kern_shape, top_shape, _ = input_shapes
        return self._known_shape(node, (top_shape[0], kern_shape[1] * self.num_groups) + tuple(
            node.inputs[2][i] for i in range(self.convdim)))

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        kern, top, shape = inputs
        (d_img,) = output_grads
        d_kern = self._like(AbstractConvGradWeights)(d_img, top, kern.shape[2:])
        d_top = self._like(AbstractConv)(d_img, kern)
        return [d_kern, d_top, disconnected_grad_for(shape)]


class AbstractConvGradWeights(BaseAbstractConv):
    """The gradient of ``AbstractConv`` with respect to its filters:
    ``(img, topgrad, shape) -> d kern``, ``shape`` the filters' spatial shape
    (Theano's ``AbstractConv_gradWeights``)."""

    _theano_name = "AbstractConv{}d_gradWeights"

    def make_node(self, img, topgrad, shape):
        img, topgrad = self._float_inputs((img, "the image"),
                                          (topgrad, "the output gradient"))
        shape, known = self._shape_input(shape, "the filters' spatial shape")
        img = self._hinted(img, self.imshp)
        kshp = self.kshp or (None,) * (self.convdim + 2)
        for axis, (hint, given) in enumerate(zip(kshp[2:], known)):
            if hint is not None and given is not None and hint != given:
                raise ValueError(f"{self._name()}: the filters' spatial shape {known} "
                                 f"contradicts kshp={self.kshp} on spatial axis {axis}")
        c = img.type.shape[1]
        kern_shape = self._merge_static(
            (topgrad.type.shape[1], None if c is None else c // self.num_groups)
            + tuple(known), kshp)
        self._check_channels(img.type.shape, kern_shape, "static shapes")
        self._check_sizes(img.type.shape, kern_shape, "static shapes")
        top_hint = get_conv_output_shape(img.type.shape, kern_shape, self.border_mode,
                                         self.subsample, self.filter_dilation)
        topgrad = self._hinted(topgrad, None if all(t is None for t in top_hint)
                               else top_hint)
        return Apply(self, [img, topgrad, shape], [TensorType(img.dtype, shape=kern_shape)()])

    def perform(self, node, inputs, output_storage):
        img, topgrad, shape = inputs
        kern_shape = (topgrad.shape[1], img.shape[1] // self.num_groups) + \
            tuple(int(s) for s in shape)
        self._check_hint("kshp", "the filters' shape", kern_shape)
        self._check_channels(img.shape, kern_shape, "run time")
        self._check_sizes(img.shape, kern_shape, "run time")
        self._check_top(img.shape, kern_shape, topgrad.shape)
        output_storage[0][0] = self._compute(
            ref.conv_backward_filter, img, topgrad, kern_shape[2:], self.pads(kern_shape[2:]),
            self.subsample, self.filter_dilation, self.num_groups, self.filter_flip,
            out_dtype=node.outputs[0].dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        img_shape, top_shape, _ = input_shapes
        return self._known_shape(node, (top_shape[1], img_shape[1] // self.num_groups) + tuple(
            node.inputs[2][i] for i in range(self.convdim)))

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.graph.gradient_markers import disconnected_grad_for

        img, top, shape = inputs
        (d_kern,) = output_grads
        d_img = self._like(AbstractConvGradInputs)(d_kern, top, img.shape[2:])
        d_top = self._like(AbstractConv)(img, d_kern)
        return [d_img, d_top, disconnected_grad_for(shape)]


# ---------------------------------------------------------------------------
# Theano's class names


class _FixedConvdim(type):
    """The metaclass of Theano's per-dimension names: calling the class builds
    the generic op with ``convdim`` fixed, and ``isinstance`` checks both."""

    def __call__(cls, *args, **kwargs):
        return cls.base(cls.convdim, *args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.base) and obj.convdim == cls.convdim


def _alias(name, base, convdim):
    doc = (f"Theano's ``{name}(imshp=None, kshp=None, border_mode='valid', "
           f"subsample=None, filter_flip=True, filter_dilation=None, num_groups=1)``: "
           f"builds a ``{base.__name__}`` with ``convdim={convdim}`` (the same op, so "
           f"nodes built either way merge); ``isinstance(op, {name})`` is true for "
           f"those ops.")
    return _FixedConvdim(name, (), {"base": base, "convdim": convdim, "__doc__": doc,
                                    "__module__": __name__})


AbstractConv2d = _alias("AbstractConv2d", AbstractConv, 2)
AbstractConv3d = _alias("AbstractConv3d", AbstractConv, 3)
AbstractConv2d_gradInputs = _alias("AbstractConv2d_gradInputs", AbstractConvGradInputs, 2)
AbstractConv3d_gradInputs = _alias("AbstractConv3d_gradInputs", AbstractConvGradInputs, 3)
AbstractConv2d_gradWeights = _alias("AbstractConv2d_gradWeights", AbstractConvGradWeights, 2)
AbstractConv3d_gradWeights = _alias("AbstractConv3d_gradWeights", AbstractConvGradWeights, 3)
