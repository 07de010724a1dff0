"""Native kernels for Elemwise nodes (any scalar op, fused Composites included).

A kernel has two functions (ABI: ``c_src/sg_kernel.h``):

``SG_FN(shape)``: the broadcast of the input shapes.  Only dimensions that the
node's input types declare broadcastable may be 1 and broadcast; any other
mismatch fails with the Python ``perform``'s message (ShapeMismatchError's
text, raised as ValueError by the runtime).

``SG_FN(run)``: one element function (the scalar op's ``c_body``) in two loops:

* a contiguous fast path, taken when every input is C-contiguous with the
  output's size (or is a scalar: a type broadcastable in every dimension,
  read once before the loop) and the outputs are C-contiguous: a flat loop
  over restrict pointers that GCC vectorizes;
* a general path for any strides (negative, zero, broadcast): size-1
  dimensions are dropped and neighbours merged where every array steps
  through them as one (``sg_ew_collapse``), then nested loops with byte
  strides, the last dimension innermost.  A broadcast input has stride 0
  there.

Vector math: glibc's libmvec has SIMD versions of expf, tanhf, logf, ... but
math.h only declares them under ``-ffast-math``, which symgraph never uses
(it breaks isnan, isinf and NaN propagation).  ``MVEC_SUPPORT`` declares
them itself (``__attribute__((simd("notinbranch")))``, what glibc's header
would do), so the loops call ``_ZGVdN8v_expf`` and friends while everything
else stays IEEE.  It is guarded by ``SG_USE_MVEC``: the library must then be
linked with ``-lmvec`` (or libmvec loaded RTLD_GLOBAL before it), so whoever
compiles defines the macro when it links libmvec.  Measured on this machine
(AVX-512, gcc 12, float32, 1e6 elements, one thread): ``exp(-x*x)*y +
tanh(z)*0.5`` takes 31 ms with scalar libm calls and 1.0 ms with libmvec.
libmvec is accurate to 4 ulp (float32 results within rtol 1e-6 of NumPy's).

OpenMP: with ``config.openmp`` the loops get ``#pragma omp parallel for``
with ``if(size >= config.openmp_elemwise_minsize)`` and the kernel is marked
``openmp=True``.

Errors an op flags per element (an integer to a negative power) are OR-ed
into one int during the loop and reported after it, as NumPy raises after
looking at the whole array.
"""

import os
import platform

from symgraph.compile.native.c_types import c_type, has_c_type
from symgraph.compile.native.kernel import COMPUTE, INPLACE, CKernel

__all__ = ["elemwise_kernel", "MVEC_SUPPORT", "EW_SUPPORT", "element_code"]

KERNEL_VERSION = 1

# ---------------------------------------------------------------------------
# libmvec declarations

_MVEC_BASE = ("sin", "cos", "log", "exp", "pow")  # glibc >= 2.22
_MVEC_MORE = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cosh",
              "erf", "erfc", "exp10", "exp2", "expm1", "hypot", "log10", "log1p", "log2",
              "sinh", "tan", "tanh")  # glibc >= 2.35
_TWO_ARGS = ("pow", "atan2", "hypot")


def _glibc_version():
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return (0, 0)
    try:
        major, minor = text.split()[-1].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


def _mvec_functions():
    if platform.machine() not in ("x86_64", "AMD64") or platform.system() != "Linux":
        return ()
    version = _glibc_version()
    if version < (2, 22):
        return ()
    return _MVEC_BASE + (_MVEC_MORE if version >= (2, 35) else ())


def _mvec_code(functions):
    lines = ["/* libmvec: SIMD variants of libm functions (see elemwise_codegen.py) */",
             "#if defined(SG_USE_MVEC) && defined(__x86_64__)",
             "#define SG_SIMD_DECL __attribute__((__simd__(\"notinbranch\")))"]
    for name in functions:
        for ctype, suffix in (("double", ""), ("float", "f")):
            args = ", ".join([ctype] * (2 if name in _TWO_ARGS else 1))
            lines.append(f"SG_SIMD_DECL {ctype} {name}{suffix}({args});")
    lines.append("#endif")
    return "\n".join(lines)


