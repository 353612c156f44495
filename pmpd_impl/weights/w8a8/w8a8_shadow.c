/* The shadow path of W8A8 (w8a8.h): what saturation clipped from the hot
 * channels, times their float weights. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

PMPD_INTERNAL void pmpd_w8a8_shadow(const pmpd_w8a8_matrix *m, const float *x, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    float inverse = 1.0f / m->activation_scale;
    size_t t, h, r;
    for (t = 0; t < n_tokens; t++)
        for (h = 0; h < m->n_hot; h++) {
            float v = x[t * m->cols + m->hot[h]];
            float remainder = v - m->activation_scale * (float)pmpd_w8a8_quantize_one(v, inverse);
            const float *column = m->hot_weights + h * m->rows;
            /* Inside the range the remainder is only rounding, which the
             * integer product already accounts for: skip. */
            if (v >= -(float)PMPD_W8A8_QMAX * m->activation_scale && v <= (float)PMPD_W8A8_QMAX * m->activation_scale)
                continue;
            for (r = row_begin; r < row_end; r++)
                y[t * ldy + r] += remainder * column[r];
        }
}
