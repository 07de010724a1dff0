"""Native code for the BLAS ops: Dot, Gemm, Gemv and Ger.

The BLAS is the one SciPy ships: ``scipy.linalg.cython_blas`` exports its
Fortran-interface functions as PyCapsules in ``__pyx_capi__``.  A kernel
declares a global function pointer per BLAS routine it may call
(``sg_blas_dgemm`` ...) in its support code and lists it in
``CKernel.symbols`` with a function returning the routine's address; the
linker sets the pointers after loading the library.  So no system BLAS and
no link flags are needed.

The BLAS is column-major: a row-major product C = A . B is computed as the
column-major C^T = B^T . A^T, which reads every operand in place when it is
C-contiguous along its rows (trans 'N') or along its columns (a transposed
contiguous array, trans 'T').  Other layouts (negative, zero or odd strides)
are copied into a contiguous workspace first.

Special values follow NumPy, not BLAS: BLAS skips ``alpha * (A . B)`` when
alpha is 0 or the inner dimension is 0, where NumPy's ``alpha * dot(a, b)``
still turns an Inf or NaN into NaN; those cases are computed explicitly.

float16 is computed in float32 (converted into a workspace, sgemm, converted
back); operands of another dtype than the result are converted the same
way.  Integer and bool products are plain loops (i-k-j order) in unsigned
arithmetic, which wraps as NumPy's integer dot does.
"""

import ctypes
import functools

from symgraph.compile.native.c_types import c_type
from symgraph.compile.native.kernel import CKernel

#: Bump when the generated code changes in a way its text would not show.
VERSION = 1

_BLAS_PREFIX = {"float": "s", "double": "d"}
_FLOAT_COMPUTE = {"float16": "float", "float32": "float", "float64": "double"}
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
# Integer products are accumulated in unsigned types, whose overflow wraps
# (signed overflow is undefined in C); narrow types in uint32_t, so that C's
# promotion to int never multiplies two large values as signed.  Truncating
# to the result type at the end gives NumPy's wrapped result.
_UNSIGNED = {"int8": "uint32_t", "int16": "uint32_t", "int32": "uint32_t",
             "int64": "uint64_t", "uint8": "uint32_t", "uint16": "uint32_t",
             "uint32": "uint32_t", "uint64": "uint64_t", "bool": "uint8_t"}


# -- the BLAS function pointers ---------------------------------------------------------

@functools.lru_cache(maxsize=None)
def blas_address(name):
    """The address of SciPy's BLAS routine ``name`` (e.g. ``'dgemm'``) as an int."""
    from scipy.linalg import cython_blas

    capsule = cython_blas.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, get_name(capsule))
    if not address:
        raise RuntimeError(f"scipy.linalg.cython_blas: no address for {name}")
    return address


@functools.lru_cache(maxsize=None)
def blas_available():
    """True when SciPy's BLAS can be found (else BLAS kernels are not generated)."""
    try:
        blas_address("dgemm")
    except Exception:  # noqa: BLE001 - any failure means no native BLAS
        return False
    return True


# One function object per routine, so that equal kernels compare equal.
_ADDRESS_FNS = {name: functools.partial(blas_address, name)
                for p in "sd" for name in (p + "gemm", p + "gemv", p + "dot", p + "ger")}


def _symbols(T):
    p = _BLAS_PREFIX[T]
    return tuple((f"sg_blas_{p}{r}", _ADDRESS_FNS[p + r]) for r in ("gemm", "gemv", "dot", "ger"))


# -- support code, per real type --------------------------------------------------------

_COMMON = r"""
/* symgraph BLAS helpers: shared definitions. */
#define SG_BLAS_INT_MAX 2147483647LL
/* A shape as Python prints it: (3, 4), (3,), (). */
static inline void sg_blas_shape_str(const sg_array *a, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < a->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, d ? ", %lld" : "%lld",
                                 (long long)a->shape[d]);
    if (used < n) snprintf(buf + used, n - used, a->ndim == 1 ? ",)" : ")");
}
static inline int sg_blas_check_dims(int64_t a, int64_t b, int64_t c, sg_error *err) {
    if (a > SG_BLAS_INT_MAX || b > SG_BLAS_INT_MAX || c > SG_BLAS_INT_MAX)
        SG_FAIL(err, SG_ERR_VALUE, "BLAS: a dimension exceeds 2**31-1 (%lld, %lld, %lld)",
                (long long)a, (long long)b, (long long)c);
    return 0;
}
"""

