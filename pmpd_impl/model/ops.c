#include "pmpd_impl/model/ops.h"

#include <math.h>

PMPD_INTERNAL void pmpd_ops_rmsnorm(float *out, const float *x, const float *weight, size_t n, float eps)
{
    float ss = 0.0f, scale;
    size_t i;
    for (i = 0; i < n; i++)
        ss += x[i] * x[i];
    scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i < n; i++)
        out[i] = weight[i] * (scale * x[i]);
}

PMPD_INTERNAL void pmpd_ops_rope_angles(float *cos_out, float *sin_out, size_t pos, size_t head_dim,
                                        float theta, const float *divisors)
{
    size_t i;
    /* Two loops rather than a test per pair; the first is llama2.c's
     * arithmetic exactly. */
    if (!divisors) {
        for (i = 0; i < head_dim / 2; i++) {
            float frequency = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
            float angle = (float)pos * frequency;
            cos_out[i] = cosf(angle);
            sin_out[i] = sinf(angle);
        }
        return;
    }
    for (i = 0; i < head_dim / 2; i++) {
        float frequency = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
        /* llama.cpp divides the angle, not the frequency. */
        float angle = (float)pos * frequency / divisors[i];
        cos_out[i] = cosf(angle);
        sin_out[i] = sinf(angle);
    }
}

PMPD_INTERNAL void pmpd_ops_rope_apply(float *vec, size_t n_heads, size_t head_dim,
                                       const float *cos_in, const float *sin_in)
{
    size_t h, i;
    for (h = 0; h < n_heads; h++) {
        float *head = vec + h * head_dim;
        for (i = 0; i < head_dim / 2; i++) {
            float a = head[2 * i], b = head[2 * i + 1];
            head[2 * i] = a * cos_in[i] - b * sin_in[i];
            head[2 * i + 1] = a * sin_in[i] + b * cos_in[i];
        }
    }
}

PMPD_INTERNAL void pmpd_ops_rope_apply_neox(float *vec, size_t n_heads, size_t head_dim,
                                            const float *cos_in, const float *sin_in)
{
    size_t h, i, half = head_dim / 2;
    for (h = 0; h < n_heads; h++) {
        float *lo = vec + h * head_dim, *hi = lo + half;
        for (i = 0; i < half; i++) {
            float a = lo[i], b = hi[i];
            lo[i] = a * cos_in[i] - b * sin_in[i];
            hi[i] = a * sin_in[i] + b * cos_in[i];
        }
    }
}

PMPD_INTERNAL pmpd_ops_rope_fn pmpd_ops_rope_for(uint32_t rope_style)
{
    return rope_style == PMPD_ROPE_NEOX ? pmpd_ops_rope_apply_neox : pmpd_ops_rope_apply;
}

PMPD_INTERNAL void pmpd_ops_swiglu(float *gate, const float *up, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

PMPD_INTERNAL void pmpd_ops_add(float *acc, const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        acc[i] += x[i];
}
