"""Concrete convolution ops: ``DnnConv``, ``DnnConvGradI`` and ``DnnConvGradW``.

The rewrites of ``opt/conv_concrete.py`` replace the abstract ops of
``ops/conv.py`` by these, which carry *how* to compute: the algorithm (the
``dnn.conv.algo_*`` flag value) and the precision (the compute dtype resolved
from ``dnn.conv.precision`` and the data's dtype).  Their inputs, outputs,
shapes and gradients are the abstract op's; their C kernels
(``backends/cpu/conv/codegen.py``) run the algorithms of ``c_src/conv/``.

``algo``: a concrete algorithm ('none' direct, 'small' tiled implicit GEMM,
'large' / 'deterministic' im2col + GEMM, 'fft', 'fft_tiling', 'winograd'),
or a meta one chosen at run time: 'guess_once', 'guess_on_shape_change'
(a heuristic from the shapes), 'time_once', 'time_on_shape_change' (the
fastest of the applicable algorithms, remembered in the tuning cache:
``backends/cpu/conv/tuning.py``).

A concrete algorithm that cannot handle the convolution (Winograd with a
stride) falls back to the next best one.  When the rewrite can tell from
static shapes it builds the op with the fallback as ``algo`` and the flag's
value as ``requested`` (printed: ``requested='winograd'``, and debugprint
says why); otherwise the kernel falls back at run time and reports it
(debugprint of a compiled function shows each choice and its source).

``precision`` (resolved by :func:`resolve_precision`): 'float64' computes in
double; 'float32' in float; 'float16' emulates half arithmetic on the CPU:
the inputs and the result are rounded to float16, the accumulation is in
float32 (cuDNN's "pseudo half").  ``perform`` applies the same roundings to
the float64 reference, so that DebugMode's C-against-Python check agrees.
"""

import numpy as np

from symgraph.graph.basic import Apply, Op

__all__ = ["DnnConv", "DnnConvGradI", "DnnConvGradW", "resolve_precision", "ALGOS",
           "ALGO_IMPLS", "META_ALGOS", "PRECISIONS", "static_fallback"]

#: The precision flag's values.
PRECISION_FLAGS = ("as_input_f32", "as_input", "float16", "float32", "float64")
#: Resolved precisions: the compute dtype.
PRECISIONS = ("float16", "float32", "float64")
META_ALGOS = ("guess_once", "guess_on_shape_change", "time_once", "time_on_shape_change")

#: Per direction, the concrete algorithm names and the C implementation each runs
#: (the names of ``conv_tuning.IMPLS``).
ALGO_IMPLS = {
    "fwd": {"none": "direct", "small": "tiled", "large": "gemm", "fft": "fft",
            "fft_tiling": "fft_tiled", "winograd": "winograd"},
    "bwd_data": {"none": "direct", "small": "tiled", "deterministic": "gemm", "fft": "fft",
                 "fft_tiling": "fft_tiled"},
    "bwd_filter": {"none": "direct", "small": "tiled", "deterministic": "gemm", "fft": "fft"},
}
#: Per direction, every accepted ``algo``.
ALGOS = {d: tuple(impls) + META_ALGOS for d, impls in ALGO_IMPLS.items()}


def resolve_precision(flag, dtype):
    """The compute dtype for data of ``dtype`` under precision flag ``flag``
    (Theano's ``get_precision``): 'as_input_f32' is the data's dtype, float16
    computed in float32; 'as_input' the data's dtype; otherwise the flag."""
    if flag not in PRECISION_FLAGS:
        raise ValueError(f"dnn.conv.precision: {flag!r} is not one of "
                         f"{', '.join(PRECISION_FLAGS)}")
    if flag == "as_input_f32":
        return "float32" if dtype == "float16" else str(dtype)
    if flag == "as_input":
        return str(dtype)
    return flag


def _round(array, precision):
    """``array`` rounded to ``precision``'s dtype where that is narrower."""
    if np.dtype(precision).itemsize < array.dtype.itemsize:
        return array.astype(precision).astype(array.dtype)
    return array


