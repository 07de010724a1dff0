/* The FFT behind the FFT convolutions (conv/sg_conv_fft.inc).
 *
 * Why our own.  The issue asks for a well-kept FFT such as pocketfft as SciPy
 * ships it.  Neither SciPy's nor NumPy's wheels ship pocketfft's C or C++ API
 * or headers (it is compiled into their extension modules, reachable only
 * through Python), FFTW is GPL and cannot be installed for CI without root,
 * and we do not copy code from other projects.  A convolution needs only a
 * small part of an FFT library (power-of-two sizes, transforms applied along
 * the axes of small 2D/3D boxes, products of spectra in any order), so this
 * header writes that part: about 200 lines, tested against numpy.fft.
 *
 * What it supports.  Complex transforms of a power-of-two length n (n >= 1)
 * in float and double (functions sg_fft_*_f32 / sg_fft_*_f64), in split
 * format (separate arrays of real and imaginary parts, which vectorize
 * better than interleaved pairs), along one axis of a C-contiguous array
 * seen as (n, m): each element of the axis is a run of m contiguous values,
 * so a transform along a leading axis processes m columns at once and needs
 * no transposition.
 *   - sg_fft_dif: the forward transform (exp(-2 pi i jk/n)), natural order
 *     in, bit-reversed order out (decimation in frequency, radix 2, the last
 *     two stages fused into radix-4 butterflies when m == 1);
 *   - sg_fft_dit: the inverse, bit-reversed order in, natural order out,
 *     unnormalized (n times the inverse DFT; decimation in time);
 *   - sg_fft_bitrev: the bit-reversal permutation (its own inverse), for
 *     callers that want spectra in natural order;
 *   - sg_fft_nd: the 3D forward or inverse transform of a (P0, P1, P2) box,
 *     skipping the 1D transforms of lines known to be zero (forward) or not
 *     needed (inverse).
 * A convolution multiplies spectra elementwise, which does not care about
 * their order, so it never permutes.  Real data: the convolutions pack two
 * real signals (two images of a batch) into the real and imaginary parts of
 * one complex transform; the products with a real filter's spectrum are
 * linear, so the inverse returns the two real results in the real and
 * imaginary parts, and no real-to-complex transform is needed.
 *
 * Twiddle tables (sg_fft_twiddles) hold n values per part for length n: for
 * each stage half-size h = 1, 2, 4, ..., n/2 the h factors exp(-i pi j / h)
 * at [h + j]; they are computed in double and rounded once.
 */
#ifndef SG_FFT_H
#define SG_FFT_H

#include <stdint.h>
#include <stddef.h>
#include <math.h>

#define SG_FFT_PI 3.14159265358979323846

/* The smallest power of two >= v (v >= 1), or 0 past 2^62. */
static inline int64_t sg_fft_pow2(int64_t v) {
    int64_t p = 1;
    while (p < v) {
        if (p > ((int64_t)1 << 61)) return 0;
        p <<= 1;
    }
    return p;
}

#define SG_FFT_BODY 1
#define SG_FT float
#define SG_FS(name) name##_f32
#include "conv/sg_fft.h"
#undef SG_FT
#undef SG_FS
#define SG_FT double
#define SG_FS(name) name##_f64
#include "conv/sg_fft.h"
#undef SG_FT
#undef SG_FS
#undef SG_FFT_BODY

#elif defined(SG_FFT_BODY)
/* ---- the body, included once per type with SG_FT / SG_FS defined ---- */

/* Fill the twiddle tables tr/ti (n values each) for length n. */
static void SG_FS(sg_fft_twiddles)(int64_t n, SG_FT *tr, SG_FT *ti) {
    if (n >= 1) {
        tr[0] = 1;
        ti[0] = 0;
    }
    for (int64_t h = 1; h < n; h <<= 1)
        for (int64_t j = 0; j < h; j++) {
            double a = -SG_FFT_PI * (double)j / (double)h;
            tr[h + j] = (SG_FT)cos(a);
            ti[h + j] = (SG_FT)sin(a);
        }
}

