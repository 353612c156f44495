/*
 * Exact attention of one query group over rows of cached K and V: the
 * recent window of the PQ cache, and the whole context for the f32, f16
 * and uniform int8/int4/int2 cache modes.  Rows stored in a narrower format
 * are widened to f32 a block at a time, in scratch.
 */
#ifndef PMPD_KVCACHE_EXACT_ATTENTION_H
#define PMPD_KVCACHE_EXACT_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/attention_partial.h"

typedef enum pmpd_kv_row_format {
    PMPD_KV_ROW_F32,
    PMPD_KV_ROW_F16,   /* IEEE binary16 bit patterns */
    PMPD_KV_ROW_F16_KEY_BLOCKS, /* binary16 keys in blocks of 16 positions (pmpd_kv_key_at) */
    PMPD_KV_ROW_INT8,  /* uniform_quant.h rows */
    PMPD_KV_ROW_INT4,
    PMPD_KV_ROW_INT2
} pmpd_kv_row_format;

typedef struct pmpd_kv_rows {
    pmpd_kv_row_format format;
    /* row t starts at data + t * row_bytes; key blocks: block t / 16 there,
     * for t a multiple of 16, and whole blocks up to the last row's */
    const unsigned char *data;
    size_t row_bytes; /* for f32 rows a multiple of sizeof(float) */
} pmpd_kv_rows;

/* Rows widened per block: bounds the scratch, keeps the block in L1. */
#define PMPD_KV_EXACT_BLOCK 16

/* Floats of scratch pmpd_attn_exact_partial needs for n rows. */
PMPD_INTERNAL int pmpd_attn_exact_scratch_floats(size_t n, uint32_t lanes, uint32_t dim, size_t *out);

/* Attention of the query group qt ([dim][lanes], already scaled by
 * 1/sqrt(dim)) over rows [0, n) of keys and values, written to *out
 * (cleared first). */
PMPD_INTERNAL void pmpd_attn_exact_partial(const float *qt, uint32_t lanes, uint32_t dim,
                                           const pmpd_kv_rows *keys, const pmpd_kv_rows *values, size_t n,
                                           float *scratch, pmpd_attn_partial *out);

/* Floats of scratch pmpd_attn_exact_group needs for n rows and groups of
 * up to max_heads query heads. */
PMPD_INTERNAL int pmpd_attn_exact_group_scratch_floats(size_t n, uint32_t max_heads, uint32_t dim, size_t *out);

/* Causal attention of `heads` query heads sharing one KV head (query and
 * out: [heads][dim], query already rotated) over rows [0, n):
 * out[h] = softmax(query[h]·K / sqrt(dim)) V, with the group's heads
 * processed together so each K and V row is read once. */
PMPD_INTERNAL void pmpd_attn_exact_group(const float *query, uint32_t heads, uint32_t dim,
                                         const pmpd_kv_rows *keys, const pmpd_kv_rows *values, size_t n,
                                         float *scratch, float *out);

#endif
