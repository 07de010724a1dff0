/* Convolution algorithms on the CPU: the shared contract.
 *
 * Every algorithm computes a cross-correlation (the filters are NOT flipped:
 * the kernel that calls an algorithm flips them first when the op asks for a
 * true convolution) over 3 spatial dimensions; a 2D convolution is the 3D one
 * with depth 1 (D = kD = oD = 1, stride/dilation 1, pad 0 along depth).
 *
 * Layouts, all C-contiguous, in the compute type T (float or double):
 *   x  (N, C, D, H, W)          the input
 *   w  (K, C/G, kD, kH, kW)     the filters, G = groups
 *   y  (N, K, oD, oH, oW)       the output
 *   o = (i + 2 * pad - dil * (k - 1) - 1) / stride + 1 per spatial dimension:
 *   `pad` zeros are added before each dimension; the zeros after are whatever
 *   the output size implies.  Input channels [g*C/G, (g+1)*C/G) meet output
 *   channels [g*K/G, (g+1)*K/G).
 *
 * Three directions, each algorithm one function per compute type with the
 * same shape (a, b) -> out, writing every element of `out` (never adding to
 * it):
 *   fwd:        (x, w)  -> y
 *   bwd_data:   (dy, w) -> dx   the gradient of fwd with respect to x
 *   bwd_filter: (x, dy) -> dw   the gradient of fwd with respect to w
 *
 *   int sg_conv_<dir>_<impl>_f32(const sg_conv_geom *g, const float *a,
 *                                const float *b, float *out, float *ws);
 *   (and _f64 with double), from the template files *.inc, which are written
 *   once with SG_T / SG_SFX and included here for both types;
 *   size_t sg_conv_ws_<dir>_<impl>(const sg_conv_geom *g);   (defined once:
 *       inside `#if SG_CONV_FIRST_PASS`, which is 1 on the float pass only)
 *       the workspace the caller passes as `ws`, in elements of T (0: none);
 *   int sg_conv_ok_<dir>_<impl>(const sg_conv_geom *g);
 *       1 when the algorithm handles this geometry, else 0.
 *   The functions return 0, or nonzero when they cannot run.
 *
 * Implementations (<impl>) and the flag values they serve:
 *   direct     'none'           every direction; no workspace
 *   tiled      'small'          implicit GEMM over tiles, a bounded workspace
 *   gemm       'large' (fwd), 'deterministic' (bwd): im2col / col2im + GEMM
 *   fft        'fft'            every direction
 *   fft_tiled  'fft_tiling'     fwd and bwd_data
 *   winograd   'winograd'       fwd, 3x3 filters, stride 1, dilation 1
 *
 * Built once into the algorithm library (compile/native/conv_library.py),
 * which generated kernels reach through sg_conv_api.h; tests may include this
 * file directly (tests/native/conv_harness.py).
 *
 * Threads: an algorithm may split its outer loops with OpenMP (under
 * `#ifdef _OPENMP`); its workspace query then counts one slice per thread
 * (omp_get_max_threads()).
 */
#ifndef SG_CONV_H
#define SG_CONV_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "conv/sg_conv_api.h"


/* -- GEMM for the algorithms -------------------------------------------------
 * Row-major: C[m,n] = alpha * op(A)[m,k] . op(B)[k,n] + beta * C, lda/ldb/ldc
 * the row strides in elements.  Through SciPy's Fortran BLAS when the loader
 * set the pointers below (the kernel lists them in CKernel.symbols), else a
 * plain loop (standalone test builds).
 */
typedef void (*sg_conv_sgemm_t)(char *, char *, int *, int *, int *, float *, float *, int *,
                                float *, int *, float *, float *, int *);
typedef void (*sg_conv_dgemm_t)(char *, char *, int *, int *, int *, double *, double *, int *,
                                double *, int *, double *, double *, int *);
sg_conv_sgemm_t sg_conv_blas_sgemm = 0;
sg_conv_dgemm_t sg_conv_blas_dgemm = 0;
/* The thread runtime's team for the calling thread (1 while it backs off: a
 * parallel region waited for a thread that another process had descheduled;
 * c_src/cpu/threads/sg_threads.c), set by the loader; null: no back-off. */
typedef int (*sg_conv_team_t)(void);
sg_conv_team_t sg_conv_region_team = 0;

