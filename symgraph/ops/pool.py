"""Pooling over the last 2 or 3 dimensions: the ``Pool`` op and its geometry.

``Pool(ndim, ignore_border, mode, ws, stride, pad)`` slides a window of
``ws`` elements, ``stride`` apart, over the last ``ndim`` dimensions of an
input of any rank >= ndim (the leading dimensions are a batch), and keeps
per window its maximum (``'max'``), its sum (``'sum'``) or its mean.  The
parameters are static ints (the op's props), so that the output's static
shape, the C kernel and its loop bounds are fixed when the graph is built.

Semantics (Theano's ``theano.tensor.signal.pool``):

* ``pad`` adds ``pad[i]`` positions before and after dimension i.  ``'max'``,
  ``'sum'`` and ``'average_exc_pad'`` leave the padding out of the window;
  ``'average_inc_pad'`` counts it in the divisor (as zeros).  Padding needs
  ``ignore_border=True`` and ``pad < ws``, as in Theano.
* Output size per pooled dimension, ``n`` the padded size (``size + 2 pad``):
  with ``ignore_border`` ``(n - ws) // stride + 1`` (at least 0); without it
  the last, partial window is kept: ``(n - 1) // stride + 1`` when ``stride
  >= ws``, else ``max(0, (n - 1 - ws) // stride + 1) + 1``.  A partial window
  at the end averages over the elements it holds (``average_inc_pad`` too:
  its divisor stops at the padded image's end), as Theano's CPU op did.
  One difference: a pooled dimension of size 0 gives an output of size 0
  (Theano's formula gave 1 there and then failed on an empty window).
* ``'max'`` propagates NaN: a window holding a NaN pools to NaN (as
  ``numpy.max`` and PyTorch's max pooling; Theano's C code skipped NaN
  unless it came first).
* The gradient of ``'max'`` (``MaxPoolGrad``) routes each window's gradient
  to the FIRST position, in row-major order within the window, whose value
  equals the pooled maximum (a NaN matches a NaN maximum).  Theano's CPU op
  gave it to every tied position, which makes the gradient of ``max(a, a)``
  twice too large; one position per window is the subgradient that finite
  differences and cuDNN agree with.

Ops for the gradients live in ``ops/pool_grad.py``; the user functions
(``pool_2d``, ``pool_3d``, ``max_pool_2d_same_size``) in
``symgraph/tensor/signal/pool.py``; the C kernels in
``backends/cpu/pool/forward.py``.
"""

import itertools

import numpy as np

from symgraph.graph.basic import Apply, Op
from symgraph.tensor.basic import as_tensor_variable
from symgraph.tensor.type import FLOAT_DTYPES, INT_DTYPES, TensorType

__all__ = ["Pool", "MODES", "pool_out_size"]

#: The pooling modes; Theano's GPU alias 'average' means 'average_inc_pad',
#: and 'max_deterministic' means 'max' (max pooling is deterministic here).
MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")
_ALIASES = {"average": "average_inc_pad", "max_deterministic": "max"}


# -- geometry ----------------------------------------------------------------------

