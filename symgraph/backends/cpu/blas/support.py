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
from symgraph.backends.c_family.c_files import c_file

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


def routine_address(name):
    """The address the kernels call for BLAS routine ``name``: the thread
    library's wrapper (one BLAS thread; large products split over symgraph's
    threads: ``backends/native/threads.py``), else SciPy's routine."""
    from symgraph.backends.native.threads import routine_address as wrapper

    return wrapper(name)


# One function object per routine, so that equal kernels compare equal.
_ADDRESS_FNS = {name: functools.partial(routine_address, name)
                for p in "sd" for name in (p + "gemm", p + "gemv", p + "dot", p + "ger")}


def blas_symbols(T):
    """CKernel.symbols for the BLAS routines of the C type T (float or double)."""
    from symgraph.backends.native.threads import prefetch

    prefetch()      # the thread library builds while the kernels do
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

_TYPED = c_file("cpu/blas/typed.inc")

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
