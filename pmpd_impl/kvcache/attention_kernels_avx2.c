/* AVX2+FMA versions of the attention kernels (attention_kernels.h).  Lanes
 * come in multiples of four, so each group of four query heads is one
 * 128-bit vector; the exponential runs on 256-bit vectors. */
#include "pmpd_impl/kvcache/attention_kernels.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/vexp.h"
#include "pmpd_impl/kvcache/attention_rows_x86.h"

/* Exact-attention rows, f32 or binary16 (converted in registers with F16C,
 * so a half-precision cache reads half the bytes and writes nothing back).
 * Both products run along the head dimension, eight elements per vector,
 * with the lanes (query heads) in separate accumulators: one row load feeds
 * four FMAs, where a broadcast of every row element would cost one
 * operation per element before any arithmetic. */

#if defined(__GNUC__)
#define KV_AVX2_INLINE static inline __attribute__((always_inline))
#else
#define KV_AVX2_INLINE static inline
#endif

/* Eight binary16 values as floats (F16C where the target has it). */
static inline __m256 kv_avx2_half8(const uint16_t *p)
{
#if defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
    float f[8];
    pmpd_kv_f16_to_f32_scalar(p, 8, f);
    return _mm256_loadu_ps(f);
#endif
}

/* Elements [d, d + 8) of a row; zeros past dim (no read beyond the row). */
static __m256 kv_avx2_row8_tail(const void *row, uint32_t d, uint32_t dim, int half)
{
    uint32_t i;
    if (half) {
        uint16_t part[8] = {0};
        for (i = 0; d + i < dim && i < 8; i++)
            part[i] = ((const uint16_t *)row)[d + i];
        return kv_avx2_half8(part);
    } else {
        float part[8] = {0};
        for (i = 0; d + i < dim && i < 8; i++)
            part[i] = ((const float *)row)[d + i];
        return _mm256_loadu_ps(part);
    }
}

KV_AVX2_INLINE __m256 kv_avx2_load8(const void *row, uint32_t d, const int half)
{
    if (half)
        return kv_avx2_half8((const uint16_t *)row + d);
    return _mm256_loadu_ps((const float *)row + d);
}

KV_AVX2_INLINE const void *kv_avx2_row(const void *rows, size_t t, size_t stride, const int half)
{
    return half ? (const void *)((const uint16_t *)rows + t * stride) : (const void *)((const float *)rows + t * stride);
}

/* Rows this far ahead are prefetched: long contexts stream K and V from
 * memory, and the arithmetic between loads would otherwise keep too few
 * misses in flight (measured: 5-6 GB/s at 16K-32K context without it). */
#ifndef KV_AVX2_PREFETCH_ROWS
#define KV_AVX2_PREFETCH_ROWS 16
#endif
#define KV_AVX2_ROW_BLOCK 16 /* rows per pass over the accumulators */

/* Every cache line of row t (if it exists) towards L1. */
KV_AVX2_INLINE void kv_avx2_prefetch_row(const void *rows, size_t t, size_t n, size_t stride, uint32_t dim,
                                         const int half)
{
    const char *p;
    size_t bytes, b;
    if (t >= n)
        return;
    p = (const char *)kv_avx2_row(rows, t, stride, half);
    bytes = (size_t)dim * (half ? 2 : 4);
    for (b = 0; b < bytes; b += 64)
        _mm_prefetch(p + b, _MM_HINT_T0);
}

/* Two rows' sums [sum a00 .. sum a03 | sum a10 .. sum a13]: each pair of
 * levels of pairwise sums without hadd (several micro-ops on AMD cores),
 * and the two rows' halves folded together by one cross-lane add. */
static inline __m256 kv_avx2_sum4x2(__m256 a00, __m256 a01, __m256 a02, __m256 a03, __m256 a10, __m256 a11,
                                    __m256 a12, __m256 a13)
{
    __m256 p0 = _mm256_add_ps(_mm256_unpacklo_ps(a00, a01), _mm256_unpackhi_ps(a00, a01));
    __m256 p1 = _mm256_add_ps(_mm256_unpacklo_ps(a02, a03), _mm256_unpackhi_ps(a02, a03));
    __m256 p2 = _mm256_add_ps(_mm256_unpacklo_ps(a10, a11), _mm256_unpackhi_ps(a10, a11));
    __m256 p3 = _mm256_add_ps(_mm256_unpacklo_ps(a12, a13), _mm256_unpackhi_ps(a12, a13));
    /* p0 = [a00 a01 a00 a01 | ...] partial sums: fold the pairs. */
    __m256 r0 = _mm256_add_ps(_mm256_shuffle_ps(p0, p1, 0x44), _mm256_shuffle_ps(p0, p1, 0xEE));
    __m256 r1 = _mm256_add_ps(_mm256_shuffle_ps(p2, p3, 0x44), _mm256_shuffle_ps(p2, p3, 0xEE));
    return _mm256_add_ps(_mm256_permute2f128_ps(r0, r1, 0x20), _mm256_permute2f128_ps(r0, r1, 0x31));
}

/* One 8-dim step of kv_avx2_scores_chunk: rows vectors k0, k1 times the
 * four heads' query vectors at dim d. */
