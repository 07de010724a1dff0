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
from symgraph.backends.c_family.c_files import c_file

__all__ = ["loss_kernel", "driver_text"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 2

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

_DRIVER = Template(c_file("cpu/nnet/loss_driver.inc"))

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


def driver_text(dtype):
    """(key, C text) of the cross-entropy driver of storage ``dtype`` (float16,
    32 or 64): in the support library, compiled once, not in every kernel."""
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
    support = (MVEC_SUPPORT, SUPPORT_ENTRY, _targets(index_dtype))
    return CKernel(source=source, support=support, version=VERSION)
