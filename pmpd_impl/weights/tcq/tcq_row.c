/* Rows of a TCQ matrix as floats (tcq.h): decoded in the rotated basis,
 * then rotated back through the shared rotated input's inverse. */
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/weights/tcq/tcq.h"

PMPD_INTERNAL void pmpd_tcq_rotated_row(const pmpd_tcq_matrix *m, size_t r, float *out)
{
    const int16_t *table = pmpd_tcq_table();
    const float scale = m->scale[r] * pmpd_tcq_unit();
    size_t j;
    unsigned step;
    for (j = 0; j < m->sequences; j++) {
        unsigned shift;
        const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
        float *values = out + j * PMPD_TCQ_SEQUENCE;
        for (step = 0; step < PMPD_TCQ_STEPS; step++) {
            int32_t a, b;
            pmpd_tcq_decode(pmpd_tcq_window(sequence, shift, step), table, &a, &b);
            values[2 * step] = scale * (float)a;
            values[2 * step + 1] = scale * (float)b;
        }
    }
}

PMPD_INTERNAL void pmpd_tcq_row(const pmpd_tcq_matrix *m, size_t r, float *out)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    if (m->cols == m->padded) {
        pmpd_tcq_rotated_row(m, r, out);
        pmpd_hadamard(out, m->rotation, 1);
    } else {
        /* No room for the padded row in out: one sequence at a time. */
        float sequence[PMPD_TCQ_SEQUENCE];
        pmpd_tcq_matrix one = *m;
        size_t j, count;
        memset(out, 0, m->cols * sizeof *out);
        for (j = 0; j < m->sequences; j++) {
            unsigned shift;
            one.bits = pmpd_tcq_sequence(m, r, j, &shift);
            one.shift[0] = one.shift[1] = shift;
            one.sequences = 1;
            one.scale = m->scale + r;
            pmpd_tcq_rotated_row(&one, 0, sequence);
            count = m->rotation - j * PMPD_TCQ_SEQUENCE;
            count = count < PMPD_TCQ_SEQUENCE ? count : PMPD_TCQ_SEQUENCE;
            pmpd_rotated_unrotate_add(&rotated, sequence, j * PMPD_TCQ_SEQUENCE, count, out, m->cols);
        }
    }
    pmpd_rotated_flip(m->seed, out, m->cols);
}