_TYPED = r"""
/* symgraph BLAS helpers for $T ($P). Fortran interface: everything by pointer. */
typedef void (*sg_blas_$Pgemm_t)(char *, char *, int *, int *, int *, $T *, $T *, int *,
                                 $T *, int *, $T *, $T *, int *);
typedef void (*sg_blas_$Pgemv_t)(char *, int *, int *, $T *, $T *, int *, $T *, int *,
                                 $T *, $T *, int *);
typedef $T (*sg_blas_$Pdot_t)(int *, $T *, int *, $T *, int *);
typedef void (*sg_blas_$Pger_t)(int *, int *, $T *, $T *, int *, $T *, int *, $T *, int *);
/* Set by the linker after loading (CKernel.symbols). */
__attribute__((visibility("default"))) sg_blas_$Pgemm_t sg_blas_$Pgemm = 0;
__attribute__((visibility("default"))) sg_blas_$Pgemv_t sg_blas_$Pgemv = 0;
__attribute__((visibility("default"))) sg_blas_$Pdot_t sg_blas_$Pdot = 0;
__attribute__((visibility("default"))) sg_blas_$Pger_t sg_blas_$Pger = 0;

#define SG_BLAS_$P_NEED(fn) do { if (!(fn)) SG_FAIL(err, SG_ERR_RUNTIME, \
    "BLAS routine " #fn " was not set when the library was loaded"); } while (0)

/* A matrix operand as BLAS reads it: the transpose of a row-major matrix.
 * trans 'N': rows are contiguous (memory is column-major cols x rows);
 * trans 'T': columns are contiguous (memory is column-major rows x cols). */
typedef struct { $T *ptr; int ld; char trans; $T *work; } sg_bmat_$P;
typedef struct { $T *ptr; int inc; $T *work; } sg_bvec_$P;

/* Describe a rows x cols matrix (byte strides rs, cs; no zero dims) for BLAS,
 * copying it into a contiguous workspace when its layout cannot be read as is. */
static inline int sg_bmat_$P_prep(char *data, int64_t rows, int64_t cols, int64_t rs,
                                  int64_t cs, sg_bmat_$P *op, sg_error *err) {
    const int64_t sz = (int64_t)sizeof($T);
    op->work = NULL;
    if ((uintptr_t)data % sizeof($T) == 0) {
        if ((cols == 1 || cs == sz) && (rows == 1 || (rs > 0 && rs % sz == 0 &&
                rs / sz >= cols && rs / sz <= SG_BLAS_INT_MAX))) {
            op->ptr = ($T *)data; op->trans = 'N';
            op->ld = (int)(rows == 1 ? cols : rs / sz);
            return 0;
        }
        if ((rows == 1 || rs == sz) && (cols == 1 || (cs > 0 && cs % sz == 0 &&
                cs / sz >= rows && cs / sz <= SG_BLAS_INT_MAX))) {
            op->ptr = ($T *)data; op->trans = 'T';
            op->ld = (int)(cols == 1 ? rows : cs / sz);
            return 0;
        }
    }
    $T *w = ($T *)malloc((size_t)(rows * cols) * sizeof($T));
    if (!w) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate a %lld x %lld workspace",
                    (long long)rows, (long long)cols);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            $T v; memcpy(&v, data + i * rs + j * cs, sizeof v);
            w[i * cols + j] = v;
        }
    op->ptr = op->work = w; op->trans = 'N'; op->ld = (int)cols;
    return 0;
}

/* Describe an n-vector (byte stride s, n > 0) for BLAS; copy unless the stride
 * is a positive multiple of the element size. */
static inline int sg_bvec_$P_prep(char *data, int64_t n, int64_t s, sg_bvec_$P *v,
                                  sg_error *err) {
    const int64_t sz = (int64_t)sizeof($T);
    v->work = NULL;
    if ((uintptr_t)data % sizeof($T) == 0 &&
            (n == 1 || (s > 0 && s % sz == 0 && s / sz <= SG_BLAS_INT_MAX))) {
        v->ptr = ($T *)data; v->inc = n == 1 ? 1 : (int)(s / sz);
        return 0;
    }
    $T *w = ($T *)malloc((size_t)n * sizeof($T));
    if (!w) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate a workspace of %lld",
                    (long long)n);
    for (int64_t i = 0; i < n; i++) memcpy(w + i, data + i * s, sizeof($T));
    v->ptr = v->work = w; v->inc = 1;
    return 0;
}

/* C = alpha * (A . B) + beta * C.  A: m x k and B: k x n, row-major views
 * with byte strides; C: m x n with unit column stride and row stride ldc
 * (elements, >= n).  beta == 0 ignores what C holds. */
static inline int sg_blas_$P_gemm(int64_t m, int64_t n, int64_t k, $T alpha,
        char *a, int64_t ars, int64_t acs, char *b, int64_t brs, int64_t bcs,
        $T beta, $T *c, int64_t ldc, sg_error *err) {
    if (m == 0 || n == 0) return 0;
    if (k == 0 || alpha == 0) {
        /* NumPy's alpha * dot(a, b): an Inf or NaN product (or alpha) still gives NaN. */
        $T *t = NULL;
        if (k > 0) {
            t = ($T *)malloc((size_t)(m * n) * sizeof($T));
            if (!t) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate a workspace");
            if (sg_blas_$P_gemm(m, n, k, 1, a, ars, acs, b, brs, bcs, 0, t, n, err)) {
                free(t); return 1;
            }
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                $T *cij = c + i * ldc + j;
                *cij = (beta == 0 ? ($T)0 : beta * *cij) + alpha * (t ? t[i * n + j] : ($T)0);
            }
        free(t);
        return 0;
    }
    SG_BLAS_$P_NEED(sg_blas_$Pgemm);
    if (sg_blas_check_dims(m, n, k, err) || sg_blas_check_dims(ldc, 1, 1, err)) return 1;
    sg_bmat_$P opa, opb;
    if (sg_bmat_$P_prep(a, m, k, ars, acs, &opa, err)) return 1;
    if (sg_bmat_$P_prep(b, k, n, brs, bcs, &opb, err)) { free(opa.work); return 1; }
    int im = (int)m, in = (int)n, ik = (int)k, ildc = (int)ldc;
    /* Column-major C^T (n x m) = B^T (n x k) . A^T (k x m). */
    sg_blas_$Pgemm(&opb.trans, &opa.trans, &in, &im, &ik, &alpha, opb.ptr, &opb.ld,
                   opa.ptr, &opa.ld, &beta, c, &ildc);
    free(opa.work); free(opb.work);
    return 0;
}

/* y = alpha * (M . x) + beta * y.  M: m x k row-major view (byte strides), x: a
 * k-vector (byte stride xs), y: m elements at stride incy (elements, > 0). */
static inline int sg_blas_$P_gemv(int64_t m, int64_t k, $T alpha, char *mp, int64_t mrs,
        int64_t mcs, char *x, int64_t xs, $T beta, $T *y, int64_t incy, sg_error *err) {
    if (m == 0) return 0;
    if (k == 0 || alpha == 0) {
        $T *t = NULL;
        if (k > 0) {
            t = ($T *)malloc((size_t)m * sizeof($T));
            if (!t) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate a workspace");
            if (sg_blas_$P_gemv(m, k, 1, mp, mrs, mcs, x, xs, 0, t, 1, err)) {
                free(t); return 1;
            }
        }
        for (int64_t i = 0; i < m; i++) {
            $T *yi = y + i * incy;
            *yi = (beta == 0 ? ($T)0 : beta * *yi) + alpha * (t ? t[i] : ($T)0);
        }
        free(t);
        return 0;
    }
    SG_BLAS_$P_NEED(sg_blas_$Pgemv);
    if (sg_blas_check_dims(m, k, incy, err)) return 1;
    sg_bmat_$P op;
    sg_bvec_$P xv;
    if (sg_bmat_$P_prep(mp, m, k, mrs, mcs, &op, err)) return 1;
    if (sg_bvec_$P_prep(x, k, xs, &xv, err)) { free(op.work); return 1; }
    int im = (int)m, ik = (int)k, iy = (int)incy;
    char t = 'T', nt = 'N';
    if (op.trans == 'N')   /* memory is M^T, column-major k x m */
        sg_blas_$Pgemv(&t, &ik, &im, &alpha, op.ptr, &op.ld, xv.ptr, &xv.inc, &beta, y, &iy);
    else                   /* memory is M, column-major m x k */
        sg_blas_$Pgemv(&nt, &im, &ik, &alpha, op.ptr, &op.ld, xv.ptr, &xv.inc, &beta, y, &iy);
    free(op.work); free(xv.work);
    return 0;
}

/* *result = x . y for n-vectors with byte strides xs, ys. */
static inline int sg_blas_$P_dot(int64_t n, char *x, int64_t xs, char *y, int64_t ys,
                                 $T *result, sg_error *err) {
    if (n == 0) { *result = 0; return 0; }
    SG_BLAS_$P_NEED(sg_blas_$Pdot);
    if (sg_blas_check_dims(n, 1, 1, err)) return 1;
    sg_bvec_$P xv, yv;
    if (sg_bvec_$P_prep(x, n, xs, &xv, err)) return 1;
    if (sg_bvec_$P_prep(y, n, ys, &yv, err)) { free(xv.work); return 1; }
    int in = (int)n;
    *result = sg_blas_$Pdot(&in, xv.ptr, &xv.inc, yv.ptr, &yv.inc);
    free(xv.work); free(yv.work);
    return 0;
}

/* C += alpha * outer(x, y).  x: m-vector, y: n-vector (byte strides); C: m x n
 * with unit column stride and row stride ldc (elements). */
static inline int sg_blas_$P_ger(int64_t m, int64_t n, $T alpha, char *x, int64_t xs,
        char *y, int64_t ys, $T *c, int64_t ldc, sg_error *err) {
    if (m == 0 || n == 0) return 0;
    if (alpha == 0) {   /* BLAS would return at once; NumPy gives 0 * Inf = NaN */
        for (int64_t i = 0; i < m; i++) {
            $T xi; memcpy(&xi, x + i * xs, sizeof xi);
            for (int64_t j = 0; j < n; j++) {
                $T yj; memcpy(&yj, y + j * ys, sizeof yj);
                c[i * ldc + j] += alpha * (xi * yj);
            }
        }
        return 0;
    }
    SG_BLAS_$P_NEED(sg_blas_$Pger);
    if (sg_blas_check_dims(m, n, ldc, err)) return 1;
    sg_bvec_$P xv, yv;
    if (sg_bvec_$P_prep(x, m, xs, &xv, err)) return 1;
    if (sg_bvec_$P_prep(y, n, ys, &yv, err)) { free(xv.work); return 1; }
    int im = (int)m, in = (int)n, ildc = (int)ldc;
    /* Column-major C^T (n x m) += alpha * y . x^T. */
    sg_blas_$Pger(&in, &im, &alpha, yv.ptr, &yv.inc, xv.ptr, &xv.inc, c, &ildc);
    free(xv.work); free(yv.work);
    return 0;
}

/* Where BLAS writes a rows x cols result bound for an array with byte strides
 * rs, cs: the array itself when its layout allows (direct), else a contiguous
 * workspace (*work) that sg_blas_*_store copies out afterwards. */
static inline int sg_blas_$P_target(char *data, int64_t rows, int64_t cols, int64_t rs,
        int64_t cs, int direct, $T **c, int64_t *ldc, $T **work, sg_error *err) {
    const int64_t sz = (int64_t)sizeof($T);
    *work = NULL;
    if (direct && (uintptr_t)data % sizeof($T) == 0 && (cols <= 1 || cs == sz) &&
            (rows <= 1 || (rs > 0 && rs % sz == 0 && rs / sz >= cols &&
                           rs / sz <= SG_BLAS_INT_MAX))) {
        *c = ($T *)data;
        *ldc = rows <= 1 ? (cols > 1 ? cols : 1) : rs / sz;
        return 0;
    }
    int64_t count = rows * cols > 0 ? rows * cols : 1;
    *work = ($T *)malloc((size_t)count * sizeof($T));
    if (!*work) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate an output workspace");
    *c = *work;
    *ldc = cols > 1 ? cols : 1;
    return 0;
}
"""