#define SG_T float
#define SG_SFX(name) name##_f32
#define SG_BLAS_GEMM sg_conv_blas_sgemm
#include "conv/sg_conv_gemm_blas.inc"
#undef SG_T
#undef SG_SFX
#undef SG_BLAS_GEMM
#define SG_T double
#define SG_SFX(name) name##_f64
#define SG_BLAS_GEMM sg_conv_blas_dgemm
#include "conv/sg_conv_gemm_blas.inc"
#undef SG_T
#undef SG_SFX
#undef SG_BLAS_GEMM

/* -- the algorithms, for both compute types ---------------------------------- */
#define SG_CONV_ALGORITHMS                      \
    SG_CONV_ALGO(fwd, direct)                   \
    SG_CONV_ALGO(bwd_data, direct)              \
    SG_CONV_ALGO(bwd_filter, direct)            \
    SG_CONV_ALGO(fwd, tiled)                    \
    SG_CONV_ALGO(bwd_data, tiled)               \
    SG_CONV_ALGO(bwd_filter, tiled)             \
    SG_CONV_ALGO(fwd, gemm)                     \
    SG_CONV_ALGO(bwd_data, gemm)                \
    SG_CONV_ALGO(bwd_filter, gemm)              \
    SG_CONV_ALGO(fwd, fft)                      \
    SG_CONV_ALGO(bwd_data, fft)                 \
    SG_CONV_ALGO(bwd_filter, fft)               \
    SG_CONV_ALGO(fwd, fft_tiled)                \
    SG_CONV_ALGO(bwd_data, fft_tiled)           \
    SG_CONV_ALGO(fwd, winograd)

#include "conv/sg_fft.h"

#define SG_CONV_FIRST_PASS 1
#define SG_T float
#define SG_SFX(name) name##_f32
#define SG_GEMM sg_conv_gemm_f32
#include "conv/sg_conv_direct.inc"
#include "conv/sg_conv_tiled.inc"
#include "conv/sg_conv_gemm.inc"
#include "conv/sg_conv_fft.inc"
#include "conv/sg_conv_winograd.inc"
#undef SG_T
#undef SG_SFX
#undef SG_GEMM
#undef SG_CONV_FIRST_PASS
#define SG_CONV_FIRST_PASS 0
#define SG_T double
#define SG_SFX(name) name##_f64
#define SG_GEMM sg_conv_gemm_f64
#include "conv/sg_conv_direct.inc"
#include "conv/sg_conv_tiled.inc"
#include "conv/sg_conv_gemm.inc"
#include "conv/sg_conv_fft.inc"
#include "conv/sg_conv_winograd.inc"
#undef SG_T
#undef SG_SFX
#undef SG_GEMM
#undef SG_CONV_FIRST_PASS

/* -- lookup table: (direction, implementation) -> functions ------------------- */
/* (the function types and sg_conv_impl are in sg_conv_api.h) */

#define SG_CONV_fwd_DIR SG_CONV_FWD
#define SG_CONV_bwd_data_DIR SG_CONV_BWD_DATA
#define SG_CONV_bwd_filter_DIR SG_CONV_BWD_FILTER
#define SG_CONV_IMPL_direct SG_CONV_DIRECT
#define SG_CONV_IMPL_tiled SG_CONV_TILED
#define SG_CONV_IMPL_gemm SG_CONV_GEMM
#define SG_CONV_IMPL_fft SG_CONV_FFT
#define SG_CONV_IMPL_fft_tiled SG_CONV_FFT_TILED
#define SG_CONV_IMPL_winograd SG_CONV_WINOGRAD
#define SG_CONV_ALGO(d, i) [SG_CONV_##d##_DIR][SG_CONV_IMPL_##i] = {                       \
    sg_conv_##d##_##i##_f32, sg_conv_##d##_##i##_f64, sg_conv_ws_##d##_##i,                \
    sg_conv_ok_##d##_##i},
static const sg_conv_impl sg_conv_table[SG_CONV_NDIRS][SG_CONV_NIMPLS] = {
    SG_CONV_ALGORITHMS
};
#undef SG_CONV_ALGO

/* The implementation `impl` of direction `dir`, or NULL when there is none. */
static inline const sg_conv_impl *sg_conv_lookup(int dir, int impl) {
    if (dir < 0 || dir >= SG_CONV_NDIRS || impl < 0 || impl >= SG_CONV_NIMPLS) return 0;
    return sg_conv_table[dir][impl].f32 ? &sg_conv_table[dir][impl] : 0;
}

#endif
