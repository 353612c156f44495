/* AVX2 + FMA float products.  A tile is 4 weight rows by 2 tokens: each
 * weight vector loaded (and, for f16, converted) serves both tokens, and a
 * decode step still runs four independent FMA chains.  Each output keeps
 * its own 8-lane accumulator over the columns in order. */
#include "pmpd_impl/weights/float/linear_float.h"

#if PMPD_USE_AVX2

#include <immintrin.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"

#define PMPD_LINEAR_AVX2_ROWS 4
#define PMPD_LINEAR_AVX2_TOKENS 2

/* The tile is instantiated per weight type and token count; inlining lets
 * those constants remove the branches and keep the accumulators in
 * registers. */
#if defined(__GNUC__)
#define PMPD_LINEAR_AVX2_INLINE static inline __attribute__((always_inline))
#else
#define PMPD_LINEAR_AVX2_INLINE static inline
#endif

/* Weights [index, index + n) as floats, n <= 8, zero-padded. */
PMPD_LINEAR_AVX2_INLINE __m256 pmpd_linear_avx2_weights(const void *data, int is_f16, size_t index, size_t n)
{
    float tmp[8] = {0};
    size_t i;
    if (!is_f16) {
        if (n == 8)
            return _mm256_loadu_ps((const float *)data + index);
        memcpy(tmp, (const float *)data + index, n * sizeof(float));
        return _mm256_loadu_ps(tmp);
    }
#if defined(__F16C__)
    if (n == 8)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)data + index)));
#endif
    for (i = 0; i < n; i++)
        tmp[i] = pmpd_f16_to_f32(((const uint16_t *)data)[index + i]);
    return _mm256_loadu_ps(tmp);
}

PMPD_LINEAR_AVX2_INLINE __m256 pmpd_linear_avx2_input(const float *x, size_t n)
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

/* Columns [c, c + n) of the tile into acc. */
PMPD_LINEAR_AVX2_INLINE void pmpd_linear_avx2_step(const void *data, int is_f16, size_t cols, const size_t *row,
                                                    const float *x, size_t n_tokens, size_t c, size_t n,
                                                    __m256 acc[PMPD_LINEAR_AVX2_ROWS][PMPD_LINEAR_AVX2_TOKENS])
{
    __m256 xv[PMPD_LINEAR_AVX2_TOKENS];
    size_t i, j;
    for (j = 0; j < n_tokens; j++)
        xv[j] = pmpd_linear_avx2_input(x + j * cols + c, n);
    for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++) {
        __m256 wv = pmpd_linear_avx2_weights(data, is_f16, row[i] * cols + c, n);
        for (j = 0; j < n_tokens; j++)
            acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
    }
}

/* Rows row[0..3] times tokens x[0 .. n_tokens) (n_tokens <= 2) into out[i][j]. */
PMPD_LINEAR_AVX2_INLINE void pmpd_linear_avx2_tile(const void *data, int is_f16, size_t cols, const size_t *row,
                                                    const float *x, size_t n_tokens,
                                                    float out[PMPD_LINEAR_AVX2_ROWS][PMPD_LINEAR_AVX2_TOKENS])
{
    __m256 acc[PMPD_LINEAR_AVX2_ROWS][PMPD_LINEAR_AVX2_TOKENS];
    size_t i, j, c;
    for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
        for (j = 0; j < n_tokens; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (c = 0; c + 8 <= cols; c += 8)
        pmpd_linear_avx2_step(data, is_f16, cols, row, x, n_tokens, c, 8, acc);
    if (c < cols)
        pmpd_linear_avx2_step(data, is_f16, cols, row, x, n_tokens, c, cols - c, acc);
    for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
        for (j = 0; j < n_tokens; j++)
            out[i][j] = pmpd_linear_avx2_sum(acc[i][j]);
}

PMPD_INTERNAL void pmpd_linear_float_simd(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                                          size_t begin, size_t end)
{
    size_t rows = (size_t)w->dims[0], cols = (size_t)w->dims[1], r0, t, i, j;
    int is_f16 = w->type == PMPD_TENSOR_F16;
    for (r0 = begin; r0 < end; r0 += PMPD_LINEAR_AVX2_ROWS) {
        /* A short last block repeats its last row (computed, not stored). */
        size_t row[PMPD_LINEAR_AVX2_ROWS];
        for (i = 0; i < PMPD_LINEAR_AVX2_ROWS; i++)
            row[i] = r0 + i < end ? r0 + i : end - 1;
        for (t = 0; t < n_tokens; t += PMPD_LINEAR_AVX2_TOKENS) {
            float out[PMPD_LINEAR_AVX2_ROWS][PMPD_LINEAR_AVX2_TOKENS];
            size_t nt = n_tokens - t < PMPD_LINEAR_AVX2_TOKENS ? n_tokens - t : PMPD_LINEAR_AVX2_TOKENS;
            const float *xt = x + t * cols;
            if (is_f16 && nt == 2)
                pmpd_linear_avx2_tile(w->data, 1, cols, row, xt, 2, out);
            else if (is_f16)
                pmpd_linear_avx2_tile(w->data, 1, cols, row, xt, 1, out);
            else if (nt == 2)
                pmpd_linear_avx2_tile(w->data, 0, cols, row, xt, 2, out);
            else
                pmpd_linear_avx2_tile(w->data, 0, cols, row, xt, 1, out);
            for (i = 0; i < PMPD_LINEAR_AVX2_ROWS && r0 + i < end; i++)
                for (j = 0; j < nt; j++)
                    y[(t + j) * rows + r0 + i] = out[i][j];
        }
    }
}

#undef PMPD_LINEAR_AVX2_ROWS
#undef PMPD_LINEAR_AVX2_TOKENS
#undef PMPD_LINEAR_AVX2_INLINE

#else
typedef int pmpd_linear_float_avx2_unused;
#endif
