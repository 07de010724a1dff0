"""CUDA for ``Join`` (concatenation along an axis) and ``Eye``.

Join copies each input into its slab of the output with one strided-copy
kernel per input; Eye writes ones on its diagonal and zeros elsewhere, its
sizes read on the host.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_literal, has_c_type
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["join_reason", "join_lowering", "eye_lowering"]

MAX_DIMS = 8
BLOCK = 256


def join_reason(node):
    """None when the Join/Eye ``node`` runs on the device, else why not."""
    dtype = str(node.outputs[0].dtype)
    if not has_c_type(dtype):
        return f"dtype {dtype} has no CUDA code yet"
    if node.outputs[0].ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    return None


def join_lowering(op, node):
    """CUDA of Join(axis)(*tensors)."""
    if join_reason(node) is not None:
        return None
    n_in, ndim, axis = len(node.inputs), node.outputs[0].ndim, op.axis
    T = storage_type(node.outputs[0].dtype)
    name = c_string(op, printf=True, limit=60)
    source = f"""
typedef struct {{ int64_t shape[{ndim}], src[{ndim}], dst[{ndim}]; }} SG_FN(geom);

__global__ void SG_FN(copy)(int64_t n, SG_FN(geom) g, const char *src, char *dst) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = j, s = 0, d = 0;
        for (int k = {ndim} - 1; k >= 0; k--) {{
            int64_t idx = rem % g.shape[k]; rem /= g.shape[k];
            s += idx * g.src[k]; d += idx * g.dst[k];
        }}
        *({T} *)(dst + d) = *(const {T} *)(src + s);
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    for (int d = 0; d < {ndim}; d++) out_shapes[d] = in[0].shape[d];
    out_shapes[{axis}] = 0;
    for (int i = 0; i < {n_in}; i++) {{
        for (int d = 0; d < {ndim}; d++)
            if (d != {axis} && in[i].shape[d] != in[0].shape[d])
                SG_FAIL(err, SG_ERR_VALUE, "{name}: input %d has size %lld in dimension %d, "
                        "input 0 has %lld", i, (long long)in[i].shape[d], d,
                        (long long)in[0].shape[d]);
        out_shapes[{axis}] += in[i].shape[{axis}];
    }}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    int64_t offset = 0;
    for (int i = 0; i < {n_in}; i++) {{
        SG_FN(geom) g;
        int64_t n = 1;
        for (int d = 0; d < {ndim}; d++) {{
            g.shape[d] = in[i].shape[d]; g.src[d] = in[i].strides[d];
            g.dst[d] = out[0].strides[d]; n *= g.shape[d];
        }}
        if (n > 0) {{
            int64_t blocks = (n + {BLOCK} - 1) / {BLOCK};
            if (blocks > 4096) blocks = 4096;
            SG_LAUNCH(SG_FN(copy), (unsigned)blocks, {BLOCK}, 0, n, g, in[i].data,
                      out[0].data + offset * out[0].strides[{axis}]);
            SG_CUDA_CHECK(err, "the device join");
        }}
        offset += in[i].shape[{axis}];
    }}
    return 0;
}}
"""
    return CKernel(source=source, version=1)


def eye_lowering(op, node):
    """CUDA of Eye(n, m, k): the sizes and the diagonal read on the host."""
    if join_reason(node) is not None:
        return None
    T = storage_type(node.outputs[0].dtype)
    one, zero = c_literal(1, op.dtype), c_literal(0, op.dtype)
    kinds = [str(v.dtype) for v in node.inputs]
    reads = [f"(int64_t)*(const {storage_type(d)} *)in[{i}].data" for i, d in enumerate(kinds)]
    source = f"""
__global__ void SG_FN(kernel)(int64_t n, int64_t m, int64_t k, {T} *out) {{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n * m;
         j += (int64_t)blockDim.x * gridDim.x)
        out[j] = (j % m) - (j / m) == k ? ({T}){one} : ({T}){zero};
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    int64_t n = {reads[0]}, m = {reads[1]};
    if (n < 0 || m < 0)
        SG_FAIL(err, SG_ERR_VALUE, "Eye: negative size (%lld, %lld)", (long long)n, (long long)m);
    out_shapes[0] = n; out_shapes[1] = m;
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    int64_t n = out[0].shape[0], m = out[0].shape[1], k = {reads[2]};
    if (n * m == 0) return 0;
    int64_t blocks = (n * m + {BLOCK} - 1) / {BLOCK};
    if (blocks > 4096) blocks = 4096;
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, n, m, k, ({T} *)out[0].data);
    SG_CUDA_CHECK(err, "the device eye");
    return 0;
}}
"""
    return CKernel(source=source, version=1)