#define KV_AVX2_SCORES_STEP(k0_expr, k1_expr)                                                       \
    do {                                                                                           \
        __m256 k0 = (k0_expr), k1 = (k1_expr);                                                     \
        __m256 q0 = _mm256_loadu_ps(q[0] + (d - d0)), q1 = _mm256_loadu_ps(q[1] + (d - d0));       \
        __m256 q2 = _mm256_loadu_ps(q[2] + (d - d0)), q3 = _mm256_loadu_ps(q[3] + (d - d0));       \
        a00 = _mm256_fmadd_ps(q0, k0, a00);                                                        \
        a01 = _mm256_fmadd_ps(q1, k0, a01);                                                        \
        a02 = _mm256_fmadd_ps(q2, k0, a02);                                                        \
        a03 = _mm256_fmadd_ps(q3, k0, a03);                                                        \
        a10 = _mm256_fmadd_ps(q0, k1, a10);                                                        \
        a11 = _mm256_fmadd_ps(q1, k1, a11);                                                        \
        a12 = _mm256_fmadd_ps(q2, k1, a12);                                                        \
        a13 = _mm256_fmadd_ps(q3, k1, a13);                                                        \
    } while (0)

/* scores[t][l0 .. l0+4) (+)= q chunk . row t over dims [d0, d1): two rows at
 * a time, eight independent accumulators, written out one by one (gcc
 * keeps a loop-indexed array of them in memory). */
KV_AVX2_INLINE void kv_avx2_scores_chunk(const float (*q)[PMPD_KV_Q_CHUNK], uint32_t lanes, uint32_t l0,
                                         uint32_t dim, uint32_t d0, uint32_t d1, const void *rows, size_t stride,
                                         size_t n, float *scores, const int half)
{
    /* d0 is a multiple of 8: dims [d0, d_full) are whole vectors. */
    const uint32_t d_full = d1 < (dim & ~7u) ? d1 : (dim & ~7u);
    size_t t;
    uint32_t d;
    for (t = 0; t < n; t += 2) {
        const void *r0 = kv_avx2_row(rows, t, stride, half);
        const void *r1 = t + 1 < n ? kv_avx2_row(rows, t + 1, stride, half) : r0;
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
        __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00, both;
        __m128 s;
        kv_avx2_prefetch_row(rows, t + KV_AVX2_PREFETCH_ROWS, n, stride, dim, half);
        kv_avx2_prefetch_row(rows, t + KV_AVX2_PREFETCH_ROWS + 1, n, stride, dim, half);
        /* Only the last vector of the row can run past dim: it goes in a
         * step of its own, which keeps the main loop free of the tail's
         * stack copies (the compiler spilled the accumulators around
         * them).  Unrolled by 2: fully unrolled, gcc 12 turned every row
         * and query load into a memory operand of each FMA (f32 scores
         * 26 -> 38 cycles per row on Zen3; f16, whose rows are converted
         * into registers, 24 -> 22). */
#pragma GCC unroll 2
        for (d = d0; d < d_full; d += 8)
            KV_AVX2_SCORES_STEP(kv_avx2_load8(r0, d, half), kv_avx2_load8(r1, d, half));
        if (d < d1)
            KV_AVX2_SCORES_STEP(kv_avx2_row8_tail(r0, d, dim, half), kv_avx2_row8_tail(r1, d, dim, half));
        both = kv_avx2_sum4x2(a00, a01, a02, a03, a10, a11, a12, a13);
        s = _mm256_castps256_ps128(both);
        if (d0)
            s = _mm_add_ps(s, _mm_loadu_ps(scores + t * lanes + l0));
        _mm_storeu_ps(scores + t * lanes + l0, s);
        if (t + 1 < n) {
            s = _mm256_extractf128_ps(both, 1);
            if (d0)
                s = _mm_add_ps(s, _mm_loadu_ps(scores + (t + 1) * lanes + l0));
            _mm_storeu_ps(scores + (t + 1) * lanes + l0, s);
        }
    }
}

KV_AVX2_INLINE void kv_avx2_row_scores(const float *qt, uint32_t lanes, uint32_t dim, const void *rows, size_t stride,
                                       size_t n, float *scores, float *max, const int half)
{
    PMPD_KV_ROW_SCORES_PASSES(kv_avx2_scores_chunk, 8, qt, lanes, dim, rows, stride, n, scores, max, half);
}

/* sums[l][d - d0 .. +16) += sum over rows [t0, t1) of weights[t][l0 + l] *
 * row t[d]: eight accumulators in registers for the block of rows. */
KV_AVX2_INLINE void kv_avx2_accumulate_block(const float *weights, uint32_t lanes, uint32_t l0, uint32_t d,
                                             uint32_t d1, const void *rows, size_t stride, size_t t0, size_t t1,
                                             float (*sums)[PMPD_KV_Q_CHUNK], uint32_t d0, const int half)
{
    float *s0 = sums[0] + (d - d0), *s1 = sums[1] + (d - d0), *s2 = sums[2] + (d - d0), *s3 = sums[3] + (d - d0);
    __m256 a00 = _mm256_loadu_ps(s0), a01 = _mm256_loadu_ps(s0 + 8), a10 = _mm256_loadu_ps(s1);
    __m256 a11 = _mm256_loadu_ps(s1 + 8), a20 = _mm256_loadu_ps(s2), a21 = _mm256_loadu_ps(s2 + 8);
    __m256 a30 = _mm256_loadu_ps(s3), a31 = _mm256_loadu_ps(s3 + 8);
    size_t t;
    for (t = t0; t < t1; t++) {
        const void *row = kv_avx2_row(rows, t, stride, half);
        const float *w = weights + t * lanes + l0;
        __m256 v0, v1, w0 = _mm256_broadcast_ss(w), w1 = _mm256_broadcast_ss(w + 1);
        __m256 w2 = _mm256_broadcast_ss(w + 2), w3 = _mm256_broadcast_ss(w + 3);
        if (d + 16 <= d1) {
            v0 = kv_avx2_load8(row, d, half);
            v1 = kv_avx2_load8(row, d + 8, half);
        } else {
            v0 = kv_avx2_row8_tail(row, d, d1, half);
            v1 = kv_avx2_row8_tail(row, d + 8, d1, half);
        }
        a00 = _mm256_fmadd_ps(w0, v0, a00);
        a01 = _mm256_fmadd_ps(w0, v1, a01);
        a10 = _mm256_fmadd_ps(w1, v0, a10);
        a11 = _mm256_fmadd_ps(w1, v1, a11);
        a20 = _mm256_fmadd_ps(w2, v0, a20);
        a21 = _mm256_fmadd_ps(w2, v1, a21);
        a30 = _mm256_fmadd_ps(w3, v0, a30);
        a31 = _mm256_fmadd_ps(w3, v1, a31);
    }
    _mm256_storeu_ps(s0, a00), _mm256_storeu_ps(s0 + 8, a01), _mm256_storeu_ps(s1, a10);
    _mm256_storeu_ps(s1 + 8, a11), _mm256_storeu_ps(s2, a20), _mm256_storeu_ps(s2 + 8, a21);
    _mm256_storeu_ps(s3, a30), _mm256_storeu_ps(s3 + 8, a31);
}

