"""CUDA of the pooling family: ``Pool`` (every mode), ``MaxPoolWithArgmax``,
and the gradients ``MaxPoolGrad``, ``MaxPoolGradFromArgmax``,
``AveragePoolGrad``, ``DownsampleFactorMaxGradGrad`` and
``MaxPoolArgmaxGather`` (``c_src/cuda/pool.inc``).

The host part (the pooled shape, the checks of the pooled operands and their
messages) is the CPU kernels' (``c_src/cpu/pool/geometry.inc``); the window
parameters are the op's, static.  ``PoolDynamic`` and ``PoolDynamicGrad``
(a symbolic window, ``ops/pool_dynamic.py``) run the same kernels: their
window, stride and padding are int64 vectors that stay on the host
(``pool_host_inputs``), read and checked when each call starts, with the
messages of the static op the CPU builds from them (``_DYNAMIC``).
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type, has_c_type
from symgraph.backends.cpu.pool.forward import _GEOMETRY, _Gen
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["pool_reason", "pool_lowering", "pool_host_inputs"]

VERSION = 1
BLOCK = 256
MAX_BLOCKS = 4096
#: The most batch (leading) dimensions a device pooling takes (sg_cu_pool_args).
MAX_LEAD = 8
_MODES = {"max": 0, "sum": 1, "average_inc_pad": 2, "average_exc_pad": 3}

_KERNELS = (f"sg_cuda_pool_v{VERSION}", c_file("cuda/pool.inc"))

# (kernel, output with x's shape?) per op class name; the inputs' roles are in _run.
_KINDS = {"Pool": "forward", "MaxPoolWithArgmax": "forward", "MaxPoolGrad": "grad",
          "MaxPoolGradFromArgmax": "grad", "AveragePoolGrad": "grad",
          "DownsampleFactorMaxGradGrad": "gather", "MaxPoolArgmaxGather": "gather",
          "PoolDynamic": "forward", "PoolDynamicGrad": "grad"}

#: The first of the (ws, stride, pad) inputs of the ops with a symbolic window.
_WINDOW_INPUT = {"PoolDynamic": 1, "PoolDynamicGrad": 3}


def pool_host_inputs(node):
    """The window, stride and padding of a symbolic-window pooling: read on the host."""
    first = _WINDOW_INPUT.get(type(node.op).__name__)
    return () if first is None else range(first, first + 3)


def pool_reason(node):
    """None when the pooling ``node`` runs on the device, else why not."""
    x = node.inputs[0]
    if type(node.op).__name__ not in _KINDS:
        return f"no device pooling for {type(node.op).__name__}"
    if not has_c_type(str(x.dtype)) or str(x.dtype).startswith("complex"):
        return f"dtype {x.dtype} has no device pooling"
    if x.ndim - node.op.ndim > MAX_LEAD:
        return f"more than {MAX_LEAD} batch dimensions before the pooled ones"
    # the kernel reads the pooled maximum as x's type; unlike MaxPoolGrad,
    # PoolDynamicGrad does not make its dtype x's
    if type(node.op).__name__ == "PoolDynamicGrad" and node.op.mode == "max" and \
            node.inputs[1].dtype != x.dtype:
        return (f"the pooled maximum has dtype {node.inputs[1].dtype}, "
                f"the input {x.dtype}")
    return None


def _acc(dtype):
    return "float" if dtype in ("float16", "float32") else c_type(dtype)


def _view(index, name, item="T"):
    """C: the strides of input ``index`` (of C type ``item``) into the
    sg_cu_pool_view ``name``."""
    return f"""    sg_cu_pool_view {name};
    SG_FN(view)(&in[{index}], (int64_t)sizeof({item}), &{name});
