"""Native kernels for the batch normalization ops (``ops/bn.py``).

The normalized axes split ``x`` into *channels* (one per position in the
other dimensions) of ``m`` elements each.  A kernel walks ``x`` in *rows*
along its last dimension, after dropping dimensions of size 1 and merging
adjacent dimensions that are both normalized (or both not) and contiguous in
every array, so that a spatial batch ``(N, C, H, W)`` in C order has rows of
``H * W`` elements of one channel and a per-activation ``(N, D)`` batch rows of
``D`` channels.  Rows are cut into chunks of at most ``CHUNK`` elements, read
where they lie (contiguous, in the compute type) or gathered into a buffer.

* Training statistics, in one pass over ``x``:
  - a row of one channel (its last dimension normalized): each chunk's mean
    and squared deviations by two passes over the chunk while it is in cache
    (the second around the first's mean, corrected by the rounding of that
    mean), summed in lanes of the compute type block by block (``BLOCK``
    elements) and the block sums in double; the chunk is then combined into
    the channel's (count, mean, M2) with Chan's parallel formula, in double;
  - a row of many channels: Welford's update for each channel, in double,
    vectorized across the row (every channel of a row has the same count).
  Both are stable for data far from zero (a mean of 1e4 and a deviation of 1
  lose no digits of the variance).
* The output, in a second pass: ``(x - mean) * (scale * invstd) + bias``,
  rounded as the Python ``perform`` rounds.
* The gradient: per channel sums of ``dy``, ``dy * (x - mean)`` and ``x -
  mean`` in one pass (accumulated as the statistics are), then ``dx = A * dy -
  B * (x - mean) - C`` with per-channel constants.
* Inference: one pass, ``(x - mean) * (scale / sqrt(var + eps)) + bias``.

float16 is stored as ``_Float16`` and computed in float32.  The parameters
(scale, bias, the statistics) are gathered into contiguous per-channel
arrays first, whatever their strides.
"""

from string import Template

from symgraph.backends.c_family.c_types import FLOAT_SUFFIXES as _DTYPES
from symgraph.backends.c_family.c_types import SUFFIX_C_TYPES as _CTYPE
from symgraph.backends.c_family.c_text import c_string
from symgraph.backends.c_family.c_types import c_type
from symgraph.backends.native.kernel import CKernel

__all__ = ["bn_kernel", "BLOCK", "CHUNK"]

#: Bump when the generated code changes in a way its text would not show.
VERSION = 1
#: Elements summed in lanes of the compute type before adding to a double.
BLOCK = 256
#: Most elements of a row handled at once (the buffers' length).
CHUNK = 4096

#: Per storage dtype: (suffix of the C names, compute type's suffix).

# -- geometry and shape checks, independent of the dtype ---------------------------

