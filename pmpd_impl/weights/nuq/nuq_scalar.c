/* The NUQ oracle: one (row, token) at a time, each index read through
 * pmpd_nuq_get (the layout's definition), summed in column order. */
#include "pmpd_impl/weights/nuq/nuq.h"

PMPD_INTERNAL void pmpd_nuq_matmul_scalar(const pmpd_nuq_matrix *m, const float *xr, size_t n_tokens,
                                          size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const float *levels = pmpd_nuq_levels(m->bits);
    size_t r, t, c;
    for (r = row_begin; r < row_end; r++) {
        const uint8_t *row = m->index + r * m->row_bytes;
        for (t = 0; t < n_tokens; t++) {
            const float *x = xr + t * m->padded;
            float sum = 0.0f;
            for (c = 0; c < m->rotation; c++)
                sum += levels[pmpd_nuq_get(row, c, m->bits)] * x[c];
            y[t * ldy + r] = m->scale[r] * sum;
        }
    }
}

/* Without a SIMD kernel for the target, the oracle is the kernel. */
#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const float *xr, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    pmpd_nuq_matmul_scalar(m, xr, n_tokens, row_begin, row_end, y, ldy);
}
#endif
