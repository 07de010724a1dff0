"""Native kernels for ``Softmax``, ``LogSoftmax`` and ``SoftmaxGrad`` (``ops/nnet.py``).

The op's ``axis`` (or None: every element) splits the array into *rows*: the
elements along the axis, one row per position in the other dimensions.  Each
row is computed by a core function on contiguous memory, in its compute type
(float16 in float32):

* softmax: one pass for the maximum (``L`` lanes, NaN flagged in separate
  lanes so that the compare-select vectorizes); then, block by block of
  ``BLOCK`` elements, ``exp(x - max)`` written into the output and the block
  summed from L1 while it is hot; one pass dividing by the sum (as NumPy
  rounds: multiplying by ``1 / sum`` measured no faster, the pass is bound by
  memory, and would add a rounding);
* log-softmax: the same maximum and sum (the output as scratch), then
  ``(x - max) - log(sum)``, rounded as the Python ``perform`` rounds;
* softmax gradient: ``dy * sm`` into the output, summed block by block, then
  ``out - sm * sum``.

Why blocks rather than one loop that both writes ``exp`` and sums it: GCC
will not vectorize a float sum without reassociation (``-ffast-math``, or
``#pragma omp simd`` which needs ``-fopenmp-simd``, neither in the compiler
flags); it then keeps the adds in order and extracts every vector lane, which
measured 1.5 times slower than a vectorized exp loop followed by a lane-wise
sum of the (L1-resident) block.  Each block is summed in ``L`` independent
lanes combined as a tree, and the block sums are added in double, so the
rounding error does not grow with the row length (NumPy's sum is pairwise).

Vector math: the libmvec SIMD declarations of ``elemwise_codegen``
(``MVEC_SUPPORT``, under ``SG_USE_MVEC``) come first in the support code, so
the exp loop calls ``_ZGV*_expf``; results differ from NumPy's by a few ulp.

Three paths, chosen at run time from the strides:

* rows whose elements are contiguous in every array (the last axis of a
  C-contiguous matrix, or every element of a contiguous array) are computed
  where they lie;
* the column path, when the rows are not contiguous but another dimension is
  in every array (``axis=0`` of a C-contiguous matrix): panels of up to
  ``COLS`` adjacent columns (about ``PANEL_BYTES`` of each array, so that the
  three passes find them in cache) are computed together, vectorized across
  the columns; each column's sum runs in order along the axis, as NumPy sums
  such an axis (4096 x 1024 float32, axis 0: 3 to 5 times faster than
  gathering each column);
* any other layout (negative strides along the rows, float16, ...) is
  gathered row by row into a workspace, computed there and scattered into
  the output.

NaN and Inf behave as the Python ``perform``: a NaN in a row makes the
maximum NaN, hence the whole row; a row of -inf, or one holding +inf, gives
``inf - inf = NaN`` the same way.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_SUFFIXES as _DTYPES
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel
from symgraph.backends.cpu.support_lib import SUPPORT_ENTRY
from symgraph.config import config

__all__ = ["nnet_kernel", "BLOCK", "COLS", "PANEL_BYTES", "STREAM_BYTES"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 3
#: Elements per block of the exp-and-sum pass (their sum is added in double).
BLOCK = 256

#: Most columns the column path computes together.
COLS = 128
#: The column path's panel: about this many bytes of each array.
PANEL_BYTES = 2048 * 1024
#: Softmax outputs of at least this many bytes are written with non-temporal
#: stores (4096x1024 float32: 4.8 to 3.9 ms on one thread).
STREAM_BYTES = 4 * 1024 * 1024

#: The op codes of the driver's ``op`` argument.
SOFTMAX, LOG_SOFTMAX, GRAD = 0, 1, 2

#: Per storage dtype: (suffix of the C names, compute type's suffix).

# -- the row cores, per compute type -------------------------------------------

_CORE = Template(r"""
/* ---- symgraph softmax rows, ${T} (see softmax_codegen.py) ---- */
#include <immintrin.h>
#define SG_NN_BLOCK ${BLOCK}
#define SG_NN_COLS ${COLS}
/* Softmax outputs of at least this many bytes are stored past the cache
   (twice a core's L2: they would not stay in it anyway). */
