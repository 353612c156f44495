/* AVX2 + FMA float products: four weight rows at a time against one token,
 * so a decode step runs four independent FMA chains; each output keeps
 * its own 8-lane accumulator. */
#include "pmpd_impl/model/linear_float.h"

#if PMPD_USE_AVX2

#include <immintrin.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"

#define PMPD_LINEAR_AVX2_ROWS 4

/* Weights [c, c+8) of row r as floats; n < 8 pads with zeros. */
static __m256 pmpd_linear_avx2_weights(const pmpd_tensor *w, size_t cols, size_t r, size_t c, size_t n)
{
    float tmp[8] = {0};
    size_t i;
    if (w->type == PMPD_TENSOR_F32) {
        const float *p = (const float *)w->data + r * cols + c;
        if (n == 8)
            return _mm256_loadu_ps(p);
        memcpy(tmp, p, n * sizeof(float));
        return _mm256_loadu_ps(tmp);
    } else {
        const uint16_t *p = (const uint16_t *)w->data + r * cols + c;
#if defined(__F16C__)
        if (n == 8)
            return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#endif
        for (i = 0; i < n; i++)
            tmp[i] = pmpd_f16_to_f32(p[i]);
        return _mm256_loadu_ps(tmp);
    }
}

static __m256 pmpd_linear_avx2_input(const float *x, size_t n)
{
    float tmp[8] = {0};
    if (n == 8)
        return _mm256_loadu_ps(x);
    memcpy(tmp, x, n * sizeof(float));
    return _mm256_loadu_ps(tmp);
}

static float pmpd_linear_avx2_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

PMPD_INTERNAL void pmpd_linear_float_simd(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                                          size_t begin, size_t end)
{
    size_t rows = (size_t)w->dims[0], cols = (size_t)w->dims[1], r0, t, c, i;
    for (r0 = begin; r0 < end; r0 += PMPD_LINEAR_AVX2_ROWS) {
        /* A short last block repeats its last row (computed, not stored). */
        size_t row[PMPD_LINEAR_AVX2_ROWS];
        for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
            row[i] = r0 + i < end ? r0 + i : end - 1;
        for (t = 0; t < n_tokens; t++) {
            const float *xt = x + t * cols;
            __m256 acc[PMPD_LINEAR_AVX2_ROWS];
            for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
                acc[i] = _mm256_setzero_ps();
            for (c = 0; c < cols; c += 8) {
                size_t n = cols - c < 8 ? cols - c : 8;
                __m256 xv = pmpd_linear_avx2_input(xt + c, n);
                for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
                    acc[i] = _mm256_fmadd_ps(pmpd_linear_avx2_weights(w, cols, row[i], c, n), xv, acc[i]);
            }
            for (i = 0; i < PMPD_LINEAR_AVX2_ROWS && r0 + i < end; i++)
                y[t * rows + r0 + i] = pmpd_linear_avx2_sum(acc[i]);
        }
    }
}

#undef PMPD_LINEAR_AVX2_ROWS

#else
typedef int pmpd_linear_float_avx2_unused;
#endif