def pool_out_size(size, ws, stride, pad, ignore_border):
    """The pooled size of one dimension of ``size`` elements (an int), by
    Theano's ``Pool.out_shape`` rule (see the module docstring)."""
    if size == 0:
        return 0
    n = size + 2 * pad
    if ignore_border:
        return max(n // stride if ws == stride else (n - ws) // stride + 1, 0)
    if stride >= ws:
        return (n - 1) // stride + 1
    return max(0, (n - 1 - ws) // stride + 1) + 1


def _symbolic_out_size(size, ws, stride, pad, ignore_border):
    """``pool_out_size`` of an int64 scalar variable ``size``."""
    from symgraph.ops import math

    n = size + 2 * pad
    if ignore_border:
        out = n // stride if ws == stride else math.maximum((n - ws) // stride + 1, 0)
    elif stride >= ws:
        out = (n - 1) // stride + 1
    else:
        out = math.maximum((n - 1 - ws) // stride + 1, 0) + 1
    if _formula_at_zero(ws, stride, pad, ignore_border) != 0:
        # The formula gives a window over nothing for an empty dimension.
        out = math.switch(math.eq(size, 0), 0, out)
    return math.cast(out, "int64")


def _formula_at_zero(ws, stride, pad, ignore_border):
    """Theano's formula at size 0 (nonzero where it counts an empty window)."""
    n = 2 * pad
    if ignore_border:
        return max(n // stride if ws == stride else (n - ws) // stride + 1, 0)
    if stride >= ws:
        return (n - 1) // stride + 1
    return max(0, (n - 1 - ws) // stride + 1) + 1


def windows(size, ws, stride, pad, ignore_border):
    """The windows along one dimension: per output index, ``(start, stop,
    count_inc_pad)``: the input elements ``start:stop`` it holds (the padding
    left out) and its size counting the padding (``average_inc_pad``'s
    divisor: up to the end of the padded image)."""
    out = []
    for j in range(pool_out_size(size, ws, stride, pad, ignore_border)):
        lo = j * stride - pad
        hi = lo + ws
        out.append((max(lo, 0), min(hi, size), min(hi, size + pad) - lo))
    return out


# -- parameters ----------------------------------------------------------------------

def _int_tuple(value, nd, what, owner, minimum):
    """``value`` as a tuple of ``nd`` Python ints >= ``minimum``; clear errors."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: {what} must be a tuple of {nd} ints, got the int "
                        f"{value!r} (write {(int(value),) * nd!r})")
    if not isinstance(value, (tuple, list)):
        if hasattr(value, "owner") or hasattr(value, "type"):
            raise TypeError(f"{owner}: {what} must be static ints (a tuple of {nd} Python "
                            f"ints), not the symbolic {value}")
        raise TypeError(f"{owner}: {what} must be a tuple of {nd} ints, got {value!r}")
    if len(value) != nd:
        raise ValueError(f"{owner}: {what} must have {nd} entries (one per pooled "
                         f"dimension), got {tuple(value)!r}")
    out = []
    for v in value:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{owner}: {what} must hold ints, got {tuple(value)!r}")
        if v < minimum:
            raise ValueError(f"{owner}: every entry of {what} must be >= {minimum}, got "
                             f"{tuple(value)!r}")
        out.append(int(v))
    return tuple(out)


class PoolBase(Op):
    """What Pool and its gradient ops share: the parameters (validated once,
    here), the window geometry, and the check of the input's rank."""

    __props__ = ("ndim", "ignore_border", "mode", "ws", "stride", "pad")
    #: The modes this op accepts (subclasses narrow it).
    accepted_modes = MODES

    def __init__(self, ndim=2, ignore_border=False, mode="max", ws=None, stride=None, pad=None):
        name = type(self).__name__
        if ndim not in (2, 3) or isinstance(ndim, bool):
            raise ValueError(f"{name}: ndim must be 2 or 3, got {ndim!r}")
        if ws is None:
            raise ValueError(f"{name}: the window size ws is required")
        mode = _ALIASES.get(mode, mode)
        if mode not in self.accepted_modes:
            raise ValueError(f"{name}: mode must be one of {', '.join(self.accepted_modes)}, "
                             f"got {mode!r}")
        if not isinstance(ignore_border, (bool, np.bool_)):
            raise TypeError(f"{name}: ignore_border must be True or False, got "
                            f"{ignore_border!r}")
        self.ndim = int(ndim)
        self.ignore_border = bool(ignore_border)
        self.mode = mode
        self.ws = _int_tuple(ws, ndim, "ws (the window size)", name, 1)
        self.stride = self.ws if stride is None else _int_tuple(stride, ndim, "stride", name, 1)
        self.pad = (0,) * ndim if pad is None else _int_tuple(pad, ndim, "pad", name, 0)
        if any(self.pad) and not self.ignore_border:
            raise ValueError(f"{name}: padding {self.pad} works only with ignore_border=True")
        if any(p >= w for p, w in zip(self.pad, self.ws)):
            raise ValueError(f"{name}: the padding {self.pad} must be smaller than the "
                             f"window {self.ws} in every dimension")

    def params(self):
        """The parameters as keywords, for building a related op."""
        return dict(ndim=self.ndim, ignore_border=self.ignore_border, ws=self.ws,
                    stride=self.stride, pad=self.pad)

    def out_size(self, img_shape):
        """The pooled sizes (ints) of an image of ``img_shape`` (the last ndim dims)."""
        return tuple(pool_out_size(s, w, st, p, self.ignore_border) for s, w, st, p in
                     zip(img_shape, self.ws, self.stride, self.pad))

    def symbolic_out_size(self, img_shape):
        """The pooled sizes of ``img_shape``, symbolic int64 scalars (or ints)."""
        out = []
        for s, w, st, p in zip(img_shape, self.ws, self.stride, self.pad):
            known = s if isinstance(s, (int, np.integer)) else None
            if known is None:
                from symgraph.ops.shape import constant_int

                known = constant_int(s)
            if known is not None:
                from symgraph.tensor.basic import constant

                out.append(constant(pool_out_size(int(known), w, st, p, self.ignore_border),
                                    dtype="int64"))
            else:
                out.append(_symbolic_out_size(s, w, st, p, self.ignore_border))
        return out

    def static_out_shape(self, x_type):
        """The output's static shape for an input of type ``x_type``."""
        lead, img = x_type.shape[:-self.ndim], x_type.shape[-self.ndim:]
        pooled = tuple(None if s is None else pool_out_size(s, w, st, p, self.ignore_border)
                       for s, w, st, p in zip(img, self.ws, self.stride, self.pad))
        return lead + pooled

    def windows(self, img_shape):
        """Per pooled dimension, the list of windows (see ``windows``)."""
        return [windows(s, w, st, p, self.ignore_border) for s, w, st, p in
                zip(img_shape, self.ws, self.stride, self.pad)]

    def window_items(self, img_shape):
        """(output index, slices of the input, element count, count with padding)
        for every window of an image of ``img_shape``, in row-major order."""
        per_dim = self.windows(img_shape)
        for index in itertools.product(*[range(len(d)) for d in per_dim]):
            wins = [per_dim[i][j] for i, j in enumerate(index)]
            slices = tuple(slice(a, b) for a, b, _ in wins)
            count = int(np.prod([b - a for a, b, _ in wins]))
            count_inc = int(np.prod([c for _, _, c in wins]))
            yield index, slices, count, count_inc

    def _check_input(self, x, what="input"):
        """``x`` as a tensor of rank >= ndim and a real dtype."""
        x = as_tensor_variable(x)
        if x.ndim < self.ndim:
            raise TypeError(f"{self}: the {what} {x} must have at least {self.ndim} dimensions "
                            f"(the last {self.ndim} are pooled), got {x.ndim}")
        if x.dtype not in FLOAT_DTYPES + INT_DTYPES:
            raise TypeError(f"{self}: the {what} {x} must be a float or integer tensor, got "
                            f"dtype {x.dtype}")
        return x

    def _like_input(self, x, var, what):
        """``var`` (a gradient given with the input ``x``) as a tensor of x's rank,
        cast to x's dtype; TypeError naming ``what`` on another rank."""
        var = as_tensor_variable(var)
        if var.ndim != x.ndim:
            raise TypeError(f"{self}: the {what} {var} ({var.ndim}-d) must have the rank "
                            f"of the input {x} ({x.ndim}-d)")
        if var.dtype != x.dtype:
            from symgraph.ops.math import cast

            var = cast(var, x.dtype)
        return var

    def _as_batch(self, array):
        """``array`` viewed as (batch, *image) (a copy where a view is not possible)."""
        nd = self.ndim
        lead = array.shape[:-nd]
        return array.reshape((int(np.prod(lead, dtype=np.int64)),) + array.shape[-nd:]), lead

    def _check_pooled(self, x_shape, other, what):
        """ValueError unless ``other`` has the pooled shape of ``x_shape``."""
        want = tuple(x_shape[:-self.ndim]) + self.out_size(x_shape[-self.ndim:])
        if tuple(other.shape) != want:
            raise ValueError(f"{self}: the {what} has shape {tuple(other.shape)} but pooling "
                             f"an input of shape {tuple(x_shape)} gives {want}")


def work_dtype(dtype):
    """The dtype sums run in: float16 is widened to float32."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


class Pool(PoolBase):
    """Max, sum or average pooling over the last ``ndim`` dimensions (see the
    module docstring for the window, padding and output-size rules)."""

    def make_node(self, x):
        x = self._check_input(x)
        if self.mode.startswith("average") and x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self}: average pooling needs a float input, got {x} of dtype "
                            f"{x.dtype} (cast it first)")
        out = TensorType(x.dtype, shape=self.static_out_shape(x.type))()
        return Apply(self, [x], [out])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        nd = self.ndim
        batch, lead = self._as_batch(x)
        pooled = self.out_size(x.shape[-nd:])
        work = x.dtype if self.mode == "max" else work_dtype(x.dtype)
        out = np.empty((batch.shape[0],) + pooled, dtype=work)
        if out.size:
            axes = tuple(range(1, nd + 1))
            for index, slices, count, count_inc in self.window_items(x.shape[-nd:]):
                region = batch[(slice(None),) + slices]
                if self.mode == "max":
                    value = region.max(axis=axes)
                else:
                    value = region.sum(axis=axes, dtype=work)
                    if self.mode == "average_exc_pad":
                        value = value / work.type(count)
                    elif self.mode == "average_inc_pad":
                        value = value / work.type(count_inc)
                out[(slice(None),) + index] = value
        output_storage[0][0] = out.reshape(lead + pooled).astype(x.dtype, copy=False)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = input_shapes[0]
        return [tuple(shape[:-self.ndim]) + tuple(self.symbolic_out_size(shape[-self.ndim:]))]

    def L_op(self, inputs, outputs, output_grads):
        from symgraph.ops.pool_grad import AveragePoolGrad, MaxPoolGrad

        (x,), (out,), (gz,) = inputs, outputs, output_grads
        if self.mode == "max":
            return [MaxPoolGrad(**self.params())(x, out, gz)]
        return [AveragePoolGrad(mode=self.mode, **self.params())(x, gz)]

    def R_op(self, inputs, eval_points):
        # Max pooling picks one element per window: its directional derivative
        # is the eval point at that element, which DownsampleFactorMaxGradGrad
        # gathers.  The other modes are linear.
        from symgraph.ops.pool_grad import DownsampleFactorMaxGradGrad

        if eval_points[0] is None:
            return [None]
        if self.mode == "max":
            x = inputs[0]
            return [DownsampleFactorMaxGradGrad(**self.params())(x, self(x), eval_points[0])]
        return [self(eval_points[0])]

    @staticmethod
    def out_shape(imgshape, ws=None, ignore_border=False, stride=None, pad=None, ndim=2):
        """Theano's ``Pool.out_shape``: the output shape (a list) for an input
        of shape ``imgshape`` (ints, or symbolic int64 scalars)."""
        op = Pool(ndim=ndim, ignore_border=ignore_border, ws=ws, stride=stride, pad=pad)
        if len(imgshape) < ndim:
            raise TypeError(f"Pool.out_shape: imgshape must have at least {ndim} entries, "
                            f"got {tuple(imgshape)!r}")
        img = list(imgshape[-ndim:])
        if all(isinstance(s, (int, np.integer)) for s in img):
            return list(imgshape[:-ndim]) + list(op.out_size([int(s) for s in img]))
        return list(imgshape[:-ndim]) + op.symbolic_out_size(img)
