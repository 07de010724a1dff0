"""CUDA for reductions over any axes, alone (``Sum``, ``Prod``, ``Max``, ``Min``,
``All``, ``Any``) or fused with the element-wise op that feeds them
(``ReduceOfElemwise``, so ``sum(exp(x))`` reads ``x`` once on the device too).

One block per output element (a grid-stride loop over the outputs): its
threads walk the reduced elements in steps of the block, each accumulating in
the op's accumulator dtype, then a tree in shared memory combines the
threads' partial results.  The order of the combination depends only on the
block size (a constant), never on the grid, so results do not change with the
launch shape.  Max and min propagate NaN as NumPy does; they refuse an empty
reduction with the CPU's message.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_compute_type, c_literal, has_c_type
from symgraph.backends.c_family.scalar_base import c_ctype
from symgraph.backends.c_family.scalar_c import (c_body, c_error_messages, c_input_dtypes,
                                                 c_support, language)
from symgraph.backends.cpu.reduce.lowering import accumulator_dtype, reduction_kind
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["MAX_DIMS", "reduce_reason", "careduce_lowering", "fused_reduce_lowering",
           "argreduce_lowering"]

MAX_DIMS = 8
BLOCK = 256
MAX_BLOCKS = 4096

_COMBINE = {
    "sum": "(a + b)", "prod": "(a * b)", "all": "(a && b)", "any": "(a || b)",
    # NaN wins, as in NumPy: a NaN ``a`` is kept; a NaN ``b`` fails the comparison
    "max": "((a != a || a > b) ? a : b)", "min": "((a != a || a < b) ? a : b)",
}


def _identity(kind, acc_dtype):
    if kind == "sum":
        return c_literal(0, acc_dtype)
    if kind == "prod":
        return c_literal(1, acc_dtype)
    if kind in ("all", "any"):
        return "1" if kind == "all" else "0"
    import numpy as np

    if acc_dtype.startswith(("float",)):
        return ("-" if kind == "max" else "") + "INFINITY"
    info = np.iinfo(acc_dtype) if acc_dtype != "bool" else None
    if info is None:
        return "0" if kind == "max" else "1"
    value = info.min if kind == "max" else info.max
    if acc_dtype == "int64" and value == info.min:
        return "(-9223372036854775807LL - 1)"
    return c_literal(value, acc_dtype)


def _reduce_op(op):
    """(the reduction op, the fused pre op or None) of a CAReduce or ReduceOfElemwise."""
    pre = getattr(op, "pre", None)
    return (op.reduce_op, pre) if pre is not None else (op, None)


def reduce_reason(node):
    """None when the reduction ``node`` has a CUDA kernel, else why not."""
    red, pre = _reduce_op(node.op)
    kind = reduction_kind(red)
    if kind is None:
        return f"no CUDA code for {type(red).__name__} yet"
    dtypes = [str(v.dtype) for v in node.inputs + node.outputs]
    for dtype in dtypes:
        if not has_c_type(dtype):
            return f"dtype {dtype} has no CUDA reduction code yet"
    if node.inputs[0].ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    if pre is not None:
        in_dtypes = [str(v.dtype) for v in node.inputs]
        with language("cuda"):
            want = c_input_dtypes(pre, *in_dtypes)
            if want is None or c_support(pre) or c_error_messages(pre, [str(d) for d in want]):
                return f"the fused {pre} needs C helpers or error reports not on the device"
    return None


def careduce_lowering(op, node):
    """The CUDA kernel of a CAReduce node (Sum, Prod, Max, Min, All, Any)."""
    return _lowering(op, node)


def fused_reduce_lowering(op, node):
    """The CUDA kernel of a ReduceOfElemwise node."""
    return _lowering(op, node)


def _lowering(op, node):
    if reduce_reason(node) is not None:
        return None
    red, pre = _reduce_op(op)
    kind = reduction_kind(red)
    ndim = node.inputs[0].ndim
    axes = tuple(sorted(red.axes(ndim)))
    keep = tuple(d for d in range(ndim) if d not in axes)
    in_dtypes = [str(v.dtype) for v in node.inputs]
    out_dtype = str(node.outputs[0].dtype)
    if pre is not None:
        with language("cuda"):
            want = [str(d) for d in c_input_dtypes(pre, *in_dtypes)]
            value_dtype = str(pre.output_dtypes(*in_dtypes)[0])
            body = c_body(pre, [f"x{i}" for i in range(len(in_dtypes))], want, ["v"],
                          [value_dtype])
    else:
        want, value_dtype, body = in_dtypes, in_dtypes[0], "v = x0;"
    acc_dtype = accumulator_dtype(red, kind, value_dtype, out_dtype)
    acc = "int" if kind in ("all", "any") else c_compute_type(acc_dtype)
    n_in = len(in_dtypes)
    params = ", ".join([f"const {storage_type(d)} *__restrict__ a{i}" for i, d in enumerate(in_dtypes)]
                       + [f"{storage_type(out_dtype)} *__restrict__ o"])
    loads = "\n".join(f"            const {c_ctype(w)} x{i} = ({c_ctype(w)})*(const {storage_type(d)} *)"
                      f"((const char *)a{i} + off{i});" for i, (d, w) in enumerate(zip(in_dtypes,
                                                                                       want)))
    declare = " ".join(f"int64_t base{i} = 0;" for i in range(n_in))
    keep_offsets = " ".join(f"base{i} += idx * g.keep_st[{i}][d];" for i in range(n_in))
    offsets = " ".join(f"int64_t off{i} = base{i};" for i in range(n_in))
    red_offsets = " ".join(f"off{i} += idx * g.red_st[{i}][d];" for i in range(n_in))
    value = "(v != 0)" if kind in ("all", "any") else f"({acc})v"
    args = ", ".join([f"(const {storage_type(d)} *)in[{i}].data" for i, d in enumerate(in_dtypes)]
                     + [f"({storage_type(out_dtype)} *)out[0].data"])
    name = c_string(op, printf=True, limit=120)
    empty_check = ""
    if kind in ("max", "min"):
        empty_check = (f"    if (g.n_red == 0 && g.n_out > 0) SG_FAIL(err, SG_ERR_VALUE, "
                       f"\"{name}: cannot reduce an empty array over axes {axes}: the "
                       f"operation has no identity value\");\n")
    keep_n, red_n = max(len(keep), 1), max(len(axes), 1)
    source = f"""
