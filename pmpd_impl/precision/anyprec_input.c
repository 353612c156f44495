/* Activations for the integer any-precision GEMV: int8 in groups of 32, one
 * scale per group, so a single outlier only coarsens its own group. */
#include <math.h>

#include "pmpd_impl/precision/anyprec.h"

PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale)
{
    uint32_t padded = pmpd_anyprec_padded_cols(cols), g, c;
    for (g = 0; g < padded; g += PMPD_ANYPREC_GROUP) {
        uint32_t end = g + PMPD_ANYPREC_GROUP < cols ? g + PMPD_ANYPREC_GROUP : cols;
        float amax = 0.0f, inv;
        for (c = g; c < end; c++)
            amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
        xscale[g / PMPD_ANYPREC_GROUP] = amax / 127.0f;
        inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (c = g; c < g + PMPD_ANYPREC_GROUP; c++)
            xq[c] = c < end ? (int8_t)lrintf(x[c] * inv) : 0;
    }
}
