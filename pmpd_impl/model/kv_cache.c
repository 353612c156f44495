#include "pmpd_impl/model/kv_cache.h"

#include <stdint.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/model/f16.h"

PMPD_INTERNAL pmpd_status pmpd_kv_cache_init(pmpd_kv_cache *cache, pmpd_arena *arena, uint32_t type,
                                             uint32_t n_layers, uint32_t n_kv_heads,
                                             uint32_t head_dim, size_t capacity, const pmpd_model *model,
                                             uint32_t pq_window)
{
    size_t kv_dim, bytes;
    pmpd_status st;
    cache->group = model->info.n_heads / n_kv_heads;
    if (pmpd_kv_quantized_handles(type)) {
        cache->type = type;
        cache->n_layers = n_layers;
        cache->n_kv_heads = n_kv_heads;
        cache->head_dim = head_dim;
        cache->kv_dim = (size_t)n_kv_heads * head_dim;
        cache->capacity = cache->stored = capacity;
        cache->element_size = 0;
        cache->k = cache->v = NULL;
        return pmpd_kv_quantized_init(&cache->quantized, arena, type, model, capacity, pq_window);
    }
    switch (type) {
    case PMPD_KV_F32: cache->element_size = sizeof(float); break;
    case PMPD_KV_F16: cache->element_size = sizeof(uint16_t); break;
    default: return PMPD_ERR_INVALID_ARGUMENT;
    }
    if (capacity > SIZE_MAX - PMPD_KV_KEY_BLOCK)
        return PMPD_ERR_OVERFLOW;
    cache->stored = (capacity + PMPD_KV_KEY_BLOCK - 1) / PMPD_KV_KEY_BLOCK * PMPD_KV_KEY_BLOCK;
    if (!pmpd_checked_mul(n_kv_heads, head_dim, &kv_dim) ||
        !pmpd_checked_mul3(n_layers, cache->stored, kv_dim, &bytes) ||
        !pmpd_checked_mul(bytes, cache->element_size, &bytes))
        return PMPD_ERR_OVERFLOW;
    cache->type = type;
    cache->n_layers = n_layers;
    cache->n_kv_heads = n_kv_heads;
    cache->head_dim = head_dim;
    cache->kv_dim = kv_dim;
    cache->capacity = capacity;
    st = pmpd_arena_alloc(arena, bytes, PMPD_ARENA_ALIGNMENT, &cache->k);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(arena, bytes, PMPD_ARENA_ALIGNMENT, &cache->v);
    return st;
}

PMPD_INTERNAL void pmpd_kv_cache_clear(pmpd_kv_cache *cache)
{
    /* Stored positions are only read once rewritten, so nothing to do for
     * the float modes. */
    if (pmpd_kv_quantized_handles(cache->type))
        pmpd_kv_quantized_clear(&cache->quantized);
}

PMPD_INTERNAL size_t pmpd_kv_cache_bytes_in_use(const pmpd_kv_cache *cache, size_t positions)
{
    if (pmpd_kv_quantized_handles(cache->type))
        return pmpd_kv_quantized_bytes_in_use(&cache->quantized, positions);
    return positions * cache->n_layers * cache->kv_dim * 2 * cache->element_size;
}

/* Element offset of (layer, kv_head, pos, 0): of the value, and of the key
 * unless f16 keys are in blocks (then pmpd_kv_key_at from pos 0's offset). */
static size_t pmpd_kv_cache_index(const pmpd_kv_cache *cache, uint32_t layer, uint32_t kv_head, size_t pos)
{
    return (((size_t)layer * cache->n_kv_heads + kv_head) * cache->stored + pos) * cache->head_dim;
}

