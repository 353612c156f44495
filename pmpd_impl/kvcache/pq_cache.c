/* PQ KV cache storage: codes for the history, a full-precision recent
 * window, batch encoding when the window fills. */
#include <string.h>

#include "pmpd_impl/kvcache/pq_cache.h"

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/pq_lut8.h"
#include "pmpd_impl/kvcache/pq_values_bf16.h"

static pmpd_status pq_cache_alloc(pmpd_arena *arena, size_t a, size_t b, size_t c, void **out)
{
    size_t bytes;
    if (!pmpd_checked_mul3(a, b, c, &bytes))
        return PMPD_ERR_OVERFLOW;
    return pmpd_arena_alloc(arena, bytes, PMPD_ARENA_ALIGNMENT, out);
}

pmpd_status pmpd_pq_cache_init(pmpd_pq_cache *cache, const pmpd_pq_codebook *keys, const pmpd_pq_codebook *values,
                               uint32_t n_kv_heads, uint32_t capacity, uint32_t window, pmpd_arena *arena)
{
    return pmpd_pq_cache_init_sharing(cache, keys, values, n_kv_heads, capacity, window, NULL, arena);
}

pmpd_status pmpd_pq_cache_init_sharing(pmpd_pq_cache *cache, const pmpd_pq_codebook *keys,
                                       const pmpd_pq_codebook *values, uint32_t n_kv_heads, uint32_t capacity,
                                       uint32_t window, const pmpd_pq_cache *tables, pmpd_arena *arena)
{
    size_t heads_tokens;
    uint32_t code_capacity;
    void *key_codes, *value_codes, *key_recent, *value_recent, *value_planes = NULL, *key_tables = NULL;
    pmpd_status status;
    if (!cache || !keys || !values || !arena || n_kv_heads == 0 || capacity == 0 || window == 0 ||
        window > capacity || keys->layout.dim == 0 || keys->layout.dim != values->layout.dim ||
        (tables && (tables->keys.centroids != keys->centroids || tables->values.centroids != values->centroids ||
                    memcmp(&tables->keys.layout, &keys->layout, sizeof keys->layout) != 0 ||
                    memcmp(&tables->values.layout, &values->layout, sizeof values->layout) != 0)))
        return PMPD_ERR_INVALID_ARGUMENT;
    /* Codes come in whole blocks of tokens: the last one may be partly used. */
    if (capacity > UINT32_MAX - (PMPD_PQ_BLOCK - 1))
        return PMPD_ERR_OVERFLOW;
    code_capacity = (capacity + PMPD_PQ_BLOCK - 1) / PMPD_PQ_BLOCK * PMPD_PQ_BLOCK;
    if (!pmpd_checked_mul(n_kv_heads, code_capacity, &heads_tokens))
        return PMPD_ERR_OVERFLOW;
    if ((status = pq_cache_alloc(arena, heads_tokens, keys->layout.code_bytes, 1, &key_codes)) != PMPD_OK ||
        (status = pq_cache_alloc(arena, heads_tokens, values->layout.code_bytes, 1, &value_codes)) != PMPD_OK ||
        (status = pq_cache_alloc(arena, (size_t)n_kv_heads * window, keys->layout.dim, sizeof(float),
                                 &key_recent)) != PMPD_OK ||
        (status = pq_cache_alloc(arena, (size_t)n_kv_heads * window, keys->layout.dim, sizeof(float),
                                 &value_recent)) != PMPD_OK ||
        (!tables && PMPD_PQ_USE_VALUES_BF16 && pmpd_pq_bf16_fits(&values->layout) &&
         (status = pq_cache_alloc(arena, pmpd_pq_bf16_plane_bytes(&values->layout), 1, 1, &value_planes)) !=
             PMPD_OK) ||
        (!tables && PMPD_PQ_USE_LUT8 && pmpd_pq_lut8_fits(&keys->layout) &&
         (status = pq_cache_alloc(arena, pmpd_pq_lut8_book_floats(&keys->layout), sizeof(float), 1,
                                  &key_tables)) != PMPD_OK))
        return status;
    memset(cache, 0, sizeof *cache);
    cache->keys = *keys;
    cache->values = *values;
    cache->n_kv_heads = n_kv_heads;
    cache->head_dim = keys->layout.dim;
    cache->capacity = capacity;
    cache->code_capacity = code_capacity;
    cache->window = window;
    cache->key_codes = (uint8_t *)key_codes;
    cache->value_codes = (uint8_t *)value_codes;
    cache->key_recent = (float *)key_recent;
    cache->value_recent = (float *)value_recent;
    cache->value_planes = (uint8_t *)value_planes;
    cache->key_tables = (float *)key_tables;
    if (tables) {
        cache->value_planes = tables->value_planes;
        cache->key_tables = tables->key_tables;
        cache->shares_tables = 1;
    }
    /* A measuring arena gives no memory to fill. */
    if (value_planes)
        pmpd_pq_bf16_planes(values, cache->value_planes);
    if (key_tables)
        pmpd_pq_lut8_book(keys, cache->key_tables);
    return PMPD_OK;
}

