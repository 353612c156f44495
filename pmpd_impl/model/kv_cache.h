/*
 * The KV cache: keys (after rotary embedding) and values of every layer for
 * every position of the context, and attention of one query head over them.
 * The forward pass sees only this interface, so a storage mode is a case in
 * kv_cache.c: f32, f16 (converted on the fly), and room for more (product-
 * quantized codes with a full-precision recent window).
 *
 * Positions are written in order, possibly many at once (prefill), and a
 * position is visible to attention once written.
 */
#ifndef PMPD_MODEL_KV_CACHE_H
#define PMPD_MODEL_KV_CACHE_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/kv_quantized.h"
#include "pmpd_impl/model/model.h"

typedef struct pmpd_kv_cache {
    uint32_t type;        /* pmpd_kv_type */
    uint32_t n_layers;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t group;       /* query heads per KV head */
    size_t kv_dim;        /* n_kv_heads * head_dim */
    size_t capacity;      /* positions */
    size_t stored;        /* positions stored per layer and KV head: capacity in whole key blocks */
    size_t element_size;  /* bytes per stored number */
    /* [layer][kv_head][position][head_dim]: each KV head's rows are one
     * sequential stream for attention (position-major rows, kv_dim apart,
     * read from memory 1.2x (f16) to 1.9x (f32) slower at 16-32K; see
     * docs/kv-cache.md); f16 keys in blocks of 16 positions instead
     * (pmpd_kv_key_at in kvcache/attention_kernels.h) */
    void *k;
    void *v;
    pmpd_kv_quantized quantized; /* PQ and integer modes (pmpd_impl/kvcache/) */
} pmpd_kv_cache;

/* Allocates the cache in the arena (the same call plans with a measuring
 * arena).  model gives the query heads per KV head and the PQ codebooks
 * (its KV codebook section);
 * pq_window is the PQ recent window in tokens (0 = head_dim).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (unknown type), PMPD_ERR_OVERFLOW,
 * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_FORMAT_* (PQ: codebook section missing
 * or malformed). */
PMPD_INTERNAL pmpd_status pmpd_kv_cache_init(pmpd_kv_cache *cache, pmpd_arena *arena, uint32_t type,
                                             uint32_t n_layers, uint32_t n_kv_heads,
                                             uint32_t head_dim, size_t capacity, const pmpd_model *model,
                                             uint32_t pq_window);

/* Bytes the first positions occupy (all layers, K and V; the PQ recent
 * window counted in full). */
PMPD_INTERNAL size_t pmpd_kv_cache_bytes_in_use(const pmpd_kv_cache *cache, size_t positions);

/* Forgets every position (a new conversation). */
PMPD_INTERNAL void pmpd_kv_cache_clear(pmpd_kv_cache *cache);

/* Stores n positions starting at pos for layer: k and v are n rows of
 * kv_dim floats.  pos + n <= capacity (checked by the caller). */
PMPD_INTERNAL void pmpd_kv_cache_write(pmpd_kv_cache *cache, uint32_t layer, size_t pos, size_t n,
                                       const float *k, const float *v);

/* The key and value (head_dim floats each) stored for (layer, pos,
 * kv_head), pos already written, in whatever form the mode keeps them. */
PMPD_INTERNAL void pmpd_kv_cache_read(const pmpd_kv_cache *cache, uint32_t layer, size_t pos, uint32_t kv_head,
                                      float *key, float *value);

/* Positions [0, n) of layer as written: keys and values are n rows of
 * kv_dim floats each (the layout pmpd_kv_cache_write takes), whatever the
 * cache's own layout. */
PMPD_INTERNAL void pmpd_kv_cache_read_layer(const pmpd_kv_cache *cache, uint32_t layer, size_t n, float *keys,
                                            float *values);

/* Per-thread scratch bytes pmpd_kv_cache_attend_group needs (64-byte
 * aligned). */
PMPD_INTERNAL pmpd_status pmpd_kv_cache_attend_scratch_bytes(const pmpd_kv_cache *cache, size_t *bytes);

/* Causal attention of the first `heads` query heads of kv_head's group
 * (q and out: [heads][head_dim], q already rotated) over positions
 * [0, n_visible) of layer: out[h] = softmax(q[h]·K / sqrt(head_dim)) V.
 * The group is processed together, so every stored row is read once, and
 * the compressed modes build their lookup tables once.  scratch:
 * pmpd_kv_cache_attend_scratch_bytes bytes. */
PMPD_INTERNAL void pmpd_kv_cache_attend_group(const pmpd_kv_cache *cache, uint32_t layer, uint32_t kv_head,
                                              const float *q, uint32_t heads, size_t n_visible, void *scratch,
                                              float *out);

#endif
