/* Unnormalized attention parts and their log-sum-exp merge. */
#include <math.h>

#include "pmpd_impl/kvcache/attention_partial.h"

void pmpd_attn_partial_clear(pmpd_attn_partial *p, uint32_t lanes, uint32_t dim)
{
    size_t i;
    for (i = 0; i < lanes; i++) {
        p->max[i] = -INFINITY;
        p->sum[i] = 0.0f;
    }
    for (i = 0; i < (size_t)lanes * dim; i++)
        p->acc[i] = 0.0f;
}

void pmpd_attn_partial_merge(pmpd_attn_partial *a, const pmpd_attn_partial *b, uint32_t lanes, uint32_t dim)
{
    uint32_t l, d;
    for (l = 0; l < lanes; l++) {
        float m, scale_a, scale_b;
        if (b->max[l] == -INFINITY)
            continue;
        if (a->max[l] == -INFINITY) {
            scale_a = 0.0f;
            scale_b = 1.0f;
            m = b->max[l];
        } else {
            m = a->max[l] > b->max[l] ? a->max[l] : b->max[l];
            scale_a = expf(a->max[l] - m);
            scale_b = expf(b->max[l] - m);
        }
        a->max[l] = m;
        a->sum[l] = a->sum[l] * scale_a + b->sum[l] * scale_b;
        for (d = 0; d < dim; d++)
            a->acc[d * lanes + l] = a->acc[d * lanes + l] * scale_a + b->acc[d * lanes + l] * scale_b;
    }
}

void pmpd_attn_partial_finish(const pmpd_attn_partial *p, uint32_t heads, uint32_t dim, float *out,
                              size_t out_stride)
{
    uint32_t lanes = pmpd_kv_lanes(heads), h, d;
    for (h = 0; h < heads; h++) {
        float inv = p->sum[h] > 0.0f ? 1.0f / p->sum[h] : 0.0f;
        for (d = 0; d < dim; d++)
            out[h * out_stride + d] = p->acc[d * lanes + h] * inv;
    }
}

void pmpd_attn_transpose_query(const float *q, size_t q_stride, uint32_t heads, uint32_t dim, float scale,
                               float *qt)
{
    uint32_t lanes = pmpd_kv_lanes(heads), h, d;
    for (d = 0; d < dim; d++)
        for (h = 0; h < lanes; h++)
            qt[d * lanes + h] = h < heads ? scale * q[h * q_stride + d] : 0.0f;
}
