"""The C helper library of the BLAS kernels, and where SciPy's BLAS is found.

SciPy's ``scipy.linalg.cython_blas`` exports its Fortran-interface routines
as PyCapsules in ``__pyx_capi__``; ``blas_address`` reads a routine's address
from its capsule.  The support code of a kernel declares one global function
pointer per routine (``sg_blas_dgemm`` ...), listed in ``CKernel.symbols``
with a function returning the address, so the linker can set it after
loading the library.

The helpers (support code, one copy per library and real type) take
row-major operands with any byte strides and call the column-major BLAS:

* ``sg_blas_<p>_gemm``: C = alpha * A . B + beta * C (as C^T = B^T . A^T);
* ``sg_blas_<p>_gemv``: y = alpha * M . x + beta * y;
* ``sg_blas_<p>_dot``, ``sg_blas_<p>_ger``;
* ``sg_blas_<p>_target``: where a result is written (the output array, or a
  workspace when its layout does not suit BLAS);
* ``sg_blas_load_*`` / ``sg_blas_store_*``: dtype conversions (float16 ...)
  into and out of contiguous workspaces.

An operand that is C-contiguous along its rows (trans 'N') or along its
columns (a transposed contiguous array, trans 'T') is read in place; other
layouts (negative, zero or odd strides, misaligned data) are copied first.
BLAS skips ``alpha * (A . B)`` when alpha or the inner dimension is 0; the
helpers compute that case themselves so that Inf and NaN propagate as in
NumPy.
"""

import ctypes
import functools

#: The BLAS routine prefix of each real C type.
BLAS_PREFIX = {"float": "s", "double": "d"}


# -- the BLAS function pointers ---------------------------------------------------------

def _cython_blas():
    """SciPy's ``scipy.linalg.cython_blas`` module.

    Importing it the usual way imports the whole ``scipy.linalg`` package first
    (0.1 to 0.2 s: most of a warm compile), although the extension needs only
    ``scipy`` itself.  So the extension file is loaded directly, under its
    own name (Cython registers it in ``sys.modules``, and a later
    ``import scipy.linalg`` reuses it); anything unexpected falls back to the
    plain import.
    """
    import importlib.machinery
    import importlib.util
    import os
    import sys

    name = "scipy.linalg.cython_blas"
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        spec = importlib.util.find_spec("scipy")
        folder = os.path.join(os.path.dirname(spec.origin), "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "cython_blas" + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                module = importlib.util.module_from_spec(
                    importlib.util.spec_from_file_location(name, path, loader=loader))
                loader.exec_module(module)
                if "sgemm" in module.__pyx_capi__:
                    return module
    except Exception:  # noqa: BLE001 - any surprise: the ordinary import below
        pass
    from scipy.linalg import cython_blas

    return cython_blas


@functools.lru_cache(maxsize=None)
def blas_address(name):
    """The address of SciPy's BLAS routine ``name`` (e.g. ``'dgemm'``) as an int."""
    capsule = _cython_blas().__pyx_capi__[name]
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


def blas_symbols(T):
    """CKernel.symbols for the BLAS routines of the C type T (float or double)."""
    p = BLAS_PREFIX[T]
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


def cname(ctype):
    """A C type as a piece of an identifier."""
    return ctype.replace(" ", "_")


def common_text():
    """(key, C text): definitions every BLAS kernel uses (shape messages, limits)."""
    return ("sg_blas_common", _COMMON)


def typed_text(T):
    """(key, C text): the helpers for the C type T (float or double)."""
    return (f"sg_blas_{BLAS_PREFIX[T]}", _TYPED.replace("$P", BLAS_PREFIX[T]).replace("$T", T))


def common_support():
    """Support entry of a kernel using the definitions of :func:`common_text`
    (compiled once, in the shared support library: ``support_lib``)."""
    from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY

    return SUPPORT_ENTRY


def typed_support(T):
    """Support entries of a kernel using the helpers of :func:`typed_text` (in
    the shared support library, whose BLAS pointers the linker sets from the
    kernel's ``blas_symbols``)."""
    return (common_support(),)


def load_support(S, T):
    """Support entry: sg_blas_load_<S>_<T>, a strided S array into a contiguous T buffer."""
    code = _LOAD.replace("$SN", cname(S)).replace("$TN", cname(T))
    return (f"sg_blas_load_{cname(S)}_{cname(T)}", code.replace("$S", S).replace("$T", T))


def store_support(T, S):
    """Support entry: sg_blas_store_<T>_<S>, a contiguous T buffer into a strided S array."""
    code = _STORE.replace("$SN", cname(S)).replace("$TN", cname(T))
    return (f"sg_blas_store_{cname(T)}_{cname(S)}", code.replace("$S", S).replace("$T", T))