# Copy-convert between a strided array of one C type and a contiguous buffer
# of another (operands of another dtype, float16, odd output layouts).
_LOAD = r"""
/* A rows x cols array of $S (byte strides rs, cs) into a new contiguous $T
 * buffer (*work); *data, *rs, *cs then describe the buffer. */
static inline int sg_blas_load_$SN_$TN(char **data, int64_t rows, int64_t cols,
        int64_t *rs, int64_t *cs, $T **work, sg_error *err) {
    int64_t count = rows * cols > 0 ? rows * cols : 1;
    $T *w = ($T *)malloc((size_t)count * sizeof($T));
    if (!w) SG_FAIL(err, SG_ERR_MEMORY, "BLAS: cannot allocate a conversion workspace");
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            $S v; memcpy(&v, *data + i * *rs + j * *cs, sizeof v);
            w[i * cols + j] = ($T)v;
        }
    *work = w; *data = (char *)w;
    *rs = cols * (int64_t)sizeof($T); *cs = (int64_t)sizeof($T);
    return 0;
}
"""

_STORE = r"""
/* A contiguous rows x cols $T buffer (row stride ld elements) into an array
 * of $S with byte strides rs, cs. */
static inline void sg_blas_store_$TN_$SN(const $T *src, int64_t ld, int64_t rows,
        int64_t cols, char *data, int64_t rs, int64_t cs) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            $S v = ($S)src[i * ld + j];
            memcpy(data + i * rs + j * cs, &v, sizeof v);
        }
}
"""


