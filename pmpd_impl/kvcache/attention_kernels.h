/*
 * The inner loops of KV-cache attention, one set per instruction set.  The
 * scalar set is always compiled (it is the oracle of the SIMD tests); the
 * AVX2 and NEON sets exist when config.h enables them, and
 * PMPD_KV_KERNEL(name) names the set chosen at compile time.
 *
 * Every attention kernel works on the token-major, lane-padded layout
 * described in attention_partial.h: lanes is a multiple of PMPD_KV_LANES,
 * queries and accumulators are [dim][lanes], scores and weights
 * [token][lanes].  The nearest-centroid search of the batch encoder is here
 * too.
 */
#ifndef PMPD_KVCACHE_ATTENTION_KERNELS_H
#define PMPD_KVCACHE_ATTENTION_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_codebook.h"

/* Binary16 keys are stored in blocks of PMPD_KV_KEY_BLOCK positions, each
 * block dimension-major: element d of position t at pmpd_kv_key_at(t, d,
 * dim).  So one vector of 16 (AVX-512), 8 (AVX2) or 4 (NEON) floats widened
 * from one load is one dimension of consecutive positions, and a query
 * head's scores for them build up with one FMA per dimension and no
 * horizontal sums (position-major rows needed 45 shuffles and adds per 16
 * sums: about a third of the f16 scores' time).  A block holds 16 positions
 * whatever the context; the kernels read a last partial block whole (its
 * unwritten slots may hold anything) and use only its first positions. */
#define PMPD_KV_KEY_BLOCK 16

static inline size_t pmpd_kv_key_at(size_t t, size_t d, size_t dim)
{
    return (t / PMPD_KV_KEY_BLOCK * dim + d) * PMPD_KV_KEY_BLOCK + t % PMPD_KV_KEY_BLOCK;
}

/* A block kernel's scores for lanes l0 .. l0 + 3 of positions [t0, t0 +
 * count): block holds them position-major ([16][4]), scores is the
 * caller's [position][lanes] array at position t0. */
static inline void pmpd_kv_put_block_scores(const float *block, size_t count, uint32_t lanes, uint32_t l0,
                                            float *scores)
{
    size_t t;
    uint32_t l;
    for (t = 0; t < count; t++)
        for (l = 0; l < 4; l++)
            scores[t * lanes + l0 + l] = block[4 * t + l];
}

#define PMPD_KV_DECLARE_ROW_KERNELS(isa)                                                            \
    /* scores[t][l] = sum_d qt[d][l] * rows[t*stride + d]; max[l] = max(max[l], scores[t][l]) */   \
    PMPD_INTERNAL void pmpd_kv_row_scores_##isa(const float *qt, uint32_t lanes, uint32_t dim,      \
                                                const float *rows, size_t stride, size_t n,         \
                                                float *scores, float *max);                         \
    /* acc[d][l] += sum_t weights[t][l] * rows[t*stride + d] */                                     \
    PMPD_INTERNAL void pmpd_kv_row_accumulate_##isa(const float *weights, uint32_t lanes,           \
                                                    uint32_t dim, const float *rows, size_t stride, \
                                                    size_t n, float *acc);                          \
    /* the scores over binary16 keys in blocks (pmpd_kv_key_at), widened as they are read */        \
    PMPD_INTERNAL void pmpd_kv_block_scores_f16_##isa(const float *qt, uint32_t lanes, uint32_t dim, \
                                                      const uint16_t *blocks, size_t n,              \
                                                      float *scores, float *max);                    \
    /* the value sums over binary16 rows, widened as they are read */                               \
    PMPD_INTERNAL void pmpd_kv_row_accumulate_f16_##isa(const float *weights, uint32_t lanes,       \
                                                        uint32_t dim, const uint16_t *rows,         \
                                                        size_t stride, size_t n, float *acc);