void pmpd_pq_cache_reset(pmpd_pq_cache *cache)
{
    cache->n_coded = 0;
    cache->n_recent = 0;
}

size_t pmpd_pq_cache_fixed_bytes(const pmpd_pq_cache *cache)
{
    /* Each was allocated with checked sizes, so their sum fits. */
    size_t bytes = 2 * (size_t)cache->n_kv_heads * cache->window * cache->head_dim * sizeof(float);
    if (cache->shares_tables)
        return bytes;
    if (cache->value_planes)
        bytes += pmpd_pq_bf16_plane_bytes(&cache->values.layout);
    if (cache->key_tables)
        bytes += pmpd_pq_lut8_book_floats(&cache->keys.layout) * sizeof(float);
    return bytes;
}

size_t pmpd_pq_cache_bytes_per_token(const pmpd_pq_layout *keys, const pmpd_pq_layout *values, uint32_t n_kv_heads)
{
    size_t bytes;
    return pmpd_checked_mul(n_kv_heads, (size_t)keys->code_bytes + values->code_bytes, &bytes) ? bytes : 0;
}

void pmpd_pq_cache_flush(pmpd_pq_cache *cache)
{
    size_t dim = cache->head_dim;
    uint32_t h;
    for (h = 0; h < cache->n_kv_heads; h++) {
        size_t recent = (size_t)h * cache->window * dim;
        size_t keys = (size_t)h * cache->code_capacity * cache->keys.layout.code_bytes;
        size_t values = (size_t)h * cache->code_capacity * cache->values.layout.code_bytes;
        pmpd_pq_encode(&cache->keys, cache->key_recent + recent, dim, cache->n_recent, cache->n_coded,
                       cache->key_codes + keys);
        pmpd_pq_encode(&cache->values, cache->value_recent + recent, dim, cache->n_recent, cache->n_coded,
                       cache->value_codes + values);
    }
    cache->n_coded += cache->n_recent;
    cache->n_recent = 0;
}

pmpd_status pmpd_pq_cache_append(pmpd_pq_cache *cache, const float *key, const float *value)
{
    size_t dim = cache->head_dim;
    uint32_t h;
    if (cache->n_coded + cache->n_recent >= cache->capacity)
        return PMPD_ERR_CONTEXT_FULL;
    if (cache->n_recent == cache->window)
        pmpd_pq_cache_flush(cache);
    for (h = 0; h < cache->n_kv_heads; h++) {
        size_t slot = ((size_t)h * cache->window + cache->n_recent) * dim;
        memcpy(cache->key_recent + slot, key + h * dim, dim * sizeof(float));
        memcpy(cache->value_recent + slot, value + h * dim, dim * sizeof(float));
    }
    cache->n_recent++;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_pq_cache_read(const pmpd_pq_cache *cache, uint32_t kv_head, size_t pos, float *key,
                                      float *value)
{
    if (pos < cache->n_coded) {
        pmpd_pq_decode(&cache->keys, pmpd_pq_cache_head_codes(cache, cache->key_codes, &cache->keys.layout, kv_head),
                       pos, key);
        pmpd_pq_decode(&cache->values,
                       pmpd_pq_cache_head_codes(cache, cache->value_codes, &cache->values.layout, kv_head), pos, value);
    } else {
        size_t offset = ((size_t)kv_head * cache->window + (pos - cache->n_coded)) * cache->head_dim;
        memcpy(key, cache->key_recent + offset, cache->head_dim * sizeof(float));
        memcpy(value, cache->value_recent + offset, cache->head_dim * sizeof(float));
    }
}