/* The bit-reversal permutation of the n runs of m values of (re, im). */
static void SG_FS(sg_fft_bitrev)(SG_FT *re, SG_FT *im, int64_t n, int64_t m) {
    for (int64_t i = 1, j = 0; i < n; i++) {
        int64_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j)
            for (int64_t q = 0; q < m; q++) {
                SG_FT t = re[i * m + q];
                re[i * m + q] = re[j * m + q];
                re[j * m + q] = t;
                t = im[i * m + q];
                im[i * m + q] = im[j * m + q];
                im[j * m + q] = t;
            }
    }
}

/* One radix-2 stage of half-size h on runs of m values; dir -1 forward
 * (DIF: twiddle after the difference), +1 inverse (DIT: conjugate twiddle
 * before the sum). */
static inline void SG_FS(sg_fft_stage)(SG_FT *restrict re, SG_FT *restrict im, int64_t n,
                                       int64_t m, int64_t h, const SG_FT *restrict tr,
                                       const SG_FT *restrict ti, int inverse) {
    for (int64_t s = 0; s < n; s += 2 * h) {
        if (m == 1) {
            SG_FT *restrict ar = re + s, *restrict ai = im + s;
            SG_FT *restrict br = ar + h, *restrict bi = ai + h;
            const SG_FT *wr = tr + h, *wi = ti + h;
            if (!inverse) {
                for (int64_t j = 0; j < h; j++) {
                    SG_FT xr = ar[j] - br[j], xi = ai[j] - bi[j];
                    ar[j] += br[j];
                    ai[j] += bi[j];
                    br[j] = xr * wr[j] - xi * wi[j];
                    bi[j] = xr * wi[j] + xi * wr[j];
                }
            } else {
                for (int64_t j = 0; j < h; j++) {
                    SG_FT tr_ = br[j] * wr[j] + bi[j] * wi[j];
                    SG_FT ti_ = bi[j] * wr[j] - br[j] * wi[j];
                    br[j] = ar[j] - tr_;
                    bi[j] = ai[j] - ti_;
                    ar[j] += tr_;
                    ai[j] += ti_;
                }
            }
            continue;
        }
        for (int64_t j = 0; j < h; j++) {
            SG_FT wr = tr[h + j], wi = ti[h + j];
            SG_FT *restrict ar = re + (s + j) * m, *restrict ai = im + (s + j) * m;
            SG_FT *restrict br = ar + h * m, *restrict bi = ai + h * m;
            if (j == 0) {
                /* the unit twiddle: the commonest case for short axes */
                for (int64_t q = 0; q < m; q++) {
                    SG_FT xr = ar[q] - br[q], xi = ai[q] - bi[q];
                    ar[q] += br[q];
                    ai[q] += bi[q];
                    br[q] = xr;
                    bi[q] = xi;
                }
            } else if (!inverse) {
                for (int64_t q = 0; q < m; q++) {
                    SG_FT xr = ar[q] - br[q], xi = ai[q] - bi[q];
                    ar[q] += br[q];
                    ai[q] += bi[q];
                    br[q] = xr * wr - xi * wi;
                    bi[q] = xr * wi + xi * wr;
                }
            } else {
                for (int64_t q = 0; q < m; q++) {
                    SG_FT tr_ = br[q] * wr + bi[q] * wi, ti_ = bi[q] * wr - br[q] * wi;
                    br[q] = ar[q] - tr_;
                    bi[q] = ai[q] - ti_;
                    ar[q] += tr_;
                    ai[q] += ti_;
                }
            }
        }
    }
}

/* The two smallest stages (h = 2, then 1 forward; 1, then 2 inverse) of a
 * contiguous (m == 1) transform as radix-4 butterflies: their twiddles are
 * 1 and -i (or +i), so they need no multiplications. */