def _cname(ctype):
    return ctype.replace(" ", "_")


def _typed_support(T):
    code = _TYPED.replace("$P", _BLAS_PREFIX[T]).replace("$T", T)
    return (("sg_blas_common", _COMMON), (f"sg_blas_{_BLAS_PREFIX[T]}", code))


def _load_support(S, T):
    code = _LOAD.replace("$SN", _cname(S)).replace("$TN", _cname(T))
    return (f"sg_blas_load_{_cname(S)}_{_cname(T)}", code.replace("$S", S).replace("$T", T))


def _store_support(T, S):
    code = _STORE.replace("$SN", _cname(S)).replace("$TN", _cname(T))
    return (f"sg_blas_store_{_cname(T)}_{_cname(S)}", code.replace("$S", S).replace("$T", T))


# -- operand descriptions ---------------------------------------------------------------

def _as_matrix(i, ndim, transpose=False):
    """C expressions (data, rows, cols, rs, cs) of ``in[i]`` viewed as a matrix
    (a vector is one row; a 0-d array one element)."""
    a = f"in[{i}]"
    if ndim == 2:
        m = [f"{a}.data", f"{a}.shape[0]", f"{a}.shape[1]", f"{a}.strides[0]", f"{a}.strides[1]"]
    elif ndim == 1:
        m = [f"{a}.data", "1", f"{a}.shape[0]", "0", f"{a}.strides[0]"]
    else:
        m = [f"{a}.data", "1", "1", "0", "0"]
    if transpose:
        m = [m[0], m[2], m[1], m[4], m[3]]
    return m


