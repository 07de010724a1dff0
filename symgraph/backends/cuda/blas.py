"""CUDA for the BLAS ops (``Dot``, ``Gemm``, ``Gemv``, ``Ger``): symgraph's own
tiled matrix product, in shared memory.

cuBLAS does not exist on the emulated device, so these kernels are what runs
there, and the fallback on a GPU without cuBLAS.  One kernel serves every op:
``out = alpha * A @ B (+ C, scaled by beta)``, with each operand read through
its strides (a vector is a matrix with a zero stride; a transposed view is
just other strides), tiles of TILE x TILE staged in shared memory, and the
dot products accumulated in the compute type.  ``Gemm``, ``Gemv`` and
``Ger`` with ``inplace=True`` (the ``inplace`` phase's choice, which
``OnDevice`` declares) write into ``z`` itself: a row-major ``z`` where it lies,
any other through a contiguous scratch copied back.
"""

from symgraph.backends.c_family.c_files import c_file
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_compute_type
from symgraph.backends.cuda.types import storage_type
from symgraph.backends.cuda import scratch
from symgraph.backends.cuda.shape import COPY_SUPPORT, SHAPE_STR
from symgraph.backends.native.kernel import COMPUTE, INPLACE, CKernel

__all__ = ["TILE", "blas_reason", "dot_lowering", "blas_update_lowering",
           "batched_dot_lowering"]

TILE = 16
_DTYPES = ("float16", "float32", "float64")

_KERNEL = c_file("cuda/gemm_tiled.inc")


def blas_reason(node):
    """None when the BLAS ``node`` has a CUDA kernel here, else why not."""
    if getattr(node.op, "nbatch", 1) != 1:
        return "only one batch dimension is multiplied on the device"
    dtypes = {str(v.dtype) for v in node.inputs + node.outputs}
    if len(dtypes) != 1 or dtypes.pop() not in _DTYPES:
        return "only float16, float32 and float64 matrix products of one dtype run on the device"
    return None


_CUBLAS_CALL = ("sg_cuda_cublas_call_v1", c_file("cuda/cublas_call.inc"))


def _fail_unless_equal(lhs, rhs, shapes, text, args):
    """Host C failing with the CPU kernels' message ``text`` when the sizes
    ``lhs`` and ``rhs`` differ: its ``%s`` are the shapes of the inputs
    ``shapes`` (``SHAPE_STR``), then come the C expressions ``args``."""
    prints = " ".join(f"sg_cuda_shape_str(&in[{i}], s{k}, sizeof s{k});"
                      for k, i in enumerate(shapes))
    values = "".join(f", s{k}" for k in range(len(shapes))) + \
        "".join(f", (long long)({a})" for a in args)
    return f"""    if (({lhs}) != ({rhs})) {{
        char s0[128], s1[128];
        (void)s1;
        {prints}
        SG_FAIL(err, SG_ERR_VALUE, "{text}"{values});
    }}
"""


def _not_aligned(op_name, lhs, rhs, dim0, dim1):
    """The CPU's 'not aligned' error of Dot and BatchedDot, both shapes in it,
    when ``lhs`` (dimension ``dim0`` of the first input) and ``rhs``
    (dimension ``dim1`` of the second) differ."""
    return _fail_unless_equal(lhs, rhs, (0, 1), f"{op_name}: shapes %s and %s are not aligned: "
                              f"dimension {dim0} of the first (%lld) != dimension {dim1} of "
                              f"the second (%lld)", (lhs, rhs))


def _update_checks(kind):
    """The CPU kernels' shape checks of Gemm, Gemv and Ger, in their order and
    with their messages: the product's operands, then z against the product."""
    checks, names = [], {"Gemm": ("x and y", "dot(x, y)"), "Gemv": ("A and x", "dot(A, x)"),
                         "Ger": (None, "outer(x, y)")}[kind]
    if names[0] is not None:
        checks.append(_fail_unless_equal(
            "in[2].shape[1]", "in[3].shape[0]", (2, 3),
            f"{kind}: shapes %s and %s of {names[0]} are not aligned (%lld != %lld)",
            ("in[2].shape[1]", "in[3].shape[0]")))
    sizes = {"Gemm": ["in[2].shape[0]", "in[3].shape[1]"], "Gemv": ["in[2].shape[0]"],
             "Ger": ["in[2].shape[0]", "in[3].shape[0]"]}[kind]
    for d, size in enumerate(sizes):
        checks.append(_fail_unless_equal(
            f"in[0].shape[{d}]", size, (0,),
            f"{kind}: z has shape %s, but {names[1]} has %lld in dimension {d}", (size,)))
    return "".join(checks)