_COMMON = (f"sg_bn_common_v{VERSION}", r"""
/* ---- symgraph batch norm geometry (see bn_codegen.py) ---- */
#define SG_BN_MAXARR 3

/* x's dimensions after dropping the size-1 ones and merging neighbours: the
   last is the row.  cstride: the step of the channel index (C order over the
   dimensions not normalized; 0 along normalized ones). */
typedef struct {
    int nd, narr;
    int64_t shape[SG_MAXDIMS];
    int red[SG_MAXDIMS];
    int64_t cstride[SG_MAXDIMS];
    int64_t strides[SG_BN_MAXARR][SG_MAXDIMS];
    int64_t nchan, m, rows, len;
} sg_bn_geom;

/* a[0..narr): arrays of x's shape (a[0] is x); bit d of mask: d normalized. */
static void sg_bn_geom_init(sg_bn_geom *g, const sg_array *const *a, int narr, uint32_t mask) {
    const sg_array *x = a[0];
    g->narr = narr; g->nd = 0; g->nchan = 1; g->m = 1;
    for (int d = 0; d < x->ndim; d++) {
        if ((mask >> d) & 1) g->m *= x->shape[d];
        else g->nchan *= x->shape[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        const int r = (mask >> d) & 1, n = g->nd;
        int merge = n > 0 && g->red[n - 1] == r;
        for (int k = 0; k < narr && merge; k++)
            merge = g->strides[k][n - 1] == a[k]->strides[d] * a[k]->shape[d];
        if (merge) {
            g->shape[n - 1] *= x->shape[d];
            for (int k = 0; k < narr; k++) g->strides[k][n - 1] = a[k]->strides[d];
            continue;
        }
        g->shape[n] = x->shape[d];
        g->red[n] = r;
        for (int k = 0; k < narr; k++) g->strides[k][n] = a[k]->strides[d];
        g->nd++;
    }
    if (g->nd == 0) {   /* one element */
        g->nd = 1; g->shape[0] = 1; g->red[0] = 1;
        for (int k = 0; k < narr; k++) g->strides[k][0] = 0;
    }
    int64_t step = 1;
    for (int d = g->nd - 1; d >= 0; d--) {
        g->cstride[d] = g->red[d] ? 0 : step;
        if (!g->red[d]) step *= g->shape[d];
    }
    g->len = g->shape[g->nd - 1];
    g->rows = 1;
    for (int d = 0; d < g->nd - 1; d++) g->rows *= g->shape[d];
}

/* Move the row pointers p and the channel index c0 to the next row. */
static inline void sg_bn_next(const sg_bn_geom *g, int64_t *idx, char **p, int64_t *c0) {
    for (int d = g->nd - 2; d >= 0; d--) {
        for (int k = 0; k < g->narr; k++) p[k] += g->strides[k][d];
        *c0 += g->cstride[d];
        if (++idx[d] < g->shape[d]) return;
        for (int k = 0; k < g->narr; k++) p[k] -= g->shape[d] * g->strides[k][d];
        *c0 -= g->shape[d] * g->cstride[d];
        idx[d] = 0;
    }
}

/* A shape as Python prints a tuple: (), (5,), (2, 3). */
static void sg_bn_shape_text(char *buf, size_t len, const int64_t *shape, int ndim) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < len) snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
}

/* The Python perform's check that parameter p has x's shape with 1 along
   the normalized axes. */
static int sg_bn_check_param(const sg_array *x, const sg_array *p, uint32_t mask,
                             const char *op, const char *name, const char *axes,
                             sg_error *err) {
    int64_t want[SG_MAXDIMS];
    int ok = p->ndim == x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        want[d] = ((mask >> d) & 1) ? 1 : x->shape[d];
        ok = ok && p->shape[d] == want[d];
    }
    if (ok) return 0;
    char ps[300], xs[300], ws[300];
    sg_bn_shape_text(ps, sizeof ps, p->shape, p->ndim);
    sg_bn_shape_text(xs, sizeof xs, x->shape, x->ndim);
    sg_bn_shape_text(ws, sizeof ws, want, x->ndim);
    SG_FAIL(err, SG_ERR_VALUE, "%s: %s has shape %s, but x of shape %s normalized over "
            "axes %s needs %s", op, name, ps, xs, axes, ws);
}
""")

# -- the chunk cores, per compute type -----------------------------------------------

