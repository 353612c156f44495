/* Activations for the integer any-precision GEMV: int8 with one scale per
 * 256-column superblock (max |x| / 127 there), written out per group of 32
 * so the reference kernel stays a plain per-group product.  One scale per
 * superblock lets the SIMD kernels add a superblock's products in integers
 * and convert once; the KL it costs on pycode21M is below run-to-run noise
 * (anyprec.h). */
#include <math.h>
#include <string.h>

#include "pmpd_impl/weights/anyprec/anyprec.h"

PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale)
{
    uint32_t padded = pmpd_anyprec_padded_cols(cols), s, c;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER) {
        uint32_t end = s + PMPD_ANYPREC_SUPER < cols ? s + PMPD_ANYPREC_SUPER : cols;
        uint32_t padded_end = s + PMPD_ANYPREC_SUPER < padded ? s + PMPD_ANYPREC_SUPER : padded;
        float amax = 0.0f, scale, inv;
        for (c = s; c < end; c++)
            amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
        scale = amax / 127.0f;
        inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (c = s; c < padded_end; c++) {
            float v = c < end ? x[c] * inv : 0.0f;
            xq[c] = (int8_t)lrintf(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
        for (c = s; c < padded_end; c += PMPD_ANYPREC_GROUP)
            xscale[c / PMPD_ANYPREC_GROUP] = scale;
    }
}

PMPD_INTERNAL void pmpd_anyprec_prepare_units(const int8_t *xq, const float *xscale, uint32_t cols,
                                              pmpd_anyprec_units *u)
{
    uint32_t padded = pmpd_anyprec_padded_cols(cols), s, c;
    double sum = 0.0;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER) {
        uint32_t end = s + PMPD_ANYPREC_SUPER < padded ? s + PMPD_ANYPREC_SUPER : padded;
        int32_t dot = 0;
        for (c = s; c < end; c++)
            dot += xq[c];
        u->scale[s / PMPD_ANYPREC_SUPER] = xscale[s / PMPD_ANYPREC_GROUP];
        sum += (double)dot * xscale[s / PMPD_ANYPREC_GROUP];
    }
    u->sum = (float)sum;
    memset(u->tail, 0, sizeof u->tail);
    s = cols / PMPD_ANYPREC_SUPER * PMPD_ANYPREC_SUPER;
    memcpy(u->tail, xq + s, padded - s);
}

PMPD_INTERNAL void pmpd_anyprec_quantize_tokens(const float *x, size_t n, uint32_t cols, int8_t *xq, float *xscale,
                                                float *xsum)
{
    size_t stride = pmpd_anyprec_token_stride(cols), padded = pmpd_anyprec_padded_cols(cols), t, c;
    for (t = 0; t < n; t++) {
        int8_t *q = xq + t * stride;
        float *scale = xscale + t * (stride / PMPD_ANYPREC_GROUP);
        double sum = 0.0;
        pmpd_anyprec_quantize_input(x + t * cols, cols, q, scale);
        memset(q + padded, 0, stride - padded);
        for (c = 0; c < padded; c++)
            sum += (double)q[c] * scale[c / PMPD_ANYPREC_GROUP];
        xsum[t] = (float)sum;
    }
}
