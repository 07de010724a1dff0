"""Native kernels for the cross-entropy ops of ``ops/nnet_loss.py``.

``SoftmaxCrossEntropy1Hot`` (``nll`` and ``sm`` of each row),
``SoftmaxCrossEntropy1HotGrad`` (``dnll * (sm - one_hot)``),
``CrossentropyCategorical1Hot`` (``-log(c[i, t])``) and its gradient.

Every kernel first converts the targets to int64 indices in ``[0, k)``
(negative ones counted from the end, as the Python ``perform``); a bad index
fails the call with an IndexError naming the op, the row and the index.

The softmax rows reuse the row cores of ``softmax_codegen`` (the vectorized
maximum and the blocked exp-and-sum, libmvec's ``exp``), so that the fused op's
``sm`` rounds as ``Softmax``'s does.  Rows whose elements are contiguous are
computed where they lie; any other layout, and float16, goes through a
workspace of one row in the compute type (float16 in float32).  The outputs
are the runtime's C-contiguous arrays.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_SUFFIXES as _DTYPES
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["loss_kernel"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 1

#: The op codes of the driver's ``op`` argument.
FUSED, FUSED_GRAD, CATEGORICAL, CATEGORICAL_GRAD = 0, 1, 2, 3

#: Per storage dtype: (suffix of the C names, compute type's suffix).

_TARGETS = Template(r"""
/* ---- symgraph cross-entropy targets, ${IT} (see nnet_loss_codegen.py) ---- */
/* t[i] = the target of row i in [0, k), negative ones counted from the end;
   returns the first row whose target is out of range (its value in *bad), or -1. */
static int64_t sg_ce_targets_${IS}(const sg_array *y, int64_t k, int64_t *t, long long *bad) {
    const int64_t n = y->shape[0], s = y->strides[0];
    for (int64_t i = 0; i < n; i++) {
        const ${IT} raw = *(const ${IT} *)(y->data + i * s);
        ${CHECK}
        t[i] = w;
    }
    return -1;
}
""")

_SIGNED_CHECK = """const int64_t v = (int64_t)raw, w = v < 0 ? v + k : v;
        if (w < 0 || w >= k) { *bad = (long long)v; return i; }"""
_UNSIGNED_CHECK = """if ((uint64_t)raw >= (uint64_t)k) { *bad = (long long)raw; return i; }
        const int64_t w = (int64_t)raw;"""

_DRIVER = Template(r"""
/* ---- symgraph cross-entropy, ${S} computed in ${T} (see nnet_loss_codegen.py) ---- */
#define SG_CE_AT(a, i, j) (*(${S} *)((a)->data + (i) * (a)->strides[0] + (j) * (a)->strides[1]))
#define SG_CE_VEC(a, i) (*(${S} *)((a)->data + (i) * (a)->strides[0]))

/* The fused forward: nll (out[0]) and softmax (out[1]) of the rows of x. */
static int sg_ce_fused_${Y}(const sg_array *x, const int64_t *t, sg_array *out,
                            const char *name, sg_error *err) {
    const int64_t n = x->shape[0], k = x->shape[1];
    sg_array *nll = &out[0], *sm = &out[1];
    const int direct = ${SAME} && (k <= 1 || x->strides[1] == (int64_t)sizeof(${S}));
    ${T} *ws = NULL;
    if (!direct || !${SAME}) {
        ws = (${T} *)malloc(2 * (size_t)k * sizeof(${T}));
        if (!ws)
            SG_FAIL(err, SG_ERR_MEMORY, "%s: cannot allocate a workspace of %lld elements",
                    name, (long long)(2 * k));
    }
    for (int64_t i = 0; i < n; i++) {
        const ${T} *a;
        if (direct) a = (const ${T} *)(x->data + i * x->strides[0]);
        else {
            for (int64_t j = 0; j < k; j++) ws[j] = (${T})SG_CE_AT(x, i, j);
            a = ws;
        }
        /* the output row is contiguous (the runtime's array) */
        ${T} *y = ${SAME} ? (${T} *)(sm->data + i * sm->strides[0]) : ws + k;
        const ${T} m = sg_nn_max_${X}(a, k);
        const ${T} s = (${T})sg_nn_expsum_${X}(a, y, k, m);
        /* log(sum) - (x[t] - m), rounded as the Python perform */
        SG_CE_VEC(nll, i) = (${S})(${LOG}(s) - (a[t[i]] - m));
        for (int64_t j = 0; j < k; j++) y[j] /= s;
        if (!${SAME})
            for (int64_t j = 0; j < k; j++) SG_CE_AT(sm, i, j) = (${S})y[j];
    }
    free(ws);
    return 0;
}