def _out_matrix(ndim):
    """(rows, cols, rs, cs) of out[0] as a matrix; a vector result is one column
    (the layout gemv writes), a 0-d result one element."""
    if ndim == 2:
        return ["out[0].shape[0]", "out[0].shape[1]", "out[0].strides[0]", "out[0].strides[1]"]
    if ndim == 1:
        return ["out[0].shape[0]", "1", "out[0].strides[0]", "0"]
    return ["1", "1", "0", "0"]


def _shape_check(lhs_dim, rhs_dim, op_name, lhs, rhs, what):
    """C code failing with NumPy's 'not aligned' message when two dims differ."""
    return f"""
    if ({lhs_dim} != {rhs_dim}) {{
        char s0[128], s1[128];
        sg_blas_shape_str(&in[{lhs}], s0, sizeof s0); sg_blas_shape_str(&in[{rhs}], s1, sizeof s1);
        SG_FAIL(err, SG_ERR_VALUE, "{op_name}: shapes %s and %s {what} (%lld != %lld)",
                s0, s1, (long long)({lhs_dim}), (long long)({rhs_dim}));
    }}"""


def _shape_fn(checks, out_dims):
    fills = "\n".join(f"    out_shapes[{d}] = {e};" for d, e in enumerate(out_dims))
    return (f"int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{"
            f"{''.join(checks)}\n{fills}\n    (void)in; (void)err;\n    return 0;\n}}\n")


def _dot_checks(x_ndim, y_ndim, name="Dot"):
    return [_shape_check(f"in[0].shape[{x_ndim - 1}]", "in[1].shape[0]", name, 0, 1,
                         "are not aligned: the inner dimensions differ")]


def _dot_out_dims(x_ndim, y_ndim):
    return ([f"in[0].shape[0]"] if x_ndim == 2 else []) + \
        ([f"in[1].shape[1]"] if y_ndim == 2 else [])


# -- Dot ------------------------------------------------------------------------------------