typedef struct {{ int64_t n_out, n_red; int nkeep, nred;
                 int64_t keep_shape[{keep_n}], red_shape[{red_n}];
                 int64_t keep_st[{n_in}][{keep_n}], red_st[{n_in}][{red_n}]; }} SG_FN(geom);

__global__ void SG_FN(kernel)(SG_FN(geom) g, {params}) {{
    __shared__ {acc} partial[{BLOCK}];
    for (int64_t j = blockIdx.x; j < g.n_out; j += gridDim.x) {{
        int64_t rem = j; {declare}
        for (int d = g.nkeep - 1; d >= 0; d--) {{
            int64_t idx = rem % g.keep_shape[d]; rem /= g.keep_shape[d]; {keep_offsets}
        }}
        {acc} a = {_identity(kind, acc_dtype)};
        for (int64_t r = threadIdx.x; r < g.n_red; r += blockDim.x) {{
            int64_t rem2 = r; {offsets}
            for (int d = g.nred - 1; d >= 0; d--) {{
                int64_t idx = rem2 % g.red_shape[d]; rem2 /= g.red_shape[d]; {red_offsets}
            }}
{loads}
            {c_ctype(value_dtype)} v;
            {body}
            {acc} b = {value};
            a = {_COMBINE[kind]};
        }}
        partial[threadIdx.x] = a;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
            if (threadIdx.x < s) {{
                {acc} a2 = partial[threadIdx.x], b = partial[threadIdx.x + s];
                {{ {acc} a = a2; partial[threadIdx.x] = {_COMBINE[kind]}; }}
            }}
            __syncthreads();
        }}
        if (threadIdx.x == 0) o[j] = ({storage_type(out_dtype)})partial[0];
        __syncthreads();
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    int k = 0;
    for (int d = 0; d < {ndim}; d++) {{
        int64_t size = 1;
        for (int i = 0; i < {n_in}; i++) {{
            int64_t s = in[i].shape[d];
            if (s == 1) continue;
            if (size != 1 && s != size)
                SG_FAIL(err, SG_ERR_VALUE, "device reduction {name}: input %d has size %lld "
                        "along dimension %d where another has %lld", i, (long long)s, d,
                        (long long)size);
            size = s;
        }}
        int kept = {" || ".join(f"d == {d}" for d in keep) or "0"};
        if (kept) out_shapes[k++] = size;
    }}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const int keep[{keep_n}] = {{{", ".join(map(str, keep)) or "0"}}};
    static const int red[{red_n}] = {{{", ".join(map(str, axes)) or "0"}}};
    SG_FN(geom) g;
    g.nkeep = {len(keep)}; g.nred = {len(axes)}; g.n_out = 1; g.n_red = 1;
    for (int k = 0; k < g.nkeep; k++) {{
        int d = keep[k];
        int64_t size = out[0].shape[k];
        g.keep_shape[k] = size; g.n_out *= size;
        for (int i = 0; i < {n_in}; i++)
            g.keep_st[i][k] = in[i].shape[d] == 1 ? 0 : in[i].strides[d];
    }}
    for (int k = 0; k < g.nred; k++) {{
        int d = red[k];
        int64_t size = 1;
        for (int i = 0; i < {n_in}; i++) if (in[i].shape[d] != 1) size = in[i].shape[d];
        g.red_shape[k] = size; g.n_red *= size;
        for (int i = 0; i < {n_in}; i++)
            g.red_st[i][k] = in[i].shape[d] == 1 ? 0 : in[i].strides[d];
    }}
{empty_check}    if (g.n_out == 0) return 0;
    int64_t blocks = g.n_out < {MAX_BLOCKS} ? g.n_out : {MAX_BLOCKS};
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, g, {args});
    SG_CUDA_CHECK(err, "the reduction kernel of {c_string(op, limit=120)}");
    return 0;
}}
"""
    return CKernel(source=source, version=1)


def argreduce_lowering(op, node):
    """CUDA of Argmax/Argmin: the flat index (in the op's order of the reduced
    axes) of the first maximum/minimum of each group; a NaN wins, as in NumPy."""
    if reduce_reason(node) is not None:
        return None
    x = node.inputs[0]
    ndim, dtype = x.ndim, str(x.dtype)
    axes = tuple(op.axes(ndim))
    keep = tuple(d for d in range(ndim) if d not in axes)
    better = ">" if type(op).__name__ == "Argmax" else "<"
    acc = c_compute_type(dtype)
    name = c_string(op, printf=True, limit=80)
    keep_n, red_n = max(len(keep), 1), max(len(axes), 1)
    # (v, i) beats (w, j): a NaN first, then the better value, then the smaller index
    beats = (f"((v != v) ? (w == w || i < j) : (w == w && (v {better} w || "
             f"(v == w && i < j))))")
    source = f"""
