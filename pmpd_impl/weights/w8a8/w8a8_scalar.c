/* The W8A8 oracle: plain integer sums, one (row, token) at a time. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

PMPD_INTERNAL void pmpd_w8a8_act_quantize_scalar(const pmpd_w8a8_matrix *m, const float *x, size_t begin,
                                                 size_t end, int8_t *q)
{
    float inverse = 1.0f / m->activation_scale;
    size_t t, c;
    for (t = begin; t < end; t++)
        for (c = 0; c < m->padded_cols; c++)
            q[t * m->padded_cols + c] =
                (int8_t)(c < m->cols ? pmpd_w8a8_quantize_one(x[t * m->cols + c], inverse) : 0);
}

PMPD_INTERNAL void pmpd_w8a8_matmul_scalar(const pmpd_w8a8_matrix *m, const int8_t *q, size_t n_tokens,
                                           size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    size_t r, t, c;
    for (r = row_begin; r < row_end; r++) {
        const int8_t *w = m->weights + r * m->padded_cols;
        for (t = 0; t < n_tokens; t++) {
            const int8_t *a = q + t * m->padded_cols;
            int32_t sum = 0;
            for (c = 0; c < m->cols; c++)
                sum += (int32_t)w[c] * a[c];
            y[t * ldy + r] = pmpd_w8a8_output(m, r, sum);
        }
    }
}
