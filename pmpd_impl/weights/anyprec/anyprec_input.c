/* Activations for the integer any-precision GEMV: int8 with one scale per
 * 256-column superblock (max |x| / 127 there), written out per group of 32
 * so the reference kernel stays a plain per-group product.  One scale per
 * superblock lets the SIMD kernels add a superblock's products in integers
 * and convert once; the KL it costs on pycode21M is below run-to-run noise
 * (anyprec.h). */
#include <math.h>
#include <string.h>

#include "pmpd_impl/weights/anyprec/anyprec.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#elif PMPD_USE_NEON && defined(__aarch64__)
#include <arm_neon.h>
#endif

/* One whole superblock, x[0..256), as pmpd_anyprec_quantize_input's loop
 * below does it (absmax, scale = absmax / 127, x / scale clamped to +-127
 * and rounded to nearest even, which the conversions do in the default
 * mode) but in vector registers: lrintf per element made a decode step's
 * quantization, which runs on the calling thread while the workers wait,
 * ~4 ns per column.  Returns 0 where the build has no vector version. */
static int pmpd_anyprec_quantize_super(const float *x, int8_t *xq, float *scale_out)
{
#if PMPD_USE_AVX2
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 m = _mm256_setzero_ps(), inv;
    __m128 m4;
    float amax, scale;
    uint32_t c;
    for (c = 0; c < PMPD_ANYPREC_SUPER; c += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + c)));
    m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
    scale = amax / 127.0f;
    inv = _mm256_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
    for (c = 0; c < PMPD_ANYPREC_SUPER; c += 32) {
        __m256i q[4], bytes;
        int k;
        for (k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(
                _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(x + c + 8 * k), inv))));
        bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(void *)(xq + c), _mm256_permutevar8x32_epi32(bytes, order));
    }
    *scale_out = scale;
    return 1;
#elif PMPD_USE_NEON && defined(__aarch64__)
    const float32x4_t hi = vdupq_n_f32(127.0f), lo = vdupq_n_f32(-127.0f);
    float32x4_t m = vdupq_n_f32(0.0f);
    float amax, scale, inv;
    uint32_t c;
    for (c = 0; c < PMPD_ANYPREC_SUPER; c += 4)
        m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + c)));
    amax = vmaxvq_f32(m);
    scale = amax / 127.0f;
    inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (c = 0; c < PMPD_ANYPREC_SUPER; c += 8) {
        int32x4_t a = vcvtnq_s32_f32(vmaxq_f32(lo, vminq_f32(hi, vmulq_n_f32(vld1q_f32(x + c), inv))));
        int32x4_t b = vcvtnq_s32_f32(vmaxq_f32(lo, vminq_f32(hi, vmulq_n_f32(vld1q_f32(x + c + 4), inv))));
        vst1_s8(xq + c, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
    }
    *scale_out = scale;
    return 1;
#else
    (void)x, (void)xq, (void)scale_out;
    return 0;
#endif
}

PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale)
{
    uint32_t padded = pmpd_anyprec_padded_cols(cols), s, c;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER) {
        uint32_t end = s + PMPD_ANYPREC_SUPER < cols ? s + PMPD_ANYPREC_SUPER : cols;
        uint32_t padded_end = s + PMPD_ANYPREC_SUPER < padded ? s + PMPD_ANYPREC_SUPER : padded;
        float amax = 0.0f, scale, inv;
        if (end - s != PMPD_ANYPREC_SUPER || !pmpd_anyprec_quantize_super(x + s, xq + s, &scale)) {
            for (c = s; c < end; c++)
                amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
            scale = amax / 127.0f;
            inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            for (c = s; c < padded_end; c++) {
                float v = c < end ? x[c] * inv : 0.0f;
                xq[c] = (int8_t)lrintf(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
            }
        }
        for (c = s; c < padded_end; c += PMPD_ANYPREC_GROUP)
            xscale[c / PMPD_ANYPREC_GROUP] = scale;
    }
}

/* sum_c xq[c] * scale of c over padded columns: each superblock's bytes
 * add up exactly in an int32 (the compiler vectorizes that loop) and meet
 * their one scale once; a multiply per column in double made this 6 us of
 * each 5632-column product in decode (Zen5). */
static float pmpd_anyprec_input_sum(const int8_t *xq, const float *xscale, uint32_t padded)
{
    uint32_t s, c;
    double sum = 0.0;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER) {
        uint32_t end = s + PMPD_ANYPREC_SUPER < padded ? s + PMPD_ANYPREC_SUPER : padded;
        int32_t dot = 0;
        for (c = s; c < end; c++)
            dot += xq[c];
        sum += (double)dot * xscale[s / PMPD_ANYPREC_GROUP];
    }
    return (float)sum;
}

PMPD_INTERNAL void pmpd_anyprec_prepare_units(const pmpd_anyprec_matrix *m, const int8_t *xq, const float *xscale,
                                              pmpd_anyprec_units *u)
{
    uint32_t padded = pmpd_anyprec_padded_cols(m->cols), s, c;
    for (s = 0; s < padded; s += PMPD_ANYPREC_SUPER)
        u->scale[s / PMPD_ANYPREC_SUPER] = xscale[s / PMPD_ANYPREC_GROUP];
    u->sum = pmpd_anyprec_input_sum(xq, xscale, padded);
    memset(u->tail, 0, sizeof u->tail);
    /* a span's worth of columns into each group's first slots */
    for (c = m->full * PMPD_ANYPREC_SUPER; c < padded; c += m->tail_span) {
        uint32_t at = pmpd_anyprec_slot(m, c, &s), n = padded - c < m->tail_span ? padded - c : m->tail_span;
        memcpy(u->tail + at, xq + c, n);
    }
}

PMPD_INTERNAL void pmpd_anyprec_quantize_tokens(const float *x, size_t n, uint32_t cols, int8_t *xq, float *xscale,
                                                float *xsum)
{
    size_t stride = pmpd_anyprec_token_stride(cols), padded = pmpd_anyprec_padded_cols(cols), t;
    for (t = 0; t < n; t++) {
        int8_t *q = xq + t * stride;
        float *scale = xscale + t * (stride / PMPD_ANYPREC_GROUP);
        pmpd_anyprec_quantize_input(x + t * cols, cols, q, scale);
        memset(q + padded, 0, stride - padded);
        xsum[t] = pmpd_anyprec_input_sum(q, scale, (uint32_t)padded);
    }
}
