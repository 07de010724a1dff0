"""Native kernels of ``DnnConv``, ``DnnConvGradI`` and ``DnnConvGradW`` (``ops/conv_algorithms.py``).

The algorithms (``c_src/conv/sg_conv.h``) compute a cross-correlation on
C-contiguous buffers of the compute type; a kernel here adapts a node to
them:

* ``shape``: the geometry (``sg_conv_geom``) from the run-time shapes and the
  border mode ('full' and 'half' pads depend on the filter size, which for
  the filter gradient is the value of the shape input), checks of channels,
  groups and the output gradient's shape (errors name the op), and the output
  shape;
* ``run``: the two operands gathered into contiguous compute-type buffers
  (not copied when they already are), the filters flipped when the op is a
  true convolution, float16 data widened (and, for precision 'float16', every
  operand and the result rounded to float16); the algorithm chosen
  (``c_src/conv/sg_conv_choose.h``: the flag's, its fallback, a guess or a
  timing) and run with its own workspace; the result converted (and, for the
  filter gradient of a true convolution, flipped) into the output.  An
  operand with no elements makes the output zeros, without an algorithm.

The algorithms are not compiled into the kernel: they live in the algorithm
library of ``conv_library.py`` (built once into the compile cache, with its
BLAS pointers set once); a kernel includes only ``conv/sg_conv_api.h`` (via
``sg_conv_choose.h``) and receives the address of the library's table, and
the tuning callbacks of ``conv_tuning.py``, through ``CKernel.symbols``.  A
new kernel is then a small compile.  (The linker's key hashes every header
and template under ``c_src/``, so an edited algorithm still rebuilds them.)

The forward op's epilogue (``DnnConv`` with ``bias=True`` and/or
``activation='relu'``: ``act(conv(x, w) + bias[k])``) is applied by the
library: right after each image for the algorithms that work image by
image, after the whole call for the others, before the result is converted
into the output.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.c_family.c_files import c_file

__all__ = ["conv_kernel", "VERSION", "DIRECTIONS", "MODES"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 2

DIRECTIONS = {"fwd": 0, "bwd_data": 1, "bwd_filter": 2}
#: The choice modes of sg_conv_choose.h, by meta algorithm (a concrete one is FIXED).
MODES = {"guess_once": 1, "guess_on_shape_change": 2, "time_once": 3,
         "time_on_shape_change": 4}
_BORDER = {"valid": 0, "full": 1, "half": 2}



# -- support: strided copies between storage and compute types ------------------------

_COPY = c_file("cpu/conv/copy.inc")


def _copy_support(storage, compute):
    from string import Template

    names = {"_Float16": "f16", "float": "f32", "double": "f64"}
    return (f"sg_convk_copy_{names[storage]}_{names[compute]}_v{VERSION}",
            Template(_COPY).substitute(S=storage, T=compute, SN=names[storage],
                                       TN=names[compute]))


_SHAPE_TEXT = (f"sg_convk_dims_v{VERSION}", r"""
/* n sizes as Python prints a tuple: (3, 4). */
static const char *sg_convk_dims(char *buf, size_t len, const int64_t *v, int n) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < n && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                                 (long long)v[d]);
    if (used < len) snprintf(buf + used, len - used, n == 1 ? ",)" : ")");
    return buf;
}
""")


# -- the kernel source -----------------------------------------------------------------

def _c_ints(values):
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _geometry(op, name, shape_ctype):
    """C: ``SG_FN(geom)(in, g, out_shape, err)``, the geometry of a call and
    its output shape, with the op's checks."""
    nd, off = op.convdim, 3 - op.convdim
    border = op.border_mode
    mode = _BORDER.get(border, 3) if isinstance(border, str) else 3
    pads = border if isinstance(border, tuple) else (0,) * nd
    direction = op.direction
    if direction == "fwd":
        roles = """    const sg_array *x = &in[0], *w = &in[1];
    g->N = x->shape[0]; g->C = x->shape[1]; g->K = w->shape[0];
    for (int d = 0; d < SG_CONVK_ND; d++) { sp_in[d] = x->shape[2 + d]; sp_k[d] = w->shape[2 + d]; }
    const int64_t cg = w->shape[1];
"""
        if getattr(op, "bias", False):
            roles += f"""    if (in[2].ndim != 1 || in[2].shape[0] != g->K)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the bias has %lld entries but there are %lld "
                "filters", (long long)(in[2].ndim ? in[2].shape[0] : 1), (long long)g->K);
"""
    elif direction == "bwd_data":
        roles = f"""    const sg_array *w = &in[0], *dy = &in[1], *sh = &in[2];
    if (sh->shape[0] != SG_CONVK_ND)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the image's spatial shape has %lld entries, "
                "not %d", (long long)sh->shape[0], SG_CONVK_ND);
    g->N = dy->shape[0]; g->K = w->shape[0];
    const int64_t cg = w->shape[1];
    g->C = cg * SG_CONVK_G;
    if (dy->shape[1] != g->K)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the output gradient has %lld channels but there "
                "are %lld filters", (long long)dy->shape[1], (long long)g->K);
    for (int d = 0; d < SG_CONVK_ND; d++) {{
        sp_in[d] = (int64_t)*(const {shape_ctype} *)(sh->data + d * sh->strides[0]);
        sp_k[d] = w->shape[2 + d];
        if (sp_in[d] < 0)
            SG_FAIL(err, SG_ERR_VALUE, "{name}: the image's spatial shape has a negative "
                    "entry %lld", (long long)sp_in[d]);
    }}
"""
    else:
        roles = f"""    const sg_array *x = &in[0], *dy = &in[1], *sh = &in[2];
    if (sh->shape[0] != SG_CONVK_ND)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the filters' spatial shape has %lld entries, "
                "not %d", (long long)sh->shape[0], SG_CONVK_ND);
    g->N = x->shape[0]; g->C = x->shape[1]; g->K = dy->shape[1];
    const int64_t cg = SG_CONVK_G ? g->C / SG_CONVK_G : 0;
    if (dy->shape[0] != g->N)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the output gradient has a batch of %lld but the "
                "image has %lld", (long long)dy->shape[0], (long long)g->N);
    for (int d = 0; d < SG_CONVK_ND; d++) {{
        sp_in[d] = x->shape[2 + d];
        sp_k[d] = (int64_t)*(const {shape_ctype} *)(sh->data + d * sh->strides[0]);
        if (sp_k[d] < 0)
            SG_FAIL(err, SG_ERR_VALUE, "{name}: the filters' spatial shape has a negative "
                    "entry %lld", (long long)sp_k[d]);
    }}
"""
    if direction == "fwd":
        result = "    out_shape[0] = g->N; out_shape[1] = g->K;\n" \
                 "    for (int d = 0; d < SG_CONVK_ND; d++) out_shape[2 + d] = sp_out[d];\n"
    elif direction == "bwd_data":
        result = "    out_shape[0] = g->N; out_shape[1] = g->C;\n" \
                 "    for (int d = 0; d < SG_CONVK_ND; d++) out_shape[2 + d] = sp_in[d];\n"
    else:
        result = "    out_shape[0] = g->K; out_shape[1] = cg;\n" \
                 "    for (int d = 0; d < SG_CONVK_ND; d++) out_shape[2 + d] = sp_k[d];\n"
    top_check = ""
    if direction != "fwd":
        top_check = f"""    for (int d = 0; d < SG_CONVK_ND; d++)
        if (dy->shape[2 + d] != sp_out[d]) {{
            char a[80], b[80], c[80], e[80];
            SG_FAIL(err, SG_ERR_VALUE, "{name}: an image of spatial shape %s and filters of "
                    "spatial shape %s give an output of spatial shape %s, but the output "
                    "gradient has spatial shape %s",
                    sg_convk_dims(a, sizeof a, sp_in, SG_CONVK_ND),
                    sg_convk_dims(b, sizeof b, sp_k, SG_CONVK_ND),
                    sg_convk_dims(c, sizeof c, sp_out, SG_CONVK_ND),
                    sg_convk_dims(e, sizeof e, dy->shape + 2, SG_CONVK_ND));
        }}
"""
    return f"""
#define SG_CONVK_ND {nd}
#define SG_CONVK_G {op.num_groups}
/* The geometry of the call and the output shape; 0, or 1 with err set. */
static int SG_FN(geom)(const sg_array *in, sg_conv_geom *g, int64_t *out_shape,
                       sg_error *err) {{
    static const int64_t stride[SG_CONVK_ND] = {_c_ints(op.subsample)},
                         dil[SG_CONVK_ND] = {_c_ints(op.filter_dilation)},
                         fixed_pad[SG_CONVK_ND] = {_c_ints(pads)};
    int64_t sp_in[SG_CONVK_ND], sp_k[SG_CONVK_ND], sp_out[SG_CONVK_ND];
    memset(g, 0, sizeof *g);
    g->G = SG_CONVK_G;
{roles}    if (g->C % SG_CONVK_G)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the image has %lld channels, which num_groups=%d "
                "does not divide", (long long)g->C, SG_CONVK_G);
    if (g->K % SG_CONVK_G)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: there are %lld filters, which num_groups=%d does "
                "not divide", (long long)g->K, SG_CONVK_G);
    if (g->C != cg * SG_CONVK_G)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the image has %lld channels but the filters "
                "expect %lld per group x %d groups = %lld", (long long)g->C, (long long)cg,
                SG_CONVK_G, (long long)(cg * SG_CONVK_G));
    for (int d = 0; d < 3; d++) {{ g->in[d] = g->k[d] = g->out[d] = 1; g->stride[d] = 1;
                                   g->dil[d] = 1; g->pad[d] = 0; }}
    for (int d = 0; d < SG_CONVK_ND; d++) {{
        const int64_t span = dil[d] * (sp_k[d] - 1) + 1;
        int64_t pad = fixed_pad[d];
        if ({mode} == 1) pad = span - 1;
        else if ({mode} == 2) pad = span / 2;
        const int64_t room = sp_in[d] + 2 * pad - span;
        if (room < 0)
            SG_FAIL(err, SG_ERR_VALUE, "{name}: along spatial axis %d the filters (size %lld, "
                    "dilated %lld) are larger than the padded image (size %lld + 2 x %lld)",
                    d, (long long)sp_k[d], (long long)span, (long long)sp_in[d],
                    (long long)pad);
        sp_out[d] = room / stride[d] + 1;
        g->in[{off} + d] = sp_in[d]; g->k[{off} + d] = sp_k[d]; g->out[{off} + d] = sp_out[d];
        g->stride[{off} + d] = stride[d]; g->dil[{off} + d] = dil[d]; g->pad[{off} + d] = pad;
    }}
{top_check}{result}    return 0;
}}
"""


