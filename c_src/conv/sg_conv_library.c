/* The convolution algorithm library: every algorithm of sg_conv.h for both
 * compute types, the forward pass with a bias/ReLU epilogue, and the table
 * that generated kernels reach it through (`sg_conv_algorithms`, an
 * sg_conv_library of sg_conv_api.h).
 *
 * Compiled once per compiler, flags (with or without OpenMP) and CPU into the
 * compile cache by symgraph/compile/native/conv_library.py, which also sets
 * the BLAS pointers sg_conv_blas_sgemm / sg_conv_blas_dgemm after loading it.
 */
#include "conv/sg_conv.h"

/* 1 when `impl` computes the forward pass image by image, so that running it
 * on one image at a time costs nothing extra (its filters are not
 * transformed per call, as Winograd's and the FFTs' are). */
static int sg_conv_per_image(int impl) {
    return impl == SG_CONV_DIRECT || impl == SG_CONV_TILED || impl == SG_CONV_GEMM;
}

/* The geometry of one image of g. */
static sg_conv_geom sg_conv_one_image(const sg_conv_geom *g) {
    sg_conv_geom g1 = *g;
    g1.N = 1;
    return g1;
}

/* Threads of the image loop of the fused forward pass. */
static int64_t sg_conv_image_threads(const sg_conv_geom *g) {
    const double work = (double)g->N * (double)g->K * (double)sg_conv_prod3(g->out) *
                        (double)(g->C / (g->G ? g->G : 1)) * (double)sg_conv_prod3(g->k);
    return work > SG_CONV_PARALLEL_MIN ? sg_conv_threads(g->N) : 1;
}

static size_t sg_conv_fused_ws(const sg_conv_geom *g, int impl) {
    const sg_conv_impl *p = sg_conv_lookup(SG_CONV_FWD, impl);
    if (!p) return 0;
    if (!sg_conv_per_image(impl) || g->N <= 1) return p->ws(g);
    const sg_conv_geom g1 = sg_conv_one_image(g);
    return (size_t)sg_conv_image_threads(g) * p->ws(&g1);
}

#define SG_T float
#define SG_SFX(name) name##_f32
#define SG_IMPL_FN(p) (p)->f32
#include "conv/sg_conv_fused.inc"
#undef SG_T
#undef SG_SFX
#undef SG_IMPL_FN
#define SG_T double
#define SG_SFX(name) name##_f64
#define SG_IMPL_FN(p) (p)->f64
#include "conv/sg_conv_fused.inc"
#undef SG_T
#undef SG_SFX
#undef SG_IMPL_FN

static int sg_conv_library_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

const sg_conv_library sg_conv_algorithms = {
    SG_CONV_ABI, sg_conv_library_threads, sg_conv_table, sg_conv_fused_f32, sg_conv_fused_f64,
    sg_conv_fused_ws,
};
