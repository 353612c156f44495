/* The rotated input (rotated.h): signs, the per-token rotation and int8
 * quantization, and the row lookup's inverse. */
#include "pmpd_impl/weights/rotated/rotated.h"

#include <math.h>
#include <string.h>

#if PMPD_USE_AVX2 || PMPD_USE_AVX512
#include <immintrin.h>
#elif PMPD_USE_NEON
#include <arm_neon.h>
#endif

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/core/splitmix.h"

PMPD_INTERNAL void pmpd_rotated_signs(uint64_t seed, uint64_t *signs, size_t words)
{
    size_t w;
    for (w = 0; w < words; w++)
        signs[w] = pmpd_splitmix64_next(&seed);
}

/* dst[c] = src[c] with its sign flipped where bit c of the 64 columns'
 * word is set, c < n <= 64 (dst may be src): the sign bit XORed in, as a
 * branch on the random bits missed every other column.  The vector forms
 * turn the word's bits into lane masks (a 4,096-wide token's flip took
 * 1.6-1.8 of its 5-7 us to rotate and quantize on Zen5 one column at a
 * time). */
#if !PMPD_USE_AVX512
/* Columns [j, n) one at a time: the scalar form and the vector forms' tails
 * (AVX-512 masks its tail). */
static void rotated_flip_columns(uint64_t word, const float *src, float *dst, size_t j, size_t n)
{
    for (; j < n; j++) {
        uint32_t b;
        memcpy(&b, src + j, sizeof b);
        b ^= (uint32_t)(word >> j & 1) << 31;
        memcpy(dst + j, &b, sizeof b);
    }
}
#endif

#if PMPD_USE_AVX512
static void rotated_flip64(uint64_t word, const float *src, float *dst, size_t n)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    size_t j;
    for (j = 0; j < n; j += 16) {
        const __mmask16 inside = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(inside, src + j);
        _mm512_mask_storeu_ps(dst + j, inside, _mm512_mask_xor_ps(v, (__mmask16)(word >> j), v, sign));
    }
}
#elif PMPD_USE_AVX2
static void rotated_flip64(uint64_t word, const float *src, float *dst, size_t n)
{
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    size_t j;
    for (j = 0; j + 8 <= n; j += 8) {
        const __m256i bits = _mm256_and_si256(_mm256_set1_epi32((int)(word >> j & 0xFF)), lane_bit);
        const __m256i flip = _mm256_slli_epi32(_mm256_cmpeq_epi32(bits, lane_bit), 31);
        _mm256_storeu_ps(dst + j, _mm256_xor_ps(_mm256_loadu_ps(src + j), _mm256_castsi256_ps(flip)));
    }
    rotated_flip_columns(word, src, dst, j, n);
}
#elif PMPD_USE_NEON
static void rotated_flip64(uint64_t word, const float *src, float *dst, size_t n)
{
    static const uint32_t lane_bit_values[4] = {1, 2, 4, 8};
    const uint32x4_t lane_bit = vld1q_u32(lane_bit_values), sign = vdupq_n_u32(0x80000000u);
    size_t j;
    for (j = 0; j + 4 <= n; j += 4) {
        const uint32x4_t flip = vandq_u32(vtstq_u32(vdupq_n_u32((uint32_t)(word >> j & 0xF)), lane_bit), sign);
        vst1q_f32(dst + j, vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vld1q_f32(src + j)), flip)));
    }
    rotated_flip_columns(word, src, dst, j, n);
}
#else
static void rotated_flip64(uint64_t word, const float *src, float *dst, size_t n)
{
    rotated_flip_columns(word, src, dst, 0, n);
}
#endif

/* dst = s o src over cols columns, s the seed's signs (dst may be src). */
static void rotated_flip_copy(uint64_t seed, const float *src, float *dst, size_t cols)
{
    size_t c0;
    for (c0 = 0; c0 < cols; c0 += 64)
        rotated_flip64(pmpd_splitmix64_next(&seed), src + c0, dst + c0, cols - c0 < 64 ? cols - c0 : 64);
}

PMPD_INTERNAL void pmpd_rotated_flip(uint64_t seed, float *x, size_t cols)
{
    rotated_flip_copy(seed, x, x, cols);
}

PMPD_INTERNAL void pmpd_rotated_rotate(const pmpd_rotated *r, const float *w, float *v)
{
    rotated_flip_copy(r->seed, w, v, r->cols);
    memset(v + r->cols, 0, (r->padded - r->cols) * sizeof(float));
    pmpd_hadamard(v, r->rotation, 0);
}

/* Block of x' as int8 steps of d = max |x'| / 127 (round to nearest, half
 * away from zero; an all-zero block gets d = 0 and zeros; NaN gives 0). */
#if PMPD_USE_AVX2
/* The same bytes and step as the scalar loops: the maximum ignores NaN as
 * their comparison does (VMAXPS returns its second operand, the running
 * maximum, when either is NaN), and the rounding adds +-0.5 and
 * truncates.  It took a 4,096-wide token's quantization from about 6 to 1
 * us on Zen5: the serial part of a decode step's product. */