class _DnnConvBase(Op):
    """What the three concrete ops share: the abstract op's parameters plus
    ``algo``, ``precision`` and ``requested`` (the flag value when a static
    fallback replaced it, else None)."""

    #: 'fwd', 'bwd_data' or 'bwd_filter' (set by each subclass).
    direction = None
    __props__ = ("convdim", "border_mode", "subsample", "filter_flip", "filter_dilation",
                 "num_groups", "imshp", "kshp", "algo", "precision", "requested")

    def __init__(self, convdim=2, imshp=None, kshp=None, border_mode="valid", subsample=None,
                 filter_flip=True, filter_dilation=None, num_groups=1, algo="none",
                 precision="float32", requested=None):
        # The abstract op normalizes and checks the shared parameters.
        abstract = self._abstract_class()(
            convdim, imshp=imshp, kshp=kshp, border_mode=border_mode, subsample=subsample,
            filter_flip=filter_flip, filter_dilation=filter_dilation, num_groups=num_groups)
        for name in self.__props__[:8]:
            setattr(self, name, getattr(abstract, name))
        name = type(self).__name__
        allowed = ALGOS[self.direction]
        if algo not in allowed:
            raise ValueError(f"{name}: algo {algo!r} is not one of {', '.join(allowed)}")
        if requested is not None and requested not in allowed:
            raise ValueError(f"{name}: requested {requested!r} is not one of "
                             f"{', '.join(allowed)}")
        if precision not in PRECISIONS:
            raise ValueError(f"{name}: precision {precision!r} is not one of "
                             f"{', '.join(PRECISIONS)} (resolve the flag value with "
                             f"resolve_precision)")
        self.algo = algo
        self.precision = precision
        self.requested = None if requested == algo else requested

    @classmethod
    def from_abstract(cls, op, algo, precision, requested=None):
        """The concrete op for abstract op ``op``."""
        return cls(op.convdim, imshp=op.imshp, kshp=op.kshp, border_mode=op.border_mode,
                   subsample=op.subsample, filter_flip=op.filter_flip,
                   filter_dilation=op.filter_dilation, num_groups=op.num_groups, algo=algo,
                   precision=precision, requested=requested)

    def abstract(self):
        """The abstract op with this op's parameters."""
        return self._abstract_class()(
            self.convdim, imshp=self.imshp, kshp=self.kshp, border_mode=self.border_mode,
            subsample=self.subsample, filter_flip=self.filter_flip,
            filter_dilation=self.filter_dilation, num_groups=self.num_groups)

    def __str__(self):
        text = f"{type(self).__name__}{{algo={self.algo!r}, precision={self.precision!r}"
        if self.requested is not None:
            text += f", requested={self.requested!r}"
        return text + "}"

    __repr__ = __str__

    # -- the graph: the abstract op's ------------------------------------------

    def make_node(self, *inputs):
        node = self.abstract().make_node(*inputs)
        return Apply(self, node.inputs, [out.type() for out in node.outputs])

    def infer_shape(self, fgraph, node, input_shapes):
        return self.abstract().infer_shape(fgraph, node, input_shapes)

    def connection_pattern(self, node):
        return self.abstract().connection_pattern(node)

    def L_op(self, inputs, outputs, output_grads):
        # The abstract gradient ops: the rewrites make them concrete in turn,
        # with the backward flags.
        return self.abstract().L_op(inputs, outputs, output_grads)

    def R_op(self, inputs, eval_points):
        return self.abstract().R_op(inputs, eval_points)

    def perform(self, node, inputs, output_storage):
        """The abstract op's float64 reference, with this precision's roundings
        (inputs and result rounded to the compute dtype where it is narrower)."""
        rounded = [_round(v, self.precision) if i < 2 else v for i, v in enumerate(inputs)]
        self.abstract().perform(node, rounded, output_storage)
        result = output_storage[0][0]
        if self.precision != "float64" and result.dtype != np.dtype(self.precision):
            # the C kernel rounds the compute dtype's result to the output dtype
            output_storage[0][0] = _round(result.astype(np.float64), self.precision).astype(
                result.dtype)

    # -- native code --------------------------------------------------------------

    def impl(self):
        """The C implementation name of a concrete ``algo``, or None for a meta one."""
        return ALGO_IMPLS[self.direction].get(self.algo)

    def profile_label(self, node):
        """The profile's name for this op's time: its str and the algorithms its
        kernel ran in this process (``DnnConv{algo='time_once', ...} [gemm]``)."""
        impls = sorted(reported_choices(self)[0])
        return f"{self} [{', '.join(impls) or self.impl() or '?'}]"

    def debug_note(self, node):
        """What debugprint adds to this node's line: a static fallback's reason,
        and the choices the kernel made in this process (with their sources)."""
        parts = []
        if self.requested is not None:
            parts.append(f"fallback from {self.requested!r}: "
                         f"{static_fallback(self, node, self.requested)[1]}")
        chosen = reported_choices(self)[1]
        if chosen:
            parts.append(f"chose {chosen}")
        elif self.impl() is not None and self.requested is None:
            parts.append(f"algo from the flag ({self.impl()})")
        return "; ".join(parts)


