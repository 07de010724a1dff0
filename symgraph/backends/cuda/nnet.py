"""CUDA for the softmax family over the rows of a matrix: ``Softmax``,
``LogSoftmax``, ``SoftmaxGrad``, and the fused, stable cross-entropy
``SoftmaxCrossEntropy1Hot`` with its gradient.

One block per row (a grid-stride loop over the rows): the row's maximum and
sum of exponentials are block reductions in shared memory, in a fixed order
that depends only on the block size.  Targets are checked and normalized on
the host (they are one integer per row) before the kernel runs, so a target
out of range is the CPU's IndexError, with its row.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_compute_type
from symgraph.backends.cuda import scratch
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["nnet_reason", "softmax_lowering", "softmax_grad_lowering", "xent_lowering",
           "xent_grad_lowering"]

BLOCK = 256
_DTYPES = ("float16", "float32", "float64")

# Row i's maximum ``m`` (NaN wins) and sum of exponentials ``s`` of x - m: what
# softmax, log-softmax and the cross-entropy all start from.
_ROW_STATS = """        ACC m = -INFINITY;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            ACC v = (ACC)x[i * s0 + j * s1];
            m = (v != v || v > m) ? v : m;
        }
        m = sg_block_max(m, scratch);
        ACC s = 0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            s += SG_EXP((ACC)x[i * s0 + j * s1] - m);
        s = sg_block_sum(s, scratch);
"""

# Block-wide maximum and sum of one value per thread, in shared memory; every
# thread gets the result.  ``scratch`` holds BLOCK values.
_BLOCK_REDUCE = ("sg_cuda_block_reduce_v1", """
template <class A> __device__ A sg_block_max(A v, A *scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            A a = scratch[threadIdx.x], b = scratch[threadIdx.x + s];
            scratch[threadIdx.x] = (a != a || a > b) ? a : b;
        }
        __syncthreads();
    }
    A r = scratch[0];
    __syncthreads();
    return r;
}

template <class A> __device__ A sg_block_sum(A v, A *scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    A r = scratch[0];
    __syncthreads();
    return r;
}
""")


def nnet_reason(node):
    """None when the softmax-family ``node`` runs on the device, else why not."""
    floats = [v for v in node.inputs + node.outputs if str(v.dtype).startswith("float")]
    if any(str(v.dtype) not in _DTYPES for v in floats):
        return "only float16, float32 and float64 softmax rows run on the device"
    axis = getattr(node.op, "axis", -1)
    matrix = node.inputs[-1] if type(node.op).__name__ == "SoftmaxGrad" else node.inputs[0]
    if type(node.op).__name__.startswith(("Softmax", "LogSoftmax")) and hasattr(node.op, "axis"):
        # axis None normalizes over every element of the matrix, not per row:
        # the row kernels would give each row its own softmax.
        if matrix.ndim != 2 or axis not in (-1, 1):
            return "the device softmax works on the rows of a matrix"
    return None


def _header(dtype, what):
    return (f"#define T {storage_type(dtype)}\n#define ACC {c_compute_type(dtype)}\n"
            f"#define WHAT {c_string(what, quote=True, limit=120)}\n"
            f"#define SG_EXP(v) {'exp' if dtype == 'float64' else 'expf'}(v)\n"
            f"#define SG_LOG(v) {'log' if dtype == 'float64' else 'logf'}(v)\n")


_FOOTER = "\n#undef T\n#undef ACC\n#undef WHAT\n#undef SG_EXP\n#undef SG_LOG\n"

_SAME_SHAPE = """
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {
    (void)err;
    out_shapes[0] = in[IN].shape[0];
    out_shapes[1] = in[IN].shape[1];
    return 0;
}
"""


def _launch(args):
    return f"""    int64_t blocks = rows < 4096 ? rows : 4096;
    if (rows == 0) return 0;
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, {args});
    SG_CUDA_CHECK(err, WHAT);
    return 0;"""


def softmax_lowering(op, node):
    """CUDA of Softmax and LogSoftmax over the rows."""
    if nnet_reason(node) is not None:
        return None
    log = type(op).__name__ == "LogSoftmax"
    dtype = str(node.outputs[0].dtype)
    result = "(v - m) - SG_LOG(s)" if log else "SG_EXP(v - m) / s"
    source = _header(dtype, f"the device {op}") + f"""
__global__ void SG_FN(kernel)(int64_t rows, int64_t cols, const T *x, int64_t s0, int64_t s1,
                              T *out) {{
    __shared__ ACC scratch[{BLOCK}];
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {{
{_ROW_STATS}        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{
            ACC v = (ACC)x[i * s0 + j * s1];
            out[i * cols + j] = (T)({result});
        }}
    }}
}}
""" + _SAME_SHAPE.replace("IN", "0") + f"""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
{_launch("rows, cols, (const T *)in[0].data, in[0].strides[0] / (int64_t)sizeof(T), "
         "in[0].strides[1] / (int64_t)sizeof(T), (T *)out[0].data")}
}}
""" + _FOOTER
    return CKernel(source=source, support=(_BLOCK_REDUCE,), version=1)


def softmax_grad_lowering(op, node):
    """CUDA of SoftmaxGrad: ``dy * sm - sm * sum(dy * sm)`` per row."""
    if nnet_reason(node) is not None:
        return None
    dtype = str(node.outputs[0].dtype)
    source = _header(dtype, f"the device {op}") + f"""