/* The value products build lane-major (sums[l][d], in L1) a block of rows
 * at a time, and are transposed into acc[d][l] once at the end. */
KV_AVX2_INLINE void kv_avx2_row_accumulate(const float *weights, uint32_t lanes, uint32_t dim, const void *rows,
                                           size_t stride, size_t n, float *acc, const int half)
{
    PMPD_KV_ROW_ACCUMULATE_PASSES(kv_avx2_accumulate_block, 16, KV_AVX2_ROW_BLOCK, kv_avx2_prefetch_row,
                                  KV_AVX2_PREFETCH_ROWS, weights, lanes, dim, rows, stride, n, acc, half);
}

/* Four lanes' eight positions (a_l: lane l) stored position-major, as
 * [8][4] floats: two rounds of unpacks put position 4 k + j of every lane
 * in 128-bit half k of v_j, and two lane permutes per output pair order
 * them (12 shuffles). */
KV_AVX2_INLINE void kv_avx2_block_transpose(__m256 a0, __m256 a1, __m256 a2, __m256 a3, float *out)
{
    const __m256 u0 = _mm256_unpacklo_ps(a0, a1), u1 = _mm256_unpackhi_ps(a0, a1);
    const __m256 u2 = _mm256_unpacklo_ps(a2, a3), u3 = _mm256_unpackhi_ps(a2, a3);
    const __m256 v0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    const __m256 v1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u0), _mm256_castps_pd(u2)));
    const __m256 v2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    const __m256 v3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(u1), _mm256_castps_pd(u3)));
    _mm256_storeu_ps(out, _mm256_permute2f128_ps(v0, v1, 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(v2, v3, 0x20));
    _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(v0, v1, 0x31));
    _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(v2, v3, 0x31));
}

/* Lane l's two vectors of a key block's sixteen positions:
 * a##l += q[l] * positions 0-7 of dimension d, b##l the same for 8-15. */
#define KV_AVX2_BLOCK_LANE(l)                                                                      \
    do {                                                                                           \
        const __m256 q_ = _mm256_set1_ps(q[l]);                                                    \
        a##l = _mm256_fmadd_ps(q_, k0, a##l);                                                      \
        b##l = _mm256_fmadd_ps(q_, k1, b##l);                                                      \
    } while (0)

/* Blocked binary16 keys (attention_kernels.h): per group of four lanes, a
 * block at a time, each lane's sixteen positions two vectors (eight FMA
 * chains): two conversions and eight FMAs per dimension and block. */
KV_AVX2_INLINE void kv_avx2_block_scores(const float *qt, uint32_t lanes, uint32_t dim, const uint16_t *blocks,
                                         size_t n, float *scores, float *max)
{
    const size_t block_halves = (size_t)PMPD_KV_KEY_BLOCK * dim;
    float out[PMPD_KV_KEY_BLOCK * 4];
    uint32_t l0, d;
    size_t t0;
    for (l0 = 0; l0 < lanes; l0 += 4) {
        for (t0 = 0; t0 < n; t0 += PMPD_KV_KEY_BLOCK) {
            const uint16_t *x = blocks + t0 / PMPD_KV_KEY_BLOCK * block_halves;
            const size_t count = n - t0 < PMPD_KV_KEY_BLOCK ? n - t0 : PMPD_KV_KEY_BLOCK;
            const int direct = lanes == 4 && count == PMPD_KV_KEY_BLOCK;
            float *to = direct ? scores + t0 * 4 : out;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (d = 0; d < dim; d++) {
                const float *q = qt + (size_t)d * lanes + l0;
                const __m256 k0 = kv_avx2_half8(x + 16 * d), k1 = kv_avx2_half8(x + 16 * d + 8);
                KV_AVX2_BLOCK_LANE(0);
                KV_AVX2_BLOCK_LANE(1);
                KV_AVX2_BLOCK_LANE(2);
                KV_AVX2_BLOCK_LANE(3);
            }
            kv_avx2_block_transpose(a0, a1, a2, a3, to);
            kv_avx2_block_transpose(b0, b1, b2, b3, to + 32);
            if (!direct)
                pmpd_kv_put_block_scores(out, count, lanes, l0, scores + t0 * lanes);
        }
        pmpd_kv_lanes_max4(scores, lanes, l0, n, max);
    }
}

#define PMPD_KV_BLOCK_INNER_ kv_avx2_block_scores
PMPD_KV_DEFINE_BLOCK_SCORES(avx2)
#undef PMPD_KV_BLOCK_INNER_
#undef KV_AVX2_BLOCK_LANE