#define SG_NN_STREAM_BYTES ${STREAM_BYTES}
/* Rows longer than this are not streamed (the row buffer stays small). */
#define SG_NN_STREAM_ROW 65536

/* The maximum of x[0..n), NaN when any element is NaN (n > 0). */
static ${T} sg_nn_max_${X}(const ${T} *restrict x, int64_t n) {
    ${T} lane[${L}];
    ${I} nan[${L}];
    for (int l = 0; l < ${L}; l++) { lane[l] = -INFINITY; nan[l] = 0; }
    int64_t i = 0;
    for (; i + ${L} <= n; i += ${L})
        for (int l = 0; l < ${L}; l++) {
            const ${T} v = x[i + l];
            lane[l] = lane[l] >= v ? lane[l] : v;
            nan[l] |= v != v;
        }
    ${T} m = -INFINITY;
    ${I} bad = 0;
    for (; i < n; i++) { const ${T} v = x[i]; m = m >= v ? m : v; bad |= v != v; }
    for (int l = 0; l < ${L}; l++) { m = m >= lane[l] ? m : lane[l]; bad |= nan[l]; }
    return bad ? (${T})NAN : m;
}

/* The sum of y[0..n) (n <= SG_NN_BLOCK) in lanes combined as a tree. */
static ${T} sg_nn_sum_${X}(const ${T} *restrict y, int64_t n) {
    ${T} lane[${L}];
    for (int l = 0; l < ${L}; l++) lane[l] = 0;
    int64_t i = 0;
    for (; i + ${L} <= n; i += ${L})
        for (int l = 0; l < ${L}; l++) lane[l] += y[i + l];
    ${T} tail = 0;
    for (; i < n; i++) tail += y[i];
    for (int w = ${L} / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0] + tail;
}

/* y = exp(x - m), block by block; returns the sum of y (in double). */
static double sg_nn_expsum_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n, ${T} m) {
    double total = 0;
    for (int64_t b = 0; b < n; b += SG_NN_BLOCK) {
        const int64_t k = n - b < SG_NN_BLOCK ? n - b : SG_NN_BLOCK;
        const ${T} *restrict xb = x + b;
        ${T} *restrict yb = y + b;
        for (int64_t i = 0; i < k; i++) yb[i] = ${EXP}(xb[i] - m);
        total += sg_nn_sum_${X}(yb, k);
    }
    return total;
}

static void sg_nn_softmax_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n) {
    const ${T} m = sg_nn_max_${X}(x, n);
    const ${T} s = (${T})sg_nn_expsum_${X}(x, y, n, m);
    for (int64_t i = 0; i < n; i++) y[i] /= s;
}

/* y[i] = t[i] / s, y written with non-temporal stores from its first
   64-byte boundary on: a large output is not read into the cache just to be
   overwritten, which saves a third of a softmax's memory traffic.  The
   quotients are the ones of the plain loop (IEEE division either way). */
static void sg_nn_div_stream_${X}(${T} *restrict y, const ${T} *restrict t, int64_t n, ${T} s) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(y + i) & 63); i++) y[i] = t[i] / s;
#if defined(__AVX512F__)
    const ${V512} sv = _mm512_set1_${PS}(s);
    for (; i + 64 / (int64_t)sizeof(${T}) <= n; i += 64 / (int64_t)sizeof(${T}))
        _mm512_stream_${PS}(y + i, _mm512_div_${PS}(_mm512_loadu_${PS}(t + i), sv));
