/* The matrix products the CUDA kernels ask of cuBLAS, as a table of function
 * pointers (no cuBLAS header needed to build anything).
 *
 * On a GPU the device memory library fills it from libcublas, loaded with
 * dlopen when first asked (sg_cuda_memory.cu); the emulated device fills it
 * with a stand-in that follows cuBLAS's conventions (column-major operands,
 * op N/T, leading dimensions, alpha and beta read from device memory), so
 * the mapping from symgraph's row-major operands is tested where there is
 * no GPU.  A NULL table: no cuBLAS, the tiled kernels run.
 */
#ifndef SG_CUBLAS_API_H
#define SG_CUBLAS_API_H

#define SG_CUBLAS_OP_N 0
#define SG_CUBLAS_OP_T 1

typedef int (*sg_cublas_sgemm_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                  const float *alpha, const float *a, int lda, const float *b,
                                  int ldb, const float *beta, float *c, int ldc);
typedef int (*sg_cublas_dgemm_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                  const double *alpha, const double *a, int lda,
                                  const double *b, int ldb, const double *beta, double *c,
                                  int ldc);

typedef struct {
    void *handle;
    sg_cublas_sgemm_fn sgemm;
    sg_cublas_dgemm_fn dgemm;
    /* 1 and 0 in device memory: alpha and beta when the node has none */
    const float *one_f, *zero_f;
    const double *one_d, *zero_d;
} sg_cublas_table;

#endif
