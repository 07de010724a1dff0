"""CUDA for gathers, scatter-adds and fills: ``x[:, ..., i0, ..., ik]``, one
integer array for each of consecutive dimensions after whole ones, the others
taken whole (``AdvancedSubtensor``: ``x[idx]`` picks rows, ``x[:, idx]``
columns, ``x[rows, cols]`` elements, ``W[ids]`` with a matrix of ids an
embedding lookup; the index arrays have one rank and broadcast together),
its increment (``AdvancedIncSubtensor``, repeated indices accumulating with
atomics), and ``Alloc``.

Index vectors and sizes stay on the host (``host_inputs``): they are checked
there with the CPU's errors, normalized (negative indices count back) and
copied to the device once per call; the device never reports an error.
Other index forms (partial slices mixed with arrays, index arrays apart or of
different ranks, boolean masks) stay on the CPU.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.cuda import scratch
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["index_reason", "gather_lowering", "scatter_add_lowering", "alloc_lowering",
           "inc_subtensor_lowering", "MAX_DIMS"]

MAX_DIMS = 8
BLOCK = 256

_ATOMIC_DTYPES = ("float32", "float64", "int32")


def _array_indices(node, first_index):
    """``(s, k, r)`` when the node's index is ``s`` whole dimensions (``:``),
    then one integer array of rank ``r`` for each of the next ``k`` dimensions,
    the rest whole; else None."""
    from symgraph.ops.advanced_subtensor import _entries
    from symgraph.ops.subtensor import FULL_SLICE

    x = node.inputs[0]
    entries = _entries(node.op, x, node.op.idx_list, node.inputs[first_index:])
    s = 0
    while s < len(entries) and entries[s][0] == "slice" and entries[s][1][0] == FULL_SLICE:
        s += 1
    arrays = entries[s:]
    if not arrays or not all(kind == "array" and value.ndim >= 1 for kind, value, _ in arrays):
        return None
    ranks = {value.ndim for _, value, _ in arrays}
    if len(ranks) != 1:
        return None
    return s, len(arrays), ranks.pop()


def index_reason(node):
    """None when the gather/scatter/fill ``node`` runs on the device, else why not."""
    name = type(node.op).__name__
    dtype = str(node.outputs[0].dtype)
    if not has_c_type(dtype):
        return f"dtype {dtype} has no CUDA indexing code yet"
    if node.outputs[0].ndim > MAX_DIMS or node.inputs[0].ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    if name == "AdvancedSubtensor" and not _array_indices(node, 1):
        return ("only integer arrays of one rank on consecutive dimensions, after whole ones "
                "(x[idx], x[:, idx], W[id_matrix]), are gathered on the device")
    if name == "AdvancedIncSubtensor":
        if node.op.set_instead_of_inc:
            return "setting with repeated indices has no deterministic device order"
        if not _array_indices(node, 2):
            return ("only integer arrays of one rank on consecutive dimensions, after whole "
                    "ones, are scattered on the device")
        s, k, r = _array_indices(node, 2)
        if node.inputs[0].ndim - k + r > MAX_DIMS:
            return f"more than {MAX_DIMS} dimensions in the indexed part"
        if dtype not in _ATOMIC_DTYPES:
            return f"no device atomic add for {dtype}"
    return None


def _index_code(first, n, r, name, axis0=0):
    """Host C: the ``n`` index arrays (rank ``r``) at inputs ``first``..
    broadcast together to ``bsh`` (``count`` entries), checked against x's
    shape, normalized, copied to the device as ``dev_idx`` (n * count int64,
    array k's entries at k * count, in row-major order of ``bsh``)."""
    return f"""    int64_t bsh[{r}], count = 1;
    for (int d = 0; d < {r}; d++) {{
        bsh[d] = 1;
        for (int k = 0; k < {n}; k++) {{
            int64_t len = in[{first} + k].shape[d];
            if (len != 1 && bsh[d] != 1 && len != bsh[d])
                SG_FAIL(err, SG_ERR_INDEX, "{name}: shape mismatch: indexing arrays could not "
                        "be broadcast together (sizes %lld and %lld along their dimension %d)",
                        (long long)bsh[d], (long long)len, d);
            if (len != 1) bsh[d] = len;
        }}
        for (int k = 0; k < {n}; k++) if (in[{first} + k].shape[d] == 0) bsh[d] = 0;
        count *= bsh[d];
    }}
    int64_t *host = (int64_t *)malloc((size_t)({n} * (count > 0 ? count : 1)) * sizeof(int64_t));
    if (host == NULL) SG_FAIL(err, SG_ERR_MEMORY, "no host memory for the indices");
    for (int k = 0; k < {n}; k++) {{
        const sg_array *v = &in[{first} + k];
        int64_t size = in[0].shape[{axis0} + k];
        for (int64_t j = 0; j < count; j++) {{
            int64_t rem = j, off = 0;
            for (int d = {r} - 1; d >= 0; d--) {{
                if (v->shape[d] != 1) off += (rem % bsh[d]) * v->strides[d];
                rem /= bsh[d];
            }}
            int64_t t = sg_cuda_read_index(v->data + off, IDX_KIND[k]);
            if (t < -size || t >= size) {{
                free(host);
                SG_FAIL(err, SG_ERR_INDEX, "{name}: index %lld is out of bounds for axis %d "
                        "with size %lld", (long long)t, {axis0} + k, (long long)size);
            }}
            host[k * count + j] = t < 0 ? t + size : t;
        }}
    }}
    int64_t *dev_idx = NULL;
    size_t dev_idx_size = 0;
    if (count > 0) {{
        dev_idx = (int64_t *)sg_cu_scratch((size_t)({n} * count) * sizeof(int64_t), &dev_idx_size);
        if (dev_idx == NULL) {{
            free(host);
            SG_FAIL(err, SG_ERR_MEMORY, "{name}: no device memory for %lld indices",
                    (long long)({n} * count));
        }}
        cudaMemcpy(dev_idx, host, (size_t)({n} * count) * sizeof(int64_t),
                   cudaMemcpyHostToDevice);
    }}
    free(host);
"""


# Reads one index of any integer dtype (the kind codes of _kind_code).
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


def _kinds(index_inputs):
    return "{" + ", ".join(str(_KIND[str(v.dtype)]) for v in index_inputs) + "}"


def gather_lowering(op, node):
    """CUDA of ``x[:, ..., i0, ..., ik]``: ``s`` whole dimensions, index
    arrays (rank r) on the next ``k``, the rest whole.  The result is (x's
    first s sizes, the index arrays' broadcast shape, x's last sizes); the
    kernel sees the index dimensions as one of ``count`` entries."""
    if index_reason(node) is not None:
        return None
    x = node.inputs[0]
    n = x.ndim
    s, k, r = _array_indices(node, 1)
    T = storage_type(x.dtype)
    name = c_string(op, printf=True, limit=80)
    source = f"""
/* element e of the result is (l, j, r): l over x's first s dimensions, j the
 * index entry, r over the dimensions after the indexed ones */
__global__ void SG_FN(kernel)(int64_t lead, int64_t count, int64_t inner, int s, int k, int n,
                              const char *x, sg_cuda_strides st, sg_cuda_strides shape,
                              const int64_t *idx, {T} *out) {{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < lead * count * inner;
         e += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = e % inner, t = e / inner, off = 0;
        const int64_t j = t % count;
        int64_t l = t / count;
        for (int d = n - 1; d >= s + k; d--) {{ off += (rem % shape.s[d]) * st.s[d]; rem /= shape.s[d]; }}
        for (int q = 0; q < k; q++) off += idx[q * count + j] * st.s[s + q];
        for (int d = s - 1; d >= 0; d--) {{ off += (l % shape.s[d]) * st.s[d]; l /= shape.s[d]; }}
        out[e] = *(const {T} *)(x + off);
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;           /* index arrays that do not broadcast: run says so */
    for (int d = 0; d < {s}; d++) out_shapes[d] = in[0].shape[d];
    for (int d = 0; d < {r}; d++) {{
        int64_t size = 1;
        for (int q = 0; q < {k}; q++) {{
            const int64_t len = in[1 + q].shape[d];
            if (len != 1) size = len;
        }}
        for (int q = 0; q < {k}; q++) if (in[1 + q].shape[d] == 0) size = 0;
        out_shapes[{s} + d] = size;
    }}
    for (int d = {s + k}; d < {n}; d++) out_shapes[d - {k} + {r}] = in[0].shape[d];
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const int IDX_KIND[] = {_kinds(node.inputs[1:])};
{_index_code(1, k, r, name, s)}
    int64_t lead = 1, inner = 1;
    for (int d = 0; d < {s}; d++) lead *= in[0].shape[d];
    for (int d = {s + k}; d < {n}; d++) inner *= in[0].shape[d];
    if (count > 0 && inner > 0 && lead > 0) {{
        sg_cuda_strides st, shape;
        for (int d = 0; d < {n}; d++) {{ st.s[d] = in[0].strides[d]; shape.s[d] = in[0].shape[d]; }}
        int64_t blocks = (lead * count * inner + {BLOCK} - 1) / {BLOCK};
        if (blocks > 4096) blocks = 4096;
        SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, lead, count, inner, {s}, {k}, {n},
                  in[0].data, st, shape, dev_idx, ({T} *)out[0].data);
        SG_CUDA_CHECK(err, "the device gather");
    }}
    sg_cu_scratch_release(dev_idx, dev_idx_size);
    return 0;
}}
"""
    return CKernel(source=source, support=(_READ_INDEX, _STRIDES, scratch.SUPPORT),
                   headers=("<stdlib.h>",), symbols=scratch.SYMBOLS, version=5)


_STRIDES = ("sg_cuda_strides_v1", "typedef struct { int64_t s[8]; } sg_cuda_strides;\n")


def scatter_add_lowering(op, node):
    """CUDA of ``inc_subtensor(x[:, ..., i0, ..., ik], y)``: a copy of x, then
    atomic adds of y (broadcast to the indexed part's shape); repeated indices
    accumulate, as ``np.add.at``."""
    if index_reason(node) is not None:
        return None
    x, y = node.inputs[0], node.inputs[1]
    n = x.ndim
    s, k, r = _array_indices(node, 2)
    m = n - k + r                 # the indexed part's rank: (lead..., index shape, trail...)
    T = storage_type(x.dtype)
    name = c_string(op, printf=True, limit=80)
    source = f"""
__global__ void SG_FN(copy)(int64_t total, int n, const char *x, sg_cuda_strides st,
                            sg_cuda_strides shape, {T} *out) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, off = 0;
        for (int d = n - 1; d >= 0; d--) {{ off += (rem % shape.s[d]) * st.s[d]; rem /= shape.s[d]; }}
        out[j] = *(const {T} *)(x + off);
    }}
}}

/* element e of the indexed part is (l, j, r) as in the gather; ys: y's byte
 * strides over the part's m dimensions (0 where broadcast), ost the output's
 * element strides, shape x's shape, ish the index arrays' shape (rank ir) */
__global__ void SG_FN(scatter)(int64_t lead, int64_t count, int64_t inner, int s, int k, int n,
                               int ir, const char *y, sg_cuda_strides ys, sg_cuda_strides ost,
                               sg_cuda_strides shape, sg_cuda_strides ish, const int64_t *idx,
                               {T} *out) {{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < lead * count * inner;
         e += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = e % inner, t = e / inner, off = 0, yoff = 0;
        const int64_t j = t % count;
        int64_t l = t / count;
        for (int d = n - 1; d >= s + k; d--) {{
            const int64_t i = rem % shape.s[d];
            rem /= shape.s[d];
            off += i * ost.s[d];
            yoff += i * ys.s[d - k + ir];
        }}
        for (int q = 0; q < k; q++) off += idx[q * count + j] * ost.s[s + q];
        int64_t jj = j;
        for (int q = ir - 1; q >= 0; q--) {{ yoff += (jj % ish.s[q]) * ys.s[s + q]; jj /= ish.s[q]; }}
        for (int d = s - 1; d >= 0; d--) {{
            const int64_t i = l % shape.s[d];
            l /= shape.s[d];
            off += i * ost.s[d];
            yoff += i * ys.s[d];
        }}
        atomicAdd(out + off, *(const {T} *)(y + yoff));
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;
    for (int d = 0; d < {n}; d++) out_shapes[d] = in[0].shape[d];
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const int IDX_KIND[] = {_kinds(node.inputs[2:])};
{_index_code(2, k, r, name, s)}
    /* y, right-aligned against the indexed part, broadcast where its size is 1 */
    sg_cuda_strides ys, ish;
    for (int d = 0; d < {r}; d++) ish.s[d] = bsh[d];
    const int pad = {m} - {y.ndim};
    for (int p = 0; p < {m}; p++) {{
        const int64_t want = p < {s} ? in[0].shape[p] : p < {s + r} ? bsh[p - {s}]
                                                           : in[0].shape[p + {k} - {r}];
        const int d = p - pad;
        ys.s[p] = 0;
        if (d < 0 || in[1].shape[d] == 1) continue;
        if (in[1].shape[d] != want) {{
            sg_cu_scratch_release(dev_idx, dev_idx_size);
            SG_FAIL(err, SG_ERR_VALUE, "{name}: the value has %lld entries along its dimension "
                    "%d where the indexed elements have %lld", (long long)in[1].shape[d], d,
                    (long long)want);
        }}
        ys.s[p] = in[1].strides[d];
    }}
    sg_cuda_strides st, shape, ost;
    int64_t total = 1, step = 1, inner = 1, lead = 1;
    for (int d = {n} - 1; d >= 0; d--) {{
        st.s[d] = in[0].strides[d]; shape.s[d] = in[0].shape[d];
        ost.s[d] = step; step *= in[0].shape[d]; total *= in[0].shape[d];
        if (d >= {s + k}) inner *= in[0].shape[d];
        if (d < {s}) lead *= in[0].shape[d];
    }}
    if (total > 0) {{
        int64_t blocks = (total + {BLOCK} - 1) / {BLOCK};
        if (blocks > 4096) blocks = 4096;
        SG_LAUNCH(SG_FN(copy), (unsigned)blocks, {BLOCK}, 0, total, {n}, in[0].data, st, shape,
                  ({T} *)out[0].data);
    }}
    if (count > 0 && inner > 0 && lead > 0) {{
        int64_t blocks = (lead * count * inner + {BLOCK} - 1) / {BLOCK};
        if (blocks > 4096) blocks = 4096;
        SG_LAUNCH(SG_FN(scatter), (unsigned)blocks, {BLOCK}, 0, lead, count, inner, {s}, {k},
                  {n}, {r}, in[1].data, ys, ost, shape, ish, dev_idx, ({T} *)out[0].data);
    }}
    sg_cu_scratch_release(dev_idx, dev_idx_size);
    SG_CUDA_CHECK(err, "the device scatter-add");
    return 0;
}}
"""
    return CKernel(source=source, support=(_READ_INDEX, _STRIDES, scratch.SUPPORT),
                   headers=("<stdlib.h>",), symbols=scratch.SYMBOLS, version=5)


def alloc_lowering(op, node):
    """CUDA of Alloc: ``value`` broadcast into a new array of the given shape
    (the sizes are host inputs)."""
    if index_reason(node) is not None:
        return None
    value, out = node.inputs[0], node.outputs[0]
    n, lead = out.ndim, out.ndim - node.inputs[0].ndim
    T = storage_type(out.dtype)
    source = f"""
__global__ void SG_FN(kernel)(int64_t total, int n, const char *v, sg_cuda_strides vst,
                              sg_cuda_strides shape, {T} *out) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < total;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, off = 0;
        for (int k = n - 1; k >= 0; k--) {{ off += (rem % shape.s[k]) * vst.s[k]; rem /= shape.s[k]; }}
        out[j] = *(const {T} *)(v + off);
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    for (int d = 0; d < {n}; d++) {{
        int64_t size = sg_cuda_read_index(in[1 + d].data, IDX_KIND_SHAPE[d]);
        if (size < 0) SG_FAIL(err, SG_ERR_VALUE, "Alloc: negative size in the requested shape");
        out_shapes[d] = size;
    }}
    for (int d = 0; d < {value.ndim}; d++) {{
        int64_t have = in[0].shape[d], want = out_shapes[{lead} + d];
        if (have != want && have != 1)
            SG_FAIL(err, SG_ERR_VALUE, "Alloc: cannot broadcast the value's dimension %d of "
                    "size %lld to %lld", d, (long long)have, (long long)want);
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
    return CKernel(source=source, support=(_READ_INDEX, _STRIDES), version=1)


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
