/*
 * exp(x) for x <= 0 in vector registers, one inline function per
 * instruction set, shared by the softmax of attention (kvcache/) and the
 * SiLU of the feed-forward block (model/ops.c): x = k ln2 + r with
 * |r| <= ln2/2 (ln2 split in two so k ln2 is exact), a degree-6 polynomial
 * for e^r whose first two terms are 1 + r, and 2^k applied exactly.
 * Inputs below PMPD_VEXP_MIN are clamped there: e^-87 < 2^-125 is
 * negligible next to the 1 that a softmax's maximum or a sigmoid's
 * denominator adds.  Relative error about 2^-22 (two float ulps).
 */
#ifndef PMPD_CORE_VEXP_H
#define PMPD_CORE_VEXP_H

#include "pmpd_impl/core/config.h"

#define PMPD_VEXP_MIN (-87.0f)
#define PMPD_VEXP_LOG2E 1.44269504088896341f
#define PMPD_VEXP_LN2_HI 0.693359375f
#define PMPD_VEXP_LN2_LO (-2.12194440e-4f)
#define PMPD_VEXP_C6 1.9875691500e-4f
#define PMPD_VEXP_C5 1.3981999507e-3f
#define PMPD_VEXP_C4 8.3334519073e-3f
#define PMPD_VEXP_C3 4.1665795894e-2f
#define PMPD_VEXP_C2 1.6666665459e-1f
#define PMPD_VEXP_C1 5.0000001201e-1f

#if PMPD_USE_AVX2
#include <immintrin.h>

/* 2^k built in the exponent field. */
static inline __m256 pmpd_vexp_avx2(__m256 x)
{
    const __m256 ln2_hi = _mm256_set1_ps(PMPD_VEXP_LN2_HI), ln2_lo = _mm256_set1_ps(PMPD_VEXP_LN2_LO);
    __m256 k, r, p;
    __m256i pow2;
    x = _mm256_max_ps(x, _mm256_set1_ps(PMPD_VEXP_MIN));
    k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(PMPD_VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(k, ln2_hi, x);
    r = _mm256_fnmadd_ps(k, ln2_lo, r);
    p = _mm256_set1_ps(PMPD_VEXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PMPD_VEXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PMPD_VEXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PMPD_VEXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PMPD_VEXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(PMPD_VEXP_C1));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}
#endif

#if PMPD_USE_AVX512
/* 2^k applied by VSCALEFPS: k is an integer, so it is one exact scaling,
 * rounded once where the result is subnormal, like the AVX2 multiply. */
static inline __m512 pmpd_vexp_avx512(__m512 x)
{
    const __m512 ln2_hi = _mm512_set1_ps(PMPD_VEXP_LN2_HI), ln2_lo = _mm512_set1_ps(PMPD_VEXP_LN2_LO);
    __m512 k, r, p;
    x = _mm512_max_ps(x, _mm512_set1_ps(PMPD_VEXP_MIN));
    k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(PMPD_VEXP_LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(k, ln2_hi, x);
    r = _mm512_fnmadd_ps(k, ln2_lo, r);
    p = _mm512_set1_ps(PMPD_VEXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PMPD_VEXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PMPD_VEXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PMPD_VEXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PMPD_VEXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PMPD_VEXP_C1));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, k);
}
#endif

/* AArch64 only (round to nearest, FMA on every core); 32-bit Arm goes
 * without. */
#if PMPD_USE_NEON && defined(__aarch64__)
#include <arm_neon.h>
#define PMPD_VEXP_NEON 1

static inline float32x4_t pmpd_vexp_neon(float32x4_t x)
{
    float32x4_t k, r, p;
    int32x4_t pow2;
    x = vmaxq_f32(x, vdupq_n_f32(PMPD_VEXP_MIN));
    k = vrndnq_f32(vmulq_n_f32(x, PMPD_VEXP_LOG2E));
    r = vfmsq_f32(x, k, vdupq_n_f32(PMPD_VEXP_LN2_HI));
    r = vfmsq_f32(r, k, vdupq_n_f32(PMPD_VEXP_LN2_LO));
    p = vdupq_n_f32(PMPD_VEXP_C6);
    p = vfmaq_f32(vdupq_n_f32(PMPD_VEXP_C5), p, r);
    p = vfmaq_f32(vdupq_n_f32(PMPD_VEXP_C4), p, r);
    p = vfmaq_f32(vdupq_n_f32(PMPD_VEXP_C3), p, r);
    p = vfmaq_f32(vdupq_n_f32(PMPD_VEXP_C2), p, r);
    p = vfmaq_f32(vdupq_n_f32(PMPD_VEXP_C1), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    pow2 = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(pow2));
}
#else
#define PMPD_VEXP_NEON 0
#endif

#endif
