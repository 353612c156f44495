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

/* Rows [first, first + count) as f32: in place for f32 storage, otherwise
 * widened into block.  *stride receives the distance between rows. */
static const float *exact_rows_as_f32(const pmpd_kv_rows *rows, uint32_t dim, size_t first, size_t count,
                                      float *block, size_t *stride)
{
    const unsigned char *src = rows->data + first * rows->row_bytes;
    size_t i;
    if (rows->format == PMPD_KV_ROW_F32) {
        *stride = rows->row_bytes / sizeof(float);
        return (const float *)(const void *)src;
    }
    *stride = dim;
    for (i = 0; i < count; i++, src += rows->row_bytes) {
        switch (rows->format) {
        case PMPD_KV_ROW_F16:
            PMPD_KV_KERNEL(pmpd_kv_f16_to_f32)((const uint16_t *)(const void *)src, dim, block + i * dim);
            break;
        case PMPD_KV_ROW_INT8:
            pmpd_kv_uniform_decode(src, dim, 8, block + i * dim);
            break;
        case PMPD_KV_ROW_INT4:
            pmpd_kv_uniform_decode(src, dim, 4, block + i * dim);
            break;
        case PMPD_KV_ROW_INT2:
        default:
            pmpd_kv_uniform_decode(src, dim, 2, block + i * dim);
            break;
        }
    }
    return block;
}

void pmpd_attn_exact_partial(const float *qt, uint32_t lanes, uint32_t dim, const pmpd_kv_rows *keys,
                             const pmpd_kv_rows *values, size_t n, float *scratch, pmpd_attn_partial *out)
{
    float *scores = scratch, *block = scratch + n * lanes;
    size_t first;
    pmpd_attn_partial_clear(out, lanes, dim);
    if (n == 0)
        return;
    for (first = 0; first < n; first += PMPD_KV_EXACT_BLOCK) {
        size_t count = n - first < PMPD_KV_EXACT_BLOCK ? n - first : PMPD_KV_EXACT_BLOCK, stride;
        const float *rows = exact_rows_as_f32(keys, dim, first, count, block, &stride);
        PMPD_KV_KERNEL(pmpd_kv_row_scores)(qt, lanes, dim, rows, stride, count, scores + first * lanes, out->max);
    }
    PMPD_KV_KERNEL(pmpd_kv_exp)(scores, lanes, n, out->max, out->sum);
    for (first = 0; first < n; first += PMPD_KV_EXACT_BLOCK) {
        size_t count = n - first < PMPD_KV_EXACT_BLOCK ? n - first : PMPD_KV_EXACT_BLOCK, stride;
        const float *rows = exact_rows_as_f32(values, dim, first, count, block, &stride);
        PMPD_KV_KERNEL(pmpd_kv_row_accumulate)(scores + first * lanes, lanes, dim, rows, stride, count, out->acc);
    }
}

/* Rows of one pass of pmpd_attn_exact_group: their scores stay in L1/L2
 * while the pass reads K, exponentiates and reads V, and the scratch no
 * longer grows with the context. */
#define EXACT_GROUP_CHUNK 512

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
