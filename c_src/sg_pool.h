/* Pooling geometry shared by the pooling kernels (compile/native/pool_codegen.py).
 *
 * The rules are those of symgraph/ops/pool.py (Theano's Pool.out_shape): a
 * window j of one pooled dimension covers the padded positions
 * [j * stride, j * stride + ws), that is the input positions
 * [j * stride - pad, j * stride - pad + ws) clipped to the input.
 */
#ifndef SG_POOL_H
#define SG_POOL_H

#include "sg_kernel.h"

/* a // b as Python rounds it (toward -inf), for b > 0. */
static inline int64_t sg_pool_floordiv(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return q * b > a ? q - 1 : q;
}

/* The pooled size of a dimension of `size` elements; 0 for an empty one. */
static inline int64_t sg_pool_out_size(int64_t size, int64_t ws, int64_t stride, int64_t pad,
                                       int ignore_border) {
    if (size == 0) return 0;
    const int64_t n = size + 2 * pad;
    int64_t r;
    if (ignore_border) {
        r = ws == stride ? n / stride : sg_pool_floordiv(n - ws, stride) + 1;
        return r < 0 ? 0 : r;
    }
    if (stride >= ws) return sg_pool_floordiv(n - 1, stride) + 1;
    r = sg_pool_floordiv(n - 1 - ws, stride) + 1;
    return (r < 0 ? 0 : r) + 1;
}

/* Window j of a dimension of `size` elements: the input elements [*a, *b) it
   holds and its size counting the padding up to the padded image's end. */
static inline void sg_pool_window(int64_t j, int64_t size, int64_t ws, int64_t stride,
                                  int64_t pad, int64_t *a, int64_t *b, int64_t *count_inc) {
    const int64_t lo = j * stride - pad, hi = lo + ws;
    *a = lo < 0 ? 0 : lo;
    *b = hi < size ? hi : size;
    *count_inc = (hi < size + pad ? hi : size + pad) - lo;
}

/* The byte offset of batch entry l (C order over the leading nl dims). */
static inline int64_t sg_pool_offset(const sg_array *a, int nl, int64_t l) {
    int64_t off = 0;
    for (int d = nl - 1; d >= 0; d--) {
        const int64_t n = a->shape[d];
        off += (l % n) * a->strides[d];
        l /= n;
    }
    return off;
}

/* A shape as Python prints a tuple: (2, 3), (5,). */
static inline void sg_pool_shape_text(char *buf, size_t len, const int64_t *shape, int ndim) {
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < len) snprintf(buf + used, len - used, ndim == 1 ? ",)" : ")");
}

/* Zero the nd-dimensional array at p (shape n, byte strides s, itemsize sz). */
static inline void sg_pool_zero(char *p, const int64_t *n, const int64_t *s, int nd, int64_t sz) {
    if (nd == 0) return;
    for (int d = 0; d < nd; d++) if (n[d] == 0) return;
    if (nd == 1) {
        if (s[0] == sz) { memset(p, 0, (size_t)(n[0] * sz)); return; }
        for (int64_t i = 0; i < n[0]; i++) memset(p + i * s[0], 0, (size_t)sz);
        return;
    }
    for (int64_t i = 0; i < n[0]; i++) sg_pool_zero(p + i * s[0], n + 1, s + 1, nd - 1, sz);
}

#endif
