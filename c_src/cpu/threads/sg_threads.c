/* symgraph's thread runtime (symgraph/backends/native/threads.py): the policy of
 * the BLAS calls' threads, and the back-off under load of every parallel region.
 *
 * One policy for symgraph's threads and the BLAS pool: a BLAS routine that a
 * symgraph kernel calls runs on ONE BLAS thread, and a large matrix product
 * is cut into blocks of rows or columns of the result that symgraph's own
 * OpenMP team shares out with a dynamic schedule.  So the BLAS pool and the
 * OpenMP team never run at once (no oversubscription), and a thread that the
 * system deschedules (another process on its core) holds up only the block it
 * is computing: the others take the rest.  OpenBLAS's own threaded GEMM
 * synchronises its threads several times per call (spinning) and, with one
 * core busy, took ten times longer.
 *
 * The GEMM wrappers have BLAS's Fortran interface, so that the support
 * library's helpers and the convolution library call them where they called
 * the BLAS routine (their pointers are set to these).  A block is the same
 * product on a sub-matrix: every element of C is computed by the same BLAS
 * kernel over the same k in the same order.
 *
 * "One BLAS thread" is held by lowering the BLAS library's thread count (an
 * OpenBLAS call that costs a few nanoseconds) while any symgraph BLAS call
 * runs, and restoring it after the last one: the BLAS pool keeps serving the
 * program's own BLAS calls (SciPy, NumPy) as before.  Without a way to set
 * the BLAS thread count (a BLAS other than OpenBLAS), products are not split.
 */
#include <stdint.h>
#include <pthread.h>
#include <time.h>
#include <omp.h>

#define SG_EXPORT __attribute__((visibility("default")))

typedef void (*sg_sgemm_t)(const char *, const char *, const int *, const int *, const int *,
                           const float *, const float *, const int *, const float *,
                           const int *, const float *, float *, const int *);
typedef void (*sg_dgemm_t)(const char *, const char *, const int *, const int *, const int *,
                           const double *, const double *, const int *, const double *,
                           const int *, const double *, double *, const int *);
typedef int (*sg_get_threads_t)(void);
typedef void (*sg_set_threads_t)(int);

/* Set once by threads.py after loading. */
SG_EXPORT sg_sgemm_t sg_threads_real_sgemm = 0;
SG_EXPORT sg_dgemm_t sg_threads_real_dgemm = 0;
SG_EXPORT sg_get_threads_t sg_threads_blas_get = 0;
SG_EXPORT sg_set_threads_t sg_threads_blas_set = 0;
/* Products of at least this many multiply-adds (m * n * k) are split. */
SG_EXPORT int64_t sg_threads_gemm_min = 1 << 20;
/* Rows or columns per block at least. */
SG_EXPORT int64_t sg_threads_gemm_grain = 64;
/* 0: symgraph runs one thread (the openmp flag is off): never split. */
SG_EXPORT int sg_threads_enabled = 1;

static pthread_mutex_t sg_hold_lock = PTHREAD_MUTEX_INITIALIZER;
static int sg_hold_depth = 0, sg_hold_saved = 0;
/* How many times the BLAS thread count was lowered (tests read it). */
SG_EXPORT int64_t sg_threads_holds = 0;

/* While any symgraph BLAS call runs, the BLAS library runs one thread. */
static void sg_blas_hold(void) {
    if (!sg_threads_blas_set || !sg_threads_blas_get) return;
    pthread_mutex_lock(&sg_hold_lock);
    if (sg_hold_depth++ == 0) {
        sg_hold_saved = sg_threads_blas_get();
        if (sg_hold_saved > 1) {
            sg_threads_blas_set(1);
            sg_threads_holds++;
        }
    }
    pthread_mutex_unlock(&sg_hold_lock);
}

static void sg_blas_release(void) {
    if (!sg_threads_blas_set || !sg_threads_blas_get) return;
    pthread_mutex_lock(&sg_hold_lock);
    if (--sg_hold_depth == 0 && sg_hold_saved > 1) sg_threads_blas_set(sg_hold_saved);
    pthread_mutex_unlock(&sg_hold_lock);
}

/* How many blocks to cut `dim` rows (or columns) into for `nt` threads:
 * about four per thread, so that a slow thread's share is taken by the
 * others, but at least `grain` rows each (each block repacks the other
 * operand).  1: do not split. */
static int64_t sg_blocks(int64_t dim, int nt) {
    int64_t most = dim / sg_threads_gemm_grain;
    int64_t want = 4 * (int64_t)nt;
    if (most < 2) return 1;
    return want < most ? want : most;
}

/* -- a core taken by another process ---------------------------------------------
 *
 * A parallel region ends when its last thread does.  When another process
 * takes a core, the thread that shares it is descheduled for a time slice
 * (milliseconds) now and then, and a region that waits for it at its end
 * costs that much: a dynamic schedule keeps the others busy meanwhile, but
 * cannot finish the block the descheduled thread holds.  So each region
 * (a split product, an element-wise loop, softmax rows) measures how long the
 * calling thread waited at the end for the others after running out of work
 * items; a wait longer than both sg_threads_late_s and twice its own mean
 * item means a peer was descheduled: the calling thread's regions then run
 * on one thread (nothing to wait for) for a back-off that doubles while it
 * keeps happening (sg_threads_backoff_min to _max seconds), and the first
 * region after it probes with the whole team again.  The results do not
 * depend on it.  The regions that do not measure (reductions, pooling,
 * batch norm, the convolution library) follow the same state through
 * sg_threads_region_team. */