static inline void SG_FS(sg_fft_radix4_tail)(SG_FT *restrict re, SG_FT *restrict im, int64_t n,
                                             int inverse) {
    for (int64_t s = 0; s < n; s += 4) {
        SG_FT *r = re + s, *i = im + s;
        if (!inverse) {
            SG_FT ar = r[0] + r[2], ai = i[0] + i[2], br = r[1] + r[3], bi = i[1] + i[3];
            SG_FT cr = r[0] - r[2], ci = i[0] - i[2];
            SG_FT dr = i[1] - i[3], di = r[3] - r[1]; /* (x1 - x3) * -i */
            r[0] = ar + br; i[0] = ai + bi;
            r[1] = ar - br; i[1] = ai - bi;
            r[2] = cr + dr; i[2] = ci + di;
            r[3] = cr - dr; i[3] = ci - di;
        } else {
            SG_FT ar = r[0] + r[1], ai = i[0] + i[1], br = r[0] - r[1], bi = i[0] - i[1];
            SG_FT cr = r[2] + r[3], ci = i[2] + i[3];
            SG_FT dr = i[3] - i[2], di = r[2] - r[3]; /* (x2 - x3) * +i */
            r[0] = ar + cr; i[0] = ai + ci;
            r[2] = ar - cr; i[2] = ai - ci;
            r[1] = br + dr; i[1] = bi + di;
            r[3] = br - dr; i[3] = bi - di;
        }
    }
}

/* Forward transform along an axis of n runs of m values: natural order in,
 * bit-reversed order out.  tr/ti: the tables of sg_fft_twiddles(n). */
static void SG_FS(sg_fft_dif)(SG_FT *re, SG_FT *im, int64_t n, int64_t m, const SG_FT *tr,
                              const SG_FT *ti) {
    int64_t last = (m == 1 && n >= 4) ? 4 : 1; /* stages h < last: the radix-4 tail */
    for (int64_t h = n >> 1; h >= last; h >>= 1) SG_FS(sg_fft_stage)(re, im, n, m, h, tr, ti, 0);
    if (last == 4) SG_FS(sg_fft_radix4_tail)(re, im, n, 0);
}

/* Inverse transform (unnormalized): bit-reversed order in, natural order out. */
static void SG_FS(sg_fft_dit)(SG_FT *re, SG_FT *im, int64_t n, int64_t m, const SG_FT *tr,
                              const SG_FT *ti) {
    int64_t h = 1;
    if (m == 1 && n >= 4) {
        SG_FS(sg_fft_radix4_tail)(re, im, n, 1);
        h = 4;
    }
    for (; h < n; h <<= 1) SG_FS(sg_fft_stage)(re, im, n, m, h, tr, ti, 1);
}

/* The 3D transform of the C-contiguous (P[0], P[1], P[2]) box (re, im).
 * Forward (inverse == 0): the input is zero outside [lo, hi) along each
 * axis, whose lines are not transformed; the output is bit-reversed along
 * every axis.  Inverse: the input bit-reversed, the output natural and
 * correct only inside [lo, hi) (the lines outside are left half done).
 * tw[d] = {tr, ti}: the twiddle tables of P[d]. */
static void SG_FS(sg_fft_nd)(SG_FT *re, SG_FT *im, const int64_t P[3], const int64_t lo[3],
                             const int64_t hi[3], int inverse, SG_FT *const tw[3][2]) {
    int64_t plane = P[1] * P[2];
    if (!inverse) {
        for (int64_t d = lo[0]; d < hi[0]; d++)
            for (int64_t h = lo[1]; h < hi[1]; h++) {
                int64_t o = (d * P[1] + h) * P[2];
                SG_FS(sg_fft_dif)(re + o, im + o, P[2], 1, tw[2][0], tw[2][1]);
            }
        if (P[1] > 1)
            for (int64_t d = lo[0]; d < hi[0]; d++)
                SG_FS(sg_fft_dif)(re + d * plane, im + d * plane, P[1], P[2], tw[1][0], tw[1][1]);
        if (P[0] > 1) SG_FS(sg_fft_dif)(re, im, P[0], plane, tw[0][0], tw[0][1]);
    } else {
        if (P[0] > 1) SG_FS(sg_fft_dit)(re, im, P[0], plane, tw[0][0], tw[0][1]);
        if (P[1] > 1)
            for (int64_t d = lo[0]; d < hi[0]; d++)
                SG_FS(sg_fft_dit)(re + d * plane, im + d * plane, P[1], P[2], tw[1][0], tw[1][1]);
        for (int64_t d = lo[0]; d < hi[0]; d++)
            for (int64_t h = lo[1]; h < hi[1]; h++) {
                int64_t o = (d * P[1] + h) * P[2];
                SG_FS(sg_fft_dit)(re + o, im + o, P[2], 1, tw[2][0], tw[2][1]);
            }
    }
}

#endif