#: Support entry declaring libmvec's SIMD functions; list it before any
#: helper that calls libm so that inlined calls vectorize too.
MVEC_SUPPORT = ("sg_mvec_v1:" + ",".join(_mvec_functions()), _mvec_code(_mvec_functions()))

# ---------------------------------------------------------------------------
# Shape checks and stride plans shared by every element-wise kernel

EW_SUPPORT = ("sg_ew_support_v1", r"""
/* ---- symgraph element-wise kernels: shapes and stride plans ---- */
static void sg_ew_shapes_text(const sg_array *in, int nin, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < nin && used + 1 < len; i++) {
        used += snprintf(buf + used, len - used, "%s(", i ? ", " : "");
        for (int d = 0; d < in[i].ndim && used + 1 < len; d++)
            used += snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                             (long long)in[i].shape[d]);
        if (used + 1 < len)
            used += snprintf(buf + used, len - used, in[i].ndim == 1 ? ",)" : ")");
    }
}

/* The output shape of broadcasting nin inputs of rank nd; bc[i*nd+d] says
   whether input i is declared broadcastable in dimension d.  The messages
   are those of Elemwise.perform (check_runtime_broadcast). */
static int sg_ew_shape(const sg_array *in, int nin, int nd, const unsigned char *bc,
                       const char *name, int64_t *shape, sg_error *err) {
    char shapes[256];
    for (int d = 0; d < nd; d++) {
        int64_t size = 1;
        int owner = -1;
        for (int i = 0; i < nin; i++) {
            if (bc[i * nd + d]) continue;
            int64_t got = in[i].shape[d];
            if (owner < 0) { size = got; owner = i; }
            else if (got != size) {
                sg_ew_shapes_text(in, nin, shapes, sizeof(shapes));
                SG_FAIL(err, SG_ERR_VALUE, "%s: input %d has size %lld in dimension %d, "
                        "but input %d has size %lld (shapes %s)", name, i, (long long)got,
                        d, owner, (long long)size, shapes);
            }
        }
        shape[d] = size;
    }
    for (int i = 0; i < nin; i++)
        for (int d = 0; d < nd; d++)
            if (bc[i * nd + d] && in[i].shape[d] != 1)
                SG_FAIL(err, SG_ERR_VALUE, "%s: input %d is declared broadcastable in "
                        "dimension %d but has size %lld", name, i, d,
                        (long long)in[i].shape[d]);
    return 0;
}

/* Drop size-1 dimensions and merge neighbours that all nops arrays step
   through as one (st[k*SG_MAXDIMS+d]: byte stride of array k).  Returns the
   new rank, at least 1. */
static int sg_ew_collapse(int nd, int nops, int64_t *shape, int64_t *st) {
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        int merge = m > 0;
        for (int k = 0; merge && k < nops; k++)
            merge = st[k * SG_MAXDIMS + m - 1] == st[k * SG_MAXDIMS + d] * shape[d];
        if (merge) {
            shape[m - 1] *= shape[d];
            for (int k = 0; k < nops; k++) st[k * SG_MAXDIMS + m - 1] = st[k * SG_MAXDIMS + d];
            continue;
        }
        shape[m] = shape[d];
        for (int k = 0; k < nops; k++) st[k * SG_MAXDIMS + m] = st[k * SG_MAXDIMS + d];
        m++;
    }
    if (m == 0) {
        shape[0] = 1;
        for (int k = 0; k < nops; k++) st[k * SG_MAXDIMS] = 0;
        m = 1;
    }
    return m;
}

/* Pointers of the arrays at the start of row o (all dimensions but the last). */
static inline void sg_ew_row(int64_t o, int nd, const int64_t *shape, const int64_t *st,
                             int nops, char *const *base, char **p) {
    for (int k = 0; k < nops; k++) p[k] = base[k];
    for (int d = nd - 2; d >= 0; d--) {
        int64_t i = o % shape[d];
        o /= shape[d];
        for (int k = 0; k < nops; k++) p[k] += i * st[k * SG_MAXDIMS + d];
    }
}
""")


# ---------------------------------------------------------------------------
# Code generation

def _ctype(dtype):
    from symgraph.ops.scalar import c_ctype

    return c_ctype(dtype)


