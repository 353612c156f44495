/*
 * The passes of the exact-attention row kernels that the AVX2 and AVX-512
 * sets share (attention_kernels_avx2.c, attention_kernels_avx512.c): each
 * group of four lanes (query heads) takes the head dimension in chunks of
 * PMPD_KV_Q_CHUNK, with the query chunk copied lane-major for the scores
 * and the value sums built lane-major, and the set's own inner kernel does
 * the arithmetic.  Macros, so that the inner kernels stay inlined with the
 * head size a constant.
 */
#ifndef PMPD_KVCACHE_ATTENTION_ROWS_X86_H
#define PMPD_KVCACHE_ATTENTION_ROWS_X86_H

#include <immintrin.h>
#include <string.h>

#define PMPD_KV_Q_CHUNK 256 /* query (and value) dimensions held lane-major per pass */

/* max[l0 .. l0 + 4) raised to the scores' over positions [0, n): four
 * chains (one was a serial max per row, 10% of the f16 scores). */
static inline void pmpd_kv_lanes_max4(const float *scores, uint32_t lanes, uint32_t l0, size_t n, float *max)
{
    __m128 m = _mm_loadu_ps(max + l0), m1 = m, m2 = m, m3 = m;
    size_t t;
    for (t = 0; t + 4 <= n; t += 4) {
        m = _mm_max_ps(m, _mm_loadu_ps(scores + t * lanes + l0));
        m1 = _mm_max_ps(m1, _mm_loadu_ps(scores + (t + 1) * lanes + l0));
        m2 = _mm_max_ps(m2, _mm_loadu_ps(scores + (t + 2) * lanes + l0));
        m3 = _mm_max_ps(m3, _mm_loadu_ps(scores + (t + 3) * lanes + l0));
    }
    for (; t < n; t++)
        m = _mm_max_ps(m, _mm_loadu_ps(scores + t * lanes + l0));
    _mm_storeu_ps(max + l0, _mm_max_ps(_mm_max_ps(m, m1), _mm_max_ps(m2, m3)));
}

/* scores and max as pmpd_kv_row_scores_*: per group of four lanes and
 * chunk [d0, d1) of the head, q[l][d - d0] (zeros up to a multiple of pad)
 * goes to chunk(q, lanes, l0, dim, d0, d1, rows, stride, n, scores, half),
 * which writes (d0 == 0) or adds to scores[t][l0 .. l0 + 4). */
#define PMPD_KV_ROW_SCORES_PASSES(chunk, pad, qt, lanes, dim, rows, stride, n, scores, max, half)               \
    do {                                                                                                      \
        float q_[4][PMPD_KV_Q_CHUNK];                                                                         \
        uint32_t l0_, d0_, d_, l_;                                                                            \
        for (l0_ = 0; l0_ < (lanes); l0_ += 4) {                                                              \
            for (d0_ = 0; d0_ < (dim); d0_ += PMPD_KV_Q_CHUNK) {                                              \
                uint32_t d1_ = (dim) - d0_ < PMPD_KV_Q_CHUNK ? (dim) : d0_ + PMPD_KV_Q_CHUNK;                  \
                uint32_t padded_ = (d1_ - d0_ + (pad) - 1) / (pad) * (pad);                                   \
                for (l_ = 0; l_ < 4; l_++)                                                                    \
                    for (d_ = 0; d_ < padded_; d_++)                                                          \
                        q_[l_][d_] = d0_ + d_ < d1_ ? (qt)[(size_t)(d0_ + d_) * (lanes) + l0_ + l_] : 0.0f;   \
                chunk((const float (*)[PMPD_KV_Q_CHUNK])q_, lanes, l0_, dim, d0_, d1_, rows, stride, n, scores, \
                      half);                                                                                  \
            }                                                                                                 \
            pmpd_kv_lanes_max4(scores, lanes, l0_, n, max);                                                   \
        }                                                                                                     \
    } while (0)

/* acc as pmpd_kv_row_accumulate_*: per group of four lanes and chunk
 * [d0, d1), blocks of `block` rows, each prefetched `ahead` rows early by
 * prefetch(rows, t, n, stride, dim, half) and taken `width` dimensions at a
 * time by slice(weights, lanes, l0, d, d1, rows, stride, t0, t1, sums, d0,
 * half), which adds to sums[l][d - d0 ..]; the sums are transposed into
 * acc[d][l] once per chunk. */
