/* PQ and uniform-integer storage for a session's KV cache. */
#include <string.h>

#include "pmpd_impl/kvcache/kv_quantized.h"

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/attention_partial.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/kvcache/uniform_quant.h"

int pmpd_kv_quantized_handles(uint32_t type)
{
    return type == PMPD_KV_PQ || type == PMPD_KV_INT8 || type == PMPD_KV_INT4;
}

static uint32_t kv_quantized_bits(uint32_t type)
{
    return type == PMPD_KV_INT8 ? 8 : 4;
}

static pmpd_status kv_quantized_find_codebooks(const pmpd_model *model, pmpd_pq_codebook_set *out)
{
    uint32_t i;
    for (i = 0; i < model->n_sections; i++)
        if (model->sections[i].kind == PMPD_SECTION_KV_CODEBOOKS &&
            model->sections[i].version == PMPD_PQ_SECTION_VERSION)
            return pmpd_pq_codebook_set_parse(model->sections[i].data, model->sections[i].size,
                                              model->info.head_dim, model->info.n_layers, out, NULL);
    return PMPD_ERR_FORMAT_MISSING;
}

pmpd_status pmpd_kv_quantized_init(pmpd_kv_quantized *q, pmpd_arena *arena, uint32_t type, const pmpd_model *model,
                                   size_t capacity, uint32_t window)
{
    const pmpd_model_info *info = &model->info;
    pmpd_pq_cache first;
    pmpd_status st;
    void *p;
    uint32_t layer;
    memset(q, 0, sizeof *q);
    q->type = type;
    q->n_layers = info->n_layers;
    q->n_kv_heads = info->n_kv_heads;
    q->head_dim = info->head_dim;
    q->group = info->n_heads / info->n_kv_heads;
    q->capacity = capacity;
    if (type == PMPD_KV_PQ) {
        if (capacity > UINT32_MAX)
            return PMPD_ERR_INVALID_ARGUMENT;
        window = window ? window : info->head_dim;
        window = window < capacity ? window : (uint32_t)capacity;
        q->window = window;
        if ((st = kv_quantized_find_codebooks(model, &q->codebooks)) != PMPD_OK ||
            (st = pmpd_arena_alloc_array(arena, info->n_layers, sizeof(pmpd_pq_cache), PMPD_ARENA_ALIGNMENT, &p)) !=
                PMPD_OK)
            return st;
        q->layers = (pmpd_pq_cache *)p;
        for (layer = 0; layer < info->n_layers; layer++) {
            pmpd_pq_codebook keys, values;
            pmpd_pq_cache shape, *cache = q->layers ? &q->layers[layer] : &shape;
            pmpd_pq_codebook_set_layer(&q->codebooks, layer, &keys, &values);
            /* One codebook pair for every layer: one copy of its tables. */
            st = pmpd_pq_cache_init_sharing(cache, &keys, &values, info->n_kv_heads, (uint32_t)capacity, window,
                                            layer > 0 && q->codebooks.n_books == 1 ? &first : NULL, arena);
            if (st != PMPD_OK)
                return st;
            if (layer == 0)
                first = *cache;
        }
        return PMPD_OK;
    }
    if (!pmpd_kv_quantized_handles(type))
        return PMPD_ERR_INVALID_ARGUMENT;
    q->row_bytes = pmpd_kv_uniform_row_bytes(info->head_dim, kv_quantized_bits(type));
    {
        size_t rows, bytes;
        if (!pmpd_checked_mul3(info->n_layers, capacity, info->n_kv_heads, &rows) ||
            !pmpd_checked_mul(rows, q->row_bytes, &bytes))
            return PMPD_ERR_OVERFLOW;
        if ((st = pmpd_arena_alloc(arena, bytes, PMPD_ARENA_ALIGNMENT, &p)) != PMPD_OK)
            return st;
        q->keys = (unsigned char *)p;
        if ((st = pmpd_arena_alloc(arena, bytes, PMPD_ARENA_ALIGNMENT, &p)) != PMPD_OK)
            return st;
        q->values = (unsigned char *)p;
    }
    return PMPD_OK;
}

void pmpd_kv_quantized_clear(pmpd_kv_quantized *q)
{
    uint32_t layer;
    if (q->layers)
        for (layer = 0; layer < q->n_layers; layer++)
            pmpd_pq_cache_reset(&q->layers[layer]);
}

/* Byte offset of the row (layer, pos, kv_head) in the INT modes. */
static size_t kv_quantized_row(const pmpd_kv_quantized *q, uint32_t layer, size_t pos, uint32_t kv_head)
{
    return (((size_t)layer * q->capacity + pos) * q->n_kv_heads + kv_head) * q->row_bytes;
}

