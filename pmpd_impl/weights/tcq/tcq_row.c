/* Rows of a TCQ matrix as floats (tcq.h): decoded in the rotated basis,
 * then rotated back through the shared rotated input's inverse. */
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/weights/tcq/tcq.h"

/* The 256 values of one sequence, times scale. */
static void tcq_decode_sequence(const uint8_t *sequence, unsigned shift, float scale, float *out)
{
    const int16_t *table = pmpd_tcq_table();
    unsigned step;
    for (step = 0; step < PMPD_TCQ_STEPS; step++) {
        int32_t a, b;
        pmpd_tcq_decode(pmpd_tcq_window(sequence, shift, step), table, &a, &b);
        out[2 * step] = scale * (float)a;
        out[2 * step + 1] = scale * (float)b;
    }
}

PMPD_INTERNAL void pmpd_tcq_rotated_row(const pmpd_tcq_matrix *m, size_t r, float *out)
{
    const float scale = m->scale[r] * pmpd_tcq_unit();
    size_t j;
    for (j = 0; j < m->sequences; j++) {
        unsigned shift;
        const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
        tcq_decode_sequence(sequence, shift, scale, out + j * PMPD_TCQ_SEQUENCE);
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
        const float scale = m->scale[r] * pmpd_tcq_unit();
        float values[PMPD_TCQ_SEQUENCE];
        size_t j;
        memset(out, 0, m->cols * sizeof *out);
        for (j = 0; j < m->sequences; j++) {
            const size_t first = j * PMPD_TCQ_SEQUENCE;
            const size_t count = m->rotation - first < PMPD_TCQ_SEQUENCE ? m->rotation - first : PMPD_TCQ_SEQUENCE;
            unsigned shift;
            const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
            tcq_decode_sequence(sequence, shift, scale, values);
            pmpd_rotated_unrotate_add(&rotated, values, first, count, out, m->cols);
        }
    }
    pmpd_rotated_flip(m->seed, out, m->cols);
}
