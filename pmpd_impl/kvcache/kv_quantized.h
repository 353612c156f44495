/*
 * The compressed storage modes of a session's KV cache, behind the
 * interface of pmpd_impl/model/kv_cache.h: product-quantized codes with a
 * full-precision recent window (PMPD_KV_PQ, codebooks from the model's
 * PMPD_SECTION_KV_CODEBOOKS section), and the naive per-vector uniform
 * int8 / int4 baselines (PMPD_KV_INT8, PMPD_KV_INT4).
 */
#ifndef PMPD_KVCACHE_KV_QUANTIZED_H
#define PMPD_KVCACHE_KV_QUANTIZED_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_cache.h"
#include "pmpd_impl/kvcache/pq_codebook_set.h"
#include "pmpd_impl/model/model.h"

typedef struct pmpd_kv_quantized {
    uint32_t type;           /* pmpd_kv_type: PQ, INT8 or INT4 */
    uint32_t n_layers, n_kv_heads, head_dim;
    uint32_t group;          /* query heads per KV head */
    uint32_t window;         /* PQ: recent-window tokens */
    size_t capacity;
    pmpd_pq_codebook_set codebooks;  /* PQ */
    pmpd_pq_cache *layers;           /* PQ: one cache per layer */
    size_t row_bytes;                /* INT: bytes of one head vector */
    unsigned char *keys, *values;    /* INT: [layer][position][kv_head] rows */
} pmpd_kv_quantized;

/* 1 if type is one of the modes here. */
PMPD_INTERNAL int pmpd_kv_quantized_handles(uint32_t type);

/* Allocates the storage in the arena (measuring arenas plan).  window is
 * the PQ recent window in tokens (0 = head_dim).  Errors:
 * PMPD_ERR_FORMAT_MISSING (PQ and the model has no codebook section), the
 * codebook section's PMPD_ERR_FORMAT_* codes, PMPD_ERR_INVALID_ARGUMENT,
 * PMPD_ERR_OVERFLOW, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_kv_quantized_init(pmpd_kv_quantized *q, pmpd_arena *arena, uint32_t type,
                                                 const pmpd_model *model, size_t capacity, uint32_t window);

PMPD_INTERNAL void pmpd_kv_quantized_clear(pmpd_kv_quantized *q);

/* Stores n positions from pos (the next ones: writes come in order). */
PMPD_INTERNAL void pmpd_kv_quantized_write(pmpd_kv_quantized *q, uint32_t layer, size_t pos, size_t n,
                                           const float *k, const float *v);

/* The key and value (head_dim floats each) stored for (layer, pos,
 * kv_head), as attention sees them. */
PMPD_INTERNAL void pmpd_kv_quantized_read(const pmpd_kv_quantized *q, uint32_t layer, size_t pos, uint32_t kv_head,
                                          float *key, float *value);

PMPD_INTERNAL pmpd_status pmpd_kv_quantized_scratch_bytes(const pmpd_kv_quantized *q, size_t *bytes);

/* Attention of the first `heads` (<= group) query heads of kv_head's group
 * (query and out: [heads][head_dim]) over positions [0, n_visible). */
PMPD_INTERNAL void pmpd_kv_quantized_attend(const pmpd_kv_quantized *q, uint32_t layer, uint32_t kv_head,
                                            const float *query, uint32_t heads, size_t n_visible, void *scratch,
                                            float *out);

/* Bytes the stored positions [0, positions) occupy, all layers, plus PQ's
 * fixed part (pmpd_pq_cache_fixed_bytes). */
PMPD_INTERNAL size_t pmpd_kv_quantized_bytes_in_use(const pmpd_kv_quantized *q, size_t positions);

#endif
