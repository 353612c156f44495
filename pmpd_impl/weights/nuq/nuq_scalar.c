/* The NUQ oracle: one (row, token) at a time, each code read through
 * pmpd_nuq_get (the layout's definition), an exact integer sum per block
 * of 32, the blocks' sums scaled and added in order. */
#include "pmpd_impl/weights/nuq/nuq.h"

PMPD_INTERNAL void pmpd_nuq_matmul_scalar(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens,
                                          size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const int8_t *levels = pmpd_nuq_levels_int8(m->bits);
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const float unit = pmpd_nuq_unit(m->bits);
    const size_t blocks = m->padded / PMPD_NUQ_BLOCK;
    size_t r, t, b, c;
    for (r = row_begin; r < row_end; r++) {
        const uint8_t *row = m->index + r * m->row_bytes;
        for (t = 0; t < n_tokens; t++) {
            float sum = 0.0f;
            for (b = 0; b < blocks; b++) {
                int32_t block = 0;
                for (c = b * PMPD_NUQ_BLOCK; c < (b + 1) * PMPD_NUQ_BLOCK; c++)
                    block += (int32_t)levels[pmpd_nuq_get(row, c, m->bits)] * q[t * m->padded + c];
                sum += (float)block * d[t * blocks + b];
            }
            y[t * ldy + r] = m->scale[r] * unit * sum;
        }
    }
}

/* Without a SIMD kernel for the target, the oracle is the kernel. */
#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    pmpd_nuq_matmul_scalar(m, act, n_tokens, row_begin, row_end, y, ldy);
}
#endif