#elif defined(__AVX__)
    const ${V256} sv = _mm256_set1_${PS}(s);
    for (; i + 32 / (int64_t)sizeof(${T}) <= n; i += 32 / (int64_t)sizeof(${T}))
        _mm256_stream_${PS}(y + i, _mm256_div_${PS}(_mm256_loadu_${PS}(t + i), sv));
#endif
    for (; i < n; i++) y[i] = t[i] / s;
}

/* Softmax of a row through the row buffer t (n elements), the result stored
   past the cache (see sg_nn_div_stream). */
static void sg_nn_softmax_stream_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n,
                                      ${T} *restrict t) {
    const ${T} m = sg_nn_max_${X}(x, n);
    const ${T} s = (${T})sg_nn_expsum_${X}(x, t, n, m);
    sg_nn_div_stream_${X}(y, t, n, s);
}

static void sg_nn_logsoftmax_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n) {
    const ${T} m = sg_nn_max_${X}(x, n);
    const ${T} ls = ${LOG}((${T})sg_nn_expsum_${X}(x, y, n, m));
    /* (x - m) rounded first, as the Python perform's shifted array */
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
}

static void sg_nn_grad_${X}(const ${T} *restrict dy, const ${T} *restrict sm,
                              ${T} *restrict y, int64_t n) {
    double total = 0;
    for (int64_t b = 0; b < n; b += SG_NN_BLOCK) {
        const int64_t k = n - b < SG_NN_BLOCK ? n - b : SG_NN_BLOCK;
        const ${T} *restrict db = dy + b, *restrict sb = sm + b;
        ${T} *restrict yb = y + b;
        for (int64_t i = 0; i < k; i++) yb[i] = db[i] * sb[i];
        total += sg_nn_sum_${X}(yb, k);
    }
    const ${T} s = (${T})total;
    for (int64_t i = 0; i < n; i++) y[i] = y[i] - sm[i] * s;
}

/* op over w <= SG_NN_COLS adjacent columns: element (i, j) of array a is at
   a + i * sa (bytes) + j elements.  Vectorized across the columns; each
   column is summed in order along the axis, as NumPy sums an axis that is
   not the innermost. */