def _convert(expr, have, need):
    """``expr`` (a value of dtype ``have``, read from storage) as ``need``."""
    if need == "bool" and have != "bool":
        return f"({expr} != 0)"
    return f"({_ctype(need)})({expr})"


def element_code(scalar_op, in_dtypes, out_dtypes, loads, stores, error_flag=None):
    """The C block computing one element, or None when the op has no C.

    ``loads[i]``: a C expression reading input i from its storage type;
    ``stores[k]``: a function of a value expression giving the statement that
    writes output k.  Returns (code, error messages).
    """
    want = scalar_op.c_input_dtypes(*in_dtypes)
    if not all(has_c_type(d) for d in want):
        return None
    lines = [f"const {_ctype(w)} a{i} = {_convert(load, have, w)};"
             for i, (load, have, w) in enumerate(zip(loads, in_dtypes, want))]
    outs = [f"r{k}" for k in range(len(out_dtypes))]
    messages = scalar_op.c_error_messages(want) if error_flag else ()
    body = scalar_op.c_body([f"a{i}" for i in range(len(loads))], list(want), outs,
                            list(out_dtypes), error_flag=error_flag if messages else None)
    if body is None:
        return None
    lines += [f"{_ctype(d)} {r};" for r, d in zip(outs, out_dtypes)]
    lines.append(body)
    lines += [store(r) for store, r in zip(stores, outs)]
    return "{\n" + "\n".join(lines) + "\n}", messages


