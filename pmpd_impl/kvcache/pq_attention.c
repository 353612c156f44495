/*
 * Attention over the PQ cache (seed 001).  Per KV head, for its group of
 * query heads at once:
 *   history: LUT[s][c] = q_s . centroid_c (scaled), score_t = sum_s
 *     LUT[s][code_t,s]; for V, the softmax weights times each token's
 *     centroids (pmpd_pq_values: the seed sums weights into per-centroid
 *     bins and multiplies them by the codebook; the AVX2 and NEON kernels
 *     add into registers directly: 2x faster on Zen3, and per llvm-mca
 *     2.2x on Cortex-A55);
 *   window: exact attention over the full-precision recent tokens;
 * and the two parts merged by log-sum-exp.
 */
#include <math.h>

#include "pmpd_impl/kvcache/pq_cache.h"

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/attention_partial.h"
#include "pmpd_impl/kvcache/exact_attention.h"
#include "pmpd_impl/kvcache/pq_lut8.h"
#include "pmpd_impl/kvcache/pq_values_bf16.h"

/* Scratch, in floats, one after another: the transposed query group, the
 * key LUT, the value bins, two partial results, the byte tables' minimum,
 * step and offset and their bytes (where pq_lut8.h is used), the bfloat16 weights of
 * pq_values_bf16.h (where used), then the token scores (shared by the
 * history and the window, which run one after the other). */
typedef struct pq_attention_scratch {
    float *qt, *lut, *bins, *scores, *bf16;
    pmpd_attn_partial history, recent;
    pmpd_pq_lut8 lut8;
} pq_attention_scratch;

/* History tokens per pass (a multiple of PMPD_PQ_BLOCK): a pass's scores
 * (lanes floats a token, 32 KB) stay in L2 between the score, exponential
 * and value kernels instead of going to memory and back beside the codes
 * (the codes of a 32K context are 1 MB per KV head and kind, its scores
 * 512 KB).  The key tables are made once per head. */
#define PQ_ATTENTION_PASS 2048u

/* Each part starts on a 64-byte line: the kernels load the byte tables,
 * the scores and the bfloat16 weights a whole 512-bit vector at a time,
 * and split loads measured 1.7-2x slower for the key tables (Zen5). */
#define PQ_ATTENTION_ALIGN (64 / sizeof(float))

static int pq_attention_part(size_t floats, float **at, float **part, size_t *offset)
{
    size_t rounded = (floats + PQ_ATTENTION_ALIGN - 1) / PQ_ATTENTION_ALIGN * PQ_ATTENTION_ALIGN;
    if (rounded < floats || !pmpd_checked_add(*offset, rounded, offset))
        return 0;
    if (*at) {
        *part = *at;
        *at += rounded;
    }
    return 1;
}

