/*
 * The value side of PQ attention with bfloat16 products, looked up in
 * registers.
 *
 * acc[s*sub_dim + j][l] += sum_t bf16(w[t][l]) * bf16(centroid[s][code][j]),
 * products exact in float, sums in float (in the SIMD kernel's order): each
 * product is off by at most 2^-8 of itself (two bfloat16 roundings, to
 * nearest even), far below what product quantization itself changes.
 *
 * The codebook's bfloat16 values are kept as two byte planes per
 * (subspace, dimension), [n_sub][sub_dim][low byte, high byte][256], built
 * once with the cache.  A kernel then looks a block's 64 codes up in each
 * plane with VPERMI2B (as pq_lut8.h does for keys), joins the bytes into 64
 * bfloat16 values and multiplies them by the block's weights with
 * VDPBF16PS: 64 tokens of one (subspace, dimension) in about a dozen
 * operations, where the float kernels load a centroid and multiply per
 * token and subspace.
 */
#ifndef PMPD_KVCACHE_PQ_VALUES_BF16_H
#define PMPD_KVCACHE_PQ_VALUES_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_codebook.h"

/* Tokens whose bfloat16 weights a kernel converts at a time: 16 KB for a
 * quad of lanes, which stays in L1 across every (subspace, dimension). */
#define PMPD_PQ_BF16_TILE 2048u

/* Floats of scratch the kernels need (the tile's weights). */
#define PMPD_PQ_BF16_SCRATCH_FLOATS (PMPD_PQ_BF16_TILE * 4u * 2u / 4u)

/* Bytes of a codebook's planes. */
static inline size_t pmpd_pq_bf16_plane_bytes(const pmpd_pq_layout *layout)
{
    return (size_t)layout->dim * 512;
}

/* Planes serve unpacked codes (at most 256 centroids). */
static inline int pmpd_pq_bf16_fits(const pmpd_pq_layout *layout)
{
    return !layout->packed;
}

/* The nearest bfloat16 (ties to even) of a finite float, as its bits. */
PMPD_INTERNAL uint16_t pmpd_pq_bf16(float x);

/* Fills planes (pmpd_pq_bf16_plane_bytes) from book; zero past n_centroids. */
PMPD_INTERNAL void pmpd_pq_bf16_planes(const pmpd_pq_codebook *book, uint8_t *planes);

#define PMPD_PQ_DECLARE_VALUES_BF16(isa)                                                            \
    /* acc as in the header comment, weights [t][lanes] for t < n, codes blocked; scratch of      \
     * PMPD_PQ_BF16_SCRATCH_FLOATS */                                                               \
    PMPD_INTERNAL void pmpd_pq_values_bf16_##isa(const float *weights, uint32_t lanes,              \
                                                 const pmpd_pq_layout *layout, const uint8_t *planes, \
                                                 const uint8_t *codes, size_t n, float *scratch,    \
                                                 float *acc);

PMPD_PQ_DECLARE_VALUES_BF16(scalar)

/* PQ attention sums values through the planes where this is 1. */
#if PMPD_USE_AVX512 && defined(__AVX512BF16__)
#define PMPD_PQ_USE_VALUES_BF16 1
PMPD_PQ_DECLARE_VALUES_BF16(avx512)
#define PMPD_PQ_VALUES_BF16_KERNEL(name) name##_avx512
#else
#define PMPD_PQ_USE_VALUES_BF16 0
#endif

#endif