SG_EXPORT double sg_threads_late_s = 0.0005;
SG_EXPORT double sg_threads_backoff_min = 0.02, sg_threads_backoff_max = 1.0;
/* How many times a wait was seen and the products ran unsplit (tests read it). */
SG_EXPORT int64_t sg_threads_lowered = 0;

static __thread double sg_until = 0, sg_backoff = 0, sg_last_late = 0;

static double sg_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* After a parallel region: `waited` at the end, `block` the mean item time.
 * A probe that did not wait forgets the back-off only when no region waited
 * for four back-offs' time: under a load that comes and goes (most regions
 * of a step on a shared machine find the core free, a few do not) the next
 * wait is near, and resetting at the first good probe made the back-off
 * start again from its minimum every time (measured with two other busy
 * processes on 2 cores: the 2-thread MLP step took 7 to 9 ms with that reset,
 * 11 to 13 ms with no back-off, 5 to 6 ms on one thread). */
static void sg_adapt_after(double waited, double block) {
    const double now = sg_now();
    if (waited > sg_threads_late_s && waited > 2 * block) {
        sg_backoff = sg_backoff > 0 ? 2 * sg_backoff : sg_threads_backoff_min;
        if (sg_backoff > sg_threads_backoff_max) sg_backoff = sg_threads_backoff_max;
        sg_until = now + sg_backoff;
        sg_last_late = now;
        __atomic_add_fetch(&sg_threads_lowered, 1, __ATOMIC_RELAXED);
    } else if (now - sg_last_late > 4 * sg_backoff) {
        sg_backoff = 0;
    }
}

/* -- any parallel region ---------------------------------------------------------
 *
 * The same detector for the loops of symgraph's kernels (the element-wise
 * driver, reductions, softmax rows ...): a region asks for its team with
 * sg_threads_region_team() (1 while the calling thread backs off), records
 * when the calling thread ran out of work, and reports it with
 * sg_threads_region_end(); the work items must not depend on the team size
 * (the same bits with one thread as with all).  A region that waited at its
 * end for a descheduled thread (libgomp's end barrier waits for every thread
 * of the team, even one that found no work left) makes the calling thread's
 * next regions and products run on one thread for the back-off. */
SG_EXPORT double sg_threads_now(void) { return sg_now(); }

SG_EXPORT int sg_threads_region_team(void) {
    if (omp_in_parallel()) return 1;
    if (sg_until > 0 && sg_now() < sg_until) return 1;      /* backing off */
    return omp_get_max_threads();
}

/* Make the calling thread back off for `seconds` now, as if a region had
 * waited (tests; a program that knows its cores are taken). */
SG_EXPORT void sg_threads_back_off(double seconds) {
    sg_backoff = seconds;
    sg_until = sg_now() + seconds;
}

/* t0: before the region; done: when the calling thread ran out of items, of
 * which it ran `mine`. */
SG_EXPORT void sg_threads_region_end(int team, double t0, double done, int64_t mine) {
    if (team > 1 && mine > 0) sg_adapt_after(sg_now() - done, (done - t0) / (double)mine);
}

/* The team size for a product of m x n x k, or 1: a region's team (one
 * while backing off) for a product large enough to split. */
static int sg_gemm_team(int64_t m, int64_t n, int64_t k) {
    if (!sg_threads_enabled || !sg_threads_blas_set) return 1;
    if (m * n * k < sg_threads_gemm_min) return 1;
    return sg_threads_region_team();
}

/* One wrapper per type (column-major, as BLAS): C (m x n) = alpha op(A) op(B)
 * + beta C.  The larger of m and n is cut: rows of C are offsets of op(A)'s
 * rows; columns of C are columns of ldc and of op(B). */