__global__ void SG_FN(kernel)(int64_t rows, int64_t cols, const T *dy, int64_t d0, int64_t d1,
                              const T *sm, int64_t m0, int64_t m1, T *out) {{
    __shared__ ACC scratch[{BLOCK}];
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {{
        ACC s = 0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            s += (ACC)dy[i * d0 + j * d1] * (ACC)sm[i * m0 + j * m1];
        s = sg_block_sum(s, scratch);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{
            ACC p = (ACC)sm[i * m0 + j * m1];
            out[i * cols + j] = (T)((ACC)dy[i * d0 + j * d1] * p - p * s);
        }}
    }}
}}
""" + _SAME_SHAPE.replace("IN", "1") + f"""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const int64_t rows = in[1].shape[0], cols = in[1].shape[1];
    if (in[0].shape[0] != rows || in[0].shape[1] != cols)
        SG_FAIL(err, SG_ERR_VALUE, "%s: the gradient's shape (%lld, %lld) is not the "
                "softmax's (%lld, %lld)", WHAT, (long long)in[0].shape[0],
                (long long)in[0].shape[1], (long long)rows, (long long)cols);
{_launch("rows, cols, (const T *)in[0].data, in[0].strides[0] / (int64_t)sizeof(T), "
         "in[0].strides[1] / (int64_t)sizeof(T), (const T *)in[1].data, "
         "in[1].strides[0] / (int64_t)sizeof(T), in[1].strides[1] / (int64_t)sizeof(T), "
         "(T *)out[0].data")}
}}
""" + _FOOTER
    return CKernel(source=source, support=(_BLOCK_REDUCE,), version=1)


#: Device code of the targets' check: each row's target normalized into
#: ``targets`` (int64), and the first row whose target is out of range
#: (atomicMin) in ``bad``, which starts with every bit set.
_TARGETS_KERNEL = """
__global__ void SG_FN(targets)(int64_t rows, int64_t cols, const TARGET *y, int64_t ys,
                               int64_t *targets, unsigned long long *bad) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows;
         i += (int64_t)blockDim.x * gridDim.x) {
        const TARGET raw = y[i * ys];
        const int64_t t = (int64_t)raw;
        const bool out = TARGET_UNSIGNED ? (uint64_t)raw >= (uint64_t)cols
                                         : (t < -cols || t >= cols);
        if (out) atomicMin(bad, (unsigned long long)i);
        targets[i] = out ? 0 : (t < 0 ? t + cols : t);
    }
}
"""


def _targets_code(target_input, rows_expr, cols_expr, name):
    """Host C: check the targets on the device as the CPU does and put the
    normalized int64 indices in device scratch (``targets``).  One small read
    back (the first bad row, if any) is the only wait: the targets are never
    copied to the host, which row by row cost a synchronizing copy per row."""
    return f"""    const sg_array *y = &in[{target_input}];
    const int64_t rows = {rows_expr}, cols = {cols_expr};
    if (y->shape[0] != rows)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the targets have %lld entries but there are "
                "%lld rows", (long long)y->shape[0], (long long)rows);
    size_t targets_size = 0;
    /* rows targets, then the first bad row */
    int64_t *targets = (int64_t *)sg_cu_scratch((size_t)(rows + 1) * sizeof(int64_t),
                                                &targets_size);
    if (targets == NULL)
        SG_FAIL(err, SG_ERR_MEMORY, "{name}: no device memory for %lld targets",
                (long long)rows);
    if (rows > 0) {{
        unsigned long long *bad = (unsigned long long *)(targets + rows), first = 0;
        int64_t tblocks = (rows + {BLOCK} - 1) / {BLOCK};
        if (tblocks > 1024) tblocks = 1024;
        /* all bits set: no bad row yet (a memset queues; a copy from the host
         * would wait for the device) */
        cudaMemset(bad, 0xff, sizeof first);
        SG_LAUNCH(SG_FN(targets), (unsigned)tblocks, {BLOCK}, 0, rows, cols,
                  (const TARGET *)y->data, y->strides[0] / (int64_t)TARGET_SIZE, targets, bad);
        const cudaError_t read = cudaMemcpy(&first, bad, sizeof first,
                                            cudaMemcpyDeviceToHost);
        if (read != cudaSuccess) {{
            sg_cu_scratch_release(targets, targets_size);
            SG_FAIL(err, SG_ERR_RUNTIME, "{name}: checking the targets failed on the device: "
                    "%s", cudaGetErrorString(read));
        }}
        if (first < (unsigned long long)rows) {{
            TARGET raw;
            cudaMemcpy(&raw, y->data + (int64_t)first * y->strides[0], TARGET_SIZE,
                       cudaMemcpyDeviceToHost);
            sg_cu_scratch_release(targets, targets_size);
            SG_FAIL(err, SG_ERR_INDEX, "{name}: target index %lld in row %lld is out of "
                    "range for %lld classes", TARGET_UNSIGNED ? (long long)(uint64_t)raw
                    : (long long)raw, (long long)first, (long long)cols);
        }}
    }}
