/* Activations for the integer any-precision GEMV: int8 in groups of 32, one
 * scale per group, so a single outlier only coarsens its own group.  A
 * group's scale is rounded up to a whole number of steps of its superblock's
 * unit (1/4096 of the largest scale there): at most 1/m coarser for a group
 * m steps wide, and it lets the SIMD kernels weigh groups by integer
 * multiplies and convert to float once per 256 columns. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/weights/anyprec/anyprec.h"

static float anyprec_input_amax(const float *x, uint32_t begin, uint32_t end)
{
    float amax = 0.0f;
    uint32_t c;
    for (c = begin; c < end; c++)
        amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
    return amax;
}

PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale)
{
    uint32_t padded = pmpd_anyprec_padded_cols(cols), s, g, c;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER) {
        uint32_t s_end = s + PMPD_ANYPREC_SUPER < cols ? s + PMPD_ANYPREC_SUPER : cols;
        float unit = anyprec_input_amax(x, s, s_end) / (127.0f * PMPD_ANYPREC_UNIT_STEPS);
        for (g = s; g < padded && g < s + PMPD_ANYPREC_SUPER; g += PMPD_ANYPREC_GROUP) {
            uint32_t end = g + PMPD_ANYPREC_GROUP < cols ? g + PMPD_ANYPREC_GROUP : cols;
            float amax = anyprec_input_amax(x, g, end), steps, inv;
            /* Whole steps, at least one, and never past the unit's range. */
            steps = unit > 0.0f ? ceilf(amax / 127.0f / unit) : 0.0f;
            steps = steps < 1.0f ? 1.0f : steps > PMPD_ANYPREC_UNIT_STEPS ? PMPD_ANYPREC_UNIT_STEPS : steps;
            xscale[g / PMPD_ANYPREC_GROUP] = steps * unit;
            inv = unit > 0.0f ? 1.0f / (steps * unit) : 0.0f;
            for (c = g; c < g + PMPD_ANYPREC_GROUP; c++) {
                float v = c < end ? x[c] * inv : 0.0f;
                xq[c] = (int8_t)lrintf(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
            }
        }
    }
}

PMPD_INTERNAL void pmpd_anyprec_prepare_units(const int8_t *xq, const float *xscale, uint32_t cols,
                                              pmpd_anyprec_units *u)
{
    uint32_t groups = pmpd_anyprec_padded_cols(cols) / PMPD_ANYPREC_GROUP, s, g, j;
    uint32_t per_super = PMPD_ANYPREC_SUPER / PMPD_ANYPREC_GROUP, supers = (groups + per_super - 1) / per_super;
    double sum = 0.0;
    memset(u->mult, 0, supers * per_super * sizeof u->mult[0]);
    for (s = 0; s < supers; s++) {
        float largest = 0.0f;
        for (g = s * per_super; g < groups && g < (s + 1) * per_super; g++)
            largest = xscale[g] > largest ? xscale[g] : largest;
        u->unit[s] = largest / PMPD_ANYPREC_UNIT_STEPS;
        for (g = s * per_super; g < groups && g < (s + 1) * per_super; g++) {
            int32_t m = u->unit[s] > 0.0f ? (int32_t)lrintf(xscale[g] / u->unit[s]) : 0, dot = 0;
            u->mult[g] = m | m << 16;
            for (j = 0; j < PMPD_ANYPREC_GROUP; j++)
                dot += xq[g * PMPD_ANYPREC_GROUP + j];
            sum += (double)dot * xscale[g];
        }
    }
    u->sum = (float)sum;
    memset(u->tail, 0, sizeof u->tail);
    s = cols / PMPD_ANYPREC_SUPER * PMPD_ANYPREC_SUPER;
    memcpy(u->tail, xq + s, groups * PMPD_ANYPREC_GROUP - s);
}
