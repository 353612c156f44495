/* Reference any-precision kernels: plain C, one weight at a time.  Every
 * SIMD kernel is tested against these and against a brute-force oracle. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

/* Table indexes (plane p's bit at bit p) of group g of superblock s of a
 * row whose planes there are block[p]: the group's columns from *c0 on,
 * span of them (fewer in a shared partial superblock, anyprec.h, and at
 * the row's end); returns how many, 0 past the row.  Each plane's byte and
 * bit are found once per group (within a group a column's bit is the same
 * byte's next one over: bit_place adds j), not per weight: that cost made
 * these kernels slow on 32-bit cores. */
static unsigned anyprec_scalar_group(const pmpd_anyprec_matrix *m, unsigned bits,
                                     const unsigned char *const *block, uint32_t s, unsigned g, uint32_t *c0,
                                     unsigned char *index)
{
    const unsigned span = s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
    unsigned p, j, n, first[PMPD_ANYPREC_MAX_BITS], bit[PMPD_ANYPREC_MAX_BITS];
    *c0 = s * PMPD_ANYPREC_SUPER + g * span;
    if (*c0 >= m->cols)
        return 0;
    n = m->cols - *c0 < span ? m->cols - *c0 : span;
    for (p = 0; p < bits; p++)
        first[p] = pmpd_anyprec_bit_place(m->paired, p, g * PMPD_ANYPREC_GROUP, &bit[p]);
    for (j = 0; j < n; j++) {
        unsigned i = 0;
        for (p = 0; p < bits; p++)
            i |= ((block[p][first[p] + j] >> bit[p]) & 1u) << p;
        index[j] = (unsigned char)i;
    }
    return n;
}

/* Row r's planes in superblock s. */
static void anyprec_scalar_blocks(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, uint32_t s,
                                  const unsigned char **block)
{
    unsigned p;
    for (p = 0; p < bits; p++)
        block[p] = pmpd_anyprec_block(m, p, r, s);
}

PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end)
{
    uint32_t r, s, c0;
    for (r = row_begin; r < row_end; r++) {
        /* weight = scale * entry + offset, so the row is scale * (entries . x) + offset * sum(x). */
        const unsigned char *table = m->tables[bits] + ((size_t)r << bits);
        float dot_entries = 0.0f, dot_ones = 0.0f;
        for (s = 0; s * PMPD_ANYPREC_SUPER < m->cols; s++) {
            const unsigned char *block[PMPD_ANYPREC_MAX_BITS];
            unsigned char index[PMPD_ANYPREC_GROUP];
            unsigned g, j, n;
            anyprec_scalar_blocks(m, bits, r, s, block);
            for (g = 0; g < PMPD_ANYPREC_SUPER / PMPD_ANYPREC_GROUP &&
                        (n = anyprec_scalar_group(m, bits, block, s, g, &c0, index)) > 0;
                 g++) {
                int32_t dot = 0, sum = 0;
                for (j = 0; j < n; j++) {
                    dot += (int32_t)table[index[j]] * xq[c0 + j];
                    sum += xq[c0 + j];
                }
                dot_entries += (float)dot * xscale[c0 / PMPD_ANYPREC_GROUP];
                dot_ones += (float)sum * xscale[c0 / PMPD_ANYPREC_GROUP];
            }
        }
        y[r] = dot_entries * m->scales[bits][r] + dot_ones * m->offsets[bits][r];
    }
}

/* Row r at width bits, in float, a group at a time as the GEMV reads it
 * (the embedding's lookup of a nested vocabulary: weight by weight it took
 * about 2% of a pycode21M decode step). */
PMPD_INTERNAL void pmpd_anyprec_row(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, float *out)
{
    const unsigned char *table = m->tables[bits] + ((size_t)r << bits);
    const float scale = m->scales[bits][r], offset = m->offsets[bits][r];
    uint32_t s, c0;
    for (s = 0; s * PMPD_ANYPREC_SUPER < m->cols; s++) {
        const unsigned char *block[PMPD_ANYPREC_MAX_BITS];
        unsigned char index[PMPD_ANYPREC_GROUP];
        unsigned g, j, n;
        anyprec_scalar_blocks(m, bits, r, s, block);
        for (g = 0; g < PMPD_ANYPREC_SUPER / PMPD_ANYPREC_GROUP &&
                    (n = anyprec_scalar_group(m, bits, block, s, g, &c0, index)) > 0;
             g++)
            for (j = 0; j < n; j++)
                out[c0 + j] = scale * (float)table[index[j]] + offset;
    }
}
