"""CUDA of batch normalization: ``AbstractBatchNormTrain`` (with or without
running averages), ``AbstractBatchNormTrainGrad`` and
``AbstractBatchNormInference`` over any axes (``c_src/cuda/batchnorm.inc``).

The host part splits x's dimensions into the kept ones (the channels) and the
normalized ones, checks every parameter's shape with the CPU's message, and
reads epsilon and the running average factor, which stay on the host.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.cuda.nnet import _BLOCK_REDUCE
from symgraph.backends.native.kernel import CKernel

__all__ = ["batchnorm_reason", "batchnorm_lowering", "batchnorm_host_inputs"]

VERSION = 1
BLOCK = 256
MAX_BLOCKS = 4096
MAX_DIMS = 8
_DTYPES = ("float16", "float32", "float64")

_KERNELS = (f"sg_cuda_batchnorm_v{VERSION}",
            f"#define SG_CU_BN_BLOCK {BLOCK}\n" + c_file("cuda/batchnorm.inc"))

# Per op: the parameters' names and input indices, their slots in the
# geometry's parameter strides (array 3 + slot), and the host scalars.
_ROLES = {
    "AbstractBatchNormTrain": ((("scale", 1), ("bias", 2), ("running_mean", 5),
                                ("running_var", 6)), (3, 4)),
    "AbstractBatchNormTrainGrad": ((("scale", 2), ("x_mean", 3), ("x_invstd", 4)), (5,)),
    "AbstractBatchNormInference": ((("scale", 1), ("bias", 2), ("estimated_mean", 3),
                                    ("estimated_variance", 4)), (5,)),
}


def batchnorm_reason(node):
    """None when the batch normalization ``node`` runs on the device, else why not."""
    x = node.inputs[0]
    if str(x.dtype) not in _DTYPES:
        return f"dtype {x.dtype} has no device batch normalization"
    if x.ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    return None


def batchnorm_host_inputs(node):
    """epsilon and the running average factor: scalars read on the host."""
    return _ROLES[type(node.op).__name__][1]


def _strides(index, keep_field, red_field=None, item="T"):
    """C: input ``index``'s element strides into the geometry's fields (kept
    dimensions, and normalized ones when ``red_field``); size 1: stride 0."""
    red = f"""            else {{ g.{red_field}[nr++] = s; }}
""" if red_field else "            else { nr++; }\n"
    return f"""    {{
        const sg_array *v = &in[{index}];
        int nk = 0, nr = 0;
        for (int d = 0; d < v->ndim; d++) {{
            const int64_t s = v->shape[d] == 1 ? 0 : v->strides[d] / (int64_t)sizeof({item});
            if (!SG_FN(is_axis)[d]) {{ g.{keep_field}[nk++] = s; }}
{red}        }}
    }}
"""


def batchnorm_lowering(op, node):
    """The CKernel (CUDA source) of a batch normalization node, or None."""
    if batchnorm_reason(node) is not None:
        return None
    cls = type(op).__name__
    params, scalars = _ROLES[cls]
    params = [(name, i) for name, i in params if i < len(node.inputs)]
    x = node.inputs[0]
    dtype, ndim = str(x.dtype), x.ndim
    work = "float" if dtype in ("float16", "float32") else "double"
    name = c_string(str(op), printf=True)
    what = c_string(f"the device {op}", quote=True, limit=120)
    axes = ", ".join("1" if d in op.axes else "0" for d in range(ndim))
    checks = "".join(f"""    if (SG_FN(check)(in, {i}, "{pname}", err)) return 1;
""" for pname, i in params)
    strides = _strides(0, "xk", "xr")
    for slot, (_, i) in enumerate(params):
        strides += _strides(i, f"pk[{slot}]")
    if cls == "AbstractBatchNormTrainGrad":
        strides += _strides(1, "dk", "dr")
        checks = f"""    if (in[1].ndim != in[0].ndim ||
        memcmp(in[1].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a1[300], b1[300];
        SG_FAIL(err, SG_ERR_VALUE, "{name}: dy has shape %s, but x has shape %s",
                SG_FN(text)(a1, in[1].shape, in[1].ndim), SG_FN(text)(b1, in[0].shape, in[0].ndim));
    }}