PMPD_INTERNAL void pmpd_kv_cache_write(pmpd_kv_cache *cache, uint32_t layer, size_t pos, size_t n,
                                       const float *k, const float *v)
{
    size_t t, i;
    uint32_t head;
    if (pmpd_kv_quantized_handles(cache->type)) {
        pmpd_kv_quantized_write(&cache->quantized, layer, pos, n, k, v);
        return;
    }
    for (t = 0; t < n; t++)
        for (head = 0; head < cache->n_kv_heads; head++) {
            size_t to = pmpd_kv_cache_index(cache, layer, head, pos + t);
            const float *key = k + t * cache->kv_dim + (size_t)head * cache->head_dim;
            const float *value = v + t * cache->kv_dim + (size_t)head * cache->head_dim;
            if (cache->type == PMPD_KV_F32) {
                memcpy((float *)cache->k + to, key, cache->head_dim * sizeof(float));
                memcpy((float *)cache->v + to, value, cache->head_dim * sizeof(float));
            } else {
                /* f16 keys in blocks: pmpd_kv_key_at from the head's start */
                uint16_t *keys = (uint16_t *)cache->k + pmpd_kv_cache_index(cache, layer, head, 0);
                for (i = 0; i < cache->head_dim; i++) {
                    keys[pmpd_kv_key_at(pos + t, i, cache->head_dim)] = pmpd_f32_to_f16(key[i]);
                    ((uint16_t *)cache->v)[to + i] = pmpd_f32_to_f16(value[i]);
                }
            }
        }
}

PMPD_INTERNAL void pmpd_kv_cache_read(const pmpd_kv_cache *cache, uint32_t layer, size_t pos, uint32_t kv_head,
                                      float *key, float *value)
{
    size_t base = pmpd_kv_cache_index(cache, layer, kv_head, pos), i;
    switch (cache->type) {
    case PMPD_KV_F32:
        memcpy(key, (const float *)cache->k + base, cache->head_dim * sizeof(float));
        memcpy(value, (const float *)cache->v + base, cache->head_dim * sizeof(float));
        break;
    case PMPD_KV_F16: {
        /* f16 keys in blocks: pmpd_kv_key_at from the head's start, as written */
        const uint16_t *keys = (const uint16_t *)cache->k + pmpd_kv_cache_index(cache, layer, kv_head, 0);
        for (i = 0; i < cache->head_dim; i++) {
            key[i] = pmpd_f16_to_f32(keys[pmpd_kv_key_at(pos, i, cache->head_dim)]);
            value[i] = pmpd_f16_to_f32(((const uint16_t *)cache->v)[base + i]);
        }
        break;
    }
    default:
        pmpd_kv_quantized_read(&cache->quantized, layer, pos, kv_head, key, value);
        break;
    }
}

PMPD_INTERNAL void pmpd_kv_cache_read_layer(const pmpd_kv_cache *cache, uint32_t layer, size_t n, float *keys,
                                            float *values)
{
    size_t pos;
    uint32_t head;
    for (pos = 0; pos < n; pos++)
        for (head = 0; head < cache->n_kv_heads; head++) {
            size_t at = pos * cache->kv_dim + (size_t)head * cache->head_dim;
            pmpd_kv_cache_read(cache, layer, pos, head, keys + at, values + at);
        }
}

PMPD_INTERNAL pmpd_status pmpd_kv_cache_attend_scratch_bytes(const pmpd_kv_cache *cache, size_t *bytes)
{
    size_t floats;
    if (pmpd_kv_quantized_handles(cache->type))
        return pmpd_kv_quantized_scratch_bytes(&cache->quantized, bytes);
    return pmpd_attn_exact_group_scratch_floats(cache->capacity, cache->group, cache->head_dim, &floats) &&
                   pmpd_checked_mul(floats, sizeof(float), bytes)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

PMPD_INTERNAL void pmpd_kv_cache_attend_group(const pmpd_kv_cache *cache, uint32_t layer, uint32_t kv_head,
                                              const float *q, uint32_t heads, size_t n_visible, void *scratch,
                                              float *out)
{
    pmpd_kv_rows keys, values;
    size_t base;
    if (pmpd_kv_quantized_handles(cache->type)) {
        pmpd_kv_quantized_attend(&cache->quantized, layer, kv_head, q, heads, n_visible, scratch, out);
        return;
    }
    /* A KV head's rows are consecutive: one stream each for K and V. */
    base = pmpd_kv_cache_index(cache, layer, kv_head, 0) * cache->element_size;
    keys.format = cache->type == PMPD_KV_F16 ? PMPD_KV_ROW_F16_KEY_BLOCKS : PMPD_KV_ROW_F32;
    values.format = cache->type == PMPD_KV_F16 ? PMPD_KV_ROW_F16 : PMPD_KV_ROW_F32;
    keys.row_bytes = values.row_bytes = cache->head_dim * cache->element_size;
    keys.data = (const unsigned char *)cache->k + base;
    values.data = (const unsigned char *)cache->v + base;
    pmpd_attn_exact_group(q, heads, cache->head_dim, &keys, &values, n_visible, (float *)scratch, out);
}