#define KV_AVX2_SCORES(size, half) kv_avx2_row_scores(qt, lanes, size, rows, stride, n, scores, max, half)
#define KV_AVX2_ACCUMULATE(size, half) kv_avx2_row_accumulate(weights, lanes, size, rows, stride, n, acc, half)
PMPD_KV_DEFINE_ROW_KERNELS(avx2, KV_AVX2_SCORES, KV_AVX2_ACCUMULATE)
#undef KV_AVX2_SCORES
#undef KV_AVX2_ACCUMULATE
#undef KV_AVX2_SCORES_STEP
#undef KV_AVX2_PREFETCH_ROWS
#undef KV_AVX2_ROW_BLOCK

void pmpd_kv_exp_avx2(float *x, uint32_t lanes, size_t n, const float *max, float *sum)
{
    size_t t;
    uint32_t l;
    if (lanes == 4) {
        /* Two tokens per 256-bit vector. */
        __m128 m4 = _mm_loadu_ps(max);
        __m256 m = _mm256_set_m128(m4, m4), s = _mm256_setzero_ps();
        __m128 tail;
        for (t = 0; t + 1 < n; t += 2) {
            __m256 e = pmpd_vexp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + t * 4), m));
            _mm256_storeu_ps(x + t * 4, e);
            s = _mm256_add_ps(s, e);
        }
        tail = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        if (t < n) {
            __m128 e = _mm256_castps256_ps128(
                pmpd_vexp_avx2(_mm256_castps128_ps256(_mm_sub_ps(_mm_loadu_ps(x + t * 4), m4))));
            _mm_storeu_ps(x + t * 4, e);
            tail = _mm_add_ps(tail, e);
        }
        _mm_storeu_ps(sum, _mm_add_ps(_mm_loadu_ps(sum), tail));
        return;
    }
    for (t = 0; t < n; t++)
        for (l = 0; l < lanes; l += 4) {
            __m128 e = _mm256_castps256_ps128(
                pmpd_vexp_avx2(_mm256_castps128_ps256(_mm_sub_ps(_mm_loadu_ps(x + t * lanes + l), _mm_loadu_ps(max + l)))));
            _mm_storeu_ps(x + t * lanes + l, e);
            _mm_storeu_ps(sum + l, _mm_add_ps(_mm_loadu_ps(sum + l), e));
        }
}

void pmpd_kv_f16_to_f32_avx2(const uint16_t *src, size_t n, float *dst)
{
#if defined(__F16C__)
    size_t i;
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    pmpd_kv_f16_to_f32_scalar(src + i, n - i, dst + i);
#else
    pmpd_kv_f16_to_f32_scalar(src, n, dst);
#endif
}

/* Four heads and 2- or 4-dim subspaces: the loops over lanes and over the
 * subspace's dimensions written out (a LUT of 8192 entries per KV head is
 * built every decode step; the general loop cost ~45 instructions each). */
static void pq_avx2_lut4(const pmpd_pq_codebook *book, const float *qt, float *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    const float *centroid = book->centroids;
    uint32_t s, c;
    for (s = 0; s < lay->n_sub; s++) {
        const float *q_sub = qt + (size_t)s * lay->sub_dim * 4;
        __m128 q0 = _mm_loadu_ps(q_sub), q1 = _mm_loadu_ps(q_sub + 4);
        if (lay->sub_dim == 2) {
            for (c = 0; c < lay->n_centroids; c++, centroid += 2, lut += 4)
                _mm_storeu_ps(lut, _mm_fmadd_ps(q1, _mm_set1_ps(centroid[1]), _mm_mul_ps(q0, _mm_set1_ps(centroid[0]))));
        } else {
            __m128 q2 = _mm_loadu_ps(q_sub + 8), q3 = _mm_loadu_ps(q_sub + 12);
            for (c = 0; c < lay->n_centroids; c++, centroid += 4, lut += 4) {
                __m128 a = _mm_fmadd_ps(q1, _mm_set1_ps(centroid[1]), _mm_mul_ps(q0, _mm_set1_ps(centroid[0])));
                __m128 b = _mm_fmadd_ps(q3, _mm_set1_ps(centroid[3]), _mm_mul_ps(q2, _mm_set1_ps(centroid[2])));
                _mm_storeu_ps(lut, _mm_add_ps(a, b));
            }
        }
    }
}

void pmpd_pq_lut_avx2(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes, float *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    if (lanes == 4 && (lay->sub_dim == 2 || lay->sub_dim == 4)) {
        pq_avx2_lut4(book, qt, lut);
        return;
    }
    for (s = 0; s < lay->n_sub; s++) {
        const float *q_sub = qt + (size_t)s * lay->sub_dim * lanes;
        for (c = 0; c < lay->n_centroids; c++) {
            const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
            float *out = lut + ((size_t)s * lay->n_centroids + c) * lanes;
            for (l = 0; l < lanes; l += 4) {
                __m128 a = _mm_mul_ps(_mm_loadu_ps(q_sub + l), _mm_set1_ps(centroid[0]));
                for (j = 1; j < lay->sub_dim; j++)
                    a = _mm_fmadd_ps(_mm_loadu_ps(q_sub + j * lanes + l), _mm_set1_ps(centroid[j]), a);
                _mm_storeu_ps(out + l, a);
            }
        }
    }
}

/* Tokens per block of the byte-code score kernel below. */
#define PQ_AVX2_TOKEN_BLOCK 4096