def cublas_table_address():
    """The device memory library's cuBLAS table (NULL where cuBLAS is not
    installed): the kernels' ``sg_cu_blas``."""
    import ctypes

    from symgraph.backends.cuda.device_memory import _emulated, _library

    fn = _library(_emulated()).sg_cuda_blas_table
    fn.restype = ctypes.c_void_p
    return fn() or 0


def _kernel(node, run, what, inplace=False):
    from symgraph.config import config

    dtype = str(node.outputs[0].dtype)
    # cuBLAS for float32/64 (float16 stays with the tiled kernel)
    blas = bool(config.gpu.cublas) and dtype in ("float32", "float64")
    shape_str = (SHAPE_STR,) if "sg_cuda_shape_str" in run else ()
    header = (f"#define T {storage_type(dtype)}\n#define ACC {c_compute_type(dtype)}\n"
              f"#define TILE {TILE}\n#define WHAT {c_string(what, quote=True, limit=120)}\n"
              f"#define SG_CU_BLAS {int(blas)}\n")
    source = (header + _KERNEL + run +
              "\n#undef T\n#undef ACC\n#undef TILE\n#undef WHAT\n#undef SG_CU_BLAS\n")
    support, symbols = shape_str, ()
    if inplace:
        support += (COPY_SUPPORT, scratch.SUPPORT)
        symbols += scratch.SYMBOLS
    if blas:
        support = (COPY_SUPPORT, _CUBLAS_CALL) + support
        symbols += (("sg_cu_blas", cublas_table_address),)
    alias = {"kind": INPLACE, "inplace_of": (0,)} if inplace else {"kind": COMPUTE}
    return CKernel(source=source, support=tuple(dict.fromkeys(support)),
                   headers=('"cuda/sg_cublas_api.h"', "<stdio.h>") if blas else ("<stdio.h>",),
                   symbols=symbols, version=4, **alias)


# (rows, columns, row stride, column stride) of an operand, in elements:
# a vector is one row or one column with a zero stride across.
def _as_rows(i):
    return (f"in[{i}].shape[0]", "1", f"in[{i}].strides[0] / (int64_t)sizeof(T)", "0")


def _as_cols(i):
    return ("1", f"in[{i}].shape[0]", "0", f"in[{i}].strides[0] / (int64_t)sizeof(T)")


def _matrix(i):
    return (f"in[{i}].shape[0]", f"in[{i}].shape[1]",
            f"in[{i}].strides[0] / (int64_t)sizeof(T)", f"in[{i}].strides[1] / (int64_t)sizeof(T)")


def dot_lowering(op, node):
    """CUDA of Dot: 2-d and 1-d operands in every combination."""
    if blas_reason(node) is not None:
        return None
    x, y = node.inputs
    # A is (M, K), B is (K, N); a 1-d x is one row, a 1-d y one column
    a = _matrix(0) if x.ndim == 2 else _as_cols(0)
    b = _matrix(1) if y.ndim == 2 else _as_rows(1)
    out_dims = ([f"in[0].shape[0]"] if x.ndim == 2 else []) + \
               ([f"in[1].shape[1]"] if y.ndim == 2 else [])
    shapes = "\n".join(f"    out_shapes[{k}] = {d};" for k, d in enumerate(out_dims))
    run = f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
{_not_aligned("Dot", a[1], b[0], x.ndim - 1, 0)}{shapes}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    return SG_FN(launch)({a[0]}, {b[1]}, {a[1]}, (const T *)in[0].data, {a[2]}, {a[3]},
                         (const T *)in[1].data, {b[2]}, {b[3]}, 0, 0, 0, 0, 0,
                         (T *)out[0].data, err);
}}
"""
    return _kernel(node, run, "the device matrix product (Dot)")


def blas_update_lowering(op, node):
    """CUDA of Gemm (z*b + a*x@y), Gemv (z*b + a*A@x) and Ger (z + a*outer(x, y)),
    into a new output, or into ``z`` when ``op.inplace``."""
    if blas_reason(node) is not None:
        return None
    kind = type(op).__name__
    if kind == "Gemm":
        a, b, c, alpha, beta = _matrix(2), _matrix(3), _matrix(0), "in[1].data", "in[4].data"
    elif kind == "Gemv":
        a, b, alpha, beta = _matrix(2), _as_rows(3), "in[1].data", "in[4].data"
        c = _as_rows(0)
    elif kind == "Ger":
        a, b, c, alpha, beta = _as_rows(2), _as_cols(3), _matrix(0), "in[1].data", "0"
    else:
        return None
    dims = [f"in[0].shape[{d}]" for d in range(node.outputs[0].ndim)]
    shapes = "\n".join(f"    out_shapes[{k}] = {d};" for k, d in enumerate(dims))
    launch = (f"SG_FN(launch)({a[0]}, {b[1]}, {a[1]}, (const T *)in[2].data, {a[2]}, {a[3]}, "
              f"(const T *)in[3].data, {b[2]}, {b[3]}, (const T *)in[0].data, {c[2]}, "
              f"{c[3]}, (const T *){alpha}, (const T *){beta}, o, err)")
    if not op.inplace:
        body = f"    T *o = (T *)out[0].data;\n    return {launch};\n"
    else:
        # out[0] is z: each element of the result is read from z and written
        # back by one thread, so a row-major z is written where it lies
        body = f"""    if (sg_is_c_contiguous(&out[0], (int64_t)sizeof(T))) {{
        T *o = (T *)out[0].data;
        return {launch};
    }}
    size_t bytes = 0;
    T *o = (T *)sg_cu_scratch((size_t)sg_size(&out[0]) * sizeof(T), &bytes);
    if (o == NULL)
        SG_FAIL(err, SG_ERR_MEMORY, "%s: no device memory for the result", WHAT);
    int rc = {launch};
    if (rc == 0) rc = sg_cu_copy_into(&out[0], (const char *)o, (int64_t)sizeof(T), err);
    sg_cu_scratch_release(o, bytes);
    return rc;