"""


# The host geometry of a symbolic-window op: its window, stride and padding
# read from the int64 vectors in[$P], in[$P + 1], in[$P + 2] (any stride) and
# checked in the order and with the messages of the static op's constructor
# (ops/pool.py PoolBase), which the CPU builds for each call; the pooled shape
# and the operand checks as the static geometry's, named as that op prints.
_DYNAMIC = c_file("cuda/pool_dynamic.inc")


def _static_name(op):
    """The static op a symbolic-window op's node runs as (its CPU ``perform``'s)."""
    cls = type(op).__name__
    if cls == "PoolDynamic":
        return "Pool"
    if cls == "PoolDynamicGrad":
        return "MaxPoolGrad" if op.mode == "max" else "AveragePoolGrad"
    return cls


def _geometry(op, dtype):
    """(C text of the host geometry, the statement that declares and fills
    ``w`` (or nothing), the pooled-shape call's extra argument, the window
    arrays' names, the operand check's extra argument, the op's printf name)."""
    cls = type(op).__name__
    if cls not in _WINDOW_INPUT:
        gen = _Gen(op, dtype)
        return (_GEOMETRY.substitute(gen.subs()), "", "",
                ("SG_FN(ws)", "SG_FN(st)", "SG_FN(pd)"), "", gen.name)
    from string import Template

    text = Template(_DYNAMIC).substitute(
        ND=op.ndim, P=_WINDOW_INPUT[cls], IB=int(op.ignore_border), STATIC=_static_name(op),
        IBTEXT=str(op.ignore_border), MODE=op.mode)
    fill = "    SG_FN(win) w;\n    if (SG_FN(window)(in, &w, err)) return 1;\n"
    return text, fill, "&w, ", ("w.ws", "w.st", "w.pd"), "&w, ", _static_name(op)


def pool_lowering(op, node):
    """The CKernel (CUDA source) of a pooling node, or None."""
    if pool_reason(node) is not None:
        return None
    cls = type(op).__name__
    kind = _KINDS[cls]
    dtype = str(node.inputs[0].dtype)
    geometry, fill, warg, (ws, st, pd), carg, name = _geometry(op, dtype)
    nd = op.ndim
    what = c_string(f"the device {op}", quote=True, limit=120)
    argmax_t = "uint8_t"
    if cls in ("MaxPoolWithArgmax",):
        argmax_t = c_type(str(node.outputs[1].dtype))
    elif cls in ("MaxPoolGradFromArgmax", "MaxPoolArgmaxGather"):
        argmax_t = c_type(str(node.inputs[2].dtype))
    mode = _MODES.get(getattr(op, "mode", "max"), 0)
    checks, launch, size = "", "", "a.out"

    def check(index, label):
        return (f'    if (SG_FN(check)(&in[0], &in[{index}], "{label}", {carg}err)) '
                f'return 1;\n')

    if kind == "forward":
        shape = f"    SG_FN(pooled)(&in[0], {warg}out_shapes);\n"
        if cls == "MaxPoolWithArgmax":
            shape += f"    SG_FN(pooled)(&in[0], {warg}out_shapes + SG_MAXDIMS);\n"
        arg = f"({argmax_t} *)out[1].data" if cls == "MaxPoolWithArgmax" else \
            f"({argmax_t} *)NULL"
        views = _view(0, "xv")
        kernel = "sg_cu_pool_fwd<T, ACC, A>"
        launch = f"a, xv, (const T *)in[0].data, (T *)out[0].data, {arg}"
    elif kind == "grad":
        shape = "    for (int d = 0; d < in[0].ndim; d++) out_shapes[d] = in[0].shape[d];\n"
        # (pooled operand, output gradient) inputs and the grad kernel's kind;
        # PoolDynamicGrad is (x, maxout, gz, ws, stride, pad) in every mode.
        static = _static_name(op)
        if cls == "PoolDynamicGrad":
            pooled, grad, code, label = (1, 2, 0, "pooled maximum") if op.mode == "max" \
                else (2, 2, 2, None)
        else:
            pooled, grad, code, label = {"MaxPoolGrad": (1, 2, 0, "pooled maximum"),
                                         "MaxPoolGradFromArgmax": (2, 1, 1, "argmax"),
                                         "AveragePoolGrad": (1, 1, 2, None)}[static]
        if label is not None:
            checks += check(pooled, label)
        checks += check(grad, "output gradient")
        views = _view(0, "xv") + _view(pooled, "pv", "A" if code == 1 else "T") + \
            _view(grad, "gv")
        kernel = "sg_cu_pool_grad<T, ACC, A>"
        launch = (f"a, {code}, xv, (const T *)in[0].data, pv, (const void *)in[{pooled}].data, "
                  f"gv, (const T *)in[{grad}].data, (T *)out[0].data")
        size = "a.in"
    else:
        # DownsampleFactorMaxGradGrad(x, maxout, ggx), MaxPoolArgmaxGather(x, ggx, argmax)
        pooled, ggx, label = (1, 2, "pooled maximum") if cls == "DownsampleFactorMaxGradGrad" \
            else (2, 1, "argmax")
        shape = f"    for (int d = 0; d < in[{pooled}].ndim; d++) " \
            f"out_shapes[d] = in[{pooled}].shape[d];\n"
        checks = check(pooled, label)
        checks += f"""    if (in[{ggx}].ndim != in[0].ndim ||
        memcmp(in[{ggx}].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a1[200], b1[200];
        sg_pool_shape_text(a1, sizeof a1, in[{ggx}].shape, in[{ggx}].ndim);
        sg_pool_shape_text(b1, sizeof b1, in[0].shape, in[0].ndim);
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the input-shaped gradient has shape %s but "
                "the input has shape %s", a1, b1);
    }}
"""
        views = _view(0, "xv") + _view(pooled, "pv", "A" if pooled == 2 else "T") + \
            _view(ggx, "gv")
        kernel = "sg_cu_pool_gather<T, ACC, A>"
        launch = (f"a, {int(pooled == 2)}, xv, (const T *)in[0].data, pv, "
                  f"(const void *)in[{pooled}].data, gv, (const T *)in[{ggx}].data, "
                  f"(T *)out[0].data")
    source = (f"#define T {storage_type(dtype)}\n#define ACC {_acc(dtype)}\n"
              f"#define A {argmax_t}\n/* {name} */\n"
              + geometry + f"""
/* The strides of a (batch..., pooled...) operand, in elements; a pooled
 * dimension of a 2-D pooling's leading slot, or of size 1, has stride 0. */
static void SG_FN(view)(const sg_array *v, int64_t item, sg_cu_pool_view *out) {{
    const int nl = v->ndim - {nd};
    for (int d = 0; d < SG_CU_POOL_LEAD; d++) out->lead[d] = 0;
    for (int d = 0; d < nl; d++)
        out->lead[d] = v->shape[d] == 1 ? 0 : v->strides[d] / item;
    out->sp[0] = 0;
    for (int i = 0; i < {nd}; i++) {{
        const int d = nl + i;
        out->sp[3 - {nd} + i] = v->shape[d] == 1 ? 0 : v->strides[d] / item;
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;
{fill}{shape}    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
{fill}{checks}    sg_cu_pool_args a;
    const sg_array *x = &in[0];
    const int nl = x->ndim - {nd};
    int64_t pooled[SG_MAXDIMS];
    SG_FN(pooled)(x, {warg}pooled);
    a.nlead = nl;
    a.batch = SG_FN(batch)(x);
    for (int d = 0; d < nl; d++) a.lead[d] = x->shape[d];
    for (int d = 0; d < 3; d++) {{
        a.in[d] = a.out[d] = a.ws[d] = a.stride[d] = 1;
        a.pad[d] = 0;
    }}
    for (int i = 0; i < {nd}; i++) {{
        const int d = 3 - {nd} + i;
        a.in[d] = x->shape[nl + i];
        a.out[d] = pooled[nl + i];
        a.ws[d] = {ws}[i];
        a.stride[d] = {st}[i];
        a.pad[d] = {pd}[i];
    }}
    a.mode = {mode};
    const int64_t total = a.batch * {size}[0] * {size}[1] * {size}[2];
    if (total == 0) return 0;
{views}    int64_t blocks = (total + {BLOCK} - 1) / {BLOCK};
    if (blocks > {MAX_BLOCKS}) blocks = {MAX_BLOCKS};
    auto kernel = {kernel};
    SG_LAUNCH(kernel, (unsigned)blocks, {BLOCK}, 0, {launch});
    SG_CUDA_CHECK(err, {what});
    return 0;
}}
#undef T
#undef ACC
#undef A
""")
    return CKernel(source=source, support=(_KERNELS,),
                   headers=('"sg_pool.h"', "<string.h>", "<stdio.h>"), version=VERSION)