#: Backends that choose an algorithm when a kernel first runs report their
#: choices here (the ops cannot ask a backend): functions ``op -> (impls,
#: description)``, registered by ``register_choice_reporter``.
_CHOICE_REPORTERS = []


def register_choice_reporter(report):
    """Add ``report(op) -> (set of impl names, text)``: the algorithms a backend
    chose for ``op``'s kernels in this process, for profiles and debugprint."""
    if report not in _CHOICE_REPORTERS:
        _CHOICE_REPORTERS.append(report)


def reported_choices(op):
    """(impl names, description) of what the backends chose for ``op``."""
    impls, texts = set(), []
    for report in _CHOICE_REPORTERS:
        names, text = report(op)
        impls.update(names)
        if text:
            texts.append(text)
    return impls, "; ".join(texts)


def _abstract(name):
    from symgraph.ops import conv

    return getattr(conv, name)


class DnnConv(_DnnConvBase):
    """The convolution ``(img, kern) -> out`` with a chosen algorithm and
    precision (Theano's ``GpuDnnConv``); replaces ``AbstractConv``.

    With an epilogue (the rewrite ``local_conv_bias_relu`` of
    ``opt/conv_concrete.py`` makes these): ``bias=True`` takes a third input, a
    vector of one value per output channel, added to the result;
    ``activation='relu'`` applies ``maximum(., 0)`` last.  The kernel applies
    them while the result is in cache (see ``conv_codegen.py``); the
    gradient builds the ReLU mask from the op's own output, ``gz * (out >
    0)``, so the pre-activation tensor never exists.  (At a pre-activation of
    exactly 0 this mask is 0, where ``maximum``'s own gradient passes gz.)
    """

    direction = "fwd"
    __props__ = _DnnConvBase.__props__ + ("bias", "activation")
    ACTIVATIONS = (None, "relu")

    def __init__(self, *args, bias=False, activation=None, **kwargs):
        super().__init__(*args, **kwargs)
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"DnnConv: activation {activation!r} is not one of "
                             f"{', '.join(map(repr, self.ACTIVATIONS))}")
        self.bias = bool(bias)
        self.activation = activation

    @classmethod
    def from_abstract(cls, op, algo, precision, requested=None, bias=False, activation=None):
        """The concrete op for abstract op ``op`` (with an epilogue if asked)."""
        concrete = super().from_abstract(op, algo, precision, requested)
        return concrete.with_epilogue(bias, activation) if bias or activation else concrete

    def with_epilogue(self, bias, activation):
        """This op with ``bias`` and ``activation`` set."""
        return DnnConv(self.convdim, imshp=self.imshp, kshp=self.kshp,
                       border_mode=self.border_mode, subsample=self.subsample,
                       filter_flip=self.filter_flip, filter_dilation=self.filter_dilation,
                       num_groups=self.num_groups, algo=self.algo, precision=self.precision,
                       requested=self.requested, bias=bias, activation=activation)

    def __str__(self):
        text = super().__str__()
        extra = (", bias=True" if self.bias else "") + \
            (f", activation={self.activation!r}" if self.activation else "")
        return text[:-1] + extra + "}"

    __repr__ = __str__

    @staticmethod
    def _abstract_class():
        return _abstract("AbstractConv")

    def make_node(self, img, kern, *bias):
        from symgraph.tensor.basic import as_tensor_variable

        if len(bias) != int(self.bias):
            raise TypeError(f"{self}: expected {2 + int(self.bias)} inputs (image, filters"
                            f"{', bias' if self.bias else ''}), got {2 + len(bias)}")
        node = super().make_node(img, kern)
        inputs = list(node.inputs)
        if self.bias:
            b = as_tensor_variable(bias[0])
            out_dtype = node.outputs[0].dtype
            if b.ndim != 1:
                raise TypeError(f"{self}: the bias must be a vector (one value per output "
                                f"channel), got {b.ndim} dimensions")
            if b.dtype != out_dtype:
                from symgraph.ops.math import cast

                b = cast(b, out_dtype)
            inputs.append(b)
        return Apply(self, inputs, [node.outputs[0].type()])

    def infer_shape(self, fgraph, node, input_shapes):
        return self.abstract().infer_shape(fgraph, node, input_shapes[:2])

    def connection_pattern(self, node):
        return [[True]] * len(node.inputs)

    def perform(self, node, inputs, output_storage):
        """The convolution's reference (``_DnnConvBase.perform``), then
        ``+ bias`` over the channels and the activation."""
        super().perform(node, inputs[:2], output_storage)
        if not self.bias and not self.activation:
            return
        out = output_storage[0][0]
        if self.bias:
            spread = (1, -1) + (1,) * self.convdim
            out = (out + inputs[2].astype(out.dtype).reshape(spread)).astype(out.dtype)
        if self.activation == "relu":
            out = np.where(out < 0, np.zeros((), out.dtype), out)
        output_storage[0][0] = out

    def L_op(self, inputs, outputs, output_grads):
        if not self.bias and not self.activation:
            return super().L_op(inputs, outputs, output_grads)
        from symgraph.ops.math import cast, gt

        (gz,) = output_grads
        if self.activation == "relu":
            (out,) = outputs
            gz = gz * cast(gt(out, 0), gz.dtype)
        grads = self.abstract().L_op(inputs[:2], outputs, [gz])
        if self.bias:
            axes = [0] + list(range(2, 2 + self.convdim))
            grads.append(gz.sum(axis=axes))
        return grads

    def R_op(self, inputs, eval_points):
        if self.bias or self.activation:
            raise NotImplementedError(f"{self}: R_op of a convolution with an epilogue; "
                                      "take it before the rewrite fuses it")
        return super().R_op(inputs, eval_points)


