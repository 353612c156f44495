/* The synthetic weights: normal draws from splitmix64 through Box-Muller.
 *
 * One 64-bit output gives both uniforms of a pair (32 bits each), and the
 * transform runs in float: a billion weights (TinyLlama's shape) then take
 * seconds, not a minute.  The same seed gives the same weights on any run
 * with the same libm. */
#include "pmpd_impl/offline/synth/synth.h"

#include <math.h>

#include "pmpd_impl/core/splitmix.h"

PMPD_INTERNAL uint64_t pmpd_synth_stream(uint64_t seed, uint32_t index)
{
    /* splitmix64 mixes nearby states into unrelated outputs, so a state per
     * (seed, index) pair is one step from their sum with an odd stride. */
    uint64_t state = seed + 0xD1B54A32D192ED03ull * ((uint64_t)index + 1);
    return pmpd_splitmix64_next(&state);
}

PMPD_INTERNAL void pmpd_synth_normal(uint64_t *state, float std, float *out, size_t n)
{
    const float two_pi = 6.28318530717958647692f;
    size_t i;
    for (i = 0; i < n; i += 2) {
        uint64_t bits = pmpd_splitmix64_next(state);
        /* u1 in (0, 1] keeps the logarithm finite; u2 in [0, 1). */
        float u1 = ((float)(uint32_t)(bits >> 32) + 1.0f) * (1.0f / 4294967296.0f);
        float u2 = (float)(uint32_t)bits * (1.0f / 4294967296.0f);
        float radius = std * sqrtf(-2.0f * logf(u1)), angle = two_pi * u2;
        out[i] = radius * cosf(angle);
        if (i + 1 < n)
            out[i + 1] = radius * sinf(angle);
    }
}
