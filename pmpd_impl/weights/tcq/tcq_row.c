/* Rows of a TCQ matrix as floats (tcq.h): decoded in the rotated basis,
 * then rotated back through the shared rotated input's inverse. */
#include <string.h>

#include "pmpd_impl/weights/tcq/tcq.h"

/* The values (two per step) of sequence j of row r, times scale. */
static void tcq_decode_sequence(const pmpd_tcq_matrix *m, size_t r, size_t j, float scale, float *out)
{
    const int16_t *table = pmpd_tcq_table();
    const unsigned steps = pmpd_tcq_steps(m, j);
    unsigned shift, step;
    const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
    for (step = 0; step < steps; step++) {
        int32_t a, b;
        pmpd_tcq_decode(pmpd_tcq_window(sequence, shift, steps, step), table, &a, &b);
        out[2 * step] = scale * (float)a;
        out[2 * step + 1] = scale * (float)b;
    }
}

PMPD_INTERNAL void pmpd_tcq_rotated_row(const pmpd_tcq_matrix *m, size_t r, float *out)
{
    const float scale = m->scale[r] * pmpd_tcq_unit();
    size_t j;
    for (j = 0; j < m->sequences; j++)
        tcq_decode_sequence(m, r, j, scale, out + j * PMPD_TCQ_SEQUENCE);
}

/* Entries [k0, k0 + count) of one TCQ row in the rotated basis, k0 a
 * multiple of PMPD_ROTATED_ROW_CHUNK and so of PMPD_TCQ_SEQUENCE: whole
 * sequences, the last one cut through a copy. */
typedef struct tcq_row_values {
    const pmpd_tcq_matrix *m;
    size_t r;
    float scale;
} tcq_row_values;

typedef char tcq_row_chunk_is_whole_sequences[PMPD_ROTATED_ROW_CHUNK % PMPD_TCQ_SEQUENCE == 0 ? 1 : -1];

static void tcq_row_decode(const void *context, size_t k0, size_t count, float *v)
{
    const tcq_row_values *values = (const tcq_row_values *)context;
    float last[PMPD_TCQ_SEQUENCE];
    size_t k;
    for (k = 0; k < count; k += PMPD_TCQ_SEQUENCE) {
        const size_t j = (k0 + k) / PMPD_TCQ_SEQUENCE, length = 2 * (size_t)pmpd_tcq_steps(values->m, j);
        const size_t n = count - k < length ? count - k : length;
        tcq_decode_sequence(values->m, values->r, j, values->scale, n == length ? v + k : last);
        if (n < length)
            memcpy(v + k, last, n * sizeof *v);
    }
}

PMPD_INTERNAL void pmpd_tcq_row(const pmpd_tcq_matrix *m, size_t r, float *out)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    tcq_row_values values;
    values.m = m;
    values.r = r;
    values.scale = m->scale[r] * pmpd_tcq_unit();
    pmpd_rotated_row(&rotated, tcq_row_decode, &values, out);
}
