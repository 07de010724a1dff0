"""CUDA for fills (``Alloc``) and basic ``inc_subtensor`` / ``set_subtensor``
(``IncSubtensor``: a view of the output updated in place, no atomics since
basic indexing never repeats an element); ``index_reason`` answers for every
indexing node.

Advanced indexing (``AdvancedSubtensor``, ``AdvancedIncSubtensor``: integer
arrays, masks, slices and ints in any mix, setting or adding) is lowered in
``symgraph.backends.cuda.advanced``.  Index values and sizes stay on the host
(``host_inputs``): they are checked there with the CPU's errors and only
what the kernels need is copied to the device; the device never reports an
error.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.cuda.shape import SHAPE_STR
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["index_reason", "strided_copy_kernel", "STRIDES", "alloc_lowering",
           "inc_subtensor_lowering", "MAX_DIMS"]

MAX_DIMS = 8
BLOCK = 256


def index_reason(node):
    """None when the gather/scatter/fill ``node`` runs on the device, else why not."""
    name = type(node.op).__name__
    dtype = str(node.outputs[0].dtype)
    if not has_c_type(dtype):
        return f"dtype {dtype} has no CUDA indexing code yet"
    if node.outputs[0].ndim > MAX_DIMS or node.inputs[0].ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    if name in ("AdvancedSubtensor", "AdvancedIncSubtensor"):
        from symgraph.backends.cuda.advanced import advanced_reason

        return advanced_reason(node)
    return None


# Reads one index of any integer dtype (the kind codes of _KIND).
_READ_INDEX = ("sg_cuda_read_index_v1", """
static int64_t sg_cuda_read_index(const char *p, int kind) {
    switch (kind) {
        case 0: return *(const int8_t *)p;   case 1: return *(const int16_t *)p;
        case 2: return *(const int32_t *)p;  case 3: return *(const int64_t *)p;
        case 4: return *(const uint8_t *)p;  case 5: return *(const uint16_t *)p;
        case 6: return *(const uint32_t *)p; default: return (int64_t)*(const uint64_t *)p;
    }
}
""")

_KIND = {"int8": 0, "int16": 1, "int32": 2, "int64": 3, "uint8": 4, "uint16": 5, "uint32": 6,
         "uint64": 7}


#: Support code: the by-value array of per-dimension sizes or byte strides
#: that the device kernels take.
STRIDES = ("sg_cuda_strides_v1", "typedef struct { int64_t s[8]; } sg_cuda_strides;\n")


def strided_copy_kernel(name, T):
    """CUDA of ``SG_FN(name)(total, n, src, st, shape, out)``: the contiguous
    ``out`` (``total`` elements of type ``T``, ``n`` dims of sizes ``shape``)
    read from ``src`` with byte strides ``st`` (0: broadcast); needs
    ``STRIDES`` in the kernel's support code."""
    return f"""
__global__ void SG_FN({name})(int64_t total, int n, const char *src, sg_cuda_strides st,
                              sg_cuda_strides shape, {T} *out) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, off = 0;
        for (int k = n - 1; k >= 0; k--) {{ off += (rem % shape.s[k]) * st.s[k]; rem /= shape.s[k]; }}
        out[j] = *(const {T} *)(src + off);
    }}
}}
"""


