#include "pmpd_impl/model/kv_cache.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/model/f16.h"

PMPD_INTERNAL pmpd_status pmpd_kv_cache_init(pmpd_kv_cache *cache, pmpd_arena *arena, uint32_t type,
                                             uint32_t n_layers, uint32_t n_kv_heads,
                                             uint32_t head_dim, size_t capacity, const pmpd_model *model,
                                             uint32_t pq_window)
{
    size_t kv_dim, bytes;
    pmpd_status st;
    if (pmpd_kv_quantized_handles(type)) {
        cache->type = type;
        cache->n_layers = n_layers;
        cache->n_kv_heads = n_kv_heads;
        cache->head_dim = head_dim;
        cache->kv_dim = (size_t)n_kv_heads * head_dim;
        cache->capacity = capacity;
        cache->element_size = 0;
        cache->k = cache->v = NULL;
        return pmpd_kv_quantized_init(&cache->quantized, arena, type, model, capacity, pq_window);
    }
    switch (type) {
    case PMPD_KV_F32: cache->element_size = sizeof(float); break;
    case PMPD_KV_F16: cache->element_size = sizeof(uint16_t); break;
    default: return PMPD_ERR_INVALID_ARGUMENT;
    }
    if (!pmpd_checked_mul(n_kv_heads, head_dim, &kv_dim) ||
        !pmpd_checked_mul3(n_layers, capacity, kv_dim, &bytes) ||
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

/* Element offset of (layer, pos, 0). */
static size_t pmpd_kv_cache_index(const pmpd_kv_cache *cache, uint32_t layer, size_t pos)
{
    return ((size_t)layer * cache->capacity + pos) * cache->kv_dim;
}

PMPD_INTERNAL void pmpd_kv_cache_write(pmpd_kv_cache *cache, uint32_t layer, size_t pos, size_t n,
                                       const float *k, const float *v)
{
    size_t base = pmpd_kv_cache_index(cache, layer, pos), count = n * cache->kv_dim, i;
    switch (cache->type) {
    case PMPD_KV_F32:
        memcpy((float *)cache->k + base, k, count * sizeof(float));
        memcpy((float *)cache->v + base, v, count * sizeof(float));
        break;
    case PMPD_KV_F16:
        for (i = 0; i < count; i++) {
            ((uint16_t *)cache->k)[base + i] = pmpd_f32_to_f16(k[i]);
            ((uint16_t *)cache->v)[base + i] = pmpd_f32_to_f16(v[i]);
        }
        break;
    default:
        pmpd_kv_quantized_write(&cache->quantized, layer, pos, n, k, v);
        break;
    }
}

PMPD_INTERNAL void pmpd_kv_cache_read(const pmpd_kv_cache *cache, uint32_t layer, size_t pos, uint32_t kv_head,
                                      float *key, float *value)
{
    size_t base = pmpd_kv_cache_index(cache, layer, pos) + (size_t)kv_head * cache->head_dim, i;
    switch (cache->type) {
    case PMPD_KV_F32:
        memcpy(key, (const float *)cache->k + base, cache->head_dim * sizeof(float));
        memcpy(value, (const float *)cache->v + base, cache->head_dim * sizeof(float));
        break;
    case PMPD_KV_F16:
        for (i = 0; i < cache->head_dim; i++) {
            key[i] = pmpd_f16_to_f32(((const uint16_t *)cache->k)[base + i]);
            value[i] = pmpd_f16_to_f32(((const uint16_t *)cache->v)[base + i]);
        }
        break;
    default:
        pmpd_kv_quantized_read(&cache->quantized, layer, pos, kv_head, key, value);
        break;
    }
}

PMPD_INTERNAL pmpd_status pmpd_kv_cache_attend_scratch_bytes(const pmpd_kv_cache *cache, size_t *bytes)
{
    size_t floats;
    if (pmpd_kv_quantized_handles(cache->type))
        return pmpd_kv_quantized_scratch_bytes(&cache->quantized, bytes);
    /* One score per visible position, then one row widened from f16. */
    return pmpd_checked_add(cache->capacity, cache->head_dim, &floats) &&
                   pmpd_checked_mul(floats, sizeof(float), bytes)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

/* The head_dim numbers stored at element offset index, as floats: in
 * place for f32, widened into row for f16. */
static const float *pmpd_kv_cache_row(const pmpd_kv_cache *cache, const void *data, size_t index, float *row)
{
    size_t i;
    if (cache->type != PMPD_KV_F16)
        return (const float *)data + index;
    for (i = 0; i < cache->head_dim; i++)
        row[i] = pmpd_f16_to_f32(((const uint16_t *)data)[index + i]);
    return row;
}

PMPD_INTERNAL void pmpd_kv_cache_attend(const pmpd_kv_cache *cache, uint32_t layer, uint32_t kv_head,
                                        const float *q, size_t n_visible, void *scratch, float *out)
{
    float *scores = (float *)scratch, *widened = scores + cache->capacity;
    size_t d = cache->head_dim, head_offset = (size_t)kv_head * d, t, i;
    size_t base = pmpd_kv_cache_index(cache, layer, 0) + head_offset;
    float scale = sqrtf((float)d), max_score, sum = 0.0f;
    if (pmpd_kv_quantized_handles(cache->type)) {
        pmpd_kv_quantized_attend(&cache->quantized, layer, kv_head, q, 1, n_visible, scratch, out);
        return;
    }
    for (t = 0; t < n_visible; t++) {
        const float *k = pmpd_kv_cache_row(cache, cache->k, base + t * cache->kv_dim, widened);
        float dot = 0.0f;
        for (i = 0; i < d; i++)
            dot += q[i] * k[i];
        scores[t] = dot / scale;
    }
    max_score = scores[0];
    for (t = 1; t < n_visible; t++)
        if (scores[t] > max_score)
            max_score = scores[t];
    for (t = 0; t < n_visible; t++) {
        scores[t] = expf(scores[t] - max_score);
        sum += scores[t];
    }
    for (i = 0; i < d; i++)
        out[i] = 0.0f;
    for (t = 0; t < n_visible; t++) {
        const float *v = pmpd_kv_cache_row(cache, cache->v, base + t * cache->kv_dim, widened);
        float weight = scores[t] / sum;
        for (i = 0; i < d; i++)
            out[i] += weight * v[i];
    }
}

PMPD_INTERNAL void pmpd_kv_cache_attend_group(const pmpd_kv_cache *cache, uint32_t layer, uint32_t kv_head,
                                              const float *q, uint32_t heads, size_t n_visible, void *scratch,
                                              float *out)
{
    uint32_t h;
    if (pmpd_kv_quantized_handles(cache->type)) {
        pmpd_kv_quantized_attend(&cache->quantized, layer, kv_head, q, heads, n_visible, scratch, out);
        return;
    }
    for (h = 0; h < heads; h++)
        pmpd_kv_cache_attend(cache, layer, kv_head, q + (size_t)h * cache->head_dim, n_visible, scratch,
                             out + (size_t)h * cache->head_dim);
}
