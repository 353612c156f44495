/* The TCQ oracle: one (row, token) at a time, every value decoded through
 * pmpd_tcq_window and pmpd_tcq_decode (the format's definition), an exact
 * integer sum per block of 32 rotated columns, the blocks' sums scaled and
 * added in order. */
#include "pmpd_impl/weights/tcq/tcq.h"

PMPD_INTERNAL void pmpd_tcq_matmul_scalar(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens,
                                          size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    const int16_t *table = pmpd_tcq_table();
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t blocks = m->padded / PMPD_ROTATED_BLOCK;
    const size_t blocks_per_sequence = PMPD_TCQ_SEQUENCE / PMPD_ROTATED_BLOCK;
    size_t r, t, b;
    unsigned step;
    for (r = row_begin; r < row_end; r++)
        for (t = 0; t < n_tokens; t++) {
            const int8_t *x = q + t * m->padded;
            float sum = 0.0f;
            for (b = 0; b < blocks; b++) {
                unsigned shift;
                const unsigned steps = pmpd_tcq_steps(m, b / blocks_per_sequence);
                const uint8_t *sequence = pmpd_tcq_sequence(m, r, b / blocks_per_sequence, &shift);
                const unsigned first = (unsigned)(b % blocks_per_sequence) * PMPD_ROTATED_BLOCK / 2;
                int32_t block = 0;
                for (step = first; step < first + PMPD_ROTATED_BLOCK / 2; step++) {
                    const size_t c = b / blocks_per_sequence * PMPD_TCQ_SEQUENCE + 2 * (size_t)step;
                    int32_t a, v;
                    pmpd_tcq_decode(pmpd_tcq_window(sequence, shift, steps, step), table, &a, &v);
                    block += a * x[c] + v * x[c + 1];
                }
                sum += (float)block * d[t * blocks + b];
            }
            y[t * ldy + r] = m->scale[r] * pmpd_tcq_unit() * sum;
        }
}

/* Without a SIMD kernel for the target, the oracle is the kernel. */
#if !PMPD_USE_AVX2 && !(PMPD_USE_NEON && defined(__aarch64__))
PMPD_INTERNAL void pmpd_tcq_matmul(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    pmpd_tcq_matmul_scalar(m, act, n_tokens, row_begin, row_end, y, ldy);
}
#endif