def _c_string(text, limit=160):
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def elemwise_kernel(node):
    """The CKernel of an Elemwise node, or None (a dtype or member without C)."""
    from symgraph.config import config

    op = node.op
    scalar_op = op.scalar_op
    in_dtypes = [str(v.dtype) for v in node.inputs]
    out_dtypes = [str(v.dtype) for v in node.outputs]
    if not all(has_c_type(d) for d in in_dtypes + out_dtypes):
        return None
    nin, nout = len(in_dtypes), len(out_dtypes)
    nd = node.outputs[0].ndim
    bcast = [tuple(v.type.broadcastable) for v in node.inputs]
    scalars = [i for i in range(nin) if all(bcast[i])]
    arrays = [i for i in range(nin) if i not in scalars]
    inplace = dict(op.inplace_pattern)
    openmp = bool(config.openmp)
    minsize = int(config.openmp_elemwise_minsize)

    # operand k of the loops: the non-scalar inputs, then the outputs
    ops_in = {i: k for k, i in enumerate(arrays)}
    nops = len(arrays) + nout
    restrict = "" if inplace else " restrict"

    def load_contig(i):
        return f"s{i}" if i in scalars else f"p{i}[i]"

    def load_strided(i):
        if i in scalars:
            return f"s{i}"
        return f"*(const {c_type(in_dtypes[i])} *)(q[{ops_in[i]}] + j * t{ops_in[i]})"

    flag = "sg_bad"
    contig = element_code(
        scalar_op, in_dtypes, out_dtypes, [load_contig(i) for i in range(nin)],
        [lambda r, k=k: f"o{k}[i] = ({c_type(out_dtypes[k])}){r};" for k in range(nout)],
        error_flag=flag)
    if contig is None:
        return None
    contig_body, messages = contig
    strided_body, _ = element_code(
        scalar_op, in_dtypes, out_dtypes, [load_strided(i) for i in range(nin)],
        [lambda r, k=k: f"*({c_type(out_dtypes[k])} *)(q[{len(arrays) + k}] + j * "
                        f"t{len(arrays) + k}) = ({c_type(out_dtypes[k])}){r};"
         for k in range(nout)],
        error_flag=flag)

    src = []
    # -- shape ------------------------------------------------------------------
    bc_flags = ", ".join("1" if b else "0" for flags in bcast for b in flags) or "0"
    src.append(f"static const unsigned char SG_FN(bc)[] = {{{bc_flags}}};")
    src.append(f"int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{")
    src.append(f"    int64_t shape[SG_MAXDIMS];")
    src.append(f"    if (sg_ew_shape(in, {nin}, {nd}, SG_FN(bc), {_c_string(str(op))}, shape, "
               f"err)) return 1;")
    src.append(f"    for (int k = 0; k < {nout}; k++)")
    src.append(f"        for (int d = 0; d < {nd}; d++) out_shapes[k * SG_MAXDIMS + d] = shape[d];")
    src.append("    return 0;\n}")

    # -- run ----------------------------------------------------------------------
    reduction = f" reduction(|:{flag})" if messages else ""
    src.append("int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {")
    src.append("    const int64_t n = sg_size(&out[0]);")
    src.append("    if (n == 0) return 0;")
    src.append(f"    int {flag} = 0;")
    for i in scalars:
        src.append(f"    const {c_type(in_dtypes[i])} s{i} = "
                   f"*(const {c_type(in_dtypes[i])} *)in[{i}].data;")
    checks = [f"sg_size(&in[{i}]) == n && sg_is_c_contiguous(&in[{i}], "
              f"sizeof({c_type(in_dtypes[i])}))" for i in arrays]
    checks += [f"sg_is_c_contiguous(&out[{k}], sizeof({c_type(out_dtypes[k])}))"
               for k in range(nout)]
    src.append(f"    if ({' && '.join(checks) or '1'}) {{")
    for i in arrays:
        src.append(f"        const {c_type(in_dtypes[i])} *{restrict} p{i} = "
                   f"(const {c_type(in_dtypes[i])} *)in[{i}].data;")
    for k in range(nout):
        src.append(f"        {c_type(out_dtypes[k])} *{restrict} o{k} = "
                   f"({c_type(out_dtypes[k])} *)out[{k}].data;")
    if openmp:
        src.append(f"        #pragma omp parallel for simd schedule(static) if(n >= {minsize})"
                   f"{reduction}")
    else:
        src.append("        #pragma GCC ivdep")
    src.append("        for (int64_t i = 0; i < n; i++) " + _indent(contig_body, 8))
    src.append("    } else {")
    src.append(f"        int64_t shape[SG_MAXDIMS], st[{nops} * SG_MAXDIMS];")
    src.append(f"        char *base[{nops}];")
    src.append(f"        for (int d = 0; d < {nd}; d++) {{")
    src.append(f"            shape[d] = out[0].shape[d];")
    for i in arrays:
        src.append(f"            st[{ops_in[i]} * SG_MAXDIMS + d] = in[{i}].shape[d] == 1 ? 0 : "
                   f"in[{i}].strides[d];")
    for k in range(nout):
        src.append(f"            st[{len(arrays) + k} * SG_MAXDIMS + d] = out[{k}].strides[d];")
    src.append("        }")
    for i in arrays:
        src.append(f"        base[{ops_in[i]}] = in[{i}].data;")
    for k in range(nout):
        src.append(f"        base[{len(arrays) + k}] = out[{k}].data;")
    src.append(f"        const int nd = sg_ew_collapse({nd}, {nops}, shape, st);")
    src.append("        const int64_t inner = shape[nd - 1], outer = n / inner;")
    for k in range(nops):
        src.append(f"        const int64_t t{k} = st[{k} * SG_MAXDIMS + nd - 1];")
    if openmp:
        src.append(f"        #pragma omp parallel for schedule(static) if(n >= {minsize}){reduction}")
    src.append("        for (int64_t o = 0; o < outer; o++) {")
    src.append(f"            char *q[{nops}];")
    src.append(f"            sg_ew_row(o, nd, shape, st, {nops}, base, q);")
    src.append("            for (int64_t j = 0; j < inner; j++) " + _indent(strided_body, 12))
    src.append("        }")
    src.append("    }")
    if messages:
        src.append(f"    if ({flag}) SG_FAIL(err, SG_ERR_VALUE, \"%s\", "
                   f"{_c_string(' '.join(messages), 400)});")
    src.append("    return 0;\n}")

    support = [MVEC_SUPPORT, EW_SUPPORT] + list(scalar_op.c_support())
    if inplace:
        kind, inplace_of = INPLACE, tuple(inplace[k] for k in range(nout))
    else:
        kind, inplace_of = COMPUTE, ()
    return CKernel(source="\n".join(src), kind=kind, inplace_of=inplace_of,
                   support=tuple(support), openmp=openmp, version=KERNEL_VERSION,
                   extra={"libraries": ("mvec",)} if _mvec_functions() else {})


def _indent(block, spaces):
    pad = " " * spaces
    return block.replace("\n", "\n" + pad)