static void rotated_quantize_block(const float *x, int8_t *q, float *d)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f);
    __m256 v[4], m = _mm256_setzero_ps(), inverse;
    __m256i r[4], bytes;
    __m128 m4;
    float absmax;
    int c;
    for (c = 0; c < 4; c++) {
        v[c] = _mm256_loadu_ps(x + 8 * c);
        m = _mm256_max_ps(_mm256_andnot_ps(sign, v[c]), m);
    }
    m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    absmax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    *d = absmax / 127.0f;
    inverse = _mm256_set1_ps(absmax > 0.0f ? 127.0f / absmax : 0.0f);
    for (c = 0; c < 4; c++) {
        const __m256 s = _mm256_mul_ps(v[c], inverse);
        const __m256i rounded = _mm256_cvttps_epi32(_mm256_add_ps(s, _mm256_or_ps(_mm256_and_ps(s, sign), half)));
        r[c] = _mm256_and_si256(rounded, _mm256_castps_si256(_mm256_cmp_ps(s, s, _CMP_ORD_Q)));
    }
    bytes = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)q, bytes);
}
#else
static void rotated_quantize_block(const float *x, int8_t *q, float *d)
{
    float absmax = 0.0f, inverse;
    int c;
    for (c = 0; c < PMPD_ROTATED_BLOCK; c++) {
        float a = x[c] < 0.0f ? -x[c] : x[c];
        absmax = a > absmax ? a : absmax;
    }
    *d = absmax / 127.0f;
    inverse = absmax > 0.0f ? 127.0f / absmax : 0.0f;
    for (c = 0; c < PMPD_ROTATED_BLOCK; c++) {
        float v = x[c] * inverse;
        /* |v| <= 127 by construction; NaN (from a NaN input) becomes 0. */
        q[c] = (int8_t)(v != v ? 0 : (int)(v + (v >= 0.0f ? 0.5f : -0.5f)));
    }
}
#endif

PMPD_INTERNAL void pmpd_rotated_prepare_tokens(const pmpd_rotated *r, const float *x, size_t begin, size_t end,
                                               size_t n_tokens, void *act, float *work)
{
    const size_t blocks = r->padded / PMPD_ROTATED_BLOCK;
    int8_t *q = (int8_t *)act;
    float *d = (float *)(uintptr_t)pmpd_rotated_act_d(r, act, n_tokens);
    float *sum = (float *)(uintptr_t)pmpd_rotated_act_sum(r, act, n_tokens);
    size_t t, b, c;
    for (t = begin; t < end; t++) {
        double total = 0;
        pmpd_rotated_rotate(r, x + t * r->cols, work);
        for (b = 0; b < blocks; b++) {
            int8_t *block = q + t * r->padded + b * PMPD_ROTATED_BLOCK;
            int32_t block_sum = 0;
            rotated_quantize_block(work + b * PMPD_ROTATED_BLOCK, block, d + t * blocks + b);
            for (c = 0; c < PMPD_ROTATED_BLOCK; c++)
                block_sum += block[c];
            total += (double)d[t * blocks + b] * block_sum;
        }
        sum[t] = (float)total;
    }
}

/* Sylvester's entry (a, b) is -1 to the number of bits a and b share. */
static int rotated_sylvester_negative(size_t a, size_t b)
{
    size_t v = a & b;
    int odd = 0;
    while (v) {
        odd ^= 1;
        v &= v - 1;
    }
    return odd;
}

PMPD_INTERNAL void pmpd_rotated_unrotate_add(const pmpd_rotated *r, const float *v, size_t k0, size_t count,
                                             float *out, size_t cols)
{
    /* H = H_m (x) H_p / sqrt(n) (core/hadamard.h). */
    const unsigned order = pmpd_hadamard_order(r->rotation);
    const size_t p = r->rotation / order;
    const double norm = 1.0 / sqrt((double)r->rotation);
    size_t c, k;
    for (c = 0; c < cols; c++) {
        double sum = 0;
        for (k = k0; k < k0 + count; k++) {
            int negative = rotated_sylvester_negative(k % p, c % p);
            if (order > 1)
                negative ^= (int)(pmpd_hadamard_small_row(order, (unsigned)(k / p)) >> (c / p) & 1);
            sum += negative ? -(double)v[k - k0] : (double)v[k - k0];
        }
        out[c] += (float)(sum * norm);
    }
}

PMPD_INTERNAL void pmpd_rotated_row(const pmpd_rotated *r, pmpd_rotated_decode decode, const void *context,
                                    float *out)
{
    if (r->cols == r->rotation) {
        decode(context, 0, r->rotation, out);
        pmpd_hadamard(out, r->rotation, 1);
    } else {
        float chunk[PMPD_ROTATED_ROW_CHUNK];
        size_t k0;
        memset(out, 0, r->cols * sizeof *out);
        for (k0 = 0; k0 < r->rotation; k0 += PMPD_ROTATED_ROW_CHUNK) {
            const size_t count =
                r->rotation - k0 < PMPD_ROTATED_ROW_CHUNK ? r->rotation - k0 : PMPD_ROTATED_ROW_CHUNK;
            decode(context, k0, count, chunk);
            pmpd_rotated_unrotate_add(r, chunk, k0, count, out, r->cols);
        }
    }
    pmpd_rotated_flip(r->seed, out, r->cols);
}