/* Byte codes, one quad of lanes (lane l..l+3 of every row).  The whole LUT
 * (n_sub x 256 entries of 16 bytes: 128 KB for 2-dim subspaces of a 64-dim
 * head) does not fit in L1, so a block of tokens is scored eight subspaces
 * at a time: the eight 4 KB tables stay in L1 while the block's codes and
 * scores stream past (blocks of 4096 tokens measured faster on Zen3 than
 * blocks that keep them in L1 too), and each token's score is read and
 * written once per eight lookups (7% faster than per four on Zen3).  Codes are read byte by byte: with the
 * table size a constant, each lookup is one load and one shift. */
/* One token's entries in four subspaces' tables, summed (code points at
 * the first subspace's byte; the next ones are a block's run apart). */
KV_AVX2_INLINE __m128 pq_avx2_entries4(const float *l0, size_t row, size_t lanes, const uint8_t *code)
{
    __m128 v = _mm_add_ps(_mm_loadu_ps(l0 + code[0] * lanes), _mm_loadu_ps(l0 + row + code[PMPD_PQ_BLOCK] * lanes));
    return _mm_add_ps(v, _mm_add_ps(_mm_loadu_ps(l0 + 2 * row + code[2 * PMPD_PQ_BLOCK] * lanes),
                                    _mm_loadu_ps(l0 + 3 * row + code[3 * PMPD_PQ_BLOCK] * lanes)));
}

/* One token's score += its entries in four subspaces' tables. */
KV_AVX2_INLINE void pq_avx2_score4(const float *l0, size_t row, size_t lanes, const uint8_t *code, float *score)
{
    _mm_storeu_ps(score, _mm_add_ps(_mm_loadu_ps(score), pq_avx2_entries4(l0, row, lanes, code)));
}

/* The same over eight subspaces: the score is read and written once per
 * eight lookups. */
KV_AVX2_INLINE void pq_avx2_score8(const float *l0, size_t row, size_t lanes, const uint8_t *code, float *score)
{
    __m128 v = _mm_add_ps(pq_avx2_entries4(l0, row, lanes, code),
                          pq_avx2_entries4(l0 + 4 * row, row, lanes, code + 4 * PMPD_PQ_BLOCK));
    _mm_storeu_ps(score, _mm_add_ps(_mm_loadu_ps(score), v));
}

KV_AVX2_INLINE void pq_avx2_scores_bytes(const float *lut, size_t n_centroids, size_t n_sub, size_t lanes, size_t l,
                                         const uint8_t *codes, size_t n, float *scores, float *max)
{
    const size_t row = n_centroids * lanes, block_bytes = n_sub * PMPD_PQ_BLOCK;
    __m128 m = _mm_loadu_ps(max + l);
    size_t t0, t, b, s, k;
    for (t0 = 0; t0 < n; t0 += PQ_AVX2_TOKEN_BLOCK) {
        size_t t1 = n - t0 < PQ_AVX2_TOKEN_BLOCK ? n : t0 + PQ_AVX2_TOKEN_BLOCK;
        for (t = t0; t < t1; t++)
            _mm_storeu_ps(scores + t * lanes + l, _mm_setzero_ps());
        for (s = 0; s < n_sub; s += 8) {
            const float *l0 = lut + s * row + l;
            /* Token blocks of codes: token b + t's byte of subspace s is
             * at code[t], subspace s + k at code[t + k * PMPD_PQ_BLOCK]. */
            for (b = t0; b < t1; b += PMPD_PQ_BLOCK) {
                const uint8_t *code = codes + b / PMPD_PQ_BLOCK * block_bytes + s * PMPD_PQ_BLOCK;
                size_t count = t1 - b < PMPD_PQ_BLOCK ? t1 - b : PMPD_PQ_BLOCK;
                float *score = scores + b * lanes + l;
                if (s + 8 <= n_sub)
                    for (t = 0; t < count; t++)
                        pq_avx2_score8(l0, row, lanes, code + t, score + t * lanes);
                else if (s + 4 <= n_sub)
                    for (t = 0; t < count; t++)
                        pq_avx2_score4(l0, row, lanes, code + t, score + t * lanes);
                for (k = s + 8 <= n_sub ? 8 : s + 4 <= n_sub ? 4 : 0; s + k < n_sub && k < 8; k++)
                    for (t = 0; t < count; t++)
                        _mm_storeu_ps(score + t * lanes,
                                      _mm_add_ps(_mm_loadu_ps(score + t * lanes),
                                                 _mm_loadu_ps(l0 + k * row + code[k * PMPD_PQ_BLOCK + t] * lanes)));
            }
        }
        for (t = t0; t < t1; t++)
            m = _mm_max_ps(m, _mm_loadu_ps(scores + t * lanes + l));
    }
    _mm_storeu_ps(max + l, m);
}

void pmpd_pq_scores_avx2(const float *lut, const pmpd_pq_layout *layout, uint32_t lanes, const uint8_t *codes,
                         size_t n, float *scores, float *max)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    if (!layout->packed) {
        /* Constant sizes in the common case turn table offsets into
         * displacements. */
        if (lanes == 4 && layout->n_centroids == 256)
            pq_avx2_scores_bytes(lut, 256, n_sub, 4, 0, codes, n, scores, max);
        else
            for (l = 0; l < lanes; l += 4)
                pq_avx2_scores_bytes(lut, layout->n_centroids, n_sub, lanes, l, codes, n, scores, max);
        return;
    }
    /* Packed codes: a byte holds two subspaces' codes. */
    for (t = 0; t < n; t++) {
        const uint8_t *code = codes + pmpd_pq_code_offset(layout, t, 0);
        for (l = 0; l < lanes; l += 4) {
            const float *table = lut + l;
            __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps(), sum;
            for (s = 0; s + 1 < n_sub; s += 2) {
                uint32_t c0 = code[s / 2 * PMPD_PQ_BLOCK] & 15u, c1 = (uint32_t)code[s / 2 * PMPD_PQ_BLOCK] >> 4;
                a0 = _mm_add_ps(a0, _mm_loadu_ps(table + s * row + (size_t)c0 * lanes));
                a1 = _mm_add_ps(a1, _mm_loadu_ps(table + (s + 1) * row + (size_t)c1 * lanes));
            }
            if (s < n_sub)
                a0 = _mm_add_ps(a0, _mm_loadu_ps(table + s * row + (size_t)pmpd_pq_code(layout, codes, t, s) * lanes));
            sum = _mm_add_ps(a0, a1);
            _mm_storeu_ps(scores + t * lanes + l, sum);
            _mm_storeu_ps(max + l, _mm_max_ps(_mm_loadu_ps(max + l), sum));
        }
    }
}

