/* The ABI between symgraph's generated kernels and its runtime.
 *
 * Kernels are plain C (no Python or NumPy headers, so they compile fast).
 * The runtime (runtime.c, a CPython extension built once) owns the arrays:
 * it checks inputs, allocates or reuses outputs, and calls the kernels of a
 * compiled function in schedule order.
 *
 * Every node with native code exports, under a symbol prefix P:
 *
 *   int P_shape(const sg_array *in, int64_t *out_shapes, sg_error *err);
 *       Fill the shape of every output (output k's dims start at
 *       out_shapes + k * SG_MAXDIMS).  Return 0, or nonzero with err set.
 *       Kernels of kind SG_VIEW do not export it.
 *
 *   int P_view(const sg_array *in, const int64_t *out_shapes, sg_array *out,
 *              sg_error *err);
 *       SG_VIEW_OR_COPY only, called after P_shape with its shapes.  When the
 *       input's strides (known only now) allow it, describe every output as
 *       memory inside its base input (out[k].data/ndim/shape/strides, as an
 *       SG_VIEW kernel's P_run does) and return 0: the runtime wraps them as
 *       views.  Return SG_NO_VIEW when a view is impossible (err untouched):
 *       the runtime then allocates the outputs as for SG_COMPUTE and calls
 *       P_run, which copies.  Any other nonzero value: an error, err set.
 *
 *   int P_run(const sg_array *in, sg_array *out, sg_error *err);
 *       SG_COMPUTE: the outputs are allocated with the shapes from P_shape
 *       (C-contiguous unless reused); write them.
 *       SG_INPLACE: out[k] is the array of the input it overwrites.
 *       SG_VIEW:    set out[k].data/shape/strides to describe memory inside
 *       in[base]; the runtime wraps it as a view of that input.
 *       SG_VIEW_OR_COPY: called only after P_view returned SG_NO_VIEW; the
 *       outputs are allocated as for SG_COMPUTE; write them.
 *
 * A slot filled by an SG_VIEW_OR_COPY kernel holds a view on some calls and
 * a runtime-owned array on others: the runtime reuses only the latter (an
 * array without a base that nothing else holds), so a later call never
 * writes into an input through it, nor into an array handed to the user.
 *
 * Dtypes are fixed when the kernel is generated; the runtime checks them.
 */
#ifndef SG_KERNEL_H
#define SG_KERNEL_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>

#define SG_MAXDIMS 32

/* A float rounded to float16 and back: what each float16 step of a fused
 * computation stores (CUDA redefines it for its own half type). */
#ifndef SG_ROUND_F16
#define SG_ROUND_F16(x) ((float)(_Float16)(x))
#endif

typedef struct {
    char *data;                    /* first element */
    int ndim;
    int64_t shape[SG_MAXDIMS];
    int64_t strides[SG_MAXDIMS];   /* in bytes */
} sg_array;

typedef struct {
    int kind;        /* SG_ERR_* below: which Python exception the runtime raises */
    char msg[512];
} sg_error;

#define SG_ERR_VALUE 1     /* ValueError: shapes that do not match, ...   */
#define SG_ERR_INDEX 2     /* IndexError: index out of bounds             */
#define SG_ERR_TYPE 3      /* TypeError                                   */
#define SG_ERR_MEMORY 4    /* MemoryError: a kernel's own workspace       */
#define SG_ERR_RUNTIME 5   /* RuntimeError                                */
#define SG_ERR_ASSERTION 6 /* AssertionError: a declared shape that fails */

#define SG_COMPUTE 0
#define SG_INPLACE 1
#define SG_VIEW 2
#define SG_VIEW_OR_COPY 3

#define SG_NO_VIEW (-1)    /* P_view: the input's layout needs a copy */

#define SG_FAIL(err, k, ...) \
    do { (err)->kind = (k); snprintf((err)->msg, sizeof((err)->msg), __VA_ARGS__); \
         return 1; } while (0)

/* Size of an array (product of its shape). */
static inline int64_t sg_size(const sg_array *a) {
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
    return n;
}

/* True when the array is C-contiguous for an element size of itemsize bytes. */
static inline int sg_is_c_contiguous(const sg_array *a, int64_t itemsize) {
    int64_t expected = itemsize;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->shape[d] != 1 && a->strides[d] != expected) return 0;
        expected *= a->shape[d];
    }
    return 1;
}

#endif
