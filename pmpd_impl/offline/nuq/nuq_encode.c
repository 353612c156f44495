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

/* Quantizes one rotated row v (n floats): indices into row, returns the scale. */
static float nuq_quantize_row(const float *v, size_t n, unsigned bits, uint8_t *row, unsigned *idx)
{
    const float *levels = pmpd_nuq_levels(bits);
    const unsigned count = 1u << bits;
    double energy = 0;
    float scale;
    size_t c;
    int round;
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
    scale = (float)sqrt(energy / (double)n);
    for (round = 0; round < NUQ_SCALE_ROUNDS; round++) {
        double vl = 0, ll = 0;
        float inverse = 1.0f / scale;
        for (c = 0; c < n; c++) {
            idx[c] = nuq_nearest(v[c] * inverse, levels, count);
            vl += (double)v[c] * levels[idx[c]];
            ll += (double)levels[idx[c]] * levels[idx[c]];
        }
        if (!(vl > 0) || !(ll > 0))
            break;
        scale = (float)(vl / ll);
    }
    {
        float inverse = 1.0f / scale;
        for (c = 0; c < n; c++)
            nuq_put(row, c, bits, nuq_nearest(v[c] * inverse, levels, count));
    }
    return scale;
}

PMPD_INTERNAL pmpd_status pmpd_nuq_encode(const float *values, size_t rows, size_t cols, unsigned bits,
                                          uint64_t seed, unsigned char *out, size_t size)
{
    pmpd_nuq_layout layout;
    pmpd_rotated rotated;
    float *v;
    unsigned *idx;
    size_t r;
    if (pmpd_nuq_compute_layout(rows, cols, bits, &layout) != PMPD_OK || size != layout.total)
        return PMPD_ERR_INVALID_ARGUMENT;
    rotated = pmpd_rotated_make(cols, layout.rotation, layout.padded, seed);
    v = (float *)malloc(layout.padded * sizeof *v);
    idx = (unsigned *)malloc(layout.rotation * sizeof *idx);
    if (!v || !idx) {
        free(v);
        free(idx);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_rotated_put_header(out, size, "NUQW", PMPD_NUQ_VERSION, rows, cols, bits, layout.rotation, seed);
    for (r = 0; r < rows; r++) {
        float scale;
        pmpd_rotated_rotate(&rotated, values + r * cols, v);
        scale = nuq_quantize_row(v, layout.rotation, bits, out + layout.index_offset + r * layout.row_bytes, idx);
        pmpd_le_put_f32(out + PMPD_NUQ_HEADER_BYTES + 4 * r, scale);
    }
    free(v);
    free(idx);
    return PMPD_OK;
}

#undef NUQ_SCALE_ROUNDS