"""
    run = f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
{_update_checks(kind)}{shapes}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
{body}}}
"""
    return _kernel(node, run, f"the device {kind}", inplace=op.inplace)


def _operand(i, first, ndim_core, vector_as):
    """(rows, cols, row stride, col stride) of input ``i``'s core dims starting at
    ``first``: a matrix, or a vector laid as one row or one column."""
    st = f"in[{i}].strides[{{}}] / (int64_t)sizeof(T)"
    if ndim_core == 2:
        return (f"in[{i}].shape[{first}]", f"in[{i}].shape[{first + 1}]", st.format(first),
                st.format(first + 1))
    if vector_as == "row":
        return ("1", f"in[{i}].shape[{first}]", "0", st.format(first))
    return (f"in[{i}].shape[{first}]", "1", st.format(first), "0")


def batched_dot_lowering(op, node):
    """CUDA of BatchedDot with one batch dimension (size 1 broadcasts): one tiled
    product per batch entry."""
    if blas_reason(node) is not None or op.nbatch != 1:
        return None
    x, y = node.inputs
    a = _operand(0, 1, x.ndim - 1, "row")
    b = _operand(1, 1, y.ndim - 1, "col")
    # as on the CPU, a batch of one broadcasts only where its type says so: a
    # size-1 batch of an undeclared dimension is an error, not a broadcast
    broadcast = x.type.broadcastable[0] or y.type.broadcastable[0]
    out_dims = (["in[0].shape[1]"] if x.ndim == 3 else []) + \
               (["in[1].shape[2]"] if y.ndim == 3 else [])
    shapes = "\n".join(f"    out_shapes[{k + 1}] = {d};" for k, d in enumerate(out_dims))
    run = f"""
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
    int64_t bx = in[0].shape[0], by = in[1].shape[0];
    if (bx != by && !{int(broadcast)}) {{
        char s0[128], s1[128];
        sg_cuda_shape_str(&in[0], s0, sizeof s0); sg_cuda_shape_str(&in[1], s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "BatchedDot: batch dimension 0 differs: shapes %s and %s",
                s0, s1);
    }}
{_not_aligned("BatchedDot", a[1], b[0], x.ndim - 1, 1)}    out_shapes[0] = bx == 1 ? by : bx;
{shapes}
    return 0;
}}

int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    int64_t batch = out[0].shape[0], per = 1;
    for (int d = 1; d < out[0].ndim; d++) per *= out[0].shape[d];
    int64_t sx = in[0].shape[0] == 1 ? 0 : in[0].strides[0];
    int64_t sy = in[1].shape[0] == 1 ? 0 : in[1].strides[0];
    for (int64_t e = 0; e < batch; e++) {{
        if (SG_FN(launch)({a[0]}, {b[1]}, {a[1]}, (const T *)(in[0].data + e * sx), {a[2]},
                          {a[3]}, (const T *)(in[1].data + e * sy), {b[2]}, {b[3]}, 0, 0, 0, 0, 0,
                          (T *)out[0].data + e * per, err))
            return 1;
    }}
    return 0;
}}
"""
    return _kernel(node, run, "the device BatchedDot")