def alloc_lowering(op, node):
    """CUDA of Alloc: ``value`` broadcast into a new array of the given shape
    (the sizes are host inputs)."""
    if index_reason(node) is not None:
        return None
    value, out = node.inputs[0], node.outputs[0]
    n, lead = out.ndim, out.ndim - node.inputs[0].ndim
    T = storage_type(out.dtype)
    # As on the CPU, a size-1 dimension of the value broadcasts only where its
    # type declares it; the errors are the CPU kernel's, shapes included (the
    # node seen here has unnamed host stand-ins: "the value" names none).
    bcast = "{" + ", ".join(["1" if b else "0" for b in value.type.broadcastable] + ["0"]) + "}"
    source = strided_copy_kernel("kernel", T) + f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    static const int bcast[] = {bcast};
    char s0[256], s1[256];
    (void)bcast; (void)s0; (void)s1;
    for (int d = 0; d < {n}; d++)
        out_shapes[d] = sg_cuda_read_index(in[1 + d].data, IDX_KIND_SHAPE[d]);
    for (int d = 0; d < {n}; d++) {{
        if (out_shapes[d] >= 0) continue;
        sg_cuda_dims_str(out_shapes, {n}, s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "Alloc: negative size in the requested shape %s", s1);
    }}
    for (int d = 0; d < {value.ndim}; d++) {{
        int64_t have = in[0].shape[d], want = out_shapes[{lead} + d];
        if (have == want || bcast[d]) continue;
        sg_cuda_shape_str(&in[0], s0, sizeof s0);
        sg_cuda_dims_str(out_shapes, {n}, s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "Alloc: cannot broadcast the value of shape %s to %s: "
                "dimension %d has size %lld and is not declared broadcastable", s0, s1, d,
                (long long)have);
    }}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    sg_cuda_strides vst, shape;
    int64_t total = 1;
    for (int d = 0; d < {n}; d++) {{
        shape.s[d] = out[0].shape[d]; total *= shape.s[d];
        int k = d - {lead};
        vst.s[d] = (k < 0 || in[0].shape[k] == 1) ? 0 : in[0].strides[k];
    }}
    if (total == 0) return 0;
    int64_t blocks = (total + {BLOCK} - 1) / {BLOCK};
    if (blocks > 4096) blocks = 4096;
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, total, {n}, in[0].data, vst, shape,
              ({T} *)out[0].data);
    SG_CUDA_CHECK(err, "the device fill (Alloc)");
    return 0;
}}
"""
    kinds = "{" + ", ".join(str(_KIND[str(v.dtype)]) for v in node.inputs[1:]) + "}" \
        if n else "{0}"
    source = f"static const int SG_FN(kinds)[] = {kinds};\n#define IDX_KIND_SHAPE SG_FN(kinds)\n" \
        + source + "\n#undef IDX_KIND_SHAPE\n"
    return CKernel(source=source, support=(_READ_INDEX, STRIDES, SHAPE_STR),
                   headers=("<stdio.h>",), version=2)


def inc_subtensor_lowering(op, node):
    """CUDA of IncSubtensor (basic indexing): x copied into the output, then y
    added to (or stored into) the view ``out[idx]``.  The view and the checks
    of y's shape are the CPU kernel's host C (descriptors only); the index
    values are host inputs.  Basic indexing never repeats an element, so the
    update needs no atomics."""
    from symgraph.backends.cpu.index.basic import _basic_index, _support, _value_check
    from symgraph.backends.cpu.shape.codegen import all_have_c_types
    from symgraph.ops.subtensor import SliceSpec

    if not all_have_c_types(node) or index_reason(node) is not None:
        return None
    x = node.inputs[0]
    n = x.ndim
    T = storage_type(x.dtype)
    sub_ndim = n - sum(1 for e in op.idx_list if not isinstance(e, SliceSpec))
    update = "=" if op.set_instead_of_inc else "+="
    source = f"""
typedef struct {{ int n; int64_t shape[{max(n, 1)}], src[{max(n, 1)}], dst[{max(n, 1)}]; }} SG_FN(geom);

__global__ void SG_FN(copy)(int64_t total, SG_FN(geom) g, const char *src, char *dst) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, s = 0, d = 0;
        for (int k = g.n - 1; k >= 0; k--) {{
            int64_t idx = rem % g.shape[k]; rem /= g.shape[k];
            s += idx * g.src[k]; d += idx * g.dst[k];
        }}
        *({T} *)(dst + d) {update.replace("+=", "=")} *(const {T} *)(src + s);
    }}
}}

__global__ void SG_FN(update)(int64_t total, SG_FN(geom) g, const char *src, char *dst) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, s = 0, d = 0;
        for (int k = g.n - 1; k >= 0; k--) {{
            int64_t idx = rem % g.shape[k]; rem /= g.shape[k];
            s += idx * g.src[k]; d += idx * g.dst[k];
        }}
        *({T} *)(dst + d) {update} *(const {T} *)(src + s);
    }}
}}

static int SG_FN(launch)(int kind, int nd, const int64_t *shape, const int64_t *src_st,
                         const int64_t *dst_st, const char *src, char *dst, sg_error *err) {{
    SG_FN(geom) g;
    int64_t total = 1;
    g.n = nd;
    for (int k = 0; k < nd; k++) {{
        g.shape[k] = shape[k]; g.src[k] = src_st[k]; g.dst[k] = dst_st[k]; total *= shape[k];
    }}
    if (total == 0) return 0;
    int64_t blocks = (total + {BLOCK} - 1) / {BLOCK};
    if (blocks > 4096) blocks = 4096;
    if (kind == 0) SG_LAUNCH(SG_FN(copy), (unsigned)blocks, {BLOCK}, 0, total, g, src, dst);
    else SG_LAUNCH(SG_FN(update), (unsigned)blocks, {BLOCK}, 0, total, g, src, dst);
    SG_CUDA_CHECK(err, "the device inc_subtensor");
    return 0;
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;
    for (int d = 0; d < {n}; d++) out_shapes[d] = in[0].shape[d];
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    if (SG_FN(launch)(0, {n}, in[0].shape, in[0].strides, out[0].strides, in[0].data,
                      out[0].data, err)) return 1;
    sg_array view;
{_basic_index(op, node, 2, "(&out[0])", c_string(x, quote=True))}
{_value_check(op, node, "view.shape", sub_ndim)}
    return SG_FN(launch)(1, {sub_ndim}, view.shape, ys, view.strides, in[1].data, view.data,
                         err);
}}
"""
    return CKernel(source=source, support=_support(), version=1)
