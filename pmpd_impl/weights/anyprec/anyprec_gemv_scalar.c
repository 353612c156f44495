/* Reference any-precision kernels: plain C, one weight at a time.  Every
 * SIMD kernel is tested against these and against a brute-force oracle. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

/* Table index of weight (r, c) at width bits: plane p's bit at bit p. */
static unsigned anyprec_scalar_index(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, uint32_t c)
{
    unsigned p, index = 0, bit, slot;
    uint32_t s;
    slot = pmpd_anyprec_slot(m, c, &s);
    for (p = 0; p < bits; p++) {
        const unsigned char *block = pmpd_anyprec_block(m, p, r, s);
        unsigned byte = pmpd_anyprec_bit_place(m->paired, p, slot, &bit);
        index |= ((block[byte] >> bit) & 1u) << p;
    }
    return index;
}

static unsigned anyprec_scalar_entry(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, uint32_t c)
{
    return m->tables[bits][((size_t)r << bits) + anyprec_scalar_index(m, bits, r, c)];
}

PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end)
{
    uint32_t r, s;
    for (r = row_begin; r < row_end; r++) {
        /* weight = scale * entry + offset, so the row is scale * (entries . x) + offset * sum(x). */
        const unsigned char *table = m->tables[bits] + ((size_t)r << bits);
        float dot_entries = 0.0f, dot_ones = 0.0f;
        for (s = 0; s * PMPD_ANYPREC_SUPER < m->cols; s++) {
            /* The superblock's planes are looked up once, and each group's
             * byte and bit per plane once (within a group a column's bit
             * is the same byte's next one over: bit_place adds j), not per
             * weight: that cost made this kernel slow on 32-bit cores. */
            /* A group's slots hold span consecutive columns (fewer in a
             * shared partial superblock, anyprec.h). */
            const unsigned char *block[PMPD_ANYPREC_MAX_BITS];
            const unsigned span = s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
            unsigned p, g, j, first[PMPD_ANYPREC_MAX_BITS], bit[PMPD_ANYPREC_MAX_BITS];
            for (p = 0; p < bits; p++)
                block[p] = pmpd_anyprec_block(m, p, r, s);
            for (g = 0; g < PMPD_ANYPREC_SUPER / PMPD_ANYPREC_GROUP; g++) {
                uint32_t c0 = s * PMPD_ANYPREC_SUPER + g * span;
                int32_t dot = 0, sum = 0;
                if (c0 >= m->cols)
                    break;
                for (p = 0; p < bits; p++)
                    first[p] = pmpd_anyprec_bit_place(m->paired, p, g * PMPD_ANYPREC_GROUP, &bit[p]);
                for (j = 0; j < span && c0 + j < m->cols; j++) {
                    unsigned index = 0;
                    for (p = 0; p < bits; p++)
                        index |= ((block[p][first[p] + j] >> bit[p]) & 1u) << p;
                    dot += (int32_t)table[index] * xq[c0 + j];
                    sum += xq[c0 + j];
                }
                dot_entries += (float)dot * xscale[c0 / PMPD_ANYPREC_GROUP];
                dot_ones += (float)sum * xscale[c0 / PMPD_ANYPREC_GROUP];
            }
        }
        y[r] = dot_entries * m->scales[bits][r] + dot_ones * m->offsets[bits][r];
    }
}

/* Weights (r, c0 .. c0+n-1) at width bits, in float. */
static void anyprec_scalar_decode(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, uint32_t c0, uint32_t n,
                                  float *out)
{
    uint32_t j;
    for (j = 0; j < n; j++)
        out[j] = m->scales[bits][r] * (float)anyprec_scalar_entry(m, bits, r, c0 + j) + m->offsets[bits][r];
}

PMPD_INTERNAL void pmpd_anyprec_row(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, float *out)
{
    anyprec_scalar_decode(m, bits, r, 0, m->cols, out);
}