/* dx = dnll[i] * (sm - one_hot(t)); dnll of length 1 is broadcast. */
static void sg_ce_fused_grad_${Y}(const sg_array *d, const sg_array *sm, const int64_t *t,
                                  sg_array *dx) {
    const int64_t n = sm->shape[0], k = sm->shape[1];
    const int64_t ds = d->shape[0] == 1 ? 0 : d->strides[0];
    const int contiguous = ${SAME} && (k <= 1 || sm->strides[1] == (int64_t)sizeof(${S}));
    for (int64_t i = 0; i < n; i++) {
        const ${T} g = (${T})*(const ${S} *)(d->data + i * ds);
        if (contiguous) {
            const ${T} *restrict a = (const ${T} *)(sm->data + i * sm->strides[0]);
            ${T} *restrict o = (${T} *)(dx->data + i * dx->strides[0]);
            for (int64_t j = 0; j < k; j++) o[j] = g * a[j];
            o[t[i]] = g * (a[t[i]] - 1);
        } else {
            for (int64_t j = 0; j < k; j++)
                SG_CE_AT(dx, i, j) = (${S})(g * (${T})SG_CE_AT(sm, i, j));
            SG_CE_AT(dx, i, t[i]) = (${S})(g * ((${T})SG_CE_AT(sm, i, t[i]) - 1));
        }
    }
}

/* nll[i] = -log(c[i, t[i]]). */
static void sg_ce_categorical_${Y}(const sg_array *c, const int64_t *t, sg_array *nll) {
    for (int64_t i = 0; i < c->shape[0]; i++)
        SG_CE_VEC(nll, i) = (${S})(-${LOG}((${T})SG_CE_AT(c, i, t[i])));
}

/* zeros, except out[i, t[i]] = -g[i] / c[i, t[i]]; g of length 1 is broadcast. */
static void sg_ce_categorical_grad_${Y}(const sg_array *g, const sg_array *c, const int64_t *t,
                                        sg_array *dc) {
    const int64_t n = c->shape[0], k = c->shape[1];
    const int64_t gs = g->shape[0] == 1 ? 0 : g->strides[0];
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < k; j++) SG_CE_AT(dc, i, j) = (${S})0;
        const ${T} gi = (${T})*(const ${S} *)(g->data + i * gs);
        SG_CE_AT(dc, i, t[i]) = (${S})(-gi / (${T})SG_CE_AT(c, i, t[i]));
    }
}