static int pq_attention_layout(const pmpd_pq_cache *cache, uint32_t lanes, float *base,
                               pq_attention_scratch *out, size_t *total)
{
    size_t qt, lut, bins, partial, history_scores, recent_scores, scores, table = 0, offset = PQ_ATTENTION_ALIGN - 1;
    size_t dim = cache->head_dim, n_sub = cache->keys.layout.n_sub; /* table: n_sub x lanes x 256 bytes */
    /* The caller's scratch from its first 64-byte line (the extra line's
     * worth of floats counted in the total). */
    float *at = base ? base + (64 - (uintptr_t)base % 64) % 64 / sizeof(float) : NULL;
    float *lut8_minimum = NULL, *lut8_step = NULL, *lut8_offset = NULL, *lut8_table = NULL;
    pq_attention_scratch ignored;
    if (!out)
        out = &ignored;
    if (!pmpd_checked_mul(dim, lanes, &qt) ||
        !pmpd_checked_mul(pmpd_pq_codebook_floats(&cache->keys.layout) / cache->keys.layout.sub_dim, lanes, &lut) ||
        !pmpd_checked_mul(pmpd_pq_codebook_floats(&cache->values.layout) / cache->values.layout.sub_dim, lanes,
                          &bins) ||
        !pmpd_checked_mul(dim + 2, lanes, &partial) ||
        !pmpd_checked_mul(cache->capacity < PQ_ATTENTION_PASS ? cache->capacity : PQ_ATTENTION_PASS, lanes,
                          &history_scores) ||
        !pmpd_attn_exact_scratch_floats(cache->window, lanes, cache->head_dim, &recent_scores) ||
        (PMPD_PQ_USE_LUT8 && !pmpd_checked_mul3(n_sub, lanes, 256 / sizeof(float), &table)))
        return 0;
    scores = history_scores > recent_scores ? history_scores : recent_scores;
    if (!pq_attention_part(qt, &at, &out->qt, &offset) || !pq_attention_part(lut, &at, &out->lut, &offset) ||
        !pq_attention_part(bins, &at, &out->bins, &offset) ||
        !pq_attention_part(partial, &at, &out->history.max, &offset) ||
        !pq_attention_part(partial, &at, &out->recent.max, &offset))
        return 0;
    /* minimum [n_sub][lanes], step and offset [lanes], bytes [n_sub][lanes][256] */
    if (PMPD_PQ_USE_LUT8 && (!pq_attention_part((size_t)n_sub * lanes, &at, &lut8_minimum, &offset) ||
                             !pq_attention_part(lanes, &at, &lut8_step, &offset) ||
                             !pq_attention_part(lanes, &at, &lut8_offset, &offset) ||
                             !pq_attention_part(table, &at, &lut8_table, &offset)))
        return 0;
    if (!pq_attention_part(PMPD_PQ_USE_VALUES_BF16 ? PMPD_PQ_BF16_SCRATCH_FLOATS : 0, &at, &out->bf16, &offset) ||
        !pq_attention_part(scores, &at, &out->scores, &offset))
        return 0;
    *total = offset;
    if (base) {
        out->history.sum = out->history.max + lanes;
        out->history.acc = out->history.sum + lanes;
        out->recent.sum = out->recent.max + lanes;
        out->recent.acc = out->recent.sum + lanes;
        if (cache->key_tables)
            pmpd_pq_lut8_book_view(&cache->keys.layout, cache->key_tables, &out->lut8);
        out->lut8.minimum = lut8_minimum;
        out->lut8.step = lut8_step;
        out->lut8.offset = lut8_offset;
        out->lut8.table = (uint8_t *)lut8_table;
    }
    return 1;
}

