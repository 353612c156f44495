/* Exact attention over K/V rows of any stored format (see exact_attention.h). */
#include "pmpd_impl/kvcache/exact_attention.h"

#include <math.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/kvcache/attention_kernels.h"
#include "pmpd_impl/kvcache/uniform_quant.h"

int pmpd_attn_exact_scratch_floats(size_t n, uint32_t lanes, uint32_t dim, size_t *out)
{
    size_t scores, block;
    return pmpd_checked_mul(n, lanes, &scores) && pmpd_checked_mul(PMPD_KV_EXACT_BLOCK, dim, &block) &&
           pmpd_checked_add(scores, block, out);
}

/* Rows [first, first + count) of a uniformly quantized cache, decoded into
 * block (f32 and f16 rows go to the kernels as they are stored). */
static const float *exact_rows_decoded(const pmpd_kv_rows *rows, uint32_t dim, size_t first, size_t count,
                                       float *block)
{
    const unsigned char *src = rows->data + first * rows->row_bytes;
    unsigned bits = rows->format == PMPD_KV_ROW_INT8 ? 8 : rows->format == PMPD_KV_ROW_INT4 ? 4 : 2;
    size_t i;
    for (i = 0; i < count; i++, src += rows->row_bytes)
        pmpd_kv_uniform_decode(src, dim, bits, block + i * dim);
    return block;
}

static void exact_scores(const float *qt, uint32_t lanes, uint32_t dim, const pmpd_kv_rows *keys, size_t first,
                         size_t count, float *block, float *scores, float *max)
{
    const unsigned char *src = keys->data + first * keys->row_bytes;
    if (keys->format == PMPD_KV_ROW_F32)
        PMPD_KV_ROW_KERNEL(pmpd_kv_row_scores)(qt, lanes, dim, (const float *)(const void *)src,
                                           keys->row_bytes / sizeof(float), count, scores, max);
    else if (keys->format == PMPD_KV_ROW_F16_KEY_BLOCKS)
        PMPD_KV_ROW_KERNEL(pmpd_kv_block_scores_f16)(qt, lanes, dim, (const uint16_t *)(const void *)src, count,
                                                 scores, max);
    else
        PMPD_KV_ROW_KERNEL(pmpd_kv_row_scores)(qt, lanes, dim, exact_rows_decoded(keys, dim, first, count, block), dim,
                                           count, scores, max);
}

static void exact_accumulate(const float *weights, uint32_t lanes, uint32_t dim, const pmpd_kv_rows *values,
                             size_t first, size_t count, float *block, float *acc)
{
    const unsigned char *src = values->data + first * values->row_bytes;
    if (values->format == PMPD_KV_ROW_F32)
        PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate)(weights, lanes, dim, (const float *)(const void *)src,
                                               values->row_bytes / sizeof(float), count, acc);
    else if (values->format == PMPD_KV_ROW_F16)
        PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate_f16)(weights, lanes, dim, (const uint16_t *)(const void *)src,
                                                   values->row_bytes / sizeof(uint16_t), count, acc);
    else
        PMPD_KV_ROW_KERNEL(pmpd_kv_row_accumulate)(weights, lanes, dim, exact_rows_decoded(values, dim, first, count, block),
                                               dim, count, acc);
}

/* Rows per kernel call: f32 and f16 rows go to the kernels in one call;
 * quantized rows are decoded a block at a time into the scratch. */
static size_t exact_rows_per_call(const pmpd_kv_rows *rows, size_t n)
{
    return rows->format == PMPD_KV_ROW_F32 || rows->format == PMPD_KV_ROW_F16 ||
                   rows->format == PMPD_KV_ROW_F16_KEY_BLOCKS
               ? n
               : PMPD_KV_EXACT_BLOCK;
}

void pmpd_attn_exact_partial(const float *qt, uint32_t lanes, uint32_t dim, const pmpd_kv_rows *keys,
                             const pmpd_kv_rows *values, size_t n, float *scratch, pmpd_attn_partial *out)
{
    float *scores = scratch, *block = scratch + n * lanes;
    size_t step = exact_rows_per_call(keys, n), first;
    pmpd_attn_partial_clear(out, lanes, dim);
    if (n == 0)
        return;
    for (first = 0; first < n; first += step) {
        size_t count = n - first < step ? n - first : step;
        exact_scores(qt, lanes, dim, keys, first, count, block, scores + first * lanes, out->max);
    }
    PMPD_KV_EXP_KERNEL(scores, lanes, n, out->max, out->sum);
    step = exact_rows_per_call(values, n);
    for (first = 0; first < n; first += step) {
        size_t count = n - first < step ? n - first : step;
        exact_accumulate(scores + first * lanes, lanes, dim, values, first, count, block, out->acc);
    }
}

/* Rows of one pass of pmpd_attn_exact_group: their scores stay in L1/L2
 * while the pass reads K, exponentiates and reads V, and the scratch no
 * longer grows with the context.  A multiple of the key blocks. */
#define EXACT_GROUP_CHUNK 512
typedef char exact_chunk_whole_key_blocks[EXACT_GROUP_CHUNK % PMPD_KV_KEY_BLOCK == 0 ? 1 : -1];

/* Scratch layout: transposed query [dim][lanes], the running and the
 * chunk's partial results (max, sum, acc each), then
 * pmpd_attn_exact_partial's own scratch for one chunk. */
int pmpd_attn_exact_group_scratch_floats(size_t n, uint32_t max_heads, uint32_t dim, size_t *out)
{
    size_t exact, lanes = pmpd_kv_lanes(max_heads);
    size_t rows = n < EXACT_GROUP_CHUNK ? n : EXACT_GROUP_CHUNK;
    return pmpd_attn_exact_scratch_floats(rows, (uint32_t)lanes, dim, &exact) &&
           pmpd_checked_add(exact, lanes * (3 * (size_t)dim + 4), out);
}

static float *exact_group_partial(float *at, uint32_t lanes, uint32_t dim, pmpd_attn_partial *p)
{
    p->max = at;
    p->sum = p->max + lanes;
    p->acc = p->sum + lanes;
    return p->acc + (size_t)dim * lanes;
}

void pmpd_attn_exact_group(const float *query, uint32_t heads, uint32_t dim, const pmpd_kv_rows *keys,
                           const pmpd_kv_rows *values, size_t n, float *scratch, float *out)
{
    uint32_t lanes = pmpd_kv_lanes(heads);
    pmpd_attn_partial total, chunk;
    float *rest = exact_group_partial(scratch + (size_t)dim * lanes, lanes, dim, &total);
    size_t first;
    rest = exact_group_partial(rest, lanes, dim, &chunk);
    pmpd_attn_transpose_query(query, dim, heads, dim, 1.0f / sqrtf((float)dim), scratch);
    pmpd_attn_partial_clear(&total, lanes, dim);
    for (first = 0; first < n; first += EXACT_GROUP_CHUNK) {
        size_t count = n - first < EXACT_GROUP_CHUNK ? n - first : EXACT_GROUP_CHUNK;
        pmpd_kv_rows k = *keys, v = *values;
        k.data += first * k.row_bytes;
        v.data += first * v.row_bytes;
        pmpd_attn_exact_partial(scratch, lanes, dim, &k, &v, count, rest, &chunk);
        pmpd_attn_partial_merge(&total, &chunk, lanes, dim);
    }
    pmpd_attn_partial_finish(&total, heads, dim, out, dim);
}

#undef EXACT_GROUP_CHUNK