static int sg_ce_run_${Y}(int op, const sg_array *in, sg_array *out, const int64_t *t,
                          const char *name, sg_error *err) {
    switch (op) {
    case 0: return sg_ce_fused_${Y}(&in[0], t, out, name, err);
    case 1: sg_ce_fused_grad_${Y}(&in[0], &in[1], t, &out[0]); return 0;
    case 2: sg_ce_categorical_${Y}(&in[0], t, &out[0]); return 0;
    default: sg_ce_categorical_grad_${Y}(&in[0], &in[1], t, &out[0]); return 0;
    }
}
#undef SG_CE_AT
#undef SG_CE_VEC
""")

# Per op: (op code, index of the matrix input, of the targets, of a gradient vector or None).
_LAYOUT = {
    "SoftmaxCrossEntropy1Hot": (FUSED, 0, 1, None),
    "SoftmaxCrossEntropy1HotGrad": (FUSED_GRAD, 1, 2, 0),
    "CrossentropyCategorical1Hot": (CATEGORICAL, 0, 1, None),
    "CrossentropyCategorical1HotGrad": (CATEGORICAL_GRAD, 1, 2, 0),
}


def _targets(dtype):
    suffix = dtype.replace("int", "i")
    check = _UNSIGNED_CHECK if dtype.startswith("uint") else _SIGNED_CHECK
    return (f"sg_ce_targets_{suffix}_v{VERSION}",
            _TARGETS.substitute(IT=c_type(dtype), IS=suffix, CHECK=check))


def _driver(dtype):
    suffix, core = _DTYPES[dtype]
    ctype = {"f32": "float", "f64": "double"}[core]
    return (f"sg_ce_driver_{suffix}_v{VERSION}", _DRIVER.substitute(
        S=c_type(dtype), T=ctype, X=core, Y=suffix, SAME="1" if suffix == core else "0",
        LOG="logf" if ctype == "float" else "log"))


def _shape_code(mat, tgt, grad, name):
    """The shape function: the Python perform's checks (ValueError), then the shapes."""
    checks = f"""    if (in[{tgt}].shape[0] != in[{mat}].shape[0])
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the targets have %lld entries but there are "
                "%lld rows", (long long)in[{tgt}].shape[0], (long long)in[{mat}].shape[0]);
"""
    if grad is not None:
        checks += f"""    if (in[{grad}].shape[0] != 1 && in[{grad}].shape[0] != in[{mat}].shape[0])
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the gradient has %lld entries but there are "
                "%lld rows", (long long)in[{grad}].shape[0], (long long)in[{mat}].shape[0]);
"""
    return checks


def loss_kernel(kind, op, node):
    """The CKernel of a cross-entropy node of ``ops/nnet_loss.py`` (``kind``: its
    op's class name, a key of ``_LAYOUT``), or None where it has no native code
    (a dtype other than float16/32/64)."""
    from symgraph.backends.cpu.elemwise.loop import MVEC_SUPPORT
    from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY

    code, mat, tgt, grad = _LAYOUT[kind]
    dtype = str(node.outputs[0].dtype)
    if dtype not in _DTYPES:
        return None
    index_dtype = str(node.inputs[tgt].dtype)
    name = c_string(str(op), printf=True)
    suffix = _DTYPES[dtype][0]
    if code == FUSED:
        shapes = """    out_shapes[0] = in[0].shape[0];
    out_shapes[SG_MAXDIMS] = in[0].shape[0];
    out_shapes[SG_MAXDIMS + 1] = in[0].shape[1];"""
    elif code == CATEGORICAL:
        shapes = "    out_shapes[0] = in[0].shape[0];"
    else:
        shapes = f"""    out_shapes[0] = in[{mat}].shape[0];
    out_shapes[1] = in[{mat}].shape[1];"""
    source = f"""/* {name} */
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
{_shape_code(mat, tgt, grad, name)}{shapes}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const int64_t n = in[{tgt}].shape[0], k = in[{mat}].shape[1];
    if (n == 0) return 0;
    int64_t *t = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    if (!t)
        SG_FAIL(err, SG_ERR_MEMORY, "{name}: cannot allocate %lld target indices", (long long)n);
    long long bad = 0;
    const int64_t row = sg_ce_targets_{index_dtype.replace("int", "i")}(&in[{tgt}], k, t, &bad);
    if (row >= 0) {{
        free(t);
        SG_FAIL(err, SG_ERR_INDEX, "{name}: target index %lld in row %lld is out of range "
                "for %lld classes", bad, (long long)row, (long long)k);
    }}
    const int status = sg_ce_run_{suffix}({code}, in, out, t, "{name}", err);
    free(t);
    return status;
}}
"""
    support = (MVEC_SUPPORT, SUPPORT_ENTRY, _targets(index_dtype), _driver(dtype))
    return CKernel(source=source, support=support, version=VERSION)
