/* IEEE 754 binary16 <-> binary32, exact and portable (no compiler extension
 * types), for f16 weights converted on the fly and the f16 KV cache. */
#ifndef PMPD_MODEL_F16_H
#define PMPD_MODEL_F16_H

#include <stdint.h>
#include <string.h>

static inline float pmpd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    uint32_t bits;
    float f;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        /* Subnormal half: renormalize into a normal float. */
        exponent = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Rounds to nearest, ties to even; overflow gives infinity, NaN stays NaN. */
static inline uint16_t pmpd_f32_to_f16(float f)
{
    uint32_t bits, sign, abs_bits;
    memcpy(&bits, &f, sizeof bits);
    sign = (bits >> 16) & 0x8000u;
    abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits >= 0x7F800000u)
        return (uint16_t)(sign | 0x7C00u | (abs_bits > 0x7F800000u ? 0x200u : 0u));
    if (abs_bits >= 0x477FF000u) /* rounds to 65520 or more */
        return (uint16_t)(sign | 0x7C00u);
    if (abs_bits < 0x38800000u) {
        /* Result is subnormal or zero: shift the full mantissa into place. */
        uint32_t shift, mantissa, half, rest, halfway;
        if (abs_bits < 0x33000000u) /* below half the smallest subnormal */
            return (uint16_t)sign;
        shift = 126u - (abs_bits >> 23); /* 14..24 */
        mantissa = (abs_bits & 0x7FFFFFu) | 0x800000u;
        half = mantissa >> shift;
        rest = mantissa & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
        if (rest > halfway || (rest == halfway && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    } else {
        uint32_t rounded = abs_bits + 0xFFFu + ((abs_bits >> 13) & 1u);
        return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
    }
}

#endif