void pmpd_pq_bins_avx2(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout, const uint8_t *codes,
                       size_t n, float *bins)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    for (t = 0; t < n; t++) {
        for (l = 0; l < lanes; l += 4) {
            __m128 w = _mm_loadu_ps(weights + t * lanes + l);
            for (s = 0; s < n_sub; s++) {
                float *bin = bins + s * row + (size_t)pmpd_pq_code(layout, codes, t, s) * lanes + l;
                _mm_storeu_ps(bin, _mm_add_ps(_mm_loadu_ps(bin), w));
            }
        }
    }
}

#undef PQ_AVX2_TOKEN_BLOCK

/* Four heads and 2- or 4-dim subspaces, the inner loops written out as in
 * pq_avx2_lut4 (it runs over every bin of every subspace each step). */
static void pq_avx2_bins_times_codebook4(const float *bins, const pmpd_pq_codebook *book, float *acc)
{
    const pmpd_pq_layout *lay = &book->layout;
    const float *centroid = book->centroids;
    uint32_t s, c;
    for (s = 0; s < lay->n_sub; s++) {
        float *out = acc + (size_t)s * lay->sub_dim * 4;
        __m128 a0 = _mm_loadu_ps(out), a1 = _mm_loadu_ps(out + 4);
        if (lay->sub_dim == 2) {
            for (c = 0; c < lay->n_centroids; c++, centroid += 2, bins += 4) {
                __m128 bin = _mm_loadu_ps(bins);
                a0 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[0]), a0);
                a1 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[1]), a1);
            }
        } else {
            __m128 a2 = _mm_loadu_ps(out + 8), a3 = _mm_loadu_ps(out + 12);
            for (c = 0; c < lay->n_centroids; c++, centroid += 4, bins += 4) {
                __m128 bin = _mm_loadu_ps(bins);
                a0 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[0]), a0);
                a1 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[1]), a1);
                a2 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[2]), a2);
                a3 = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[3]), a3);
            }
            _mm_storeu_ps(out + 8, a2);
            _mm_storeu_ps(out + 12, a3);
        }
        _mm_storeu_ps(out, a0);
        _mm_storeu_ps(out + 4, a1);
    }
}

void pmpd_pq_bins_times_codebook_avx2(const float *bins, const pmpd_pq_codebook *book, uint32_t lanes, float *acc)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    if (lanes == 4 && (lay->sub_dim == 2 || lay->sub_dim == 4)) {
        pq_avx2_bins_times_codebook4(bins, book, acc);
        return;
    }
    for (s = 0; s < lay->n_sub; s++)
        for (l = 0; l < lanes; l += 4) {
            float *out = acc + (size_t)s * lay->sub_dim * lanes + l;
            __m128 a[4];
            for (j = 0; j < lay->sub_dim; j++)
                a[j] = _mm_loadu_ps(out + j * lanes);
            for (c = 0; c < lay->n_centroids; c++) {
                const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
                __m128 bin = _mm_loadu_ps(bins + ((size_t)s * lay->n_centroids + c) * lanes + l);
                for (j = 0; j < lay->sub_dim; j++)
                    a[j] = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[j]), a[j]);
            }
            for (j = 0; j < lay->sub_dim; j++)
                _mm_storeu_ps(out + j * lanes, a[j]);
        }
}

/* The value side, for byte codes and one quad of lanes (l..l+3).  Rather
 * than scattering each token's weights into a bin per subspace (a
 * read-modify-write that stalls whenever a store has not yet left for the
 * next token's load) and multiplying the bins by the codebook afterwards,
 * every token adds its weights times its centroid straight into
 * registers: eight 2-dim subspaces (or four 4-dim ones) at a time, one FMA
 * per subspace (two for 4-dim), with the pass's codebooks in L1.  The
 * accumulators are lane-major ([lane][j]), so one broadcast of a centroid
 * serves all four lanes; they are transposed into acc[s*sub_dim + j][l] at
 * the end.  Same sum as bins x codebook, in another order. */
/* Tokens t < n, block by block; code[k * PMPD_PQ_BLOCK] is then token t's
 * code of subspace s + k (s: the pass's first subspace). */
#define PQ_AVX2_FOR_TOKENS(t)                                                                      \
    for (size_t b_ = 0; b_ < n; b_ += PMPD_PQ_BLOCK)                                                \
        for (t = b_; t < n && t < b_ + PMPD_PQ_BLOCK; t++)
#define PQ_AVX2_TOKEN_CODES(t) (codes + (b_ / PMPD_PQ_BLOCK * n_sub + s) * PMPD_PQ_BLOCK + ((t) - b_))
#define PQ_AVX2_CODE(k) ((k) * nc + code[(k) * PMPD_PQ_BLOCK])
#define PQ_AVX2_STEP2(k)                                                                           \
    a##k = _mm256_fmadd_ps(w, _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(book0 + PQ_AVX2_CODE(k) * 2))), \
                           a##k)
