/* IEEE binary16 conversions for the importers and writer (offline). */
#ifndef PMPD_OFFLINE_FORMAT_HALF_H
#define PMPD_OFFLINE_FORMAT_HALF_H

#include <math.h>
#include <stdint.h>

static inline float pmpd_half_to_float(uint16_t h)
{
    int exponent = (h >> 10) & 0x1F;
    float magnitude, mantissa = (float)(h & 0x3FF);
    if (exponent == 0x1F)
        magnitude = mantissa != 0.0f ? NAN : INFINITY;
    else if (exponent == 0)
        magnitude = ldexpf(mantissa, -24);
    else
        magnitude = ldexpf(mantissa + 1024.0f, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

/* Round to nearest even; overflow gives infinity. */
static inline uint16_t pmpd_float_to_half(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    int exponent;
    float scaled;
    uint32_t q;
    if (isnan(f))
        return (uint16_t)(sign | 0x7E00);
    if (a >= 65520.0f)
        return (uint16_t)(sign | 0x7C00);
    if (a < ldexpf(1.0f, -14)) {
        /* Subnormal: units of 2^-24; nearbyintf rounds half to even. */
        return (uint16_t)(sign | (uint16_t)nearbyintf(ldexpf(a, 24)));
    }
    frexpf(a, &exponent); /* a = m * 2^exponent, m in [0.5, 1) */
    scaled = ldexpf(a, 11 - exponent); /* [1024, 2048) */
    q = (uint32_t)nearbyintf(scaled);
    if (q == 2048) {
        q = 1024;
        exponent++;
    }
    return (uint16_t)(sign | (uint16_t)((exponent + 14) << 10) | (uint16_t)(q - 1024));
}

#endif
