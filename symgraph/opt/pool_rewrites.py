"""Pooling rewrites: static windows for PoolDynamic, and the argmax path.

Phase ``canonicalize`` (tag ``fast_run``): ``local_pool_dynamic_static``
replaces ``PoolDynamic`` and ``PoolDynamicGrad`` (``ops/pool_dynamic.py``),
once their window, stride and padding are constants, by the static ``Pool``
and gradient ops, which have native kernels.

Max pooling keeps its argmax for the backward pass (``ops/pool_argmax.py``).

Phase ``specialize`` (tags ``fast_run``, ``pool_argmax``):
``local_max_pool_grad_from_argmax`` replaces ``MaxPoolGrad(x, Pool(x), gz)``,
when that ``Pool`` node is in the graph (a training step), by
``MaxPoolGradFromArgmax(x, gz, argmax)``, and the ``Pool`` node by
``MaxPoolWithArgmax(x)``, whose first output is the same maximum and whose
second is the argmax.  The backward pass then scatters ``gz`` instead of
reading ``x`` again to find each maximum; the results are the same bits
(same tie rule: the first maximum in row-major window order; NaN the
maximum).  ``MaxPoolGrad`` with a ``maxout`` of any other origin stays.
Exclude the tag ``pool_argmax`` to keep the recomputing form.

It fires only where the argmax kernels have their vector path (2D, 2x2
windows, stride 2, no padding, float32: the usual CNN layer): measured on
64x32x30x30 float32, forward + backward 1.4-1.9 ms against 2.5 ms for
``Pool`` + ``MaxPoolGrad``.  For other windows the generic argmax scan costs
more than the forward it replaces (3x3 stride 2: about 13 + 2 ms against
15 ms; 3x3 stride 3: 6 + 5 ms against 9 ms), so those keep ``MaxPoolGrad``.
"""

from symgraph.ops.pool import Pool
from symgraph.ops.pool_argmax import MaxPoolGradFromArgmax, MaxPoolWithArgmax
from symgraph.ops.pool_dynamic import PoolDynamic, PoolDynamicGrad
from symgraph.ops.pool_grad import MaxPoolGrad
from symgraph.opt.registry import register
from symgraph.opt.rewriter import node_rewriter
from symgraph.opt.utils import conform


def _same_pooling(op, other):
    return op.params() == other.params()


def _argmax_pays(op, dtype):
    """Whether the argmax kernels beat Pool + MaxPoolGrad here (see above)."""
    return (dtype == "float32" and op.ndim == 2 and op.ws == (2, 2) and op.stride == (2, 2)
            and op.pad == (0, 0))


@node_rewriter([MaxPoolGrad])
def local_max_pool_grad_from_argmax(fgraph, node):
    """``MaxPoolGrad(x, Pool(x), gz) -> MaxPoolGradFromArgmax(x, gz, argmax)``
    with ``(Pool(x), argmax) = MaxPoolWithArgmax(x)``."""
    x, maxout, gz = node.inputs
    forward = maxout.owner
    if forward is None or forward.inputs[0] is not x or \
            not _same_pooling(node.op, forward.op) or not _argmax_pays(node.op, x.dtype):
        return None
    params = node.op.params()
    replacements = {}
    if isinstance(forward.op, MaxPoolWithArgmax):
        # another gradient already rewrote this forward node: share its argmax
        argmax = forward.outputs[1]
    elif type(forward.op) is Pool and forward.op.mode == "max":
        new_max, argmax = MaxPoolWithArgmax(**params)(x)
        new_max = conform(new_max, maxout)
        if new_max is None:
            return None
        replacements[maxout] = new_max
    else:
        return None
    grad = conform(MaxPoolGradFromArgmax(**params)(x, gz, argmax), node.outputs[0])
    if grad is None:
        return None
    replacements[node.outputs[0]] = grad
    return replacements


register(local_max_pool_grad_from_argmax, "fast_run", "pool_argmax", phase="specialize")


@node_rewriter([PoolDynamic, PoolDynamicGrad])
def local_pool_dynamic_static(fgraph, node):
    """``PoolDynamic(x, ws, stride, pad)`` with constant parameters -> ``Pool(x)``
    (and the same for its gradient); values that Pool refuses stay dynamic, so
    the call reports Pool's error."""
    from symgraph.graph.basic import Constant

    params = node.inputs[-3:]
    if not all(isinstance(p, Constant) for p in params):
        return None
    try:
        if isinstance(node.op, PoolDynamic):
            new = Pool(mode=node.op.mode, **node.op.static_params(*(p.data for p in params)))(
                node.inputs[0])
        else:
            op = node.op.static_op(*(p.data for p in params))
            x, out, gz = node.inputs[:3]
            new = op(x, out, gz) if node.op.mode == "max" else op(x, gz)
    except (TypeError, ValueError):
        return None
    return [conform(new, node.outputs[0])]


register(local_pool_dynamic_static, "fast_run", phase="canonicalize")