#define SG_GEMM_WRAPPER(NAME, T, REAL)                                                      \
SG_EXPORT void NAME(const char *ta, const char *tb, const int *m, const int *n,             \
                    const int *k, const T *alpha, const T *a, const int *lda, const T *b,  \
                    const int *ldb, const T *beta, T *c, const int *ldc) {                 \
    sg_blas_hold();                                                                         \
    const int nt = sg_gemm_team(*m, *n, *k);                                                \
    const int by_rows = *m > *n;                                                            \
    const int64_t dim = by_rows ? *m : *n;                                                  \
    const int64_t blocks = nt > 1 ? sg_blocks(dim, nt) : 1;                                 \
    if (blocks < 2) {                                                                       \
        REAL(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                         \
    } else {                                                                                \
        const int a_t = *ta == 'T' || *ta == 't' || *ta == 'C' || *ta == 'c';              \
        const int b_t = *tb == 'T' || *tb == 't' || *tb == 'C' || *tb == 'c';              \
        const double t0 = sg_now();                                                         \
        double done = t0;                                                                   \
        int64_t mine = 0;                                                                   \
        _Pragma("omp parallel num_threads(nt)")                                             \
        {                                                                                   \
            int64_t own = 0;                                                                \
            _Pragma("omp for schedule(dynamic, 1) nowait")                                  \
            for (int64_t i = 0; i < blocks; i++) {                                          \
                const int64_t lo = dim * i / blocks, hi = dim * (i + 1) / blocks;           \
                const int part = (int)(hi - lo);                                            \
                own++;                                                                      \
                if (by_rows) {                                                              \
                    const T *ai = a + (a_t ? lo * (int64_t)*lda : lo);                      \
                    REAL(ta, tb, &part, n, k, alpha, ai, lda, b, ldb, beta, c + lo, ldc);   \
                } else {                                                                    \
                    const T *bi = b + (b_t ? lo : lo * (int64_t)*ldb);                      \
                    REAL(ta, tb, m, &part, k, alpha, a, lda, bi, ldb, beta,                 \
                         c + lo * (int64_t)*ldc, ldc);                                      \
                }                                                                           \
            }                                                                               \
            if (omp_get_thread_num() == 0) { done = sg_now(); mine = own; }                 \
        }                                                                                   \
        sg_threads_region_end(nt, t0, done, mine);                                          \
    }                                                                                       \
    sg_blas_release();                                                                      \
}

SG_GEMM_WRAPPER(sg_threads_sgemm, float, sg_threads_real_sgemm)
SG_GEMM_WRAPPER(sg_threads_dgemm, double, sg_threads_real_dgemm)

/* The other routines symgraph calls run on one BLAS thread, unsplit. */
#define SG_GEMV_WRAPPER(NAME, T, REAL)                                                      \
SG_EXPORT sg_##T##gemv_t REAL = 0;                                                          \
SG_EXPORT void NAME(const char *tr, const int *m, const int *n, const T *alpha, const T *a, \
                    const int *lda, const T *x, const int *incx, const T *beta, T *y,      \
                    const int *incy) {                                                      \
    sg_blas_hold();                                                                         \
    REAL(tr, m, n, alpha, a, lda, x, incx, beta, y, incy);                                  \
    sg_blas_release();                                                                      \
}
#define SG_DOT_WRAPPER(NAME, T, REAL)                                                       \
SG_EXPORT sg_##T##dot_t REAL = 0;                                                           \
SG_EXPORT T NAME(const int *n, const T *x, const int *incx, const T *y, const int *incy) {  \
    sg_blas_hold();                                                                         \
    const T r = REAL(n, x, incx, y, incy);                                                  \
    sg_blas_release();                                                                      \
    return r;                                                                               \
}
#define SG_GER_WRAPPER(NAME, T, REAL)                                                       \
SG_EXPORT sg_##T##ger_t REAL = 0;                                                           \
SG_EXPORT void NAME(const int *m, const int *n, const T *alpha, const T *x, const int *incx, \
                    const T *y, const int *incy, T *a, const int *lda) {                    \
    sg_blas_hold();                                                                         \
    REAL(m, n, alpha, x, incx, y, incy, a, lda);                                            \
    sg_blas_release();                                                                      \
}

typedef void (*sg_floatgemv_t)(const char *, const int *, const int *, const float *,
                               const float *, const int *, const float *, const int *,
                               const float *, float *, const int *);
typedef void (*sg_doublegemv_t)(const char *, const int *, const int *, const double *,
                                const double *, const int *, const double *, const int *,
                                const double *, double *, const int *);
typedef float (*sg_floatdot_t)(const int *, const float *, const int *, const float *,
                               const int *);
typedef double (*sg_doubledot_t)(const int *, const double *, const int *, const double *,
                                 const int *);
typedef void (*sg_floatger_t)(const int *, const int *, const float *, const float *,
                              const int *, const float *, const int *, float *, const int *);
typedef void (*sg_doubleger_t)(const int *, const int *, const double *, const double *,
                               const int *, const double *, const int *, double *,
                               const int *);
SG_GEMV_WRAPPER(sg_threads_sgemv, float, sg_threads_real_sgemv)
SG_GEMV_WRAPPER(sg_threads_dgemv, double, sg_threads_real_dgemv)
SG_DOT_WRAPPER(sg_threads_sdot, float, sg_threads_real_sdot)
SG_DOT_WRAPPER(sg_threads_ddot, double, sg_threads_real_ddot)
SG_GER_WRAPPER(sg_threads_sger, float, sg_threads_real_sger)
SG_GER_WRAPPER(sg_threads_dger, double, sg_threads_real_dger)

/* libgomp's thread count for this thread (omp_get_max_threads). */
SG_EXPORT int sg_threads_max(void) { return omp_get_max_threads(); }

/* The team size a parallel region gets here (omp_get_num_threads inside one). */
SG_EXPORT int sg_threads_team(void) {
    int n = 1;
    #pragma omp parallel
    {
        #pragma omp single
        n = omp_get_num_threads();
    }
    return n;
}