#define PMPD_KV_ROW_ACCUMULATE_PASSES(slice, width, block, prefetch, ahead, weights, lanes, dim, rows, stride, n,  \
                                      acc, half)                                                              \
    do {                                                                                                      \
        float sums_[4][PMPD_KV_Q_CHUNK];                                                                      \
        uint32_t l0_, d0_, d_, l_;                                                                            \
        size_t t0_, t_;                                                                                       \
        for (l0_ = 0; l0_ < (lanes); l0_ += 4)                                                                \
            for (d0_ = 0; d0_ < (dim); d0_ += PMPD_KV_Q_CHUNK) {                                              \
                uint32_t d1_ = (dim) - d0_ < PMPD_KV_Q_CHUNK ? (dim) : d0_ + PMPD_KV_Q_CHUNK;                  \
                memset(sums_, 0, sizeof sums_);                                                               \
                for (t0_ = 0; t0_ < (n); t0_ += (block)) {                                                    \
                    size_t t1_ = (n) - t0_ < (block) ? (n) : t0_ + (block);                                   \
                    for (t_ = t0_; t_ < t1_; t_++)                                                            \
                        prefetch(rows, t_ + (ahead), n, stride, dim, half);                                   \
                    for (d_ = d0_; d_ < d1_; d_ += (width))                                                   \
                        slice(weights, lanes, l0_, d_, d1_, rows, stride, t0_, t1_, sums_, d0_, half);        \
                }                                                                                             \
                for (d_ = d0_; d_ < d1_; d_++)                                                                \
                    for (l_ = 0; l_ < 4; l_++)                                                                \
                        (acc)[(size_t)d_ * (lanes) + l0_ + l_] += sums_[l_][d_ - d0_];                        \
            }                                                                                                 \
    } while (0)

/* Three of the exported row kernels of a set (the blocked f16 scores are
 * each set's own), with copies for head sizes 64 and 128 where the size is
 * a constant (the loops over the dimension unroll and lose their tail
 * tests; a dispatching inline function instead of this macro measured 5%
 * slower f16 scores on AVX2). */
#define PMPD_KV_BY_HEAD_SIZE(call, half)                                                                      \
    do {                                                                                                      \
        if (dim == 64)                                                                                        \
            call(64, half);                                                                                   \
        else if (dim == 128)                                                                                  \
            call(128, half);                                                                                  \
        else                                                                                                  \
            call(dim, half);                                                                                  \
    } while (0)
/* pmpd_kv_block_scores_f16_<isa> from a set's inner kernel
 * inner(qt, lanes, dim, blocks, n, scores, max), copied for head sizes 64
 * and 128. */
#define PMPD_KV_BLOCK_SCORES_BY_SIZE_(size, unused) PMPD_KV_BLOCK_INNER_(qt, lanes, size, blocks, n, scores, max)
#define PMPD_KV_DEFINE_BLOCK_SCORES(isa)                                                                      \
    void pmpd_kv_block_scores_f16_##isa(const float *qt, uint32_t lanes, uint32_t dim, const uint16_t *blocks, \
                                        size_t n, float *scores, float *max)                                  \
    {                                                                                                         \
        PMPD_KV_BY_HEAD_SIZE(PMPD_KV_BLOCK_SCORES_BY_SIZE_, 0);                                              \
    }

#define PMPD_KV_DEFINE_ROW_KERNELS(isa, scores_by_size, accumulate_by_size)                                   \
    void pmpd_kv_row_scores_##isa(const float *qt, uint32_t lanes, uint32_t dim, const float *rows,            \
                                  size_t stride, size_t n, float *scores, float *max)                         \
    {                                                                                                         \
        PMPD_KV_BY_HEAD_SIZE(scores_by_size, 0);                                                              \
    }                                                                                                         \
    void pmpd_kv_row_accumulate_##isa(const float *weights, uint32_t lanes, uint32_t dim, const float *rows,   \
                                      size_t stride, size_t n, float *acc)                                    \
    {                                                                                                         \
        PMPD_KV_BY_HEAD_SIZE(accumulate_by_size, 0);                                                          \
    }                                                                                                         \
    void pmpd_kv_row_accumulate_f16_##isa(const float *weights, uint32_t lanes, uint32_t dim,                  \
                                          const uint16_t *rows, size_t stride, size_t n, float *acc)          \
    {                                                                                                         \
        PMPD_KV_BY_HEAD_SIZE(accumulate_by_size, 1);                                                          \
    }

#endif
