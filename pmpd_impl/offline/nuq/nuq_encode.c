/* The NUQ encoder (nuq_build.h). */
#include "pmpd_impl/offline/nuq/nuq_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/hadamard.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/rotated/rotated_build.h"
#include "pmpd_impl/weights/nuq/nuq.h"

/* Scale refinements per row: the error stops moving after 2 or 3. */
#define NUQ_SCALE_ROUNDS 4

PMPD_INTERNAL pmpd_status pmpd_nuq_size(uint64_t rows, uint64_t cols, unsigned bits, uint64_t *bytes)
{
    pmpd_nuq_layout layout;
    pmpd_status status = pmpd_nuq_compute_layout(rows, cols, bits, &layout);
    if (status == PMPD_OK)
        *bytes = layout.total;
    return status;
}

/* The code of the level nearest v (nuq.h: sign bit over the index of the
 * nearest positive level; the levels are symmetric). */
static unsigned nuq_nearest(float v, const float *levels, unsigned count)
{
    const unsigned half = count / 2;
    float a = v < 0.0f ? -v : v;
    unsigned m = 0;
    while (m + 1 < half && a > 0.5f * (levels[m] + levels[m + 1]))
        m++;
    return v < 0.0f ? half | m : m;
}

static void nuq_put(uint8_t *row, size_t c, unsigned bits, unsigned index)
{
    uint8_t *block = row + c / PMPD_NUQ_BLOCK * 4 * bits;
    unsigned j = (unsigned)(c % PMPD_NUQ_BLOCK);
    if (bits == 4) {
        block[j % 16] |= (uint8_t)(index << (j / 16 * 4));
    } else {
        block[j % 8] |= (uint8_t)((index & 3u) << (j / 8 * 2));
        if (bits == 3 && (index & 4u)) {
            unsigned bit = 4 * (j % 8) + j / 8;
            block[8 + bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
    }
}

/* One row's rounding to the nearest level at a fixed scale (ldlq.h's
 * pmpd_ldlq_round). */
typedef struct nuq_rounding {
    const float *levels;
    unsigned count, bits;
    float scale, inverse;
    uint8_t *row;
} nuq_rounding;

static void nuq_round(void *context, size_t begin, size_t end, const float *target, float *q)
{
    const nuq_rounding *n = (const nuq_rounding *)context;
    size_t c;
    for (c = begin; c < end; c++) {
        const unsigned index = nuq_nearest(target[c - begin] * n->inverse, n->levels, n->count);
        nuq_put(n->row, c, n->bits, index);
        q[c - begin] = n->levels[index] * n->scale;
    }
}

/* Quantizes one rotated row v (n floats) into row, returns the scale;
 * work holds 2 n floats.  With ldlq the levels are chosen by LDLQ at the
 * data-free scale, which is then refitted in H's norm. */
static float nuq_quantize_row(const float *v, size_t n, unsigned bits, const pmpd_ldlq *ldlq, uint8_t *row,
                              float *work)
{
    nuq_rounding rounding;
    double energy = 0;
    size_t c;
    int round;
    rounding.levels = pmpd_nuq_levels(bits);
    rounding.count = 1u << bits;
    rounding.bits = bits;
    rounding.row = row;
    for (c = 0; c < n; c++)
        energy += (double)v[c] * v[c];
    if (!(energy > 0)) {
        for (c = 0; c < n; c++)
            nuq_put(row, c, bits, 0);
        return 0.0f;
    }
    /* Start at the row's RMS (the levels are for unit variance), then
     * alternate: nearest levels for the scale, least-squares scale for the
     * levels.  Each step lowers the squared error. */
    rounding.scale = (float)sqrt(energy / (double)n);
    for (round = 0; round < NUQ_SCALE_ROUNDS; round++) {
        double vl = 0, ll = 0;
        float inverse = 1.0f / rounding.scale;
        for (c = 0; c < n; c++) {
            const float level = rounding.levels[nuq_nearest(v[c] * inverse, rounding.levels, rounding.count)];
            vl += (double)v[c] * level;
            ll += (double)level * level;
        }
        if (!(vl > 0) || !(ll > 0))
            break;
        rounding.scale = (float)(vl / ll);
    }
    rounding.inverse = 1.0f / rounding.scale;
    pmpd_ldlq_row(ldlq, n, 1, v, nuq_round, &rounding, work, work + n);
    return ldlq ? (float)(rounding.scale * pmpd_ldlq_rescale(ldlq, v, work + n)) : rounding.scale;
}

PMPD_INTERNAL pmpd_status pmpd_nuq_encode(const float *values, size_t rows, size_t cols, unsigned bits,
                                          uint64_t seed, const pmpd_ldlq *ldlq, unsigned char *out, size_t size)
{
    pmpd_nuq_layout layout;
    pmpd_rotated rotated;
    float *v, *work;
    size_t r;
    if (pmpd_nuq_compute_layout(rows, cols, bits, &layout) != PMPD_OK || size != layout.total ||
        (ldlq && (ldlq->n != layout.rotation || ldlq->block != 1)))
        return PMPD_ERR_INVALID_ARGUMENT;
    rotated = pmpd_rotated_make(cols, layout.rotation, layout.padded, seed);
    v = (float *)malloc(layout.padded * sizeof *v);
    work = (float *)malloc(2 * layout.rotation * sizeof *work);
    if (!v || !work) {
        free(v);
        free(work);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_rotated_put_header(out, size, "NUQW", PMPD_NUQ_VERSION, rows, cols, bits, layout.rotation, seed);
    for (r = 0; r < rows; r++) {
        float scale;
        pmpd_rotated_rotate(&rotated, values + r * cols, v);
        scale = nuq_quantize_row(v, layout.rotation, bits, ldlq, out + layout.index_offset + r * layout.row_bytes,
                                 work);
        pmpd_le_put_f32(out + PMPD_NUQ_HEADER_BYTES + 4 * r, scale);
    }
    free(v);
    free(work);
    return PMPD_OK;
}

#undef NUQ_SCALE_ROUNDS