def dot_kernel(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim):
    """The CKernel of ``Dot`` for these dtypes and ranks (1 or 2), or None."""
    x_dtype, y_dtype, out_dtype = str(x_dtype), str(y_dtype), str(out_dtype)
    if x_ndim not in (1, 2) or y_ndim not in (1, 2):
        return None
    shape = _shape_fn(_dot_checks(x_ndim, y_ndim), _dot_out_dims(x_ndim, y_ndim))
    if out_dtype in _FLOAT_COMPUTE:
        if not blas_available():
            return None
        return _float_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape)
    if out_dtype in _INT_DTYPES or out_dtype == "bool":
        return _int_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape)
    return None


def _float_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape):
    T = _FLOAT_COMPUTE[out_dtype]
    p = _BLAS_PREFIX[T]
    support = list(_typed_support(T))
    x = _as_matrix(0, x_ndim)
    y = _as_matrix(1, y_ndim)
    lines = [f"char *d0 = {x[0]}, *d1 = {y[0]};",
             f"int64_t r0 = {x[1]}, c0 = {x[2]}, rs0 = {x[3]}, cs0 = {x[4]};",
             f"int64_t r1 = {y[1]}, c1 = {y[2]}, rs1 = {y[3]}, cs1 = {y[4]};",
             f"{T} *w0 = NULL, *w1 = NULL, *wout = NULL, *c = NULL;",
             "int64_t ldc = 1;", "int rc = 1;"]
    for i, dtype in ((0, x_dtype), (1, y_dtype)):
        if c_type(dtype) != T:   # another dtype (float16 included): convert first
            S = c_type(dtype)
            support.append(_load_support(S, T))
            lines.append(f"if (sg_blas_load_{_cname(S)}_{_cname(T)}(&d{i}, r{i}, c{i}, "
                         f"&rs{i}, &cs{i}, &w{i}, err)) goto done;")
    rows, cols, ors, ocs = _out_matrix(x_ndim + y_ndim - 2)
    direct = int(c_type(out_dtype) == T)
    lines.append(f"if (sg_blas_{p}_target(out[0].data, {rows}, {cols}, {ors}, {ocs}, {direct}, "
                 f"&c, &ldc, &wout, err)) goto done;")
    if x_ndim == 2 and y_ndim == 2:
        call = f"sg_blas_{p}_gemm(r0, c1, c0, 1, d0, rs0, cs0, d1, rs1, cs1, 0, c, ldc, err)"
    elif x_ndim == 2:
        call = f"sg_blas_{p}_gemv(r0, c0, 1, d0, rs0, cs0, d1, cs1, 0, c, ldc, err)"
    elif y_ndim == 2:   # x . Y = Y^T . x: Y read with its strides swapped
        call = f"sg_blas_{p}_gemv(c1, r1, 1, d1, cs1, rs1, d0, cs0, 0, c, ldc, err)"
    else:
        call = f"sg_blas_{p}_dot(c0, d0, cs0, d1, cs1, c, err)"
    lines.append(f"if ({call}) goto done;")
    O = c_type(out_dtype)
    support.append(_store_support(T, O))
    lines.append(f"if (wout) sg_blas_store_{_cname(T)}_{_cname(O)}(c, ldc, {rows}, {cols}, "
                 f"out[0].data, {ors}, {ocs});")
    lines.append("rc = 0;")
    body = "\n    ".join(lines)
    run = (f"int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n    {body}\n"
           f"done:\n    free(w0); free(w1); free(wout);\n    return rc;\n}}\n")
    return CKernel(source=shape + run, support=tuple(support), symbols=_symbols(T),
                   version=VERSION)


def _int_accumulate(out_dtype, target, a, b):
    """C statement: target += a * b in out_dtype, wrapping (bool: target |= a && b)."""
    O, U = c_type(out_dtype), _UNSIGNED[out_dtype]
    if out_dtype == "bool":
        return f"{target} = (uint8_t)({target} | (({a}) != 0 && ({b}) != 0));"
    return f"{target} = ({O})(({U}){target} + ({U})({a}) * ({U})({b}));"


def _elem(i, ctype, ndim, idx):
    """C expression: element idx (tuple of C index expressions) of in[i]."""
    offset = " + ".join(f"({e}) * in[{i}].strides[{d}]" for d, e in enumerate(idx)) or "0"
    return f"(*(const {ctype} *)(in[{i}].data + {offset}))"


def _out_elem(ndim, idx):
    offset = " + ".join(f"({e}) * out[0].strides[{d}]" for d, e in enumerate(idx)) or "0"
    return offset


