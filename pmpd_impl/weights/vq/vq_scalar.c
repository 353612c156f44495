/* The VQ oracle: one (row, token) at a time, each index read through
 * pmpd_vq_get (the layout's definition), an exact integer sum per block
 * of 16 pairs, the blocks' sums scaled and added in order. */
#include "pmpd_impl/weights/vq/vq.h"

PMPD_INTERNAL void pmpd_vq_matmul_scalar(const pmpd_vq_matrix *m, const void *act, size_t n_tokens,
                                         size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    const int8_t *book = pmpd_vq_book(m->pair_bits), *q;
    const float *d;
    const float unit = pmpd_vq_unit(m->pair_bits);
    const size_t blocks = m->padded / PMPD_VQ_BLOCK, half = PMPD_VQ_BLOCK / 2;
    size_t r, t, b, j;
    q = pmpd_rotated_act_q(act);
    d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    for (r = row_begin; r < row_end; r++) {
        const uint8_t *row = m->index + r * m->row_bytes;
        for (t = 0; t < n_tokens; t++) {
            float sum = 0.0f;
            for (b = 0; b < blocks; b++) {
                const int8_t *x = q + t * m->padded + b * PMPD_VQ_BLOCK;
                int32_t block = 0;
                for (j = 0; j < half; j++) {
                    const int8_t *point = book + 2 * pmpd_vq_get(row, b * half + j, m->pair_bits);
                    block += (int32_t)point[0] * x[j] + (int32_t)point[1] * x[half + j];
                }
                sum += (float)block * d[t * blocks + b];
            }
            y[t * ldy + r] = m->scale[r] * unit * sum;
        }
    }
}

/* Without a SIMD kernel for the target, the oracle is the kernel. */
#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
    pmpd_vq_matmul_scalar(m, act, n_tokens, row_begin, row_end, y, ldy);
}
#endif
