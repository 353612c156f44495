#include "pmpd_impl/weights/grouped/qact.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/weights/grouped/qformat.h"

/* Sizes of the three buffers, each rounded up to the arena alignment. */
static int pmpd_qact_sizes(size_t n_tokens, size_t cols, size_t *qs, size_t *per_group)
{
    size_t tokens = n_tokens + (n_tokens & 1), groups = pmpd_qformat_groups(cols), tg;
    return pmpd_checked_mul(tokens, groups, &tg) && pmpd_checked_mul(tg, PMPD_QGROUP, qs) &&
           pmpd_checked_align_up(*qs, PMPD_ARENA_ALIGNMENT, qs) &&
           pmpd_checked_mul(tg, 4, per_group) &&
           pmpd_checked_align_up(*per_group, PMPD_ARENA_ALIGNMENT, per_group);
}

PMPD_INTERNAL pmpd_status pmpd_qact_bytes(size_t n_tokens, size_t cols, size_t *bytes)
{
    size_t qs, per_group, both;
    if (!pmpd_qact_sizes(n_tokens, cols, &qs, &per_group) || !pmpd_checked_add(qs, per_group, &both) ||
        !pmpd_checked_add(both, per_group, bytes))
        return PMPD_ERR_OVERFLOW;
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_qact_alloc(pmpd_arena *arena, size_t n_tokens, size_t cols, pmpd_qact *out)
{
    size_t qs, per_group;
    void *a, *b, *c;
    pmpd_status status;
    if (!pmpd_qact_sizes(n_tokens, cols, &qs, &per_group))
        return PMPD_ERR_OVERFLOW;
    if ((status = pmpd_arena_alloc(arena, qs, PMPD_ARENA_ALIGNMENT, &a)) != PMPD_OK ||
        (status = pmpd_arena_alloc(arena, per_group, PMPD_ARENA_ALIGNMENT, &b)) != PMPD_OK ||
        (status = pmpd_arena_alloc(arena, per_group, PMPD_ARENA_ALIGNMENT, &c)) != PMPD_OK)
        return status;
    out->qs = (int8_t *)a;
    out->scale = (float *)b;
    out->sum = (int32_t *)c;
    out->n_tokens = 0;
    out->n_groups = pmpd_qformat_groups(cols);
    return PMPD_OK;
}

#if PMPD_USE_AVX2
#include <immintrin.h>
#elif PMPD_USE_NEON && defined(__aarch64__)
#include <arm_neon.h>
#endif

/* A whole group of 32 columns in vector registers, the same arithmetic as
 * pmpd_qact_group below (absmax, 127 / absmax, x times that rounded to
 * nearest even, which is what the conversions do in the default rounding
 * mode): one decode step quantizes each layer's input four times on the
 * calling thread while the workers wait, and lrintf per element made that
 * 3.7 ns per column (19 us for a 5632-column input).  Returns 0 where the
 * build has no vector version. */
static int pmpd_qact_group_simd(pmpd_qact *act, size_t t, size_t g, const float *x)
{
#if PMPD_USE_AVX2
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m;
    __m256i q[4], sum, bytes;
    __m128 m4;
    int8_t packed[PMPD_QGROUP];
    float amax, inverse;
    int c;
    for (c = 0; c < 4; c++)
        v[c] = _mm256_loadu_ps(x + 8 * c);
    m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    amax = _mm_cvtss_f32(m4);
    inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (c = 0; c < 4; c++)
        q[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], _mm256_set1_ps(inverse)));
    sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    /* The packs interleave 128-bit lanes; one dword permute restores the
     * column order. */
    bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)packed, bytes);
    for (c = 0; c < 4; c++)
        memcpy((int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + (size_t)c), packed + 8 * c, 8);
    {
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        act->sum[t * act->n_groups + g] = _mm_cvtsi128_si32(s4);
    }
    act->scale[t * act->n_groups + g] = amax / 127.0f;
    return 1;
#elif PMPD_USE_NEON && defined(__aarch64__)
    float32x4_t v[8];
    int32x4_t q[8];
    float amax, inverse;
    int32_t sum = 0;
    int c;
    float32x4_t m = vdupq_n_f32(0.0f);
    for (c = 0; c < 8; c++) {
        v[c] = vld1q_f32(x + 4 * c);
        m = vmaxq_f32(m, vabsq_f32(v[c]));
    }
    amax = vmaxvq_f32(m);
    inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (c = 0; c < 8; c++) {
        q[c] = vcvtnq_s32_f32(vmulq_n_f32(v[c], inverse));
        sum += vaddvq_s32(q[c]);
    }
    for (c = 0; c < 4; c++) {
        int16x8_t h = vcombine_s16(vmovn_s32(q[2 * c]), vmovn_s32(q[2 * c + 1]));
        vst1_s8((int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + (size_t)c), vmovn_s16(h));
    }
    act->scale[t * act->n_groups + g] = amax / 127.0f;
    act->sum[t * act->n_groups + g] = sum;
    return 1;
#else
    (void)act, (void)t, (void)g, (void)x;
    return 0;
#endif
}

/* One group of one token; x holds n valid columns (the rest is padding). */
static void pmpd_qact_group(pmpd_qact *act, size_t t, size_t g, const float *x, size_t n)
{
    float amax = 0.0f, inverse;
    int32_t sum = 0;
    size_t c, k;
    for (k = 0; k < n; k++)
        amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (c = 0; c < PMPD_QGROUP / 8; c++) {
        int8_t *out = (int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + c);
        for (k = 0; k < 8; k++) {
            size_t col = c * 8 + k;
            int8_t q = col < n ? (int8_t)lrintf(x[col] * inverse) : 0;
            out[k] = q;
            sum += q;
        }
    }
    act->scale[t * act->n_groups + g] = amax / 127.0f;
    act->sum[t * act->n_groups + g] = sum;
}

/* The padding token: what pmpd_qact_group makes of zeros, written directly
 * (a one-token GEMV pays for it on every call). */
static void pmpd_qact_zero_group(pmpd_qact *act, size_t t, size_t g)
{
    size_t c;
    for (c = 0; c < PMPD_QGROUP / 8; c++)
        memset((int8_t *)pmpd_qact_chunk(act, t, g * (PMPD_QGROUP / 8) + c), 0, 8);
    act->scale[t * act->n_groups + g] = 0.0f;
    act->sum[t * act->n_groups + g] = 0;
}

PMPD_INTERNAL void pmpd_qact_quantize_tokens(pmpd_qact *act, const float *x, size_t ldx, size_t cols,
                                             size_t begin, size_t end)
{
    size_t t, g;
    for (t = begin; t < end; t++) {
        for (g = 0; g < act->n_groups; g++) {
            size_t first = g * PMPD_QGROUP;
            size_t n = cols - first < PMPD_QGROUP ? cols - first : PMPD_QGROUP;
            if (t < act->n_tokens) {
                if (n < PMPD_QGROUP || !pmpd_qact_group_simd(act, t, g, x + t * ldx + first))
                    pmpd_qact_group(act, t, g, x + t * ldx + first, n);
            } else
                pmpd_qact_zero_group(act, t, g);
        }
    }
}

PMPD_INTERNAL void pmpd_qact_quantize(pmpd_qact *act, const float *x, size_t ldx, size_t n_tokens,
                                      size_t cols)
{
    act->n_tokens = n_tokens;
    act->n_groups = pmpd_qformat_groups(cols);
    pmpd_qact_quantize_tokens(act, x, ldx, cols, 0, n_tokens + (n_tokens & 1));
}