void pmpd_kv_quantized_read(const pmpd_kv_quantized *q, uint32_t layer, size_t pos, uint32_t kv_head, float *key,
                            float *value)
{
    size_t row;
    if (q->type == PMPD_KV_PQ) {
        pmpd_pq_cache_read(&q->layers[layer], kv_head, pos, key, value);
        return;
    }
    row = kv_quantized_row(q, layer, pos, kv_head);
    pmpd_kv_uniform_decode(q->keys + row, q->head_dim, kv_quantized_bits(q->type), key);
    pmpd_kv_uniform_decode(q->values + row, q->head_dim, kv_quantized_bits(q->type), value);
}

void pmpd_kv_quantized_write(pmpd_kv_quantized *q, uint32_t layer, size_t pos, size_t n, const float *k,
                             const float *v)
{
    size_t kv_dim = (size_t)q->n_kv_heads * q->head_dim, i;
    uint32_t h;
    for (i = 0; i < n; i++) {
        if (q->type == PMPD_KV_PQ) {
            /* The session checks the context length first: this cannot be full. */
            (void)pmpd_pq_cache_append(&q->layers[layer], k + i * kv_dim, v + i * kv_dim);
            continue;
        }
        for (h = 0; h < q->n_kv_heads; h++) {
            size_t row = kv_quantized_row(q, layer, pos + i, h);
            pmpd_kv_uniform_encode(k + i * kv_dim + (size_t)h * q->head_dim, q->head_dim,
                                   kv_quantized_bits(q->type), q->keys + row);
            pmpd_kv_uniform_encode(v + i * kv_dim + (size_t)h * q->head_dim, q->head_dim,
                                   kv_quantized_bits(q->type), q->values + row);
        }
    }
}

pmpd_status pmpd_kv_quantized_scratch_bytes(const pmpd_kv_quantized *q, size_t *bytes)
{
    size_t floats;
    pmpd_status st;
    if (q->type == PMPD_KV_PQ) {
        /* Room for a whole group of query heads. */
        pmpd_pq_cache shape;
        memset(&shape, 0, sizeof shape);
        pmpd_pq_codebook_set_layer(&q->codebooks, 0, &shape.keys, &shape.values);
        shape.n_kv_heads = q->n_kv_heads;
        shape.head_dim = q->head_dim;
        shape.capacity = (uint32_t)q->capacity;
        shape.window = q->window;
        if ((st = pmpd_pq_attention_scratch_floats(&shape, q->n_kv_heads * q->group, &floats)) != PMPD_OK)
            return st;
    } else if (!pmpd_attn_exact_group_scratch_floats(q->capacity, q->group, q->head_dim, &floats)) {
        return PMPD_ERR_OVERFLOW;
    }
    return pmpd_checked_mul(floats, sizeof(float), bytes) ? PMPD_OK : PMPD_ERR_OVERFLOW;
}

void pmpd_kv_quantized_attend(const pmpd_kv_quantized *q, uint32_t layer, uint32_t kv_head, const float *query,
                              uint32_t heads, size_t n_visible, void *scratch, float *out)
{
    pmpd_kv_rows keys, values;
    if (q->type == PMPD_KV_PQ) {
        pmpd_pq_cache_attend_group(&q->layers[layer], kv_head, query, heads, n_visible, out, (float *)scratch);
        return;
    }
    keys.format = values.format = q->type == PMPD_KV_INT8 ? PMPD_KV_ROW_INT8 : PMPD_KV_ROW_INT4;
    keys.row_bytes = values.row_bytes = (size_t)q->n_kv_heads * q->row_bytes;
    keys.data = q->keys + kv_quantized_row(q, layer, 0, kv_head);
    values.data = q->values + kv_quantized_row(q, layer, 0, kv_head);
    pmpd_attn_exact_group(query, heads, q->head_dim, &keys, &values, n_visible, (float *)scratch, out);
}

size_t pmpd_kv_quantized_bytes_in_use(const pmpd_kv_quantized *q, size_t positions)
{
    size_t per_token, bytes;
    uint32_t layer;
    if (q->type != PMPD_KV_PQ)
        return positions * q->n_layers * q->n_kv_heads * 2 * q->row_bytes;
    per_token = pmpd_pq_cache_bytes_per_token(&q->codebooks.keys, &q->codebooks.values, q->n_kv_heads);
    bytes = q->n_layers * positions * per_token;
    /* The window and the codebook tables are allocated once, whatever the position. */
    if (q->layers)
        for (layer = 0; layer < q->n_layers; layer++)
            bytes += pmpd_pq_cache_fixed_bytes(&q->layers[layer]);
    return bytes;
}
