/* VQ's input and row lookup on the rotated formats' rotation (vq.h,
 * weights/rotated/rotated.h): the same rotated int8 blocks, reordered so
 * that each block's pair coordinates lie in two halves. */
#include <string.h>

#include "pmpd_impl/weights/vq/vq.h"

PMPD_INTERNAL void pmpd_vq_pair_order(const pmpd_rotated *r, void *act, size_t begin, size_t end)
{
    int8_t *q = (int8_t *)act, *block, pairs[PMPD_VQ_BLOCK];
    size_t t, b, j;
    for (t = begin; t < end; t++)
        for (b = 0; b < r->padded; b += PMPD_VQ_BLOCK) {
            block = q + t * r->padded + b;
            memcpy(pairs, block, sizeof pairs);
            for (j = 0; j < PMPD_VQ_BLOCK / 2; j++) {
                block[j] = pairs[2 * j];
                block[PMPD_VQ_BLOCK / 2 + j] = pairs[2 * j + 1];
            }
        }
}

PMPD_INTERNAL void pmpd_vq_prepare_tokens(const pmpd_vq_matrix *m, const float *x, size_t begin, size_t end,
                                          size_t n_tokens, void *act, float *work)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    pmpd_rotated_prepare_tokens(&rotated, x, begin, end, n_tokens, act, work);
    pmpd_vq_pair_order(&rotated, act, begin, end);
}

/* Entries [k0, k0 + count) of one VQ row in the rotated basis: scale
 * times a coordinate of its pair's point. */
typedef struct vq_row_values {
    const uint8_t *row;
    const int8_t *book;
    unsigned pair_bits;
    float step; /* scale * unit */
} vq_row_values;

static void vq_row_decode(const void *context, size_t k0, size_t count, float *v)
{
    const vq_row_values *values = (const vq_row_values *)context;
    size_t k;
    for (k = k0; k < k0 + count; k++)
        v[k - k0] =
            values->step * (float)values->book[2 * pmpd_vq_get(values->row, k / 2, values->pair_bits) + k % 2];
}

PMPD_INTERNAL void pmpd_vq_row(const pmpd_vq_matrix *m, size_t r, float *out)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    vq_row_values values;
    values.row = m->index + r * m->row_bytes;
    values.book = pmpd_vq_book(m->pair_bits);
    values.pair_bits = m->pair_bits;
    values.step = m->scale[r] * pmpd_vq_unit(m->pair_bits);
    pmpd_rotated_row(&rotated, vq_row_decode, &values, out);
}