""" + checks
    eps = f"*(const {work} *)in[{scalars[0]}].data"
    if cls == "AbstractBatchNormTrain":
        running = len(node.inputs) > 5
        n_out = 5 if running else 3
        kernel = "sg_cu_bn_train<T, W>"
        launch = (f"g, (const T *)in[0].data, (const T *)in[1].data, "
                  f"(const T *)in[2].data, {eps}, *(const {work} *)in[4].data, "
                  + ("(const T *)in[5].data, (const T *)in[6].data, " if running else
                     "(const T *)NULL, (const T *)NULL, ")
                  + "(T *)out[0].data, (T *)out[1].data, (T *)out[2].data, "
                  + ("(T *)out[3].data, (T *)out[4].data" if running else "(T *)NULL, (T *)NULL"))
        grid = "g.channels"
    elif cls == "AbstractBatchNormTrainGrad":
        n_out = 3
        kernel = "sg_cu_bn_train_grad<T, W>"
        launch = ("g, (const T *)in[0].data, (const T *)in[1].data, "
                  "(const T *)in[2].data, (const T *)in[3].data, (const T *)in[4].data, "
                  "(T *)out[0].data, (T *)out[1].data, (T *)out[2].data")
        grid = "g.channels"
    else:
        n_out = 1
        kernel = "sg_cu_bn_inference<T, W>"
        launch = ("g, (const T *)in[0].data, (const T *)in[1].data, "
                  "(const T *)in[2].data, (const T *)in[3].data, (const T *)in[4].data, "
                  f"{eps}, (T *)out[0].data")
        grid = f"(g.channels * g.m + {BLOCK} - 1) / {BLOCK}"
    shapes = "".join(f"""    for (int d = 0; d < {ndim}; d++)
        out_shapes[{k} * SG_MAXDIMS + d] = {'in[0].shape[d]' if k == 0 else
                                            '(SG_FN(is_axis)[d] ? 1 : in[0].shape[d])'};
""" for k in range(n_out))
    source = f"""#define T {storage_type(dtype)}
#define W {work}
static const int SG_FN(is_axis)[{ndim}] = {{{axes}}};

static const char *SG_FN(text)(char *buf, const int64_t *shape, int n) {{
    size_t used = (size_t)snprintf(buf, 300, "(");
    for (int d = 0; d < n && used < 300; d++)
        used += (size_t)snprintf(buf + used, 300 - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < 300) snprintf(buf + used, 300 - used, n == 1 ? ",)" : ")");
    return buf;
}}

/* Error unless input i has the reduced shape of x (the Python perform's message). */
static int SG_FN(check)(const sg_array *in, int i, const char *pname, sg_error *err) {{
    int64_t want[{ndim}];
    int bad = in[i].ndim != {ndim};
    for (int d = 0; d < {ndim}; d++) {{
        want[d] = SG_FN(is_axis)[d] ? 1 : in[0].shape[d];
        if (!bad && in[i].shape[d] != want[d]) bad = 1;
    }}
    if (!bad) return 0;
    char a[300], b[300], c[300];
    SG_FAIL(err, SG_ERR_VALUE, "{name}: %s has shape %s, but x of shape %s normalized over "
            "axes {c_string(str(op.axes), printf=True)} needs %s", pname,
            SG_FN(text)(a, in[i].shape, in[i].ndim), SG_FN(text)(b, in[0].shape, {ndim}),
            SG_FN(text)(c, want, {ndim}));
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;
{shapes}    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
{checks}    sg_cu_bn_geom g;
    memset(&g, 0, sizeof g);
    g.channels = g.m = 1;
    int64_t ostride = 1, ost[{ndim}];
    for (int d = {ndim} - 1; d >= 0; d--) {{
        ost[d] = in[0].shape[d] == 1 ? 0 : ostride;
        ostride *= in[0].shape[d];
    }}
    for (int d = 0; d < {ndim}; d++) {{
        if (SG_FN(is_axis)[d]) {{
            g.orr[g.nred] = ost[d];
            g.red[g.nred++] = in[0].shape[d];
            g.m *= in[0].shape[d];
        }} else {{
            g.ok[g.nkeep] = ost[d];
            g.keep[g.nkeep++] = in[0].shape[d];
            g.channels *= in[0].shape[d];
        }}
    }}
{strides}    if (g.channels == 0) return 0;
    int64_t blocks = {grid};
    if (blocks > {MAX_BLOCKS}) blocks = {MAX_BLOCKS};
    if (blocks < 1) return 0;
    auto kernel = {kernel};
    SG_LAUNCH(kernel, (unsigned)blocks, {BLOCK}, 0, {launch});
    SG_CUDA_CHECK(err, {what});
    return 0;
}}
#undef T
#undef W
"""
    return CKernel(source=source, support=(_BLOCK_REDUCE, _KERNELS),
                   headers=("<string.h>", "<stdio.h>"), version=VERSION)