def _run(op, node, name, key_name, storage, compute, r16):
    """C: ``SG_FN(run)``."""
    from symgraph.config import config

    direction = op.direction
    dbl = int(compute == "double")
    flip_in = {"fwd": "-1, 2", "bwd_data": "2, -1", "bwd_filter": "-1, -1"}[direction]
    flip_out = 2 if (direction == "bwd_filter" and op.filter_flip) else -1
    if not op.filter_flip:
        flip_in = "-1, -1"
    same = storage == compute and not r16
    impl = op.impl()
    from symgraph.backends.cpu.conv.tuning import IMPLS

    mode = MODES.get(op.algo, 0)
    requested = IMPLS.index(impl) if impl is not None else -1
    ctype = {"float": "f32", "double": "f64"}[compute] + ("h" if r16 else "")
    a, b = (1, 0) if direction == "bwd_data" else (0, 1)
    bias_setup, empty_epilogue, bias_free, bias_arg, relu = _epilogue(op, name, storage,
                                                                      compute, r16)
    return f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    sg_conv_geom g;
    return SG_FN(geom)(in, &g, out_shapes, err);
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static sg_conv_memo memo;
    sg_conv_geom g;
    int64_t shape[SG_MAXDIMS];
    if (sg_conv_library_ready("{name}", err) || SG_FN(geom)(in, &g, shape, err)) return 1;
    const int64_t n_out = sg_size(&out[0]), n_a = sg_size(&in[0]), n_b = sg_size(&in[1]);
    if (n_out == 0) return 0;
{bias_setup}{empty_epilogue}    if (n_a == 0 || n_b == 0) {{
        /* an empty sum: zeros */
        static const {storage} zero = 0;
        int64_t st[SG_MAXDIMS], idx[SG_MAXDIMS] = {{0}};
        char *p = (char *)out[0].data;
        for (int d = 0; d < out[0].ndim; d++) st[d] = out[0].strides[d];
        for (int64_t i = 0; i < n_out; i++) {{
            memcpy(p, &zero, sizeof zero);
            for (int d = out[0].ndim - 1; d >= 0; d--) {{
                p += st[d];
                if (++idx[d] < out[0].shape[d]) break;
                p -= idx[d] * st[d];
                idx[d] = 0;
            }}
        }}
        return 0;
    }}
    static const int flips[2] = {{{flip_in}}};
    {compute} *buf[3] = {{NULL, NULL, NULL}};
    const void *ops[2];
    int rc = 1;
    for (int k = 0; k < 2; k++) {{
        if ({int(same)} && flips[k] < 0 && sg_is_c_contiguous(&in[k], sizeof({storage}))) {{
            ops[k] = in[k].data;
            continue;
        }}
        buf[k] = ({compute} *)malloc((size_t)sg_size(&in[k]) * sizeof({compute}));
        if (!buf[k]) {{
            err->kind = SG_ERR_MEMORY;
            snprintf(err->msg, sizeof err->msg, "{name}: cannot allocate a copy of input %d", k);
            goto done;
        }}
        sg_convk_gather_{_SN[storage]}_{_SN[compute]}(&in[k], buf[k], flips[k], {int(r16)});
        ops[k] = buf[k];
    }}
    {compute} *res;
    const int direct = {int(same)} && {flip_out} < 0 &&
                       sg_is_c_contiguous(&out[0], sizeof({storage}));
    if (direct) {{
        res = ({compute} *)out[0].data;
    }} else {{
        res = buf[2] = ({compute} *)malloc((size_t)n_out * sizeof({compute}));
        if (!res) {{
            err->kind = SG_ERR_MEMORY;
            snprintf(err->msg, sizeof err->msg, "{name}: cannot allocate the result buffer");
            goto done;
        }}
    }}
    /* the algorithms take (dy, w) for bwd_data: the node's inputs swapped */
    sg_conv_call call = {{{DIRECTIONS[direction]}, {dbl}, &g, ops[{a}], ops[{b}], res,
                          {bias_arg}, {relu}}};
    int ran = 0;
    const int impl = sg_conv_choose(&memo, &call, {mode}, {requested},
                                    (size_t){int(config.dnn.conv.workmem_bytes)}ULL,
                                    "{key_name}", "{ctype}", &ran, err);
    if (impl < 0) goto done;
    if (!ran && sg_conv_run_impl(&call, impl, "{name}", err)) goto done;
    if (!direct) sg_convk_scatter_{_SN[compute]}_{_SN[storage]}(res, &out[0], {flip_out},
                                                                {int(r16)});
    rc = 0;
