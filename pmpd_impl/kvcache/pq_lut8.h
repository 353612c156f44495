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

/* Vertices kept per 2-dim subspace for the ranges (below); a subspace
 * whose hull has more reads every centroid. */
#define PMPD_PQ_LUT8_HULL 64u

typedef struct pmpd_pq_lut8 {
    /* The codebook transposed, columns[s][j][c] = coordinate j of centroid
     * c of subspace s, so that sixteen centroids' coordinate j are one
     * 64-byte load; the SIMD build reads it (the scalar build reads the
     * codebook).  Made once with the cache (pmpd_pq_lut8_book) rather than
     * per KV head, layer and decoded token. */
    const float *columns;
    /* 2-dim subspaces: the least and the largest T over a subspace's
     * centroids are taken at vertices of their convex hull, so both builds
     * take them over hull[s][j][i] (i < hull_count[s], a multiple of 16,
     * the first vertex repeated up to it) where hull_count[s] is not 0, and
     * over every centroid where it is 0 or hull_count is NULL. */
    const float *hull;           /* [n_sub][2][PMPD_PQ_LUT8_HULL] */
    const uint32_t *hull_count;  /* [n_sub] */
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

/* Floats of the tables pmpd_pq_lut8_book makes: the columns, then for
 * 2-dim subspaces the hulls and their counts. */
static inline size_t pmpd_pq_lut8_book_floats(const pmpd_pq_layout *layout)
{
    size_t hulls = layout->sub_dim == 2 ? (size_t)layout->n_sub * (2 * PMPD_PQ_LUT8_HULL + 1) : 0;
    return (size_t)layout->dim * layout->n_centroids + hulls;
}

/* Fills tables (pmpd_pq_lut8_book_floats) from book. */
PMPD_INTERNAL void pmpd_pq_lut8_book(const pmpd_pq_codebook *book, float *tables);

/* Points lut's columns, hull and hull_count into tables. */
static inline void pmpd_pq_lut8_book_view(const pmpd_pq_layout *layout, const float *tables, pmpd_pq_lut8 *lut)
{
    lut->columns = tables;
    lut->hull = NULL;
    lut->hull_count = NULL;
    if (layout->sub_dim == 2) {
        lut->hull = tables + (size_t)layout->dim * layout->n_centroids;
        lut->hull_count = (const uint32_t *)(const void *)(lut->hull + (size_t)layout->n_sub * 2 * PMPD_PQ_LUT8_HULL);
    }
}

/* The points the ranges of subspace s read: count of them, coordinate j
 * of point i at points[j * stride + i]. */
static inline const float *pmpd_pq_lut8_range_points(const pmpd_pq_lut8 *lut, const pmpd_pq_layout *layout,
                                                     uint32_t s, uint32_t *count, uint32_t *stride)
{
    if (lut->hull_count && lut->hull_count[s]) {
        *count = lut->hull_count[s];
        *stride = PMPD_PQ_LUT8_HULL;
        return lut->hull + (size_t)s * 2 * PMPD_PQ_LUT8_HULL;
    }
    *count = *stride = layout->n_centroids;
    return lut->columns + (size_t)s * layout->sub_dim * layout->n_centroids;
}

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