class DnnConvGradI(_DnnConvBase):
    """The gradient of a convolution with respect to its image, ``(kern,
    topgrad, shape) -> d img`` (Theano's ``GpuDnnConvGradI``); replaces
    ``AbstractConvGradInputs``."""

    direction = "bwd_data"

    @staticmethod
    def _abstract_class():
        return _abstract("AbstractConvGradInputs")


class DnnConvGradW(_DnnConvBase):
    """The gradient of a convolution with respect to its filters, ``(img,
    topgrad, shape) -> d kern`` (Theano's ``GpuDnnConvGradW``); replaces
    ``AbstractConvGradWeights``."""

    direction = "bwd_filter"

    @staticmethod
    def _abstract_class():
        return _abstract("AbstractConvGradWeights")


CONCRETE = {"AbstractConv": DnnConv, "AbstractConvGradInputs": DnnConvGradI,
            "AbstractConvGradWeights": DnnConvGradW}


# -- what the rewrite can tell without running ---------------------------------------

def _static_kernel_spatial(op, node):
    """The filters' spatial shape when the graph fixes it, else None."""
    if op.direction == "bwd_filter":
        from symgraph.ops.conv import _static_vector

        known = _static_vector(node.inputs[2], op.convdim)
    else:
        known = node.inputs[0 if op.direction == "bwd_data" else 1].type.shape[2:]
    known = tuple(known)
    if op.kshp is not None:
        known = tuple(k if k is not None else h for k, h in zip(known, op.kshp[2:]))
    return None if any(k is None for k in known) else known


def static_fallback(op, node, algo):
    """``(algo to use, reason)`` when the graph shows that the concrete ``algo``
    cannot run ``node`` (a 3x3-only Winograd with a stride, a dilation or
    another filter size), else ``(algo, '')``.  Only what is certain from
    static shapes: anything else is the kernel's run-time fallback."""
    if algo != "winograd":
        return algo, ""
    reasons = []
    if any(s != 1 for s in op.subsample):
        reasons.append(f"subsample {op.subsample}")
    if any(d != 1 for d in op.filter_dilation):
        reasons.append(f"filter_dilation {op.filter_dilation}")
    kernel = _static_kernel_spatial(op, node)
    if kernel is not None and kernel[-2:] != (3, 3):
        reasons.append(f"filters of spatial shape {kernel}")
    if not reasons:
        return algo, ""
    names = {impl: name for name, impl in ALGO_IMPLS[op.direction].items()}
    return names["gemm"], "winograd needs 3x3 filters, stride 1, dilation 1; got " + \
        ", ".join(reasons)
