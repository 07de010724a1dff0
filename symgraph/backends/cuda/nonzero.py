"""CUDA of ``Nonzero`` (``nonzero``, ``flatnonzero``, ``nonzero_values``):
one int64 vector per dimension of x, the indices of its non-zero elements in
C order, as ``numpy.nonzero``.

The outputs' size depends on x's values, so the count is made on the device
and copied back before the outputs are allocated:

1. ``count``: x's elements, in C order, are cut into ``nb`` chunks of equal
   length (at most ``MAX_BLOCKS``), one block per chunk; each block counts
   its chunk's non-zero elements (a shared-memory sum) into ``counts[b]``.
2. ``scan``: one thread turns the counts into their exclusive prefix sums
   (where each chunk's indices start) and the total, ``counts[nb]``
   (``nb`` is at most ``MAX_BLOCKS``: a few microseconds).
3. the host's ``shape`` copies the total back; the runtime allocates.
4. ``write``: each block walks its chunk in tiles of ``BLOCK`` elements;
   a shared-memory scan of each tile's flags gives every non-zero element
   its place after the chunk's start and the tiles before it, where its
   thread writes its indices.  The order is C order whatever the launch.

``shape`` and ``run`` are separate calls of the kernel ABI, so ``run`` does
steps 1 and 2 again before it writes (x is read three times in all); the
counts live in scratch memory from the device memory cache.  x is read
through its own strides (any layout, broadcast dimensions included); NaN is
non-zero and -0.0 zero, as in NumPy.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.cuda import scratch
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["nonzero_reason", "nonzero_lowering"]

VERSION = 1
#: Threads per block, and the elements of one tile of the write's scan.
BLOCK = 256
#: The most chunks (blocks) x is cut into.
MAX_BLOCKS = 1024
#: The most dimensions of x.
MAX_DIMS = 8

_SUPPORT = (f"sg_cuda_nonzero_v{VERSION}", f"""
/* x's geometry: its shape and byte strides (C order of the flat index). */
struct sg_cu_nz_geo {{
    int nd;
    int64_t shape[{MAX_DIMS}], strides[{MAX_DIMS}];
}};

/* The outputs: one int64 vector per dimension, with its element stride. */
struct sg_cu_nz_out {{
    int64_t *p[{MAX_DIMS}];
    int64_t s[{MAX_DIMS}];
}};

__device__ inline int64_t sg_cu_nz_offset(const sg_cu_nz_geo &g, int64_t i) {{
    int64_t off = 0;
    for (int d = g.nd - 1; d >= 0; d--) {{
        off += (i % g.shape[d]) * g.strides[d];
        i /= g.shape[d];
    }}
    return off;
}}

/* The chunk [*lo, *hi) of block b. */
__device__ inline void sg_cu_nz_chunk(int64_t n, int64_t chunk, int64_t b, int64_t *lo,
                                      int64_t *hi) {{
    *lo = b * chunk;
    *hi = *lo + chunk < n ? *lo + chunk : n;
}}

/* counts[nb] = the sum of counts[0..nb), which become their exclusive prefix sums. */
__global__ void sg_cu_nz_scan(int64_t *counts, int64_t nb) {{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int64_t total = 0;
    for (int64_t b = 0; b < nb; b++) {{
        const int64_t c = counts[b];
        counts[b] = total;
        total += c;
    }}
    counts[nb] = total;
}}
""")


def nonzero_reason(node):
    """None when the Nonzero ``node`` runs on the device, else why not."""
    x = node.inputs[0]
    dtype = str(x.dtype)
    if not has_c_type(dtype) or dtype.startswith("complex"):
        return f"dtype {dtype} has no device nonzero"
    if x.ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    return None


def nonzero_lowering(op, node):
    """The CKernel (CUDA source) of a Nonzero node, or None."""
    if nonzero_reason(node) is not None:
        return None
    x = node.inputs[0]
    dtype, nd = str(x.dtype), x.ndim
    value = "float" if dtype == "float16" else "T"
    name = c_string(str(op), printf=True)
    what = c_string(f"the device {op}", quote=True, limit=120)
    source = f"""#define T {storage_type(dtype)}
/* {name} of a {nd}-d {dtype} array */

static __device__ __forceinline__ int SG_FN(is_nz)(const char *x, int64_t off) {{
    return (({value})*(const T *)(x + off)) != ({value})0;
}}

__global__ void SG_FN(count)(sg_cu_nz_geo g, const char *x, int64_t n, int64_t chunk,
                             int64_t *counts) {{
    __shared__ int64_t sum[{BLOCK}];
    int64_t lo, hi, c = 0;
    sg_cu_nz_chunk(n, chunk, blockIdx.x, &lo, &hi);
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        c += SG_FN(is_nz)(x, sg_cu_nz_offset(g, i));
    sum[threadIdx.x] = c;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if ((int)threadIdx.x < s) sum[threadIdx.x] += sum[threadIdx.x + s];
        __syncthreads();
    }}
    if (threadIdx.x == 0) counts[blockIdx.x] = sum[0];
}}

