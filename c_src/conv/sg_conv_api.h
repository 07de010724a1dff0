/* The convolution algorithms as the generated kernels see them: the geometry,
 * the table type, and the library that holds the algorithms.
 *
 * The algorithms themselves (sg_conv.h and its *.inc templates, several
 * seconds of gcc) are compiled ONCE into a shared library of their own (see
 * symgraph/compile/native/conv_library.py), kept in the compile cache; a
 * kernel includes only this header and reaches the algorithms through the
 * pointer to that library's `sg_conv_algorithms` (an sg_conv_library), which
 * the linker sets after loading the kernel (CKernel.symbols).
 *
 * SG_CONV_ABI is checked at run time by the kernels: bump it when anything
 * below changes layout or meaning.
 */
#ifndef SG_CONV_API_H
#define SG_CONV_API_H

#include <stdint.h>
#include <stddef.h>

#define SG_CONV_ABI 1

typedef struct {
    int64_t N, C, K, G;           /* batch, input channels, output channels, groups */
    int64_t in[3], k[3], out[3];  /* spatial sizes (D, H, W) of x, w and y */
    int64_t stride[3], dil[3], pad[3];
} sg_conv_geom;

enum { SG_CONV_FWD = 0, SG_CONV_BWD_DATA = 1, SG_CONV_BWD_FILTER = 2, SG_CONV_NDIRS = 3 };
enum {
    SG_CONV_DIRECT = 0, SG_CONV_TILED = 1, SG_CONV_GEMM = 2, SG_CONV_FFT = 3,
    SG_CONV_FFT_TILED = 4, SG_CONV_WINOGRAD = 5, SG_CONV_NIMPLS = 6
};

static inline int64_t sg_conv_prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* One algorithm of one direction (see sg_conv.h for the contract). */
typedef int (*sg_conv_fn_f32)(const sg_conv_geom *, const float *, const float *, float *,
                              float *);
typedef int (*sg_conv_fn_f64)(const sg_conv_geom *, const double *, const double *, double *,
                              double *);
typedef size_t (*sg_conv_ws_fn)(const sg_conv_geom *);
typedef int (*sg_conv_ok_fn)(const sg_conv_geom *);

typedef struct {
    sg_conv_fn_f32 f32;
    sg_conv_fn_f64 f64;
    sg_conv_ws_fn ws;
    sg_conv_ok_fn ok;
} sg_conv_impl;

/* The forward pass with an epilogue: y = act(conv(x, w) + bias[k]), bias NULL
 * for none, relu 1 for max(., 0) (NaN kept).  Where the algorithm works image
 * by image (direct, tiled, gemm) the epilogue runs on each image's output
 * right after it is computed, while it is in cache; otherwise after the whole
 * call.  The workspace is `fused_ws(g, impl)` elements. */
typedef int (*sg_conv_fused_fn_f32)(const sg_conv_geom *, int impl, const float *x, const float *w,
                                 float *y, float *ws, const float *bias, int relu);
typedef int (*sg_conv_fused_fn_f64)(const sg_conv_geom *, int impl, const double *x,
                                 const double *w, double *y, double *ws, const double *bias,
                                 int relu);
typedef size_t (*sg_conv_fused_ws_fn)(const sg_conv_geom *, int impl);

/* What the algorithm library exports, as `sg_conv_algorithms`. */
typedef struct {
    int abi;                                       /* SG_CONV_ABI it was built with */
    int (*threads)(void);                          /* OpenMP threads it uses (1: none) */
    const sg_conv_impl (*table)[SG_CONV_NIMPLS];   /* [direction][implementation] */
    sg_conv_fused_fn_f32 fused_f32;
    sg_conv_fused_fn_f64 fused_f64;
    sg_conv_fused_ws_fn fused_ws;
} sg_conv_library;

#endif