#define PMPD_KV_DECLARE_KERNELS(isa)                                                                \
    PMPD_KV_DECLARE_ROW_KERNELS(isa)                                                                \
    /* x[t][l] = exp(x[t][l] - max[l]); sum[l] += x[t][l]  (x <= max: no overflow) */              \
    PMPD_INTERNAL void pmpd_kv_exp_##isa(float *x, uint32_t lanes, size_t n, const float *max,      \
                                         float *sum);                                               \
    /* IEEE half (binary16) to float */                                                             \
    PMPD_INTERNAL void pmpd_kv_f16_to_f32_##isa(const uint16_t *src, size_t n, float *dst);         \
    /* lut[s][c][l] = sum_j qt[s*sub_dim + j][l] * centroids[s][c][j] */                            \
    PMPD_INTERNAL void pmpd_pq_lut_##isa(const pmpd_pq_codebook *book, const float *qt,             \
                                         uint32_t lanes, float *lut);                               \
    /* scores[t][l] = sum_s lut[s][code s of token t][l]; max as in row_scores                      \
     * (codes blocked as pq_codebook.h lays them out, read with pmpd_pq_code) */                    \
    PMPD_INTERNAL void pmpd_pq_scores_##isa(const float *lut, const pmpd_pq_layout *layout,         \
                                            uint32_t lanes, const uint8_t *codes, size_t n,         \
                                            float *scores, float *max);                             \
    /* bins[s][code s of token t][l] += weights[t][l] */                                            \
    PMPD_INTERNAL void pmpd_pq_bins_##isa(const float *weights, uint32_t lanes,                     \
                                          const pmpd_pq_layout *layout, const uint8_t *codes,       \
                                          size_t n, float *bins);                                   \
    /* acc[s*sub_dim + j][l] += sum_c bins[s][c][l] * centroids[s][c][j] */                         \
    PMPD_INTERNAL void pmpd_pq_bins_times_codebook_##isa(const float *bins,                         \
                                                         const pmpd_pq_codebook *book,              \
                                                         uint32_t lanes, float *acc);               \
    /* acc[s*sub_dim + j][l] += sum_t weights[t][l] * centroids[s][code s of token t][j]: the      \
     * value side of PQ attention; bins is room for n_sub * n_centroids * lanes floats (the       \
     * kernel may sum through bins, then multiply them by the codebook)                           */ \
    PMPD_INTERNAL void pmpd_pq_values_##isa(const float *weights, uint32_t lanes,                   \
                                            const pmpd_pq_codebook *book, const uint8_t *codes,     \
                                            size_t n, float *bins, float *acc);                     \
    /* index of the centroid nearest to x (squared distance summed over j in order, lowest index   \
     * on ties); one subspace's codebook transposed: columns[j*n_centroids + c] */                  \
    PMPD_INTERNAL uint32_t pmpd_pq_nearest_##isa(const float *columns, uint32_t n_centroids,        \
                                                 uint32_t sub_dim, const float *x);

/* The value side as the seed computes it, through the bins kernels of one
 * instruction set: softmax weights summed per centroid, then one bins x
 * codebook product. */
#define PMPD_PQ_VALUES_BY_BINS(isa, weights, lanes, book, codes, n, bins, acc)                       \
    do {                                                                                            \
        size_t bin_floats_ = (size_t)(book)->layout.n_sub * (book)->layout.n_centroids * (lanes);   \
        size_t bin_ = 0;                                                                            \
        for (; bin_ < bin_floats_; bin_++)                                                          \
            (bins)[bin_] = 0.0f;                                                                    \
        pmpd_pq_bins_##isa(weights, lanes, &(book)->layout, codes, n, bins);                        \
        pmpd_pq_bins_times_codebook_##isa(bins, book, lanes, acc);                                  \
    } while (0)

/* The NEON set uses AArch64-only instructions (round to nearest, FMA on
 * every core); 32-bit Arm runs the scalar set. */
#if PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_KV_USE_NEON 1
#else
#define PMPD_KV_USE_NEON 0
#endif

PMPD_KV_DECLARE_KERNELS(scalar)
#if PMPD_USE_AVX512
PMPD_KV_DECLARE_ROW_KERNELS(avx512)
PMPD_INTERNAL void pmpd_kv_exp_avx512(float *x, uint32_t lanes, size_t n, const float *max, float *sum);
PMPD_INTERNAL uint32_t pmpd_pq_nearest_avx512(const float *columns, uint32_t n_centroids, uint32_t sub_dim,
                                              const float *x);
#endif
#if PMPD_USE_AVX2
PMPD_KV_DECLARE_KERNELS(avx2)
#define PMPD_KV_KERNEL(name) name##_avx2
#elif PMPD_KV_USE_NEON
PMPD_KV_DECLARE_KERNELS(neon)
#define PMPD_KV_KERNEL(name) name##_neon
#else
#define PMPD_KV_KERNEL(name) name##_scalar
#endif

/* The exact-attention row kernels (the four above exp), the exponential
 * and the nearest-centroid search have AVX-512 versions of their own where
 * the compiler targets it; the other kernels stay AVX2 there. */
#if PMPD_USE_AVX512
#define PMPD_KV_ROW_KERNEL(name) name##_avx512
#else
#define PMPD_KV_ROW_KERNEL(name) PMPD_KV_KERNEL(name)
#endif
#define PMPD_PQ_NEAREST_KERNEL PMPD_KV_ROW_KERNEL(pmpd_pq_nearest)
#define PMPD_KV_EXP_KERNEL PMPD_KV_ROW_KERNEL(pmpd_kv_exp)

#endif
