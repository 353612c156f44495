/* What the 256-bit W8A8 kernels (AVX2 and AVX-VNNI, never compiled
 * together) share: the sum of an accumulator's eight int32 lanes, once
 * per (row, token) after the last column. */
#ifndef PMPD_WEIGHTS_W8A8_X86_H
#define PMPD_WEIGHTS_W8A8_X86_H

#include "pmpd_impl/core/config.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <stdint.h>

static inline int32_t pmpd_w8a8_sum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}
#endif

#endif