static void sg_nn_cols_${X}(int op, int64_t n, int64_t w, const char *a, int64_t sa,
                            const char *b, int64_t sb, char *y, int64_t sy) {
    ${T} m[SG_NN_COLS], s[SG_NN_COLS];
    ${I} nan[SG_NN_COLS];
    for (int64_t j = 0; j < w; j++) { m[j] = -INFINITY; s[j] = 0; nan[j] = 0; }
    if (op == 2) {
        for (int64_t i = 0; i < n; i++) {
            const ${T} *restrict dr = (const ${T} *)(a + i * sa), *restrict sr =
                (const ${T} *)(b + i * sb);
            ${T} *restrict yr = (${T} *)(y + i * sy);
            for (int64_t j = 0; j < w; j++) { yr[j] = dr[j] * sr[j]; s[j] += yr[j]; }
        }
        for (int64_t i = 0; i < n; i++) {
            const ${T} *restrict sr = (const ${T} *)(b + i * sb);
            ${T} *restrict yr = (${T} *)(y + i * sy);
            for (int64_t j = 0; j < w; j++) yr[j] = yr[j] - sr[j] * s[j];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const ${T} *restrict xr = (const ${T} *)(a + i * sa);
        for (int64_t j = 0; j < w; j++) {
            const ${T} v = xr[j];
            m[j] = m[j] >= v ? m[j] : v;
            nan[j] |= v != v;
        }
    }
    for (int64_t j = 0; j < w; j++) m[j] = nan[j] ? (${T})NAN : m[j];
    if (op == 0) {
        for (int64_t i = 0; i < n; i++) {
            const ${T} *restrict xr = (const ${T} *)(a + i * sa);
            ${T} *restrict yr = (${T} *)(y + i * sy);
            for (int64_t j = 0; j < w; j++) { yr[j] = ${EXP}(xr[j] - m[j]); s[j] += yr[j]; }
        }
        for (int64_t i = 0; i < n; i++) {
            ${T} *restrict yr = (${T} *)(y + i * sy);
            for (int64_t j = 0; j < w; j++) yr[j] /= s[j];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const ${T} *restrict xr = (const ${T} *)(a + i * sa);
        for (int64_t j = 0; j < w; j++) s[j] += ${EXP}(xr[j] - m[j]);
    }
    for (int64_t j = 0; j < w; j++) s[j] = ${LOG}(s[j]);
    for (int64_t i = 0; i < n; i++) {
        const ${T} *restrict xr = (const ${T} *)(a + i * sa);
        ${T} *restrict yr = (${T} *)(y + i * sy);
        for (int64_t j = 0; j < w; j++) yr[j] = (xr[j] - m[j]) - s[j];
    }
}
""")

# -- the driver, per storage type: rows, gather/scatter, the workspace -----------

_DRIVER = Template(r"""
/* ---- symgraph softmax driver, ${S} computed in ${T} (see softmax_codegen.py) ---- */

/* True when the elements of a row (dimensions rd, in order) are contiguous. */
static int sg_nn_row_contig_${Y}(const sg_array *a, const int *rd, int nr) {
    int64_t expected = sizeof(${S});
    for (int r = nr - 1; r >= 0; r--) {
        const int d = rd[r];
        if (a->shape[d] != 1 && a->strides[d] != expected) return 0;
        expected *= a->shape[d];
    }
    return 1;
}

/* dst[0..n) = the row of a starting at base (row dimensions rd, C order). */
/* The byte offset from one element of a row (dims rd of a, C order) to the
   next; idx is the position, advanced like an odometer. */
static inline int64_t sg_nn_step_${Y}(int64_t *idx, const sg_array *a, const int *rd, int nr) {
    int64_t delta = 0;
    for (int r = nr - 1; r >= 0; r--) {
        const int d = rd[r];
        delta += a->strides[d];
        if (++idx[r] < a->shape[d]) break;
        delta -= idx[r] * a->strides[d];
        idx[r] = 0;
    }
    return delta;
}

static void sg_nn_gather_${Y}(${T} *dst, const char *base, const sg_array *a, const int *rd,
                              int nr, int64_t n) {
    if (nr == 1) {
        const int64_t s = a->strides[rd[0]];
        for (int64_t i = 0; i < n; i++) dst[i] = (${T})*(const ${S} *)(base + i * s);
        return;
    }
    int64_t idx[SG_MAXDIMS] = {0};
    const char *p = base;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = (${T})*(const ${S} *)p;
        p += sg_nn_step_${Y}(idx, a, rd, nr);
    }
}

/* The row of a starting at base = src[0..n), rounded to the storage type. */
static void sg_nn_scatter_${Y}(char *base, const sg_array *a, const int *rd, int nr,
                               const ${T} *src, int64_t n) {
    if (nr == 1) {
        const int64_t s = a->strides[rd[0]];
        for (int64_t i = 0; i < n; i++) *(${S} *)(base + i * s) = (${S})src[i];
        return;
    }
    int64_t idx[SG_MAXDIMS] = {0};
    char *p = base;
    for (int64_t i = 0; i < n; i++) {
        *(${S} *)p = (${S})src[i];
        p += sg_nn_step_${Y}(idx, a, rd, nr);
    }
}

/* op (0 softmax, 1 log-softmax, 2 gradient: in = dy, sm) over axis (-1: all
   the elements) of the nin inputs into out[0], which has their shape. */
static int sg_nn_run_${Y}(int op, int axis, const sg_array *in, int nin, sg_array *out,
                          const char *name, sg_error *err) {
    const sg_array *o = &out[0];
    const int nd = o->ndim;
    int rd[SG_MAXDIMS], od[SG_MAXDIMS], nr = 0, no = 0;
    for (int d = 0; d < nd; d++) {
        if (axis < 0 || d == axis) rd[nr++] = d;
        else od[no++] = d;
    }
    int64_t n = 1, count = 1;
    for (int r = 0; r < nr; r++) n *= o->shape[rd[r]];
    for (int j = 0; j < no; j++) count *= o->shape[od[j]];
    if (n == 0 || count == 0) return 0;
    int direct = ${SAME};
    for (int k = 0; k < nin; k++) direct = direct && sg_nn_row_contig_${Y}(&in[k], rd, nr);
    direct = direct && sg_nn_row_contig_${Y}(o, rd, nr);
    /* The column path: the rows are not contiguous, but another dimension c
       is, in every array (the first axis of a C-contiguous matrix). */
    int c = -1;
    for (int d = nd - 1; ${SAME} && !direct && axis >= 0 && n > 1 && d >= 0 && c < 0; d--) {
        int ok = d != axis && o->shape[d] > 1 && o->strides[d] == (int64_t)sizeof(${S});
        for (int k = 0; k < nin; k++) ok = ok && in[k].strides[d] == (int64_t)sizeof(${S});
        if (ok) c = d;
    }
    if (c >= 0) {
        /* panels of w columns: about ${PANEL} bytes of each array, kept in cache
           between the passes */
        int64_t w = ${PANEL} / (n * (int64_t)sizeof(${T}));
        w = w < 16 ? 16 : w > SG_NN_COLS ? SG_NN_COLS : w;
        int oc[SG_MAXDIMS], nc = 0;
        count = 1;
        for (int j = 0; j < no; j++)
            if (od[j] != c) { oc[nc++] = od[j]; count *= o->shape[od[j]]; }
        const int64_t width = o->shape[c], sz = sizeof(${S});
        const int64_t sa = in[0].strides[axis], sb = in[nin - 1].strides[axis];
        int64_t idx[SG_MAXDIMS] = {0};
        for (int64_t t = 0; t < count; t++) {
            const char *p[2] = {in[0].data, in[nin - 1].data};
            char *q = o->data;
            for (int j = 0; j < nc; j++) {
                const int d = oc[j];
                for (int k = 0; k < nin; k++) p[k] += idx[j] * in[k].strides[d];
                q += idx[j] * o->strides[d];
            }
            for (int64_t j0 = 0; j0 < width; j0 += w)
                sg_nn_cols_${X}(op, n, width - j0 < w ? width - j0 : w, p[0] + j0 * sz, sa,
                                p[1] + j0 * sz, sb, q + j0 * sz, o->strides[axis]);
            for (int j = nc - 1; j >= 0; j--) {
                if (++idx[j] < o->shape[oc[j]]) break;
                idx[j] = 0;
            }
        }
        return 0;
    }
    ${T} *row = NULL;
    if (direct && op == 0 && n <= SG_NN_STREAM_ROW &&
            count * n * (int64_t)sizeof(${S}) >= SG_NN_STREAM_BYTES)
        row = (${T} *)aligned_alloc(64, ((size_t)n * sizeof(${T}) + 63) & ~(size_t)63);
    ${T} *ws = NULL;
    if (!direct) {
        ws = (${T} *)malloc((size_t)(nin + 1) * (size_t)n * sizeof(${T}));
        if (!ws)
            SG_FAIL(err, SG_ERR_MEMORY, "%s: cannot allocate a workspace of %lld elements",
                    name, (long long)((nin + 1) * n));
    }
    int64_t idx[SG_MAXDIMS] = {0};
    for (int64_t c = 0; c < count; c++) {
        const char *p[2] = {in[0].data, nin > 1 ? in[1].data : in[0].data};
        char *q = o->data;
        for (int j = 0; j < no; j++) {
            const int d = od[j];
            for (int k = 0; k < nin; k++) p[k] += idx[j] * in[k].strides[d];
            q += idx[j] * o->strides[d];
        }
        const ${T} *a, *b;
        ${T} *y;
        if (direct) {
            a = (const ${T} *)p[0]; b = (const ${T} *)p[1]; y = (${T} *)q;
        } else {
            for (int k = 0; k < nin; k++) sg_nn_gather_${Y}(ws + k * n, p[k], &in[k], rd, nr, n);
            a = ws; b = ws + n; y = ws + nin * n;
        }
        if (op == 0 && row) sg_nn_softmax_stream_${X}(a, y, n, row);
        else if (op == 0) sg_nn_softmax_${X}(a, y, n);
        else if (op == 1) sg_nn_logsoftmax_${X}(a, y, n);
        else sg_nn_grad_${X}(a, b, y, n);
        if (!direct) sg_nn_scatter_${Y}(q, o, rd, nr, y, n);
        for (int j = no - 1; j >= 0; j--) {
            if (++idx[j] < o->shape[od[j]]) break;
            idx[j] = 0;
        }
    }
    free(ws);
    if (row) {
        free(row);
        _mm_sfence();   /* the streamed stores are visible before the caller reads */
    }
    return 0;
}
""")

_SHAPE_TEXT = (f"sg_nn_shape_text_v{VERSION}", r"""
/* A shape as Python prints a tuple: (), (5,), (2, 3). */
static void sg_nn_shape_text(char *buf, size_t len, const sg_array *a) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < a->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                                 (long long)a->shape[d]);
    if (used < len) snprintf(buf + used, len - used, a->ndim == 1 ? ",)" : ")");
}
""")




def core_text(suffix):
    """(key, C text) of the row cores of compute type ``suffix`` (the library's source)."""
    ctype = {"f32": "float", "f64": "double"}[suffix]
    return (f"sg_nn_core_{suffix}_v{VERSION}", _CORE.substitute(
        T=ctype, X=suffix, BLOCK=BLOCK, COLS=COLS,
        # 128 bytes of lanes (two AVX-512 or four AVX2 registers): enough to
        # hide the latency of the max and the add
        L=128 // (4 if ctype == "float" else 8),
        I="int32_t" if ctype == "float" else "int64_t",
        EXP="expf" if ctype == "float" else "exp",
        V512="__m512" if ctype == "float" else "__m512d",
        V256="__m256" if ctype == "float" else "__m256d",
        PS="ps" if ctype == "float" else "pd", STREAM_BYTES=STREAM_BYTES,
        LOG="logf" if ctype == "float" else "log"))


def driver_text(dtype):
    """(key, C text) of the softmax driver of storage ``dtype`` (the library's source)."""
    suffix, core = _DTYPES[dtype]
    return (f"sg_nn_driver_{suffix}_v{VERSION}", _DRIVER.substitute(
        S=c_type(dtype), T={"f32": "float", "f64": "double"}[core], X=core, Y=suffix,
        SAME="1" if suffix == core else "0", PANEL=PANEL_BYTES))


#: The lowering table's names of the three kernels.
_CODES = {"softmax": SOFTMAX, "log_softmax": LOG_SOFTMAX, "softmax_grad": GRAD}


def nnet_kernel(kind, op, node):
    """The CKernel of a ``Softmax`` (``kind`` "softmax"), ``LogSoftmax``
    ("log_softmax") or ``SoftmaxGrad`` ("softmax_grad") node, or None where it
    has no native code (dtypes other than float16/32/64)."""
    from symgraph.backends.cpu.elemwise.loop import MVEC_SUPPORT

    dtype = str(node.outputs[0].dtype)
    if dtype not in _DTYPES or any(str(v.dtype) != dtype for v in node.inputs):
        return None
    code = _CODES[kind]
    nin = len(node.inputs)
    axis = op._axis(node.inputs[-1].ndim)
    name = c_string(str(op), printf=True)
    if code == GRAD:
        # The Python perform's check, with its message.
        check = f"""    if (in[0].ndim != in[1].ndim ||
        memcmp(in[0].shape, in[1].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a[200], b[200];
        sg_nn_shape_text(a, sizeof a, &in[0]);
        sg_nn_shape_text(b, sizeof b, &in[1]);
        SG_FAIL(err, SG_ERR_VALUE, "{name}: the gradient has shape %s but the softmax "
                "has shape %s", a, b);
    }}
"""
    else:
        check = ""
    source = f"""/* {name} */
int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {{
{check}    (void)err;
    for (int d = 0; d < in[{nin - 1}].ndim; d++) out_shapes[d] = in[{nin - 1}].shape[d];
    return 0;
}}

"""
    run = f"sg_nn_run_{_DTYPES[dtype][0]}({code}, {-1 if axis is None else axis}"
    ndim = node.outputs[0].ndim
    openmp = bool(config.openmp) and axis is not None and ndim >= 2
    if openmp:
        split = 1 if axis == 0 else 0
        # Splitting the innermost dimension splits the column path's panels:
        # cut at the serial panel width, so that every column is computed in
        # the same panel position (vector lanes or tail) as serially.
        if split == ndim - 1:
            compute = "float" if _DTYPES[dtype][1] == "f32" else "double"
            grain = (f"{PANEL_BYTES} / (out[0].shape[{axis}] * (int64_t)sizeof({compute}));\n"
                     "        grain = grain < 16 ? 16 : grain > SG_NN_COLS ? SG_NN_COLS : grain")
        else:
            grain = "1"
        source += _PARALLEL_RUN.substitute(
            RUN=run, NIN=nin, NAME=name, SPLIT=split, GRAIN=grain, AXIS=axis,
            MINPAR=int(config.openmp_elemwise_minsize))
    else:
        source += f"""int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{
    return {run}, in, {nin}, out, "{name}", err);
}}
"""
    # The row cores and the drivers are in the shared support library.
    support = (MVEC_SUPPORT, SUPPORT_ENTRY)
    if code == GRAD:
        support += (_SHAPE_TEXT,)
    return CKernel(source=source, support=support, version=VERSION, openmp=openmp,
                   headers=("<omp.h>",) if openmp else ())


# With OpenMP: the rows are independent, so the threads split a dimension that
# is not the axis into contiguous ranges (whole panels of GRAIN columns) and
# each runs the (serial) shared driver on its slice of every array: the same
# per-row code, the same bits.
_PARALLEL_RUN = Template(r"""
int SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {
    int64_t n = out[0].shape[$SPLIT], grain = 1, pieces = 0;
    int nt = omp_get_max_threads();
    if (out[0].shape[$AXIS] > 0) {
        grain = $GRAIN;
        pieces = (n + grain - 1) / grain;
    }
    if (sg_size(&out[0]) < $MINPAR || pieces < 2 || nt < 2)
        return $RUN, in, $NIN, out, "$NAME", err);
    if (nt > pieces) nt = (int)pieces;
    int failed = 0;
    #pragma omp parallel for num_threads(nt) schedule(static) reduction(|:failed)
    for (int t = 0; t < nt; t++) {
        int64_t lo = pieces * t / nt * grain, hi = pieces * (t + 1) / nt * grain;
        if (hi > n) hi = n;
        sg_array part_in[$NIN], part_out[1];
        for (int k = 0; k < $NIN; k++) {
            part_in[k] = in[k];
            part_in[k].data += lo * in[k].strides[$SPLIT];
            part_in[k].shape[$SPLIT] = hi - lo;
        }
        part_out[0] = out[0];
        part_out[0].data += lo * out[0].strides[$SPLIT];
        part_out[0].shape[$SPLIT] = hi - lo;
        sg_error mine;
        if ($RUN, part_in, $NIN, part_out, "$NAME", &mine)) {
            failed = 1;
            #pragma omp critical
            *err = mine;
        }
    }
    return failed;
}
""")