"""


def _target_macros(node, position):
    dtype = str(node.inputs[position].dtype)
    return (f"#define TARGET {storage_type(dtype)}\n#define TARGET_SIZE sizeof({storage_type(dtype)})\n"
            f"#define TARGET_UNSIGNED {1 if dtype.startswith('uint') else 0}\n")


_TARGET_FOOTER = "\n#undef TARGET\n#undef TARGET_SIZE\n#undef TARGET_UNSIGNED\n"


def xent_lowering(op, node):
    """CUDA of SoftmaxCrossEntropy1Hot: ``(nll, softmax)`` of each row."""
    if nnet_reason(node) is not None:
        return None
    dtype = str(node.outputs[1].dtype)
    name = c_string(op, printf=True, limit=80)
    source = _header(dtype, f"the device {op}") + _target_macros(node, 1) + \
        _TARGETS_KERNEL + f"""
__global__ void SG_FN(kernel)(int64_t rows, int64_t cols, const T *x, int64_t s0, int64_t s1,
                              const int64_t *targets, T *nll, T *sm) {{
    __shared__ ACC scratch[{BLOCK}];
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {{
{_ROW_STATS}        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            sm[i * cols + j] = (T)(SG_EXP((ACC)x[i * s0 + j * s1] - m) / s);
        if (threadIdx.x == 0)
            nll[i] = (T)(SG_LOG(s) - ((ACC)x[i * s0 + targets[i] * s1] - m));
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    (void)err;
    out_shapes[0] = in[0].shape[0];
    out_shapes[SG_MAXDIMS] = in[0].shape[0];
    out_shapes[SG_MAXDIMS + 1] = in[0].shape[1];
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
{_targets_code(1, "in[0].shape[0]", "in[0].shape[1]", name)}
    int64_t blocks = rows < 4096 ? rows : 4096;
    if (rows > 0)
        SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, rows, cols,
                  (const T *)in[0].data, in[0].strides[0] / (int64_t)sizeof(T),
                  in[0].strides[1] / (int64_t)sizeof(T), targets, (T *)out[0].data,
                  (T *)out[1].data);
    sg_cu_scratch_release(targets, targets_size);
    SG_CUDA_CHECK(err, WHAT);
    return 0;
}}
""" + _TARGET_FOOTER + _FOOTER
    return CKernel(source=source, support=(_BLOCK_REDUCE, scratch.SUPPORT),
                   headers=("<stdlib.h>",), symbols=scratch.SYMBOLS, version=3)


def xent_grad_lowering(op, node):
    """CUDA of SoftmaxCrossEntropy1HotGrad: ``dnll[:, None] * (sm - one_hot(y))``."""
    if nnet_reason(node) is not None:
        return None
    dtype = str(node.outputs[0].dtype)
    name = c_string(op, printf=True, limit=80)
    source = _header(dtype, f"the device {op}") + _target_macros(node, 2) + \
        _TARGETS_KERNEL + f"""
__global__ void SG_FN(kernel)(int64_t rows, int64_t cols, const T *dnll, int64_t g0,
                              const T *sm, int64_t m0, int64_t m1, const int64_t *targets,
                              T *out) {{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < rows * cols;
         k += (int64_t)blockDim.x * gridDim.x) {{
        int64_t i = k / cols, j = k % cols;
        ACC hot = j == targets[i] ? (ACC)1 : (ACC)0;
        out[k] = (T)((ACC)dnll[i * g0] * ((ACC)sm[i * m0 + j * m1] - hot));
    }}
}}
""" + _SAME_SHAPE.replace("IN", "1") + f"""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    if (in[0].shape[0] != 1 && in[0].shape[0] != in[1].shape[0])
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the gradient has %lld entries but there are "
                "%lld rows", (long long)in[0].shape[0], (long long)in[1].shape[0]);
{_targets_code(2, "in[1].shape[0]", "in[1].shape[1]", name)}
    const int64_t g0 = in[0].shape[0] == 1 ? 0 : in[0].strides[0] / (int64_t)sizeof(T);
    int64_t n = rows * cols, blocks = (n + {BLOCK} - 1) / {BLOCK};
    if (blocks > 4096) blocks = 4096;
    if (n > 0)
        SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, rows, cols,
                  (const T *)in[0].data, g0, (const T *)in[1].data,
                  in[1].strides[0] / (int64_t)sizeof(T), in[1].strides[1] / (int64_t)sizeof(T),
                  targets, (T *)out[0].data);
    sg_cu_scratch_release(targets, targets_size);
    SG_CUDA_CHECK(err, WHAT);
    return 0;
}}
""" + _TARGET_FOOTER + _FOOTER
    return CKernel(source=source, support=(scratch.SUPPORT,), headers=("<stdlib.h>",),
                   symbols=scratch.SYMBOLS, version=3)
