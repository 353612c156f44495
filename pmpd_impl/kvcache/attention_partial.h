/*
 * Softmax attention of a group of query heads (the heads that share one KV
 * head under grouped-query attention) over one part of the context, kept
 * unnormalized so that parts computed separately -- the PQ-coded history and
 * the full-precision recent window -- merge exactly by log-sum-exp.
 *
 * Scores and weights are laid out token-major with the group's heads padded
 * to a multiple of PMPD_KV_LANES ("lanes"), so every SIMD kernel works on
 * whole vectors of heads; padding lanes carry zero queries and are ignored.
 */
#ifndef PMPD_KVCACHE_ATTENTION_PARTIAL_H
#define PMPD_KVCACHE_ATTENTION_PARTIAL_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_KV_LANES 4

/* Lanes for a group of heads: heads rounded up to PMPD_KV_LANES. */
static inline uint32_t pmpd_kv_lanes(uint32_t heads)
{
    return (heads + PMPD_KV_LANES - 1) / PMPD_KV_LANES * PMPD_KV_LANES;
}

typedef struct pmpd_attn_partial {
    float *max;  /* [lanes] largest score seen; -INFINITY while empty */
    float *sum;  /* [lanes] sum of exp(score - max) */
    float *acc;  /* [dim][lanes] sum of exp(score - max) * v, transposed like the queries */
} pmpd_attn_partial;

/* Sets p to the empty state. */
PMPD_INTERNAL void pmpd_attn_partial_clear(pmpd_attn_partial *p, uint32_t lanes, uint32_t dim);

/* a := a merged with b (both over disjoint tokens). */
PMPD_INTERNAL void pmpd_attn_partial_merge(pmpd_attn_partial *a, const pmpd_attn_partial *b,
                                           uint32_t lanes, uint32_t dim);

/* out[h*out_stride + d] = acc[d][h] / sum[h] for the first heads lanes;
 * an empty head gives zeros. */
PMPD_INTERNAL void pmpd_attn_partial_finish(const pmpd_attn_partial *p, uint32_t heads, uint32_t dim,
                                            float *out, size_t out_stride);

/* Query block of a group, transposed and padded: qt[d][lane] = scale *
 * q[lane*q_stride + d] for lane < heads, 0 for padding lanes. */
PMPD_INTERNAL void pmpd_attn_transpose_query(const float *q, size_t q_stride, uint32_t heads, uint32_t dim,
                                             float scale, float *qt);

#endif
