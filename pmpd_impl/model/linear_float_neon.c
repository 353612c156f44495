/* NEON float products (AArch64): four weight rows at a time against one
 * token, four independent FMA chains; each output keeps its own 4-lane
 * accumulator. */
#include "pmpd_impl/model/linear_float.h"

#if PMPD_LINEAR_FLOAT_SIMD && PMPD_USE_NEON

#include <arm_neon.h>
#include <string.h>

#include "pmpd_impl/model/f16.h"

#define PMPD_LINEAR_NEON_ROWS 4

/* Weights [c, c+4) of row r as floats; n < 4 pads with zeros. */
static float32x4_t pmpd_linear_neon_weights(const pmpd_tensor *w, size_t cols, size_t r, size_t c, size_t n)
{
    float tmp[4] = {0};
    size_t i;
    if (w->type == PMPD_TENSOR_F32) {
        const float *p = (const float *)w->data + r * cols + c;
        if (n == 4)
            return vld1q_f32(p);
        memcpy(tmp, p, n * sizeof(float));
        return vld1q_f32(tmp);
    } else {
        const uint16_t *p = (const uint16_t *)w->data + r * cols + c;
        if (n == 4)
            return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
        for (i = 0; i < n; i++)
            tmp[i] = pmpd_f16_to_f32(p[i]);
        return vld1q_f32(tmp);
    }
}

static float32x4_t pmpd_linear_neon_input(const float *x, size_t n)
{
    float tmp[4] = {0};
    if (n == 4)
        return vld1q_f32(x);
    memcpy(tmp, x, n * sizeof(float));
    return vld1q_f32(tmp);
}

PMPD_INTERNAL void pmpd_linear_float_simd(const pmpd_tensor *w, const float *x, size_t n_tokens, float *y,
                                          size_t begin, size_t end)
{
    size_t rows = (size_t)w->dims[0], cols = (size_t)w->dims[1], r0, t, c, i;
    for (r0 = begin; r0 < end; r0 += PMPD_LINEAR_NEON_ROWS) {
        /* A short last block repeats its last row (computed, not stored). */
        size_t row[PMPD_LINEAR_NEON_ROWS];
        for (i = 0; i < PMPD_LINEAR_NEON_ROWS; i++)
            row[i] = r0 + i < end ? r0 + i : end - 1;
        for (t = 0; t < n_tokens; t++) {
            const float *xt = x + t * cols;
            float32x4_t acc[PMPD_LINEAR_NEON_ROWS];
            for (i = 0; i < PMPD_LINEAR_NEON_ROWS; i++)
                acc[i] = vdupq_n_f32(0.0f);
            for (c = 0; c < cols; c += 4) {
                size_t n = cols - c < 4 ? cols - c : 4;
                float32x4_t xv = pmpd_linear_neon_input(xt + c, n);
                for (i = 0; i < PMPD_LINEAR_NEON_ROWS; i++)
                    acc[i] = vfmaq_f32(acc[i], pmpd_linear_neon_weights(w, cols, row[i], c, n), xv);
            }
            for (i = 0; i < PMPD_LINEAR_NEON_ROWS && r0 + i < end; i++)
                y[t * rows + r0 + i] = vaddvq_f32(acc[i]);
        }
    }
}

#undef PMPD_LINEAR_NEON_ROWS

#else
typedef int pmpd_linear_float_neon_unused;
#endif