_CORE = Template(r"""
/* ---- symgraph batch norm chunks, ${T} (see bn_codegen.py) ---- */

/* The sums of v[i] - shift and of their squares over v[0..n): lanes of ${T}
   per block of ${BLOCK} elements, the blocks added in double. */
static void sg_bn_sums_${X}(const ${T} *restrict v, int64_t n, ${T} shift, double *s1,
                            double *s2) {
    double a1 = 0, a2 = 0;
    for (int64_t b = 0; b < n; b += ${BLOCK}) {
        const int64_t k = n - b < ${BLOCK} ? n - b : ${BLOCK};
        const ${T} *restrict w = v + b;
        ${T} l1[${L}], l2[${L}], t1 = 0, t2 = 0;
        for (int l = 0; l < ${L}; l++) { l1[l] = 0; l2[l] = 0; }
        int64_t i = 0;
        for (; i + ${L} <= k; i += ${L})
            for (int l = 0; l < ${L}; l++) {
                const ${T} d = w[i + l] - shift;
                l1[l] += d;
                l2[l] += d * d;
            }
        for (; i < k; i++) { const ${T} d = w[i] - shift; t1 += d; t2 += d * d; }
        for (int h = ${L} / 2; h > 0; h /= 2)
            for (int l = 0; l < h; l++) { l1[l] += l1[l + h]; l2[l] += l2[l + h]; }
        a1 += (double)(l1[0] + t1);
        a2 += (double)(l2[0] + t2);
    }
    *s1 = a1;
    *s2 = a2;
}

/* Combine the n > 0 elements v[0..n) of one channel into its (count, mean, M2). */
static void sg_bn_chunk_stats_${X}(const ${T} *restrict v, int64_t n, double *cnt,
                                   double *mean, double *m2) {
    double s1, s2;
    sg_bn_sums_${X}(v, n, 0, &s1, &s2);
    const ${T} shift = (${T})(s1 / (double)n);
    sg_bn_sums_${X}(v, n, shift, &s1, &s2);
    const double nb = (double)n, mb = (double)shift + s1 / nb;
    const double q = s2 - s1 * s1 / nb;      /* the shift's rounding taken out */
    const double na = *cnt, total = na + nb, delta = mb - *mean;
    *mean += delta * (nb / total);
    *m2 += q + delta * delta * (na * nb / total);
    *cnt = total;
}

/* One element for each of n channels (all seen na times before): Welford. */
static void sg_bn_welford_${X}(const ${T} *restrict v, int64_t n, double na,
                               double *restrict mean, double *restrict m2) {
    const double inv = 1.0 / (na + 1.0);
    for (int64_t j = 0; j < n; j++) {
        const double x = (double)v[j], d = x - mean[j];
        mean[j] += d * inv;
        m2[j] += d * (x - mean[j]);
    }
}

/* The sums of dy, dy * (x - mu) and x - mu over one channel's n elements. */
static void sg_bn_gsums_${X}(const ${T} *restrict x, const ${T} *restrict dy, int64_t n,
                             ${T} mu, double *restrict acc) {
    for (int64_t b = 0; b < n; b += ${BLOCK}) {
        const int64_t k = n - b < ${BLOCK} ? n - b : ${BLOCK};
        ${T} l0[${L}], l1[${L}], l2[${L}], t0 = 0, t1 = 0, t2 = 0;
        for (int l = 0; l < ${L}; l++) { l0[l] = 0; l1[l] = 0; l2[l] = 0; }
        int64_t i = b;
        for (; i + ${L} <= b + k; i += ${L})
            for (int l = 0; l < ${L}; l++) {
                const ${T} d = x[i + l] - mu, g = dy[i + l];
                l0[l] += g;
                l1[l] += g * d;
                l2[l] += d;
            }
        for (; i < b + k; i++) {
            const ${T} d = x[i] - mu, g = dy[i];
            t0 += g; t1 += g * d; t2 += d;
        }
        for (int h = ${L} / 2; h > 0; h /= 2)
            for (int l = 0; l < h; l++) {
                l0[l] += l0[l + h]; l1[l] += l1[l + h]; l2[l] += l2[l + h];
            }
        acc[0] += (double)(l0[0] + t0);
        acc[1] += (double)(l1[0] + t1);
        acc[2] += (double)(l2[0] + t2);
    }
}

/* The same sums for one element of each of n channels. */
static void sg_bn_gsums_row_${X}(const ${T} *restrict x, const ${T} *restrict dy, int64_t n,
                                 const ${T} *restrict mu, double *restrict sdy,
                                 double *restrict sdyd, double *restrict sd) {
    for (int64_t j = 0; j < n; j++) {
        const ${T} d = x[j] - mu[j];
        sdy[j] += (double)dy[j];
        sdyd[j] += (double)(dy[j] * d);
        sd[j] += (double)d;
    }
}

/* y = (x - mu) * a + b for one channel (scalars) or one element of each of n
   channels (arrays). */
static void sg_bn_norm_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n, ${T} mu,
                            ${T} a, ${T} b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * a + b;
}

static void sg_bn_norm_row_${X}(const ${T} *restrict x, ${T} *restrict y, int64_t n,
                                const ${T} *restrict mu, const ${T} *restrict a,
                                const ${T} *restrict b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu[i]) * a[i] + b[i];
}

/* dx = A * dy - B * (x - mu) - C, likewise. */
static void sg_bn_dx_${X}(const ${T} *restrict x, const ${T} *restrict dy, ${T} *restrict y,
                          int64_t n, ${T} mu, ${T} a, ${T} b, ${T} c) {
    for (int64_t i = 0; i < n; i++) y[i] = a * dy[i] - b * (x[i] - mu) - c;
}

static void sg_bn_dx_row_${X}(const ${T} *restrict x, const ${T} *restrict dy,
                              ${T} *restrict y, int64_t n, const ${T} *restrict mu,
                              const ${T} *restrict a, const ${T} *restrict b,
                              const ${T} *restrict c) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * dy[i] - b[i] * (x[i] - mu[i]) - c[i];
}
""")

