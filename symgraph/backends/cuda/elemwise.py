"""CUDA for element-wise nodes (fused composites included): one grid-stride kernel.

Each thread walks the flat index of the (contiguous) outputs in steps of the
whole grid, turns it into each input's byte offset from that input's strides
(0 along broadcast dimensions), and computes the element with the scalar ops'
C from ``c_family/scalar_c.py`` under the ``cuda`` language, where a CUDA entry
replaces the C one only where they differ.  The launch shape never changes a
result.

float16 is stored as ``__half`` and computed in float32, rounded after each
step of a fused composite as on the CPU.

Declined (the node stays on the CPU, with the reason in ``placement_report``):
more than :data:`MAX_DIMS` dimensions, complex dtypes, scalar ops
whose C needs helper functions that have no device version
(``scalar_cuda.py``) or raises errors.
"""

from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import has_c_type
from symgraph.backends.c_family.scalar_base import c_ctype
from symgraph.backends.c_family.scalar_c import (c_body, c_error_messages, c_input_dtypes,
                                                 c_support, language)
from symgraph.backends.cuda import scalar_cuda
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["MAX_DIMS", "BLOCK", "elemwise_reason", "elemwise_lowering"]

#: The most dimensions a device element-wise kernel takes (its geometry is a
#: kernel argument passed by value).
MAX_DIMS = 8
#: Threads per block; the grid is capped at MAX_BLOCKS and strides over the rest.
BLOCK = 256
MAX_BLOCKS = 4096


def elemwise_reason(node):
    """None when the Elemwise ``node`` has a CUDA kernel, else why not."""
    scalar_op = node.op.scalar_op
    dtypes = [str(v.dtype) for v in node.inputs + node.outputs]
    for dtype in dtypes:
        if not has_c_type(dtype):
            return f"dtype {dtype} has no CUDA element-wise code yet"
    if node.outputs[0].ndim > MAX_DIMS:
        return f"more than {MAX_DIMS} dimensions"
    in_dtypes = [str(v.dtype) for v in node.inputs]
    with language("cuda"):
        want = c_input_dtypes(scalar_op, *in_dtypes)
        if want is None:
            return f"{scalar_op} has no C"
        if not scalar_cuda.has_device_helpers(scalar_op):
            return f"{scalar_op} needs C helper functions not ported to CUDA"
        if c_error_messages(scalar_op, [str(d) for d in want]):
            return f"{scalar_op} raises errors, which device code does not report yet"
        names = [f"x{i}" for i in range(len(in_dtypes))]
        body = c_body(scalar_op, names, list(want), [f"r{k}" for k in range(len(node.outputs))],
                      [str(v.dtype) for v in node.outputs])
    if body is None:
        return f"{scalar_op} has no C for these dtypes"
    return None


def elemwise_lowering(op, node):
    """The CKernel (CUDA source) of an Elemwise ``node`` (host types), or None."""
    if elemwise_reason(node) is not None:
        return None
    scalar_op = op.scalar_op
    n_in, n_out = len(node.inputs), len(node.outputs)
    in_dtypes = [str(v.dtype) for v in node.inputs]
    out_dtypes = [str(v.dtype) for v in node.outputs]
    ndim = node.outputs[0].ndim
    with language("cuda"):
        want = [str(d) for d in c_input_dtypes(scalar_op, *in_dtypes)]
        body = c_body(scalar_op, [f"x{i}" for i in range(n_in)], want,
                      [f"r{k}" for k in range(n_out)], out_dtypes)
        support = tuple(c_support(scalar_op))
    params = [f"const {storage_type(d)} *__restrict__ a{i}" for i, d in enumerate(in_dtypes)]
    params += [f"{storage_type(d)} *__restrict__ o{k}" for k, d in enumerate(out_dtypes)]
    loads = "\n".join(
        f"        const {c_ctype(w)} x{i} = ({c_ctype(w)})*(const {storage_type(d)} *)"
        f"((const char *)a{i} + off{i});" for i, (d, w) in enumerate(zip(in_dtypes, want)))
    offsets = " ".join(f"off{i} += idx * g.st[{i}][d];" for i in range(n_in))
    declare = " ".join(f"int64_t off{i} = 0;" for i in range(n_in))
    results = " ".join(f"{c_ctype(d)} r{k};" for k, d in enumerate(out_dtypes))
    stores = "\n".join(f"        o{k}[i] = ({storage_type(d)})r{k};" for k, d in enumerate(out_dtypes))
    name = c_string(scalar_op, printf=True, limit=120)
    args = ", ".join([f"(const {storage_type(d)} *)in[{i}].data" for i, d in enumerate(in_dtypes)] +
                     [f"({storage_type(d)} *)out[{k}].data" for k, d in enumerate(out_dtypes)])
    source = f"""
typedef struct {{ int64_t n; int ndim; int64_t shape[{max(ndim, 1)}];
                 int64_t st[{n_in}][{max(ndim, 1)}]; }} SG_FN(geom);

__global__ void SG_FN(kernel)(SG_FN(geom) g, {", ".join(params)}) {{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n;
         i += (int64_t)blockDim.x * gridDim.x) {{
        int64_t rem = i; {declare}
        for (int d = g.ndim - 1; d >= 0; d--) {{
            int64_t idx = rem % g.shape[d]; rem /= g.shape[d]; {offsets}
        }}
{loads}
        {results}
        {body}
{stores}
    }}
}}

int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    for (int d = 0; d < {ndim}; d++) {{
        int64_t size = 1;
        for (int i = 0; i < {n_in}; i++) {{
            int64_t s = in[i].shape[d];
            if (s == 1) continue;
            if (size != 1 && s != size)
                SG_FAIL(err, SG_ERR_VALUE, "device element-wise {name}: input %d has "
                        "size %lld along dimension %d where another has %lld", i,
                        (long long)s, d, (long long)size);
            size = s;
        }}
        for (int k = 0; k < {n_out}; k++) out_shapes[k * SG_MAXDIMS + d] = size;
    }}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    SG_FN(geom) g;
    g.ndim = {ndim};
    g.n = 1;
    for (int d = 0; d < {ndim}; d++) {{
        g.shape[d] = out[0].shape[d];
        g.n *= g.shape[d];
        for (int i = 0; i < {n_in}; i++)
            g.st[i][d] = in[i].shape[d] == 1 ? 0 : in[i].strides[d];
    }}
    if (g.n == 0) return 0;
    int64_t blocks = (g.n + {BLOCK} - 1) / {BLOCK};
    if (blocks > {MAX_BLOCKS}) blocks = {MAX_BLOCKS};
    SG_LAUNCH(SG_FN(kernel), (unsigned)blocks, {BLOCK}, 0, g, {args});
    SG_CUDA_CHECK(err, "the element-wise kernel of {c_string(scalar_op, limit=120)}");
    return 0;
}}
"""
    return CKernel(source=source, support=support, version=1)
