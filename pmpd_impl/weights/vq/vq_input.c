/* VQ's input and row lookup on NUQ's rotation (vq.h): the same rotated
 * int8 blocks, reordered so that each block's pair coordinates lie in two
 * halves. */
#include <string.h>

#include "pmpd_impl/weights/vq/vq.h"

PMPD_INTERNAL void pmpd_vq_input(const pmpd_vq_matrix *m, pmpd_nuq_matrix *input)
{
    memset(input, 0, sizeof *input);
    input->rows = m->rows;
    input->cols = m->cols;
    input->rotation = m->rotation;
    input->padded = m->padded;
    input->seed = m->seed;
}

PMPD_INTERNAL void pmpd_vq_prepare_tokens(const pmpd_vq_matrix *m, const float *x, size_t begin, size_t end,
                                          size_t n_tokens, void *act, float *work)
{
    pmpd_nuq_matrix input;
    int8_t *q, *block, pairs[PMPD_VQ_BLOCK];
    size_t t, b, j;
    pmpd_vq_input(m, &input);
    pmpd_nuq_prepare_tokens(&input, x, begin, end, n_tokens, act, work);
    q = (int8_t *)(uintptr_t)pmpd_nuq_act_q(&input, act, n_tokens);
    for (t = begin; t < end; t++)
        for (b = 0; b < m->padded; b += PMPD_VQ_BLOCK) {
            block = q + t * m->padded + b;
            memcpy(pairs, block, sizeof pairs);
            for (j = 0; j < PMPD_VQ_BLOCK / 2; j++) {
                block[j] = pairs[2 * j];
                block[PMPD_VQ_BLOCK / 2 + j] = pairs[2 * j + 1];
            }
        }
}

/* Rotated entry k of one VQ row: scale times a coordinate of its pair's
 * point. */
typedef struct vq_row_values {
    const uint8_t *row;
    const int8_t *book;
    unsigned pair_bits;
    float step; /* scale * unit */
} vq_row_values;

static float vq_row_value(const void *context, size_t k)
{
    const vq_row_values *v = (const vq_row_values *)context;
    return v->step * (float)v->book[2 * pmpd_vq_get(v->row, k / 2, v->pair_bits) + k % 2];
}

PMPD_INTERNAL void pmpd_vq_row(const pmpd_vq_matrix *m, size_t r, float *out)
{
    pmpd_nuq_matrix input;
    vq_row_values values;
    pmpd_vq_input(m, &input);
    values.row = m->index + r * m->row_bytes;
    values.book = pmpd_vq_book(m->pair_bits);
    values.pair_bits = m->pair_bits;
    values.step = m->scale[r] * pmpd_vq_unit(m->pair_bits);
    pmpd_nuq_unrotate(&input, vq_row_value, &values, out);
}
