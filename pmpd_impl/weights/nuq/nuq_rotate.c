/* The rotation of NUQ inputs and its inverse for the row lookup (nuq.h),
 * through the rotated input shared with the other rotated formats
 * (weights/rotated/rotated.h). */
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
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

/* Rotated columns decoded per pass of a padded row's inverse. */
#define NUQ_ROW_CHUNK 256

PMPD_INTERNAL void pmpd_nuq_row(const pmpd_nuq_matrix *m, size_t r, float *out)
{
    const float *levels = pmpd_nuq_levels(m->bits);
    const uint8_t *row = m->index + r * m->row_bytes;
    const float scale = m->scale[r];
    const pmpd_rotated rotated = pmpd_nuq_rotated(m);
    size_t c, k0, k;
    if (m->cols == m->rotation) {
        for (c = 0; c < m->cols; c++)
            out[c] = scale * levels[pmpd_nuq_get(row, c, m->bits)];
        pmpd_hadamard(out, m->rotation, 1);
    } else {
        float chunk[NUQ_ROW_CHUNK];
        memset(out, 0, m->cols * sizeof *out);
        for (k0 = 0; k0 < m->rotation; k0 += NUQ_ROW_CHUNK) {
            size_t count = m->rotation - k0 < NUQ_ROW_CHUNK ? m->rotation - k0 : NUQ_ROW_CHUNK;
            for (k = 0; k < count; k++)
                chunk[k] = scale * levels[pmpd_nuq_get(row, k0 + k, m->bits)];
            pmpd_rotated_unrotate_add(&rotated, chunk, k0, count, out, m->cols);
        }
    }
    pmpd_rotated_flip(m->seed, out, m->cols);
}

#undef NUQ_ROW_CHUNK
