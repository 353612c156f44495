/* Reference any-precision kernels: plain C, one weight at a time.  Every
 * SIMD kernel is tested against these and against a brute-force oracle. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

/* A walk over one row's groups, superblock by superblock; start it zeroed. */
typedef struct anyprec_scalar_walk {
    uint32_t s;                                       /* superblock */
    unsigned g;                                       /* next group in it */
    const unsigned char *block[PMPD_ANYPREC_MAX_BITS]; /* the row's planes in s */
} anyprec_scalar_walk;

/* The table indexes (plane p's bit at bit p) of row r's next group: its
 * columns from *c0 on, a group's span of them (fewer in a shared partial
 * superblock, anyprec.h, and at the row's end); returns how many, 0 past
 * the row.  Each plane's byte and bit are found once per group (within a
 * group a column's bit is the same byte's next one over: bit_place adds
 * j), not per weight: that cost made these kernels slow on 32-bit cores. */
static unsigned anyprec_scalar_next(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r,
                                    anyprec_scalar_walk *w, uint32_t *c0, unsigned char *index)
{
    unsigned p, j, n, span, first[PMPD_ANYPREC_MAX_BITS], bit[PMPD_ANYPREC_MAX_BITS];
    if (w->g == PMPD_ANYPREC_SUPER / PMPD_ANYPREC_GROUP) {
        w->s++;
        w->g = 0;
    }
    span = w->s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
    *c0 = w->s * PMPD_ANYPREC_SUPER + w->g * span;
    if (*c0 >= m->cols)
        return 0;
    if (w->g == 0)
        for (p = 0; p < bits; p++)
            w->block[p] = pmpd_anyprec_block(m, p, r, w->s);
    n = m->cols - *c0 < span ? m->cols - *c0 : span;
    for (p = 0; p < bits; p++)
        first[p] = pmpd_anyprec_bit_place(m->paired, p, w->g * PMPD_ANYPREC_GROUP, &bit[p]);
    for (j = 0; j < n; j++) {
        unsigned i = 0;
        for (p = 0; p < bits; p++)
            i |= ((w->block[p][first[p] + j] >> bit[p]) & 1u) << p;
        index[j] = (unsigned char)i;
    }
    w->g++;
    return n;
}

PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end)
{
    uint32_t r, c0;
    for (r = row_begin; r < row_end; r++) {
        /* weight = scale * entry + offset, so the row is scale * (entries . x) + offset * sum(x). */
        const unsigned char *table = m->tables[bits] + ((size_t)r << bits);
        anyprec_scalar_walk w = { 0, 0, { NULL } };
        unsigned char index[PMPD_ANYPREC_GROUP];
        float dot_entries = 0.0f, dot_ones = 0.0f;
        unsigned j, n;
        while ((n = anyprec_scalar_next(m, bits, r, &w, &c0, index)) > 0) {
            int32_t dot = 0, sum = 0;
            for (j = 0; j < n; j++) {
                dot += (int32_t)table[index[j]] * xq[c0 + j];
                sum += xq[c0 + j];
            }
            dot_entries += (float)dot * xscale[c0 / PMPD_ANYPREC_GROUP];
            dot_ones += (float)sum * xscale[c0 / PMPD_ANYPREC_GROUP];
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
    anyprec_scalar_walk w = { 0, 0, { NULL } };
    unsigned char index[PMPD_ANYPREC_GROUP];
    uint32_t c0;
    unsigned j, n;
    while ((n = anyprec_scalar_next(m, bits, r, &w, &c0, index)) > 0)
        for (j = 0; j < n; j++)
            out[c0 + j] = scale * (float)table[index[j]] + offset;
}
