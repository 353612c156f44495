/*
 * 8-bit key tables for PQ attention, looked up in registers.
 *
 * The float path (attention_kernels.h) reads one 16-byte table entry per
 * token and subspace.  Where a CPU can look up 64 bytes at once from a
 * table held in registers (AVX-512 VBMI: VPERMI2B over two 64-byte
 * registers), the tables are quantized to bytes instead, so one instruction
 * serves one subspace of a whole block of 64 tokens (the codes' blocked
 * layout, pq_codebook.h, puts those 64 codes in one register).
 *
 * Quantization, per query lane l (query head) and subspace s, with T the
 * float table q_s . centroid_c (fmaf in subspace-dimension order):
 *   R[l]        = max over s of (max_c T[s][l][c] - min_c T[s][l][c])
 *   step[l]     = R[l] / 255, scale[l] = 255 / R[l] (0 where R[l] = 0)
 *   x(s,l,c)    = fmaf chain over j of (q_sj * scale[l]) * centroid_c[j],
 *                 started from bias = fmaf(-min_c T[s][l][c], scale[l], 0.5)
 *               = (T[s][l][c] - min_c T[s][l][c]) * scale[l] + 0.5, but for
 *                 float rounding of |T| * scale (the same order as T's own)
 *   byte(s,l,c) = trunc(x), 0 where x < 1 (or NaN), 255 where x >= 255
 *   offset[l]   = sum over s of min_c T[s][l][c]
 *   score[t][l] = (float)(sum over s of byte(s,l,code)) * step[l] + offset[l]
 * so each subspace's term is off by at most step[l] / 2 (plus float
 * rounding) and a score by at most n_sub * step[l] / 2.  Scaling the query
 * rather than each entry makes a byte one FMA per dimension and a
 * conversion, computed straight from the centroids (T itself is only needed
 * for its minimum and range).  Every step above is one IEEE operation in a
 * fixed order, so the SIMD kernels give exactly the scalar ones' bytes and
 * scores.
 */
#ifndef PMPD_KVCACHE_PQ_LUT8_H
#define PMPD_KVCACHE_PQ_LUT8_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_codebook.h"

/* Byte sums of one token's subspaces are kept in 16 bits. */
#define PMPD_PQ_LUT8_MAX_SUB 257u

typedef struct pmpd_pq_lut8 {
    /* The codebook transposed (pmpd_pq_lut8_columns), which the SIMD build
     * reads: built once with the cache rather than per KV head, layer and
     * decoded token.  The scalar build reads the codebook itself. */
    const float *columns;
    float *minimum; /* [n_sub][lanes] */
    float *step;    /* [lanes] */
    float *offset;  /* [lanes] */
    uint8_t *table; /* [n_sub][lanes][256]: the bytes (zero past n_centroids) */
} pmpd_pq_lut8;

/* Byte tables serve unpacked codes of at most PMPD_PQ_LUT8_MAX_SUB subspaces. */
static inline int pmpd_pq_lut8_fits(const pmpd_pq_layout *layout)
{
    return !layout->packed && layout->n_sub <= PMPD_PQ_LUT8_MAX_SUB && layout->n_centroids % 16 == 0;
}

/* Floats of a codebook's transposed copy. */
static inline size_t pmpd_pq_lut8_column_floats(const pmpd_pq_layout *layout)
{
    return (size_t)layout->dim * layout->n_centroids;
}

/* columns[s][j][c] = coordinate j of centroid c of subspace s: sixteen
 * centroids' coordinate j are then one 64-byte load. */
PMPD_INTERNAL void pmpd_pq_lut8_columns(const pmpd_pq_codebook *book, float *columns);

#define PMPD_PQ_DECLARE_LUT8(isa)                                                                   \
    /* Fills lut's minimum, step, offset and table for queries qt ([dim][lanes]). */              \
    PMPD_INTERNAL void pmpd_pq_lut8_build_##isa(const pmpd_pq_codebook *book, const float *qt,      \
                                                uint32_t lanes, const pmpd_pq_lut8 *lut);           \
    /* scores[t][l] as in the header comment for t < n (codes blocked); max[l] = max(max[l],    \
     * scores[t][l]) */                                                                             \
    PMPD_INTERNAL void pmpd_pq_lut8_scores_##isa(const pmpd_pq_lut8 *lut, const pmpd_pq_layout *layout, \
                                                 uint32_t lanes, const uint8_t *codes, size_t n,    \
                                                 float *scores, float *max);

PMPD_PQ_DECLARE_LUT8(scalar)

/* PQ attention scores keys through byte tables where this is 1. */
#if PMPD_USE_AVX512
#define PMPD_PQ_USE_LUT8 1
PMPD_PQ_DECLARE_LUT8(avx512)
#define PMPD_PQ_LUT8_KERNEL(name) name##_avx512
#else
#define PMPD_PQ_USE_LUT8 0
#endif

#endif