# -- the drivers, per storage type ---------------------------------------------------

_DRIVER = Template(r"""
/* ---- symgraph batch norm drivers, ${S} computed in ${T} (see bn_codegen.py) ---- */

/* The n elements from p (byte stride s) in ${T}: p itself when it can be. */
static inline const ${T} *sg_bn_load_${Y}(const char *p, int64_t s, int64_t n, ${T} *buf) {
    if (${SAME} && s == (int64_t)sizeof(${S})) return (const ${T} *)p;
    for (int64_t i = 0; i < n; i++) buf[i] = (${T})*(const ${S} *)(p + i * s);
    return buf;
}

/* Where to compute n elements bound for p (byte stride s): p itself or buf. */
static inline ${T} *sg_bn_dest_${Y}(char *p, int64_t s, ${T} *buf) {
    return ${SAME} && s == (int64_t)sizeof(${S}) ? (${T} *)p : buf;
}

static inline void sg_bn_store_${Y}(char *p, int64_t s, int64_t n, const ${T} *src) {
    if ((const char *)src == p) return;
    for (int64_t i = 0; i < n; i++) *(${S} *)(p + i * s) = (${S})src[i];
}

/* The elements of a (any strides) in C order, as ${T}; and back. */
static void sg_bn_gather_${Y}(const sg_array *a, ${T} *dst) {
    const int64_t n = sg_size(a);
    int64_t idx[SG_MAXDIMS] = {0};
    const char *p = a->data;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = (${T})*(const ${S} *)p;
        for (int d = a->ndim - 1; d >= 0; d--) {
            p += a->strides[d];
            if (++idx[d] < a->shape[d]) break;
            p -= a->shape[d] * a->strides[d];
            idx[d] = 0;
        }
    }
}

static void sg_bn_scatter_${Y}(sg_array *a, const ${T} *src) {
    const int64_t n = sg_size(a);
    int64_t idx[SG_MAXDIMS] = {0};
    char *p = a->data;
    for (int64_t i = 0; i < n; i++) {
        *(${S} *)p = (${S})src[i];
        for (int d = a->ndim - 1; d >= 0; d--) {
            p += a->strides[d];
            if (++idx[d] < a->shape[d]) break;
            p -= a->shape[d] * a->strides[d];
            idx[d] = 0;
        }
    }
}

/* o = (x - mu[c]) * a[c] + b[c] over every element (c: its channel). */
static void sg_bn_norm_pass_${Y}(const sg_array *x, sg_array *o, uint32_t mask,
                                 const ${T} *mu, const ${T} *a, const ${T} *b, ${T} *bx,
                                 ${T} *bo) {
    sg_bn_geom g;
    const sg_array *arrs[2] = {x, o};
    sg_bn_geom_init(&g, arrs, 2, mask);
    if (g.nchan == 0 || g.m == 0) return;
    const int last = g.nd - 1, red = g.red[last];
    const int64_t sx = g.strides[0][last], so = g.strides[1][last];
    int64_t idx[SG_MAXDIMS] = {0}, c0 = 0;
    char *p[2] = {x->data, o->data};
    for (int64_t r = 0; r < g.rows; r++) {
        for (int64_t j0 = 0; j0 < g.len; j0 += ${CHUNK}) {
            const int64_t n = g.len - j0 < ${CHUNK} ? g.len - j0 : ${CHUNK};
            const ${T} *v = sg_bn_load_${Y}(p[0] + j0 * sx, sx, n, bx);
            ${T} *y = sg_bn_dest_${Y}(p[1] + j0 * so, so, bo);
            if (red) sg_bn_norm_${X}(v, y, n, mu[c0], a[c0], b[c0]);
            else sg_bn_norm_row_${X}(v, y, n, mu + c0 + j0, a + c0 + j0, b + c0 + j0);
            sg_bn_store_${Y}(p[1] + j0 * so, so, n, y);
        }
        sg_bn_next(&g, idx, p, &c0);
    }
}

#define SG_BN_ALLOC(ptr, count, type)                                                 \
    do {                                                                              \
        (ptr) = (type *)malloc(((size_t)(count) + 1) * sizeof(type));                \
        if (!(ptr)) {                                                                 \
            free(dws); free(tws);                                                     \
            SG_FAIL(err, SG_ERR_MEMORY, "%s: cannot allocate a workspace of %lld "    \
                    "elements", name, (long long)(count));                            \
        }                                                                             \
    } while (0)

/* in: x, scale, bias, epsilon, factor[, running_mean, running_var];
   out: out, mean, invstd[, new_running_mean, new_running_var]. */
static int sg_bn_train_${Y}(const sg_array *in, int nin, sg_array *out, uint32_t mask,
                            const char *name, sg_error *err) {
    const sg_array *x = &in[0];
    sg_bn_geom g;
    const sg_array *arrs[1] = {x};
    sg_bn_geom_init(&g, arrs, 1, mask);
    const int64_t nc = g.nchan;
    if (nc == 0) return 0;
    double *dws = NULL;
    ${T} *tws = NULL;
    SG_BN_ALLOC(dws, 3 * nc, double);
    SG_BN_ALLOC(tws, 8 * nc + 2 * ${CHUNK}, ${T});
    double *cnt = dws, *mean = dws + nc, *m2 = dws + 2 * nc;
    ${T} *scale = tws, *bias = tws + nc, *mu = tws + 2 * nc, *a = tws + 3 * nc,
         *inv = tws + 4 * nc, *var = tws + 5 * nc, *r0 = tws + 6 * nc, *r1 = tws + 7 * nc,
         *bx = tws + 8 * nc, *bo = bx + ${CHUNK};
    for (int64_t c = 0; c < 3 * nc; c++) dws[c] = 0;
    sg_bn_gather_${Y}(&in[1], scale);
    sg_bn_gather_${Y}(&in[2], bias);
    const ${T} eps = *(const ${T} *)in[3].data;

    const int last = g.nd - 1, red = g.red[last];
    const int64_t sx = g.strides[0][last];
    int64_t idx[SG_MAXDIMS] = {0}, c0 = 0;
    char *p[1] = {x->data};
    for (int64_t r = 0; g.m > 0 && r < g.rows; r++) {
        for (int64_t j0 = 0; j0 < g.len; j0 += ${CHUNK}) {
            const int64_t n = g.len - j0 < ${CHUNK} ? g.len - j0 : ${CHUNK};
            const ${T} *v = sg_bn_load_${Y}(p[0] + j0 * sx, sx, n, bx);
            if (red) {
                sg_bn_chunk_stats_${X}(v, n, cnt + c0, mean + c0, m2 + c0);
            } else {
                const double na = cnt[c0 + j0];
                sg_bn_welford_${X}(v, n, na, mean + c0 + j0, m2 + c0 + j0);
                for (int64_t j = 0; j < n; j++) cnt[c0 + j0 + j] = na + 1;
            }
        }
        sg_bn_next(&g, idx, p, &c0);
    }
    for (int64_t c = 0; c < nc; c++) {
        const double q = m2[c] < 0 ? 0 : m2[c];   /* NaN stays NaN */
        mu[c] = cnt[c] > 0 ? (${T})mean[c] : (${T})NAN;
        var[c] = cnt[c] > 0 ? (${T})(q / cnt[c]) : (${T})NAN;
        inv[c] = (${T})1 / ${SQRT}(var[c] + eps);
        a[c] = scale[c] * inv[c];
    }
    sg_bn_scatter_${Y}(&out[1], mu);
    sg_bn_scatter_${Y}(&out[2], inv);
    if (nin > 5) {
        const ${T} f = *(const ${T} *)in[4].data, keep = (${T})1 - f;
        const ${T} corr = g.m == 1 ? (${T})INFINITY : (${T})((double)g.m / (double)(g.m - 1));
        sg_bn_gather_${Y}(&in[5], r0);
        sg_bn_gather_${Y}(&in[6], r1);
        for (int64_t c = 0; c < nc; c++) {
            r0[c] = r0[c] * keep + mu[c] * f;
            r1[c] = r1[c] * keep + (var[c] * corr) * f;
        }
        sg_bn_scatter_${Y}(&out[3], r0);
        sg_bn_scatter_${Y}(&out[4], r1);
    }
    sg_bn_norm_pass_${Y}(x, &out[0], mask, mu, a, bias, bx, bo);
    free(dws);
    free(tws);
    return 0;
}

/* in: x, dy, scale, mean, invstd, epsilon; out: dx, dscale, dbias. */
static int sg_bn_grad_${Y}(const sg_array *in, sg_array *out, uint32_t mask,
                           const char *name, sg_error *err) {
    const sg_array *x = &in[0], *dy = &in[1];
    sg_bn_geom g;
    const sg_array *arrs[3] = {x, dy, &out[0]};
    sg_bn_geom_init(&g, arrs, 3, mask);
    const int64_t nc = g.nchan;
    if (nc == 0) return 0;
    double *dws = NULL;
    ${T} *tws = NULL;
    SG_BN_ALLOC(dws, 3 * nc, double);
    SG_BN_ALLOC(tws, 7 * nc + 3 * ${CHUNK}, ${T});
    double *sdy = dws, *sdyd = dws + nc, *sd = dws + 2 * nc;
    ${T} *scale = tws, *mu = tws + nc, *inv = tws + 2 * nc, *ca = tws + 3 * nc,
         *cb = tws + 4 * nc, *cc = tws + 5 * nc, *ds = tws + 6 * nc, *bx = tws + 7 * nc,
         *bd = bx + ${CHUNK}, *bo = bd + ${CHUNK};
    for (int64_t c = 0; c < 3 * nc; c++) dws[c] = 0;
    sg_bn_gather_${Y}(&in[2], scale);
    sg_bn_gather_${Y}(&in[3], mu);
    sg_bn_gather_${Y}(&in[4], inv);

    const int last = g.nd - 1, red = g.red[last];
    const int64_t sx = g.strides[0][last], sy = g.strides[1][last], so = g.strides[2][last];
    int64_t idx[SG_MAXDIMS] = {0}, c0 = 0;
    char *p[3] = {x->data, dy->data, out[0].data};
    for (int64_t r = 0; g.m > 0 && r < g.rows; r++) {
        for (int64_t j0 = 0; j0 < g.len; j0 += ${CHUNK}) {
            const int64_t n = g.len - j0 < ${CHUNK} ? g.len - j0 : ${CHUNK};
            const ${T} *v = sg_bn_load_${Y}(p[0] + j0 * sx, sx, n, bx);
            const ${T} *d = sg_bn_load_${Y}(p[1] + j0 * sy, sy, n, bd);
            if (red) {
                double acc[3] = {0, 0, 0};
                sg_bn_gsums_${X}(v, d, n, mu[c0], acc);
                sdy[c0] += acc[0]; sdyd[c0] += acc[1]; sd[c0] += acc[2];
            } else {
                const int64_t c = c0 + j0;
                sg_bn_gsums_row_${X}(v, d, n, mu + c, sdy + c, sdyd + c, sd + c);
            }
        }
        sg_bn_next(&g, idx, p, &c0);
    }
    const double m = (double)g.m;
    for (int64_t c = 0; c < nc; c++) {
        const ${T} i3 = inv[c] * inv[c] * inv[c];
        const ${T} k = (${T})(sdyd[c] / m) * i3;
        ca[c] = scale[c] * inv[c];
        cb[c] = scale[c] * k;
        cc[c] = scale[c] * ((${T})(sdy[c] / m) * inv[c] - (${T})(sd[c] / m) * k);
        ds[c] = (${T})sdyd[c] * inv[c];
    }
    sg_bn_scatter_${Y}(&out[1], ds);
    for (int64_t c = 0; c < nc; c++) ds[c] = (${T})sdy[c];
    sg_bn_scatter_${Y}(&out[2], ds);

    for (int d = 0; d < SG_MAXDIMS; d++) idx[d] = 0;
    c0 = 0;
    p[0] = x->data; p[1] = dy->data; p[2] = out[0].data;
    for (int64_t r = 0; g.m > 0 && r < g.rows; r++) {
        for (int64_t j0 = 0; j0 < g.len; j0 += ${CHUNK}) {
            const int64_t n = g.len - j0 < ${CHUNK} ? g.len - j0 : ${CHUNK};
            const ${T} *v = sg_bn_load_${Y}(p[0] + j0 * sx, sx, n, bx);
            const ${T} *d = sg_bn_load_${Y}(p[1] + j0 * sy, sy, n, bd);
            ${T} *y = sg_bn_dest_${Y}(p[2] + j0 * so, so, bo);
            if (red) {
                sg_bn_dx_${X}(v, d, y, n, mu[c0], ca[c0], cb[c0], cc[c0]);
            } else {
                const int64_t c = c0 + j0;
                sg_bn_dx_row_${X}(v, d, y, n, mu + c, ca + c, cb + c, cc + c);
            }
            sg_bn_store_${Y}(p[2] + j0 * so, so, n, y);
        }
        sg_bn_next(&g, idx, p, &c0);
    }
    free(dws);
    free(tws);
    return 0;
}

/* in: x, scale, bias, mean, var, epsilon; out: out. */
static int sg_bn_infer_${Y}(const sg_array *in, sg_array *out, uint32_t mask,
                            const char *name, sg_error *err) {
    const int64_t nc = sg_size(&in[1]);
    if (nc == 0) return 0;
    double *dws = NULL;
    ${T} *tws = NULL;
    SG_BN_ALLOC(tws, 4 * nc + 2 * ${CHUNK}, ${T});
    ${T} *a = tws, *bias = tws + nc, *mu = tws + 2 * nc, *var = tws + 3 * nc,
         *bx = tws + 4 * nc, *bo = bx + ${CHUNK};
    sg_bn_gather_${Y}(&in[1], a);
    sg_bn_gather_${Y}(&in[2], bias);
    sg_bn_gather_${Y}(&in[3], mu);
    sg_bn_gather_${Y}(&in[4], var);
    const ${T} eps = *(const ${T} *)in[5].data;
    for (int64_t c = 0; c < nc; c++) a[c] = a[c] / ${SQRT}(var[c] + eps);
    sg_bn_norm_pass_${Y}(&in[0], &out[0], mask, mu, a, bias, bx, bo);
    free(tws);
    return 0;
}
#undef SG_BN_ALLOC
""")


