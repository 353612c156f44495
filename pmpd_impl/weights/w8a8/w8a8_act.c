/* Activations for the compiled W8A8 kernel: the same rounding everywhere
 * (pmpd_w8a8_quantize_one), stored as that kernel's multiply reads it
 * (w8a8.h).  This is O(tokens x cols) against the product's O(tokens x
 * cols x rows), yet with AMX products it was 13% of a prefill on one
 * thread in plain C: with AVX-512 the rounding runs 16 lanes wide. */
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#endif

#define W8A8_ACT_STEP 64 /* columns per step: padded_cols is a multiple */

PMPD_INTERNAL pmpd_status pmpd_w8a8_act_size(size_t n_tokens, size_t padded_cols, size_t *bytes)
{
    size_t groups = n_tokens / PMPD_W8A8_TOKEN_GROUP + (n_tokens % PMPD_W8A8_TOKEN_GROUP != 0);
    return pmpd_checked_mul(groups * PMPD_W8A8_TOKEN_GROUP, padded_cols, bytes)
               ? PMPD_OK
               : PMPD_ERR_OVERFLOW;
}

/* q[0..64) for x[0..n) (n <= 64), zeros past n. */
static void w8a8_act_step(const float *x, size_t n, float inverse, int8_t q[W8A8_ACT_STEP])
{
#if PMPD_USE_AVX512
    /* pmpd_w8a8_quantize_one lane by lane: NaN to 0, clamp to +-127, then
     * v + (+-0.5 with v's sign) truncated, the same float steps. */
    const __m512 scale = _mm512_set1_ps(inverse), lo = _mm512_set1_ps(-(float)PMPD_W8A8_QMAX),
                 hi = _mm512_set1_ps((float)PMPD_W8A8_QMAX), half = _mm512_set1_ps(0.5f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    size_t i;
    for (i = 0; i < W8A8_ACT_STEP; i += 16) {
        size_t left = n > i ? n - i : 0;
        __mmask16 valid = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, x + i), scale);
        __mmask16 number = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
        __m512 away;
        v = _mm512_maskz_mov_ps(number, _mm512_min_ps(_mm512_max_ps(v, lo), hi));
        away = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), sign),
                                                   _mm512_castps_si512(half)));
        _mm_storeu_si128((__m128i *)(void *)(q + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_add_ps(v, away))));
    }
#else
    size_t i;
    for (i = 0; i < W8A8_ACT_STEP; i++)
        q[i] = (int8_t)(i < n ? pmpd_w8a8_quantize_one(x[i], inverse) : 0);
#endif
}

PMPD_INTERNAL void pmpd_w8a8_act_quantize(const pmpd_w8a8_matrix *m, const float *x, size_t begin, size_t end,
                                          void *act)
{
    float inverse = 1.0f / m->activation_scale;
    int8_t q[W8A8_ACT_STEP];
    size_t t, c, i;
    for (t = begin; t < end; t++) {
        const float *xt = x + t * m->cols;
        for (c = 0; c < m->padded_cols; c += W8A8_ACT_STEP) {
            size_t at = pmpd_w8a8_act_index(m, t, c);
            w8a8_act_step(xt + c, m->cols > c ? m->cols - c : 0, inverse, q);
#if PMPD_W8A8_TOKEN_GROUP > 1
            /* Tile order: each 4 columns' bytes a group of tokens apart. */
            for (i = 0; i < W8A8_ACT_STEP; i += 4)
                memcpy((int8_t *)act + at + i * PMPD_W8A8_TOKEN_GROUP, q + i, 4);
#elif PMPD_W8A8_ACT_BIASED
            for (i = 0; i < W8A8_ACT_STEP; i++)
                ((uint8_t *)act)[at + i] = (uint8_t)(q[i] + 128);
#else
            for (i = 0; i < W8A8_ACT_STEP; i++)
                ((int8_t *)act)[at + i] = q[i];
#endif
        }
    }
}

#undef W8A8_ACT_STEP
