/*
 * The product-quantized KV cache of one layer, all of its KV heads.
 *
 * Per KV head the cache holds the history as PQ codes (one code per
 * subspace of K and of V, see pq_codebook.h) and the newest tokens in full
 * precision, in a
 * recent window of `window` tokens (default: the head dimension).  A token
 * always enters the window; when the window is full at the next append it
 * is encoded as one batch and appended to the codes, so the decode path
 * never encodes a single token and the window always holds the 1..window
 * newest tokens.
 *
 * Attention (pq_attention.c) reads the codes through per-query lookup
 * tables and never dequantizes a K or V vector, attends exactly to the
 * window, and merges the two by log-sum-exp.
 */
#ifndef PMPD_KVCACHE_PQ_CACHE_H
#define PMPD_KVCACHE_PQ_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/kvcache/pq_codebook.h"

typedef struct pmpd_pq_cache {
    pmpd_pq_codebook keys;    /* codebook views; the caller keeps the data alive */
    pmpd_pq_codebook values;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t capacity;        /* tokens the cache can hold */
    uint32_t window;          /* recent-window length in tokens */
    uint32_t n_coded;         /* tokens stored as codes (the oldest ones) */
    uint32_t n_recent;        /* tokens in the window (the newest ones) */
    uint32_t code_capacity;   /* capacity rounded up to whole PMPD_PQ_BLOCKs */
    uint8_t *key_codes;       /* [n_kv_heads][code_capacity * keys.code_bytes], blocked (pq_codebook.h) */
    uint8_t *value_codes;     /* [n_kv_heads][code_capacity * values.code_bytes] */
    uint8_t *value_planes;    /* the value codebook's bfloat16 planes (pq_values_bf16.h) where the
                               * build sums values through them, else NULL */
    float *key_tables;        /* the key codebook's tables (pmpd_pq_lut8_book) where the build
                               * scores keys through byte tables (pq_lut8.h), else NULL */
    uint32_t shares_tables;   /* 1: value_planes and key_tables are another cache's (same codebooks) */
    float *key_recent;        /* [n_kv_heads][window][head_dim] */
    float *value_recent;
} pmpd_pq_cache;

/* The blocked codes of one KV head (keys or values). */
static inline const uint8_t *pmpd_pq_cache_head_codes(const pmpd_pq_cache *cache, const uint8_t *codes,
                                                      const pmpd_pq_layout *layout, uint32_t kv_head)
{
    return codes + (size_t)kv_head * cache->code_capacity * layout->code_bytes;
}

/* Allocates the cache in the arena (a measuring arena gives the size) and
 * leaves it empty.  Both codebooks must be for vectors of head_dim floats.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL, zero sizes, window > capacity,
 * codebook dimension mismatch), PMPD_ERR_OVERFLOW, PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_pq_cache_init(pmpd_pq_cache *cache, const pmpd_pq_codebook *keys,
                                             const pmpd_pq_codebook *values, uint32_t n_kv_heads,
                                             uint32_t capacity, uint32_t window, pmpd_arena *arena);

/* As pmpd_pq_cache_init, but where tables is not NULL the cache reads the
 * codebook tables (value planes, key tables) of that cache, made with the
 * same codebooks (the same centroids: PMPD_ERR_INVALID_ARGUMENT
 * otherwise), instead of making its own: layers that share one codebook
 * pair need one copy. */
PMPD_INTERNAL pmpd_status pmpd_pq_cache_init_sharing(pmpd_pq_cache *cache, const pmpd_pq_codebook *keys,
                                                     const pmpd_pq_codebook *values, uint32_t n_kv_heads,
                                                     uint32_t capacity, uint32_t window,
                                                     const pmpd_pq_cache *tables, pmpd_arena *arena);

/* The key and value (head_dim floats each) kv_head stores for token pos
 * (< n_coded + n_recent): the codes' centroids, or the window's floats. */
PMPD_INTERNAL void pmpd_pq_cache_read(const pmpd_pq_cache *cache, uint32_t kv_head, size_t pos, float *key,
                                      float *value);

/* Forgets every token (a new sequence). */
PMPD_INTERNAL void pmpd_pq_cache_reset(pmpd_pq_cache *cache);

/* Bytes the cache holds whatever its length: the window's K and V and the
 * codebook tables built at init (value planes, key tables; not those it
 * shares). */
PMPD_INTERNAL size_t pmpd_pq_cache_fixed_bytes(const pmpd_pq_cache *cache);

/* Code bytes one token takes in one layer (K and V, all KV heads); the
 * window is a fixed cost on top.  0 if the count overflows size_t. */
PMPD_INTERNAL size_t pmpd_pq_cache_bytes_per_token(const pmpd_pq_layout *keys, const pmpd_pq_layout *values,
                                                   uint32_t n_kv_heads);

/* Appends one token: key and value are [n_kv_heads][head_dim].  Encodes
 * the window first if it is full.  PMPD_ERR_CONTEXT_FULL when the cache
 * already holds capacity tokens. */
PMPD_INTERNAL pmpd_status pmpd_pq_cache_append(pmpd_pq_cache *cache, const float *key, const float *value);

/* Encodes the whole window into codes now (the end of a prefill may use it
 * so that decoding starts with an empty window; append does it lazily). */
PMPD_INTERNAL void pmpd_pq_cache_flush(pmpd_pq_cache *cache);

/* Floats of scratch pmpd_pq_cache_attend needs for n_heads query heads.
 * PMPD_ERR_INVALID_ARGUMENT if n_heads is not a multiple of n_kv_heads. */
PMPD_INTERNAL pmpd_status pmpd_pq_attention_scratch_floats(const pmpd_pq_cache *cache, uint32_t n_heads,
                                                          size_t *out);

/* Attention of one KV head's group of query heads: q and out are
 * [group][head_dim]; otherwise as pmpd_pq_cache_attend, whose scratch size
 * (for n_heads = group * n_kv_heads) it needs.  Arguments are not checked. */
PMPD_INTERNAL void pmpd_pq_cache_attend_group(const pmpd_pq_cache *cache, uint32_t kv_head, const float *q,
                                              uint32_t group, size_t length, float *out, float *scratch);

/* out[h][d] = softmax attention of query head h (q is [n_heads][head_dim],
 * post-rotary, unscaled) over the first `length` cached tokens; query head h
 * reads KV head h / (n_heads / n_kv_heads).  A length below the number of
 * cached tokens serves causal attention inside a prefill chunk.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (length above the tokens held, heads
 * not a multiple of the KV heads). */
PMPD_INTERNAL pmpd_status pmpd_pq_cache_attend(const pmpd_pq_cache *cache, const float *q, uint32_t n_heads,
                                               size_t length, float *out, float *scratch);

#endif