def _core(suffix):
    ctype = _CTYPE[suffix]
    return (f"sg_bn_core_{suffix}_v{VERSION}", _CORE.substitute(
        T=ctype, X=suffix, BLOCK=BLOCK,
        # 128 bytes of lanes: enough independent adds to hide their latency
        L=128 // (4 if ctype == "float" else 8)))


def _driver(dtype):
    suffix, core = _DTYPES[dtype]
    ctype = _CTYPE[core]
    return (f"sg_bn_driver_{suffix}_v{VERSION}", _DRIVER.substitute(
        S=c_type(dtype), T=ctype, X=core, Y=suffix, SAME="1" if suffix == core else "0",
        CHUNK=CHUNK, SQRT="sqrtf" if ctype == "float" else "sqrt"))


def _shape_source(op, node, kind, mask, name, axes):
    """The kernel's shape function: the perform's checks, then the shapes."""
    names = op._NAMES
    checks = []
    if kind == "grad":
        checks.append(f"""    if (in[1].ndim != in[0].ndim ||
        memcmp(in[1].shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim)) {{
        char a[300], b[300];
        sg_bn_shape_text(a, sizeof a, in[1].shape, in[1].ndim);
        sg_bn_shape_text(b, sizeof b, in[0].shape, in[0].ndim);
        SG_FAIL(err, SG_ERR_VALUE, "%s: dy has shape %s, but x has shape %s", "{name}", a, b);
    }}""")
        params = [(2, names[2]), (3, names[3]), (4, names[4])]
    elif kind == "train":
        params = [(1, "scale"), (2, "bias")]
        if len(node.inputs) > 5:
            params += [(5, "running_mean"), (6, "running_var")]
    else:
        params = [(k, names[k]) for k in range(1, 5)]
    for k, pname in params:
        checks.append(f'    if (sg_bn_check_param(&in[0], &in[{k}], {mask}u, "{name}", '
                      f'"{pname}", "{axes}", err)) return 1;')
    # Output 0 has x's shape, the others (statistics) the reduced shape.
    loop = "    for (int d = 0; d < in[0].ndim; d++)\n        out_shapes[{k} * SG_MAXDIMS + d] = "
    fills = [loop.format(k=k)
             + ("in[0].shape[d];" if k == 0 else f"(({mask}u >> d) & 1) ? 1 : in[0].shape[d];")
             for k in range(len(node.outputs))]
    return ("int SG_FN(shape)(const sg_array *in, int64_t *out_shapes, sg_error *err) {\n"
            + "\n".join(checks) + "\n" + "\n".join(fills) + "\n    return 0;\n}\n")


def bn_kernel(kind, op, node):
    """The CKernel of a batch-norm node, or None where it has no native code
    (inputs of different dtypes, more than 32 dimensions).  ``kind``: "train"
    (``AbstractBatchNormTrain``), "grad" (``AbstractBatchNormTrainGrad``) or
    "infer" (``AbstractBatchNormInference``), as the lowering table says."""
    from symgraph.ops import bn

    dtype = str(node.outputs[0].dtype)
    if dtype not in _DTYPES or node.inputs[0].ndim > 32:
        return None
    work = bn.work_dtype(dtype)
    scalars = {"train": (3, 4), "grad": (5,), "infer": (5,)}[kind]
    for k, var in enumerate(node.inputs):
        if str(var.dtype) != (work if k in scalars else dtype):
            return None
    mask = sum(1 << a for a in op.axes)
    name = c_string(str(op))
    axes = c_string(str(op.axes))
    y = _DTYPES[dtype][0]
    call = {"train": f"sg_bn_train_{y}(in, {len(node.inputs)}, out, {mask}u, \"{name}\", err)",
            "grad": f"sg_bn_grad_{y}(in, out, {mask}u, \"{name}\", err)",
            "infer": f"sg_bn_infer_{y}(in, out, {mask}u, \"{name}\", err)"}[kind]
    source = (f"/* {name} */\n" + _shape_source(op, node, kind, mask, name, axes)
              + f"\nint SG_FN(run)(const sg_array *in, sg_array *out, sg_error *err) {{\n"
              f"    return {call};\n}}\n")
    support = (_COMMON, _core(_DTYPES[dtype][1]), _driver(dtype))
    return CKernel(source=source, support=support, version=VERSION)