#define PQ_AVX2_STEP4(k)                                                                           \
    do {                                                                                           \
        __m256 c = _mm256_broadcast_ps((const __m128 *)(book0 + PQ_AVX2_CODE(k) * 4));            \
        lo##k = _mm256_fmadd_ps(w01, c, lo##k);                                                    \
        hi##k = _mm256_fmadd_ps(w23, c, hi##k);                                                    \
    } while (0)

/* acc rows 2s and 2s+1, lanes l..l+3, += a = [l0j0 l0j1 l1j0 l1j1 ...] */
KV_AVX2_INLINE void pq_avx2_add_sub2(__m256 a, float *acc, size_t s, size_t lanes, size_t l)
{
    __m256 split = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    float *row0 = acc + s * 2 * lanes + l, *row1 = row0 + lanes;
    _mm_storeu_ps(row0, _mm_add_ps(_mm_loadu_ps(row0), _mm256_castps256_ps128(split)));
    _mm_storeu_ps(row1, _mm_add_ps(_mm_loadu_ps(row1), _mm256_extractf128_ps(split, 1)));
}

/* acc rows 4s..4s+3, lanes l..l+3, += lo = [l0 j0..3 | l1 j0..3], hi = lanes 2 and 3 */
KV_AVX2_INLINE void pq_avx2_add_sub4(__m256 lo, __m256 hi, float *acc, size_t s, size_t lanes, size_t l)
{
    __m128 r0 = _mm256_castps256_ps128(lo), r1 = _mm256_extractf128_ps(lo, 1);
    __m128 r2 = _mm256_castps256_ps128(hi), r3 = _mm256_extractf128_ps(hi, 1);
    float *row = acc + s * 4 * lanes + l;
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(row, _mm_add_ps(_mm_loadu_ps(row), r0));
    _mm_storeu_ps(row + lanes, _mm_add_ps(_mm_loadu_ps(row + lanes), r1));
    _mm_storeu_ps(row + 2 * lanes, _mm_add_ps(_mm_loadu_ps(row + 2 * lanes), r2));
    _mm_storeu_ps(row + 3 * lanes, _mm_add_ps(_mm_loadu_ps(row + 3 * lanes), r3));
}

KV_AVX2_INLINE void pq_avx2_values_sub2(const float *weights, size_t lanes, size_t l, const float *centroids,
                                        size_t nc, size_t n_sub, const uint8_t *codes, size_t n, float *acc)
{
    const __m256i twice = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    size_t s = 0, t;
    for (; s + 8 <= n_sub; s += 8) {
        const float *book0 = centroids + s * nc * 2;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        PQ_AVX2_FOR_TOKENS(t) {
            const uint8_t *code = PQ_AVX2_TOKEN_CODES(t);
            __m256 w = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(weights + t * lanes + l)), twice);
            PQ_AVX2_STEP2(0);
            PQ_AVX2_STEP2(1);
            PQ_AVX2_STEP2(2);
            PQ_AVX2_STEP2(3);
            PQ_AVX2_STEP2(4);
            PQ_AVX2_STEP2(5);
            PQ_AVX2_STEP2(6);
            PQ_AVX2_STEP2(7);
        }
        pq_avx2_add_sub2(a0, acc, s, lanes, l);
        pq_avx2_add_sub2(a1, acc, s + 1, lanes, l);
        pq_avx2_add_sub2(a2, acc, s + 2, lanes, l);
        pq_avx2_add_sub2(a3, acc, s + 3, lanes, l);
        pq_avx2_add_sub2(a4, acc, s + 4, lanes, l);
        pq_avx2_add_sub2(a5, acc, s + 5, lanes, l);
        pq_avx2_add_sub2(a6, acc, s + 6, lanes, l);
        pq_avx2_add_sub2(a7, acc, s + 7, lanes, l);
    }
    for (; s < n_sub; s++) {
        const float *book0 = centroids + s * nc * 2;
        __m256 a0 = _mm256_setzero_ps();
        PQ_AVX2_FOR_TOKENS(t) {
            const uint8_t *code = PQ_AVX2_TOKEN_CODES(t);
            __m256 w = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(weights + t * lanes + l)), twice);
            PQ_AVX2_STEP2(0);
        }
        pq_avx2_add_sub2(a0, acc, s, lanes, l);
    }
}

