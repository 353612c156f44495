/* Exact attention over K/V rows of any stored format (see exact_attention.h). */
#include "pmpd_impl/kvcache/exact_attention.h"

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
