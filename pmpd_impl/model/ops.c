#include "pmpd_impl/model/ops.h"

#include <math.h>

#include "pmpd_impl/core/vexp.h"

/* Sum of x[i]^2.  In vector lanes where the build has them: one float
 * chain of n dependent additions (llama2.c's loop, which the compiler may
 * not reorder) took 149 us per 2-bit decode step of the 1.1B shape (45
 * norms of 2048, Zen5); the lanes change the rounding, not the accuracy. */
static float pmpd_ops_sum_squares(const float *x, size_t n)
{
    float ss = 0.0f;
    size_t i = 0;
#if PMPD_USE_AVX512
    __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        const __m512 u = _mm512_loadu_ps(x + i), v = _mm512_loadu_ps(x + i + 16);
        a = _mm512_fmadd_ps(u, u, a);
        b = _mm512_fmadd_ps(v, v, b);
    }
    ss = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
#elif PMPD_USE_AVX2
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    __m128 h;
    for (; i + 16 <= n; i += 16) {
        const __m256 u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);
        a = _mm256_fmadd_ps(u, u, a);
        b = _mm256_fmadd_ps(v, v, b);
    }
    a = _mm256_add_ps(a, b);
    h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    ss = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
#elif PMPD_USE_NEON && defined(__aarch64__) /* arm_neon.h: through core/vexp.h */
    float32x4_t a = vdupq_n_f32(0.0f), b = vdupq_n_f32(0.0f);
    for (; i + 8 <= n; i += 8) {
        const float32x4_t u = vld1q_f32(x + i), v = vld1q_f32(x + i + 4);
        a = vfmaq_f32(a, u, u);
        b = vfmaq_f32(b, v, v);
    }
    ss = vaddvq_f32(vaddq_f32(a, b));
#endif
    for (; i < n; i++)
        ss += x[i] * x[i];
    return ss;
}

PMPD_INTERNAL void pmpd_ops_rmsnorm(float *out, const float *x, const float *weight, size_t n, float eps)
{
    const float ss = pmpd_ops_sum_squares(x, n);
    float scale;
    size_t i;
    scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i < n; i++)
        out[i] = weight[i] * (scale * x[i]);
}

PMPD_INTERNAL void pmpd_ops_rope_angles(float *cos_out, float *sin_out, size_t pos, size_t head_dim,
                                        float theta, const float *divisors)
{
    size_t i;
    /* Two loops rather than a test per pair; the first is llama2.c's
     * arithmetic exactly. */
    if (!divisors) {
        for (i = 0; i < head_dim / 2; i++) {
            float frequency = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
            float angle = (float)pos * frequency;
            cos_out[i] = cosf(angle);
            sin_out[i] = sinf(angle);
        }
        return;
    }
    for (i = 0; i < head_dim / 2; i++) {
        float frequency = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
        /* llama.cpp divides the angle, not the frequency. */
        float angle = (float)pos * frequency / divisors[i];
        cos_out[i] = cosf(angle);
        sin_out[i] = sinf(angle);
    }
}

PMPD_INTERNAL void pmpd_ops_rope_apply(float *vec, size_t n_heads, size_t head_dim,
                                       const float *cos_in, const float *sin_in)
{
    size_t h, i;
    for (h = 0; h < n_heads; h++) {
        float *head = vec + h * head_dim;
        for (i = 0; i < head_dim / 2; i++) {
            float a = head[2 * i], b = head[2 * i + 1];
            head[2 * i] = a * cos_in[i] - b * sin_in[i];
            head[2 * i + 1] = a * sin_in[i] + b * cos_in[i];
        }
    }
}

PMPD_INTERNAL void pmpd_ops_rope_apply_neox(float *vec, size_t n_heads, size_t head_dim,
                                            const float *cos_in, const float *sin_in)
{
    size_t h, i, half = head_dim / 2;
    for (h = 0; h < n_heads; h++) {
        float *lo = vec + h * head_dim, *hi = lo + half;
        for (i = 0; i < half; i++) {
            float a = lo[i], b = hi[i];
            lo[i] = a * cos_in[i] - b * sin_in[i];
            hi[i] = a * sin_in[i] + b * cos_in[i];
        }
    }
}

PMPD_INTERNAL pmpd_ops_rope_fn pmpd_ops_rope_for(uint32_t rope_style)
{
    return rope_style == PMPD_ROPE_NEOX ? pmpd_ops_rope_apply_neox : pmpd_ops_rope_apply;
}

/* gate[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + e^-g).  The
 * vector loops take e = e^-|g| from the shared exp (core/vexp.h, which
 * wants x <= 0): sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e)
 * below.  Scalar expf cost a 2-bit decode step on the 1.1B shape 2.5% of
 * its time (330 us of 13.4 ms, Zen5); the scalar loop, llama2.c's, takes
 * the tail. */
PMPD_INTERNAL void pmpd_ops_swiglu(float *gate, const float *up, size_t n)
{
    size_t i = 0;
#if PMPD_USE_AVX512
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(gate + i), one = _mm512_set1_ps(1.0f);
        const __m512 e = pmpd_vexp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
        const __m512 top = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_GE_OQ), e, one);
        _mm512_storeu_ps(gate + i,
                         _mm512_mul_ps(_mm512_mul_ps(g, _mm512_div_ps(top, _mm512_add_ps(one, e))),
                                       _mm512_loadu_ps(up + i)));
    }
#elif PMPD_USE_AVX2
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
        const __m256 e = pmpd_vexp_avx2(_mm256_or_ps(g, sign));
        const __m256 top = _mm256_blendv_ps(one, e, g); /* e where g's sign bit is set */
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_mul_ps(g, _mm256_div_ps(top, _mm256_add_ps(one, e))),
                                                 _mm256_loadu_ps(up + i)));
    }
#elif PMPD_VEXP_NEON
    for (; i + 4 <= n; i += 4) {
        const float32x4_t g = vld1q_f32(gate + i), one = vdupq_n_f32(1.0f);
        const float32x4_t e = pmpd_vexp_neon(vnegq_f32(vabsq_f32(g)));
        const float32x4_t top = vbslq_f32(vcgeq_f32(g, vdupq_n_f32(0.0f)), one, e);
        vst1q_f32(gate + i, vmulq_f32(vmulq_f32(g, vdivq_f32(top, vaddq_f32(one, e))), vld1q_f32(up + i)));
    }
#endif
    for (; i < n; i++) {
        float g = gate[i];
        gate[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

PMPD_INTERNAL void pmpd_ops_add(float *acc, const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        acc[i] += x[i];
}