KV_AVX2_INLINE void pq_avx2_values_sub4(const float *weights, size_t lanes, size_t l, const float *centroids,
                                        size_t nc, size_t n_sub, const uint8_t *codes, size_t n, float *acc)
{
    const __m256i first = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), second = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
    size_t s = 0, t;
    for (; s + 4 <= n_sub; s += 4) {
        const float *book0 = centroids + s * nc * 4;
        __m256 lo0 = _mm256_setzero_ps(), lo1 = lo0, lo2 = lo0, lo3 = lo0, hi0 = lo0, hi1 = lo0, hi2 = lo0, hi3 = lo0;
        PQ_AVX2_FOR_TOKENS(t) {
            const uint8_t *code = PQ_AVX2_TOKEN_CODES(t);
            __m256 w = _mm256_castps128_ps256(_mm_loadu_ps(weights + t * lanes + l));
            __m256 w01 = _mm256_permutevar8x32_ps(w, first), w23 = _mm256_permutevar8x32_ps(w, second);
            PQ_AVX2_STEP4(0);
            PQ_AVX2_STEP4(1);
            PQ_AVX2_STEP4(2);
            PQ_AVX2_STEP4(3);
        }
        pq_avx2_add_sub4(lo0, hi0, acc, s, lanes, l);
        pq_avx2_add_sub4(lo1, hi1, acc, s + 1, lanes, l);
        pq_avx2_add_sub4(lo2, hi2, acc, s + 2, lanes, l);
        pq_avx2_add_sub4(lo3, hi3, acc, s + 3, lanes, l);
    }
    for (; s < n_sub; s++) {
        const float *book0 = centroids + s * nc * 4;
        __m256 lo0 = _mm256_setzero_ps(), hi0 = lo0;
        PQ_AVX2_FOR_TOKENS(t) {
            const uint8_t *code = PQ_AVX2_TOKEN_CODES(t);
            __m256 w = _mm256_castps128_ps256(_mm_loadu_ps(weights + t * lanes + l));
            __m256 w01 = _mm256_permutevar8x32_ps(w, first), w23 = _mm256_permutevar8x32_ps(w, second);
            PQ_AVX2_STEP4(0);
        }
        pq_avx2_add_sub4(lo0, hi0, acc, s, lanes, l);
    }
}
#undef PQ_AVX2_FOR_TOKENS
#undef PQ_AVX2_TOKEN_CODES
#undef PQ_AVX2_CODE
#undef PQ_AVX2_STEP2
#undef PQ_AVX2_STEP4

void pmpd_pq_values_avx2(const float *weights, uint32_t lanes, const pmpd_pq_codebook *book, const uint8_t *codes,
                         size_t n, float *bins, float *acc)
{
    const size_t nc = book->layout.n_centroids, n_sub = book->layout.n_sub;
    uint32_t l;
    if (book->layout.packed) {
        PMPD_PQ_VALUES_BY_BINS(avx2, weights, lanes, book, codes, n, bins, acc);
        return;
    }
    /* Constant sizes in the common case (four lanes, 8-bit codes) turn
     * codebook offsets into displacements. */
    if (lanes == 4 && nc == 256) {
        if (book->layout.sub_dim == 2)
            pq_avx2_values_sub2(weights, 4, 0, book->centroids, 256, n_sub, codes, n, acc);
        else
            pq_avx2_values_sub4(weights, 4, 0, book->centroids, 256, n_sub, codes, n, acc);
        return;
    }
    for (l = 0; l < lanes; l += 4) {
        if (book->layout.sub_dim == 2)
            pq_avx2_values_sub2(weights, lanes, l, book->centroids, nc, n_sub, codes, n, acc);
        else
            pq_avx2_values_sub4(weights, lanes, l, book->centroids, nc, n_sub, codes, n, acc);
    }
}

/* Squared distances from x to centroids [c, c + 8), summed over j in order
 * with separate multiply and add, exactly like the scalar loop. */
static __m256 pq_avx2_distances(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x,
                                uint32_t c)
{
    __m256 diff = _mm256_sub_ps(_mm256_loadu_ps(columns + c), _mm256_set1_ps(x[0]));
    __m256 d = _mm256_mul_ps(diff, diff);
    uint32_t j;
    for (j = 1; j < sub_dim; j++) {
        diff = _mm256_sub_ps(_mm256_loadu_ps(columns + j * n_centroids + c), _mm256_set1_ps(x[j]));
        d = _mm256_add_ps(d, _mm256_mul_ps(diff, diff));
    }
    return d;
}

/* Keeps, per lane, the first strict minimum. */
static void pq_avx2_keep_closer(__m256 d, __m256i index, __m256 *best, __m256i *best_index)
{
    __m256 closer = _mm256_cmp_ps(d, *best, _CMP_LT_OQ);
    *best = _mm256_blendv_ps(*best, d, closer);
    *best_index =
        _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*best_index), _mm256_castsi256_ps(index), closer));
}

/* Sixteen centroids per step in two independent chains (the compare-blend
 * chain, not arithmetic, limits the search); the 16 lanes are then reduced
 * by (distance, index), so ties go to the lowest index as in the scalar
 * search. */
uint32_t pmpd_pq_nearest_avx2(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    __m256 best[2];
    __m256i best_index[2], index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    float distance[16];
    int32_t position[16];
    uint32_t c, j, result;
    float result_distance;
    if (n_centroids % 16 != 0)
        return pmpd_pq_nearest_scalar(columns, n_centroids, sub_dim, x);
    best[0] = best[1] = _mm256_set1_ps(INFINITY);
    best_index[0] = best_index[1] = _mm256_setzero_si256();
    for (c = 0; c < n_centroids; c += 16) {
        pq_avx2_keep_closer(pq_avx2_distances(columns, n_centroids, sub_dim, x, c), index, &best[0], &best_index[0]);
        index = _mm256_add_epi32(index, eight);
        pq_avx2_keep_closer(pq_avx2_distances(columns, n_centroids, sub_dim, x, c + 8), index, &best[1],
                            &best_index[1]);
        index = _mm256_add_epi32(index, eight);
    }
    _mm256_storeu_ps(distance, best[0]);
    _mm256_storeu_ps(distance + 8, best[1]);
    _mm256_storeu_si256((__m256i *)(void *)position, best_index[0]);
    _mm256_storeu_si256((__m256i *)(void *)(position + 8), best_index[1]);
    result = (uint32_t)position[0];
    result_distance = distance[0];
    for (j = 1; j < 16; j++)
        if (distance[j] < result_distance || (distance[j] == result_distance && (uint32_t)position[j] < result)) {
            result = (uint32_t)position[j];
            result_distance = distance[j];
        }
    return result;
}

#undef KV_AVX2_INLINE

#else
typedef int pq_attention_kernels_avx2_not_compiled;
#endif
