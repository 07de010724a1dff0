/* Max pooling that keeps the argmax (symgraph/ops/pool_argmax.py): helpers of
 * the kernels that compile/native/pool_argmax_codegen.py generates.
 *
 * The common case, 2x2 windows with stride 2 over float32 rows that are
 * contiguous, has row functions written with GCC vector types: 8 windows
 * (16 input columns of 2 rows) per step, the even and odd columns split by
 * shuffles.  A row of OW >= 8 windows takes ceil(OW / 8) steps, the last one
 * moved back to end at OW: it recomputes a few windows and writes the same
 * values again, so no scalar tail is needed (the outputs never alias the
 * inputs).
 *
 * Argmax offsets of a 2x2 window: 0 1 / 2 3 (row-major).  The first maximum
 * wins ties; a NaN is the maximum, the first NaN its argmax.
 */
#ifndef SG_POOL_ARGMAX_H
#define SG_POOL_ARGMAX_H

#include "sg_pool.h"

typedef float sg_pa_f8 __attribute__((vector_size(32)));
typedef int32_t sg_pa_i8 __attribute__((vector_size(32)));
typedef uint8_t sg_pa_b8 __attribute__((vector_size(8)));

static inline sg_pa_f8 sg_pa_load(const float *p) {
    sg_pa_f8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void sg_pa_store(float *p, sg_pa_f8 v) { memcpy(p, &v, sizeof v); }

/* Where `take` is set, v replaces m (and k replaces idx). */
static inline void sg_pa_take(sg_pa_f8 *m, sg_pa_i8 *idx, sg_pa_f8 v, int32_t k) {
    /* v > m, or v the first NaN: the rule of the scalar scan */
    const sg_pa_i8 take = (v > *m) | ((v != v) & (*m == *m));
    *m = (sg_pa_f8)((take & (sg_pa_i8)v) | (~take & (sg_pa_i8)*m));
    *idx = (take & k) | (~take & *idx);
}

/* The scalar form of one 2x2 window: max into *z, argmax into *a. */
static inline void sg_pa_fwd2x2_one(const float *r0, const float *r1, float *z, uint8_t *a) {
    float m = r0[0];
    uint8_t k = 0;
    const float v[3] = {r0[1], r1[0], r1[1]};
    for (int t = 0; t < 3; t++)
        if (v[t] > m || (v[t] != v[t] && m == m)) { m = v[t]; k = (uint8_t)(t + 1); }
    *z = m;
    *a = k;
}

static inline void sg_pa_fwd2x2_step(const float *r0, const float *r1, float *z, uint8_t *a) {
    const sg_pa_i8 even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = {1, 3, 5, 7, 9, 11, 13, 15};
    const sg_pa_f8 p0 = sg_pa_load(r0), p1 = sg_pa_load(r0 + 8);
    const sg_pa_f8 q0 = sg_pa_load(r1), q1 = sg_pa_load(r1 + 8);
    sg_pa_f8 m = __builtin_shuffle(p0, p1, even);
    sg_pa_i8 idx = {0, 0, 0, 0, 0, 0, 0, 0};
    sg_pa_take(&m, &idx, __builtin_shuffle(p0, p1, odd), 1);
    sg_pa_take(&m, &idx, __builtin_shuffle(q0, q1, even), 2);
    sg_pa_take(&m, &idx, __builtin_shuffle(q0, q1, odd), 3);
    sg_pa_store(z, m);
    const sg_pa_b8 b = __builtin_convertvector(idx, sg_pa_b8);
    memcpy(a, &b, sizeof b);
}

/* One output row of 2x2 stride-2 max pooling: OW full windows over the
   contiguous input rows r0 and r1 (2 * OW columns used). */
static inline void sg_pa_fwd2x2_row(const float *r0, const float *r1, float *z, uint8_t *a,
                                    int64_t OW) {
    int64_t ow = 0;
    for (; ow + 8 <= OW; ow += 8) sg_pa_fwd2x2_step(r0 + 2 * ow, r1 + 2 * ow, z + ow, a + ow);
    if (ow < OW && OW >= 8) {
        ow = OW - 8;
        sg_pa_fwd2x2_step(r0 + 2 * ow, r1 + 2 * ow, z + ow, a + ow);
        return;
    }
    for (; ow < OW; ow++) sg_pa_fwd2x2_one(r0 + 2 * ow, r1 + 2 * ow, z + ow, a + ow);
}

/* One output row of 2x2 stride-2 max pooling without the argmax (Pool). */
static inline void sg_pa_max2x2_row(const float *r0, const float *r1, float *z, int64_t OW) {
    const sg_pa_i8 even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = {1, 3, 5, 7, 9, 11, 13, 15};
    int64_t ow = 0;
    while (OW >= 8 && ow < OW) {
        if (ow + 8 > OW) ow = OW - 8;    /* the last step moved back */
        const float *p = r0 + 2 * ow, *q = r1 + 2 * ow;
        const sg_pa_f8 p0 = sg_pa_load(p), p1 = sg_pa_load(p + 8);
        const sg_pa_f8 q0 = sg_pa_load(q), q1 = sg_pa_load(q + 8);
        sg_pa_f8 m = __builtin_shuffle(p0, p1, even);
        sg_pa_i8 unused = {0, 0, 0, 0, 0, 0, 0, 0};
        sg_pa_take(&m, &unused, __builtin_shuffle(p0, p1, odd), 1);
        sg_pa_take(&m, &unused, __builtin_shuffle(q0, q1, even), 2);
        sg_pa_take(&m, &unused, __builtin_shuffle(q0, q1, odd), 3);
        sg_pa_store(z + ow, m);
        ow += 8;
    }
    for (; ow < OW; ow++) {
        uint8_t k;
        sg_pa_fwd2x2_one(r0 + 2 * ow, r1 + 2 * ow, z + ow, &k);
    }
}

/* 8 windows' 2x2 blocks of rows q0 and q1: g at offset k (0 1 / 2 3), 0
   elsewhere (everywhere for k > 3). */
static inline void sg_pa_scatter2x2(sg_pa_i8 gv, sg_pa_i8 k, float *q0, float *q1) {
    const sg_pa_i8 lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
    const sg_pa_f8 e0 = (sg_pa_f8)(gv & (k == 0)), o0 = (sg_pa_f8)(gv & (k == 1));
    const sg_pa_f8 e1 = (sg_pa_f8)(gv & (k == 2)), o1 = (sg_pa_f8)(gv & (k == 3));
    sg_pa_store(q0, __builtin_shuffle(e0, o0, lo));
    sg_pa_store(q0 + 8, __builtin_shuffle(e0, o0, hi));
    sg_pa_store(q1, __builtin_shuffle(e1, o1, lo));
    sg_pa_store(q1 + 8, __builtin_shuffle(e1, o1, hi));
}

/* Backward of 8 windows from their argmax.  Returns nonzero when an argmax
   is not in 0..3. */
static inline int sg_pa_bwd2x2_step(const float *g, const uint8_t *a, float *q0, float *q1) {
    sg_pa_b8 b;
    memcpy(&b, a, sizeof b);
    const sg_pa_i8 k = __builtin_convertvector(b, sg_pa_i8);
    sg_pa_scatter2x2((sg_pa_i8)sg_pa_load(g), k, q0, q1);
    const sg_pa_i8 bad = k > 3;
    int any = 0;
    for (int t = 0; t < 8; t++) any |= bad[t];
    return any;
}

/* MaxPoolGrad's 8 windows: the argmax is the first element equal to the
   pooled maximum m (NaN matching NaN), none (4) when nothing matches. */
static inline void sg_pa_grad2x2_step(const float *r0, const float *r1, const float *m,
                                      const float *g, float *q0, float *q1) {
    const sg_pa_i8 even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = {1, 3, 5, 7, 9, 11, 13, 15};
    const sg_pa_f8 p0 = sg_pa_load(r0), p1 = sg_pa_load(r0 + 8);
    const sg_pa_f8 s0 = sg_pa_load(r1), s1 = sg_pa_load(r1 + 8);
    const sg_pa_f8 mv = sg_pa_load(m);
    const sg_pa_f8 v[4] = {__builtin_shuffle(p0, p1, even), __builtin_shuffle(p0, p1, odd),
                           __builtin_shuffle(s0, s1, even), __builtin_shuffle(s0, s1, odd)};
    sg_pa_i8 k = {4, 4, 4, 4, 4, 4, 4, 4};
    for (int t = 3; t >= 0; t--) {
        const sg_pa_i8 hit = (v[t] == mv) | ((v[t] != v[t]) & (mv != mv));
        k = (hit & t) | (~hit & k);
    }
    sg_pa_scatter2x2((sg_pa_i8)sg_pa_load(g), k, q0, q1);
}

/* One output row of MaxPoolGrad, 2x2 stride 2, OW >= 8 full windows over the
   contiguous rows r0, r1 (input) and q0, q1 (gradient); the last step is
   moved back to end at OW. */
static inline void sg_pa_grad2x2_row(const float *r0, const float *r1, const float *m,
                                     const float *g, float *q0, float *q1, int64_t OW) {
    for (int64_t ow = 0; ow < OW; ow += 8) {
        const int64_t o = ow + 8 > OW ? OW - 8 : ow;
        sg_pa_grad2x2_step(r0 + 2 * o, r1 + 2 * o, m + o, g + o, q0 + 2 * o, q1 + 2 * o);
    }
}

static inline int sg_pa_bwd2x2_one(float g, uint8_t k, float *q0, float *q1) {
    q0[0] = k == 0 ? g : 0.0f;
    q0[1] = k == 1 ? g : 0.0f;
    q1[0] = k == 2 ? g : 0.0f;
    q1[1] = k == 3 ? g : 0.0f;
    return k > 3;
}

/* One output row of the 2x2 stride-2 backward: rows q0 and q1 (2 * OW
   columns) written once.  Returns nonzero on an argmax out of its window. */
static inline int sg_pa_bwd2x2_row(const float *g, const uint8_t *a, float *q0, float *q1,
                                   int64_t OW) {
    int64_t ow = 0;
    int bad = 0;
    for (; ow + 8 <= OW; ow += 8)
        bad |= sg_pa_bwd2x2_step(g + ow, a + ow, q0 + 2 * ow, q1 + 2 * ow);
    if (ow < OW && OW >= 8) {
        ow = OW - 8;
        return bad | sg_pa_bwd2x2_step(g + ow, a + ow, q0 + 2 * ow, q1 + 2 * ow);
    }
    for (; ow < OW; ow++) bad |= sg_pa_bwd2x2_one(g[ow], a[ow], q0 + 2 * ow, q1 + 2 * ow);
    return bad;
}

/* Zero the elements of the nd-dimensional array at p (shape n, byte strides s,
   itemsize sz) outside the box [0, covered[0]) x [0, covered[1]) x ...: what
   windows that tile the array without reaching its end leave unwritten. */
static inline void sg_pa_zero_outside(char *p, const int64_t *n, const int64_t *s, int nd,
                                      int64_t sz, const int64_t *covered) {
    if (nd == 0) return;
    const int64_t c = covered[0] < n[0] ? (covered[0] < 0 ? 0 : covered[0]) : n[0];
    if (nd == 1) {
        for (int64_t i = c; i < n[0]; i++) memset(p + i * s[0], 0, (size_t)sz);
        return;
    }
    for (int64_t i = 0; i < n[0]; i++) {
        if (i < c) sg_pa_zero_outside(p + i * s[0], n + 1, s + 1, nd - 1, sz, covered + 1);
        else sg_pool_zero(p + i * s[0], n + 1, s + 1, nd - 1, sz);
    }
}

#endif
