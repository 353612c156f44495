/* The rotation of NUQ inputs and its inverse for the row lookup (nuq.h),
 * through the rotated input shared with the other rotated formats
 * (weights/rotated/rotated.h). */
#include "pmpd_impl/weights/nuq/nuq.h"

PMPD_INTERNAL void pmpd_nuq_signs(uint64_t seed, uint64_t *signs, size_t words)
{
    pmpd_rotated_signs(seed, signs, words);
}

PMPD_INTERNAL void pmpd_nuq_prepare_tokens(const pmpd_nuq_matrix *m, const float *x, size_t begin, size_t end,
                                           size_t n_tokens, void *act, float *work)
{
    const pmpd_rotated r = pmpd_nuq_rotated(m);
    pmpd_rotated_prepare_tokens(&r, x, begin, end, n_tokens, act, work);
}

/* Entries [k0, k0 + count) of one NUQ row in the rotated basis: scale *
 * level. */
typedef struct nuq_row_values {
    const uint8_t *row;
    unsigned bits;
    float scale;
} nuq_row_values;

static void nuq_row_decode(const void *context, size_t k0, size_t count, float *v)
{
    const nuq_row_values *values = (const nuq_row_values *)context;
    const float *levels = pmpd_nuq_levels(values->bits);
    size_t k;
    for (k = 0; k < count; k++)
        v[k] = values->scale * levels[pmpd_nuq_get(values->row, k0 + k, values->bits)];
}

PMPD_INTERNAL void pmpd_nuq_row(const pmpd_nuq_matrix *m, size_t r, float *out)
{
    const pmpd_rotated rotated = pmpd_nuq_rotated(m);
    nuq_row_values values;
    values.row = m->index + r * m->row_bytes;
    values.bits = m->bits;
    values.scale = m->scale[r];
    pmpd_rotated_row(&rotated, nuq_row_decode, &values, out);
}