pmpd_status pmpd_pq_attention_scratch_floats(const pmpd_pq_cache *cache, uint32_t n_heads, size_t *out)
{
    if (!cache || !out || n_heads == 0 || n_heads % cache->n_kv_heads != 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pq_attention_layout(cache, pmpd_kv_lanes(n_heads / cache->n_kv_heads), NULL, NULL, out)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

/* The history part of one KV head: codes of tokens [0, n), a pass at a
 * time, each pass's partial (in s->recent, free until the window's turn)
 * merged into s->history. */
static void pq_attention_history(const pmpd_pq_cache *cache, uint32_t kv_head, size_t n, uint32_t lanes,
                                 pq_attention_scratch *s)
{
    const pmpd_pq_layout *kl = &cache->keys.layout, *vl = &cache->values.layout;
    const uint8_t *key_codes = pmpd_pq_cache_head_codes(cache, cache->key_codes, kl, kv_head);
    const uint8_t *value_codes = pmpd_pq_cache_head_codes(cache, cache->value_codes, vl, kv_head);
    pmpd_attn_partial *pass = &s->recent;
    size_t first;
    pmpd_attn_partial_clear(&s->history, lanes, cache->head_dim);
    if (n == 0)
        return;
#if PMPD_PQ_USE_LUT8
    if (cache->key_tables)
        PMPD_PQ_LUT8_KERNEL(pmpd_pq_lut8_build)(&cache->keys, s->qt, lanes, &s->lut8);
    else
#endif
        PMPD_KV_KERNEL(pmpd_pq_lut)(&cache->keys, s->qt, lanes, s->lut);
    for (first = 0; first < n; first += PQ_ATTENTION_PASS) {
        const size_t count = n - first < PQ_ATTENTION_PASS ? n - first : PQ_ATTENTION_PASS;
        const uint8_t *keys = key_codes + first * kl->code_bytes, *values = value_codes + first * vl->code_bytes;
        pmpd_attn_partial_clear(pass, lanes, cache->head_dim);
#if PMPD_PQ_USE_LUT8
        if (cache->key_tables)
            PMPD_PQ_LUT8_KERNEL(pmpd_pq_lut8_scores)(&s->lut8, kl, lanes, keys, count, s->scores, pass->max);
        else
#endif
            PMPD_KV_KERNEL(pmpd_pq_scores)(s->lut, kl, lanes, keys, count, s->scores, pass->max);
        PMPD_KV_EXP_KERNEL(s->scores, lanes, count, pass->max, pass->sum);
#if PMPD_PQ_USE_VALUES_BF16
        if (cache->value_planes)
            PMPD_PQ_VALUES_BF16_KERNEL(pmpd_pq_values_bf16)(s->scores, lanes, vl, cache->value_planes, values, count,
                                                            s->bf16, pass->acc);
        else
#endif
            PMPD_KV_KERNEL(pmpd_pq_values)(s->scores, lanes, &cache->values, values, count, s->bins, pass->acc);
        pmpd_attn_partial_merge(&s->history, pass, lanes, cache->head_dim);
    }
}

void pmpd_pq_cache_attend_group(const pmpd_pq_cache *cache, uint32_t kv_head, const float *q, uint32_t group,
                                size_t length, float *out, float *scratch)
{
    size_t dim = cache->head_dim, total, history, recent;
    uint32_t lanes = pmpd_kv_lanes(group);
    pmpd_kv_rows keys, values;
    pq_attention_scratch s;
    pq_attention_layout(cache, lanes, scratch, &s, &total);
    history = length < cache->n_coded ? length : cache->n_coded;
    recent = length - history;
    keys.format = values.format = PMPD_KV_ROW_F32;
    keys.row_bytes = values.row_bytes = dim * sizeof(float);
    keys.data = (const unsigned char *)(cache->key_recent + (size_t)kv_head * cache->window * dim);
    values.data = (const unsigned char *)(cache->value_recent + (size_t)kv_head * cache->window * dim);
    pmpd_attn_transpose_query(q, dim, group, cache->head_dim, 1.0f / sqrtf((float)dim), s.qt);
    pq_attention_history(cache, kv_head, history, lanes, &s);
    pmpd_attn_exact_partial(s.qt, lanes, cache->head_dim, &keys, &values, recent, s.scores, &s.recent);
    pmpd_attn_partial_merge(&s.history, &s.recent, lanes, cache->head_dim);
    pmpd_attn_partial_finish(&s.history, group, cache->head_dim, out, dim);
}

pmpd_status pmpd_pq_cache_attend(const pmpd_pq_cache *cache, const float *q, uint32_t n_heads, size_t length,
                                 float *out, float *scratch)
{
    size_t total;
    uint32_t group, kv_head;
    if (!cache || !q || !out || !scratch || n_heads == 0 || n_heads % cache->n_kv_heads != 0 ||
        length > (size_t)cache->n_coded + cache->n_recent)
        return PMPD_ERR_INVALID_ARGUMENT;
    group = n_heads / cache->n_kv_heads;
    if (!pq_attention_layout(cache, pmpd_kv_lanes(group), NULL, NULL, &total))
        return PMPD_ERR_OVERFLOW;
    for (kv_head = 0; kv_head < cache->n_kv_heads; kv_head++) {
        size_t first = (size_t)kv_head * group * cache->head_dim;
        pmpd_pq_cache_attend_group(cache, kv_head, q + first, group, length, out + first, scratch);
    }
    return PMPD_OK;
}