__global__ void SG_FN(write)(sg_cu_nz_geo g, const char *x, int64_t n, int64_t chunk,
                             const int64_t *starts, sg_cu_nz_out out) {{
    __shared__ int scan[{BLOCK}];
    int64_t lo, hi;
    sg_cu_nz_chunk(n, chunk, blockIdx.x, &lo, &hi);
    int64_t base = starts[blockIdx.x];
    for (int64_t t = lo; t < hi; t += blockDim.x) {{
        const int64_t i = t + threadIdx.x;
        const int flag = i < hi ? SG_FN(is_nz)(x, sg_cu_nz_offset(g, i)) : 0;
        scan[threadIdx.x] = flag;
        __syncthreads();
        for (int o = 1; o < (int)blockDim.x; o <<= 1) {{      /* inclusive scan */
            const int add = (int)threadIdx.x >= o ? scan[threadIdx.x - o] : 0;
            __syncthreads();
            scan[threadIdx.x] += add;
            __syncthreads();
        }}
        if (flag) {{
            const int64_t at = base + scan[threadIdx.x] - 1;
            int64_t rem = i;
            for (int d = g.nd - 1; d >= 0; d--) {{
                out.p[d][at * out.s[d]] = rem % g.shape[d];
                rem /= g.shape[d];
            }}
        }}
        base += scan[blockDim.x - 1];
        __syncthreads();
    }}
}}

static int SG_FN(launched)(sg_error *err) {{
    SG_CUDA_CHECK(err, {what});
    return 0;
}}

/* Steps 1 and 2: counts (nb + 1 entries of scratch) get each chunk's start
 * and the total; *nb and *chunk the cut.  0 blocks for an empty x. */
static int SG_FN(counted)(const sg_array *x, sg_cu_nz_geo *g, int64_t **counts, size_t *got,
                          int64_t *nb, int64_t *chunk, sg_error *err) {{
    const int64_t n = sg_size(x);
    g->nd = x->ndim;
    for (int d = 0; d < {MAX_DIMS}; d++) {{
        g->shape[d] = d < x->ndim ? x->shape[d] : 1;
        g->strides[d] = d < x->ndim ? x->strides[d] : 0;
    }}
    *nb = (n + {BLOCK} - 1) / {BLOCK};
    if (*nb > {MAX_BLOCKS}) *nb = {MAX_BLOCKS};
    *chunk = *nb > 0 ? (n + *nb - 1) / *nb : 0;
    if (*chunk > 0) *nb = (n + *chunk - 1) / *chunk;
    *counts = (int64_t *)sg_cu_scratch((size_t)(*nb + 1) * sizeof(int64_t), got);
    if (*counts == NULL)
        SG_FAIL(err, SG_ERR_MEMORY, "{name}: no device memory for %lld counts",
                (long long)(*nb + 1));
    if (*nb == 0) {{
        const int64_t zero = 0;
        const cudaError_t set = cudaMemcpy(*counts, &zero, sizeof zero, cudaMemcpyHostToDevice);
        if (set != cudaSuccess) {{
            sg_cu_scratch_release(*counts, *got);
            SG_FAIL(err, SG_ERR_RUNTIME, "%s: setting the count failed: %s", {what},
                    cudaGetErrorString(set));
        }}
        return 0;
    }}
    SG_LAUNCH(SG_FN(count), (unsigned)*nb, {BLOCK}, 0, *g, (const char *)x->data, n, *chunk,
              *counts);
    SG_LAUNCH(sg_cu_nz_scan, 1u, 1, 0, *counts, *nb);
    if (SG_FN(launched)(err)) {{
        sg_cu_scratch_release(*counts, *got);
        return 1;
    }}
    return 0;
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    sg_cu_nz_geo g;
    int64_t *counts, nb, chunk, total = 0;
    size_t got = 0;
    if (SG_FN(counted)(&in[0], &g, &counts, &got, &nb, &chunk, err)) return 1;
    const cudaError_t copied = cudaMemcpy(&total, counts + nb, sizeof total,
                                          cudaMemcpyDeviceToHost);
    sg_cu_scratch_release(counts, got);
    if (copied != cudaSuccess)
        SG_FAIL(err, SG_ERR_RUNTIME, "%s: copying the count back failed: %s", {what},
                cudaGetErrorString(copied));
    for (int k = 0; k < {nd}; k++) out_shapes[k * SG_MAXDIMS] = total;
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    sg_cu_nz_geo g;
    int64_t *counts, nb, chunk;
    size_t got = 0;
    if (out[0].shape[0] == 0) return 0;
    if (SG_FN(counted)(&in[0], &g, &counts, &got, &nb, &chunk, err)) return 1;
    sg_cu_nz_out o;
    for (int d = 0; d < {MAX_DIMS}; d++) {{
        o.p[d] = d < {nd} ? (int64_t *)out[d].data : NULL;
        o.s[d] = d < {nd} ? out[d].strides[0] / (int64_t)sizeof(int64_t) : 0;
    }}
    SG_LAUNCH(SG_FN(write), (unsigned)nb, {BLOCK}, 0, g, (const char *)in[0].data, sg_size(&in[0]),
              chunk, counts, o);
    sg_cu_scratch_release(counts, got);
    return SG_FN(launched)(err);
}}
#undef T
"""
    return CKernel(source=source, support=(_SUPPORT, scratch.SUPPORT), headers=("<string.h>",),
                   symbols=scratch.SYMBOLS, version=VERSION)