typedef struct {{ int64_t n_out, n_red; int nkeep, nred;
                 int64_t keep_shape[{keep_n}], red_shape[{red_n}];
                 int64_t keep_st[{keep_n}], red_st[{red_n}]; }} SG_FN(geom);

__global__ void SG_FN(kernel)(SG_FN(geom) g, const {storage_type(dtype)} *__restrict__ a, int64_t *o) {{
    __shared__ {acc} best_v[{BLOCK}];
    __shared__ int64_t best_i[{BLOCK}];
    for (int64_t j0 = blockIdx.x; j0 < g.n_out; j0 += gridDim.x) {{
        int64_t rem = j0, base = 0;
        for (int d = g.nkeep - 1; d >= 0; d--) {{
            base += (rem % g.keep_shape[d]) * g.keep_st[d]; rem /= g.keep_shape[d];
        }}
        {acc} w = 0; int64_t j = -1;
        for (int64_t r = threadIdx.x; r < g.n_red; r += blockDim.x) {{
            int64_t rem2 = r, off = base;
            for (int d = g.nred - 1; d >= 0; d--) {{
                off += (rem2 % g.red_shape[d]) * g.red_st[d]; rem2 /= g.red_shape[d];
            }}
            {acc} v = ({acc})*(const {storage_type(dtype)} *)((const char *)a + off);
            int64_t i = r;
            if (j < 0 || {beats}) {{ w = v; j = i; }}
        }}
        best_v[threadIdx.x] = w; best_i[threadIdx.x] = j;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
            if (threadIdx.x < s) {{
                {acc} v = best_v[threadIdx.x + s], w2 = best_v[threadIdx.x];
                int64_t i = best_i[threadIdx.x + s], j2 = best_i[threadIdx.x];
                {acc} w = w2; int64_t j = j2;
                if (i >= 0 && (j < 0 || {beats})) {{
                    best_v[threadIdx.x] = v; best_i[threadIdx.x] = i;
                }}
            }}
            __syncthreads();
        }}
        if (threadIdx.x == 0) o[j0] = best_i[0] < 0 ? 0 : best_i[0];
        __syncthreads();
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    static const int keep[{keep_n}] = {{{", ".join(map(str, keep)) or "0"}}};
    static const int red[{red_n}] = {{{", ".join(map(str, axes)) or "0"}}};
    int64_t group = 1;
    for (int k = 0; k < {len(axes)}; k++) group *= in[0].shape[red[k]];
    if ({len(axes)} > 0 && group == 0)
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the {op.word} of an empty array is undefined");
    for (int k = 0; k < {len(keep)}; k++) out_shapes[k] = in[0].shape[keep[k]];
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    static const int keep[{keep_n}] = {{{", ".join(map(str, keep)) or "0"}}};
    static const int red[{red_n}] = {{{", ".join(map(str, axes)) or "0"}}};
    SG_FN(geom) g;
    g.nkeep = {len(keep)}; g.nred = {len(axes)}; g.n_out = 1; g.n_red = 1;
    for (int k = 0; k < g.nkeep; k++) {{
        g.keep_shape[k] = in[0].shape[keep[k]]; g.keep_st[k] = in[0].strides[keep[k]];
        g.n_out *= g.keep_shape[k];
    }}
    for (int k = 0; k < g.nred; k++) {{
        g.red_shape[k] = in[0].shape[red[k]]; g.red_st[k] = in[0].strides[red[k]];
        g.n_red *= g.red_shape[k];
    }}
    if (g.n_out == 0) return 0;
    int64_t blocks = g.n_out < {MAX_BLOCKS} ? g.n_out : {MAX_BLOCKS};
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, g, (const {storage_type(dtype)} *)in[0].data,
              (int64_t *)out[0].data);
    SG_CUDA_CHECK(err, "the {op.word} kernel");
    return 0;
}}
"""
    return CKernel(source=source, version=1)