def _int_dot(x_dtype, y_dtype, out_dtype, x_ndim, y_ndim, shape):
    if x_dtype not in _INT_DTYPES + ("bool",) or y_dtype not in _INT_DTYPES + ("bool",):
        return None
    X, Y, O = c_type(x_dtype), c_type(y_dtype), c_type(out_dtype)
    m = "in[0].shape[0]" if x_ndim == 2 else "1"
    n = "in[1].shape[1]" if y_ndim == 2 else "1"
    k = "in[1].shape[0]"
    xi = ("i", "p") if x_ndim == 2 else ("p",)
    yi = ("p", "j") if y_ndim == 2 else ("p",)
    oi = (("i",) if x_ndim == 2 else ()) + (("j",) if y_ndim == 2 else ())
    o = f"*(({O} *)(out[0].data + {_out_elem(len(oi), oi)}))"
    acc = _int_accumulate(out_dtype, "*o", "a", _elem(1, Y, y_ndim, yi))
    run = f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const int64_t m = {m}, n = {n}, k = {k};
    (void)err;
    /* i-k-j order: the innermost loop walks a row of the right operand. */
    for (int64_t i = 0; i < m; i++) {{
        for (int64_t j = 0; j < n; j++) {o} = 0;
        for (int64_t p = 0; p < k; p++) {{
            const {X} a = {_elem(0, X, x_ndim, xi)};
            for (int64_t j = 0; j < n; j++) {{
                {O} *o = ({O} *)(out[0].data + {_out_elem(len(oi), oi)});
                {acc}
            }}
        }}
    }}
    return 0;
}}
"""
    return CKernel(source=shape + run, support=(("sg_blas_common", _COMMON),), version=VERSION)


# -- Gemm, Gemv, Ger --------------------------------------------------------------------

def _scalar(i, T):
    return f"(*(const {T} *)in[{i}].data)"


def _same_shape_check(op_name, z, other_dims, what):
    """C: in[z] must have dims other_dims (C expressions)."""
    checks = []
    for d, e in enumerate(other_dims):
        checks.append(f"""
    if (in[{z}].shape[{d}] != {e}) {{
        char s[128]; sg_blas_shape_str(&in[{z}], s, sizeof s);
        SG_FAIL(err, SG_ERR_VALUE, "{op_name}: z has shape %s, but {what} has %lld in dimension {d}",
                s, (long long)({e}));
    }}""")
    return checks


def blas_update_kernel(op_name, dtype):
    """The CKernel of Gemm, Gemv or Ger (``op_name``) for ``dtype``, or None.

    Gemm(z, a, x, y, b) = b*z + a*dot(x, y) with matrices x, y;
    Gemv(z, a, A, x, b) = b*z + a*dot(A, x) with a matrix A and vector x;
    Ger(z, a, x, y) = z + a*outer(x, y).  All inputs have ``dtype``.
    """
    dtype = str(dtype)
    if dtype in ("float32", "float64"):
        if not blas_available():
            return None
        return _float_update(op_name, _FLOAT_COMPUTE[dtype])
    if dtype in _INT_DTYPES:
        return _int_update(op_name, dtype)
    return None


def _update_shape(op_name):
    if op_name == "Gemm":
        checks = [_shape_check("in[2].shape[1]", "in[3].shape[0]", op_name, 2, 3,
                               "of x and y are not aligned")]
        checks += _same_shape_check(op_name, 0, ["in[2].shape[0]", "in[3].shape[1]"],
                                    "dot(x, y)")
        return _shape_fn(checks, ["in[0].shape[0]", "in[0].shape[1]"])
    if op_name == "Gemv":
        checks = [_shape_check("in[2].shape[1]", "in[3].shape[0]", op_name, 2, 3,
                               "of A and x are not aligned")]
        checks += _same_shape_check(op_name, 0, ["in[2].shape[0]"], "dot(A, x)")
        return _shape_fn(checks, ["in[0].shape[0]"])
    checks = _same_shape_check(op_name, 0, ["in[2].shape[0]", "in[3].shape[0]"],
                               "outer(x, y)")
    return _shape_fn(checks, ["in[0].shape[0]", "in[0].shape[1]"])


def _float_update(op_name, T):
    p = _BLAS_PREFIX[T]
    support = list(_typed_support(T)) + [_store_support(T, T)]
    out_ndim = 1 if op_name == "Gemv" else 2
    rows, cols, ors, ocs = _out_matrix(out_ndim)
    z = _as_matrix(0, 2) if out_ndim == 2 else ["in[0].data", "in[0].shape[0]", "1",
                                                   "in[0].strides[0]", "0"]
    if op_name == "Gemm":
        call = (f"sg_blas_{p}_gemm(in[2].shape[0], in[3].shape[1], in[2].shape[1], alpha, "
                "in[2].data, in[2].strides[0], in[2].strides[1], "
                "in[3].data, in[3].strides[0], in[3].strides[1], 1, c, ldc, err)")
    elif op_name == "Gemv":
        call = (f"sg_blas_{p}_gemv(in[2].shape[0], in[2].shape[1], alpha, "
                "in[2].data, in[2].strides[0], in[2].strides[1], "
                "in[3].data, in[3].strides[0], 1, c, ldc, err)")
    else:
        call = (f"sg_blas_{p}_ger(in[2].shape[0], in[3].shape[0], alpha, "
                "in[2].data, in[2].strides[0], in[3].data, in[3].strides[0], c, ldc, err)")
    beta = _scalar(4, T) if op_name != "Ger" else f"({T})1"
    run = f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    const {T} alpha = {_scalar(1, T)}, beta = {beta};
    const int64_t rows = {rows}, cols = {cols}, zrs = {z[3]}, zcs = {z[4]};
    {T} *c = NULL, *wout = NULL;
    int64_t ldc = 1;
    if (sg_blas_{p}_target(out[0].data, rows, cols, {ors}, {ocs}, 1, &c, &ldc, &wout, err))
        return 1;
    /* The result starts as beta * z (as NumPy computes it, NaN * 0 included);
       BLAS then adds alpha * the product with beta = 1. */
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {{
            {T} zij; memcpy(&zij, in[0].data + i * zrs + j * zcs, sizeof zij);
            c[i * ldc + j] = {"zij" if op_name == "Ger" else "beta * zij"};
        }}
    (void)beta;
    int rc = {call};
    if (!rc && wout)
        sg_blas_store_{T}_{T}(c, ldc, rows, cols, out[0].data, {ors}, {ocs});
    free(wout);
    return rc;
}}
"""
    return CKernel(source=_update_shape(op_name) + run, support=tuple(support),
                   symbols=_symbols(T), version=VERSION)