done:
    for (int k = 0; k < 3; k++) free(buf[k]);
{bias_free}    return rc;
}}
#undef SG_CONVK_ND
#undef SG_CONVK_G
"""


_SN = {"_Float16": "f16", "float": "f32", "double": "f64"}


def _epilogue(op, name, storage, compute, r16):
    """C pieces of the forward epilogue: (setup, empty-operand case, cleanup,
    the call's bias argument, its relu flag).  The bias is gathered into a
    compute-type vector; with an empty operand the output is act(bias)."""
    bias = op.direction == "fwd" and getattr(op, "bias", False)
    relu = int(op.direction == "fwd" and getattr(op, "activation", None) == "relu")
    if not bias and not relu:
        return "", "", "", "NULL", 0
    setup = ""
    free = ""
    if bias:
        setup = f"""    {compute} *bias = ({compute} *)malloc((size_t)g.K * sizeof({compute}));
    if (!bias) {{
        err->kind = SG_ERR_MEMORY;
        snprintf(err->msg, sizeof err->msg, "{name}: cannot allocate a copy of the bias");
        return 1;
    }}
    sg_convk_gather_{_SN[storage]}_{_SN[compute]}(&in[2], bias, -1, {int(r16)});
"""
        free = "    free(bias);\n"
    value = "bias[k]" if bias else "0"
    act = "v < 0 ? 0 : v" if relu else "v"
    empty = f"""    if (n_a == 0 || n_b == 0) {{
        /* an empty sum: act(0 + bias) everywhere */
        {compute} *filled = ({compute} *)malloc((size_t)n_out * sizeof({compute}));
        if (!filled) {{
            {"free(bias); " if bias else ""}err->kind = SG_ERR_MEMORY;
            snprintf(err->msg, sizeof err->msg, "{name}: cannot allocate the result buffer");
            return 1;
        }}
        const int64_t per = n_out / (g.N * g.K);
        for (int64_t i = 0; i < n_out; i++) {{
            const int64_t k = (i / per) % g.K;
            const {compute} v = {value};
            (void)k;
            filled[i] = {act};
        }}
        sg_convk_scatter_{_SN[compute]}_{_SN[storage]}(filled, &out[0], -1, {int(r16)});
        free(filled);
{free}        return 0;
    }}
"""
    return setup, empty, free, "bias" if bias else "NULL", relu


def conv_kernel(op, node):
    """The CKernel of a concrete convolution node, or None where it has no
    native code (dtypes other than float16/32/64)."""
    from symgraph.backends.cpu.conv import library as conv_library
    from symgraph.backends.cpu.conv.tuning import op_key, tuning_symbols

    dtype = str(node.outputs[0].dtype)
    data = node.inputs[:3] if op.direction == "fwd" else node.inputs[:2]
    if dtype not in ("float16", "float32", "float64") or \
            any(str(v.dtype) != dtype for v in data):
        return None
    shape_ctype = None
    if op.direction != "fwd":
        shape_dtype = str(node.inputs[2].dtype)
        if not shape_dtype.startswith(("int", "uint")):
            return None
        shape_ctype = c_type(shape_dtype)
    storage = c_type(dtype)
    compute = "double" if op.precision == "float64" else "float"
    r16 = op.precision == "float16" and dtype != "float16"
    name = c_string(str(op), printf=True)
    key_name = c_string(op_key(op), printf=True)
    source = (_geometry(op, name, shape_ctype)
              + _run(op, node, name, key_name, storage, compute, r16))
    support = [_SHAPE_TEXT, _copy_support(storage, compute)]
    # Start the algorithm library's build now (a cold cache) so that it
    # overlaps this kernel's compile.  The kernel runs no parallel loop of its
    # own: the library does.
    conv_library.prefetch()
    return CKernel(source=source, support=tuple(support),
                   headers=('"conv/sg_conv_choose.h"',),
                   symbols=conv_library.SYMBOLS + tuple(tuning_symbols()), version=VERSION)