def _int_update(op_name, dtype):
    O, U = c_type(dtype), _UNSIGNED[dtype]

    def rd(i, idx):
        return _elem(i, O, len(idx), idx)

    def at(idx):
        return f"(({O} *)(out[0].data + {_out_elem(len(idx), idx)}))"

    alpha, beta = f"(({U}){rd(1, ())})", f"(({U}){rd(4, ())})"
    if op_name == "Gemm":
        body = f"""
    const int64_t m = in[2].shape[0], n = in[3].shape[1], k = in[2].shape[1];
    for (int64_t i = 0; i < m; i++) {{
        for (int64_t j = 0; j < n; j++) *{at(("i", "j"))} = ({O})({beta} * ({U}){rd(0, ("i", "j"))});
        for (int64_t p = 0; p < k; p++) {{
            const {U} a = {alpha} * ({U}){rd(2, ("i", "p"))};
            for (int64_t j = 0; j < n; j++) {{
                {O} *o = {at(("i", "j"))};
                *o = ({O})(({U})*o + a * ({U}){rd(3, ("p", "j"))});
            }}
        }}
    }}"""
    elif op_name == "Gemv":
        body = f"""
    const int64_t m = in[2].shape[0], k = in[2].shape[1];
    for (int64_t i = 0; i < m; i++) {{
        {U} acc = 0;
        for (int64_t p = 0; p < k; p++) acc += ({U}){rd(2, ("i", "p"))} * ({U}){rd(3, ("p",))};
        *{at(("i",))} = ({O})({beta} * ({U}){rd(0, ("i",))} + {alpha} * acc);
    }}"""
    else:
        body = f"""
    const int64_t m = in[2].shape[0], n = in[3].shape[0];
    for (int64_t i = 0; i < m; i++) {{
        const {U} a = {alpha} * ({U}){rd(2, ("i",))};
        for (int64_t j = 0; j < n; j++)
            *{at(("i", "j"))} = ({O})(({U}){rd(0, ("i", "j"))} + a * ({U}){rd(3, ("j",))});
    }}"""
    run = (f"int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n"
           f"    (void)err;{body}\n    return 0;\n}}\n")
    return CKernel(source=_update_shape(op_name) + run,
                   support=(("sg_blas_common", _COMMON),), version=VERSION)
