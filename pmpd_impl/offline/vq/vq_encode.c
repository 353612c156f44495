/* The VQ encoder (vq_build.h). */
#include "pmpd_impl/offline/vq/vq_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/rotated/rotated_build.h"
#include "pmpd_impl/offline/nuq/nuq_build.h"
#include "pmpd_impl/weights/vq/vq.h"

/* Scale refinements per row: the error stops moving after 2 or 3. */
#define VQ_SCALE_ROUNDS 4

PMPD_INTERNAL unsigned pmpd_vq_pair_bits(unsigned quarter_bits)
{
    return quarter_bits >= 8 && quarter_bits <= 16 && quarter_bits % 2 == 0 ? quarter_bits / 2 : 0;
}

PMPD_INTERNAL pmpd_status pmpd_vq_size(uint64_t rows, uint64_t cols, unsigned quarter_bits, uint64_t *bytes)
{
    pmpd_vq_layout layout;
    pmpd_status status = pmpd_vq_compute_layout(rows, cols, pmpd_vq_pair_bits(quarter_bits), &layout);
    if (status == PMPD_OK)
        *bytes = layout.total;
    return status;
}

/* The book sorted by first coordinate, for a nearest-point search that
 * walks out from the query's x and stops once dx^2 alone exceeds the best
 * distance: exact, and at 256 points about 20 times fewer distances than
 * pmpd_vq_nearest's brute force, which it matches (ties to the lowest
 * index). */
typedef struct vq_sorted_book {
    float x[256], y[256];
    unsigned index[256], points;
} vq_sorted_book;

static void vq_sort_book(const float *book, unsigned points, vq_sorted_book *s)
{
    unsigned i, j;
    s->points = points;
    for (i = 0; i < points; i++) {
        for (j = i; j > 0 && s->x[j - 1] > book[2 * i]; j--) {
            s->x[j] = s->x[j - 1];
            s->y[j] = s->y[j - 1];
            s->index[j] = s->index[j - 1];
        }
        s->x[j] = book[2 * i];
        s->y[j] = book[2 * i + 1];
        s->index[j] = i;
    }
}

/* Point i of s against the best so far. */
static void vq_consider(const vq_sorted_book *s, unsigned i, float x, float y, float *best, unsigned *best_index)
{
    float dx = x - s->x[i], dy = y - s->y[i], distance = dx * dx + dy * dy;
    if (distance < *best || (distance == *best && s->index[i] < *best_index)) {
        *best = distance;
        *best_index = s->index[i];
    }
}

static unsigned vq_nearest_sorted(const vq_sorted_book *s, float x, float y)
{
    unsigned low = 0, high = s->points, up, down, best_index = 0;
    float best = INFINITY;
    while (low < high) { /* the first point with x' >= x */
        unsigned mid = (low + high) / 2;
        if (s->x[mid] < x)
            low = mid + 1;
        else
            high = mid;
    }
    for (up = low; up < s->points && (s->x[up] - x) * (s->x[up] - x) <= best; up++)
        vq_consider(s, up, x, y, &best, &best_index);
    for (down = low; down-- > 0 && (x - s->x[down]) * (x - s->x[down]) <= best;)
        vq_consider(s, down, x, y, &best, &best_index);
    return best_index;
}

static void vq_put(uint8_t *row, size_t j, unsigned pair_bits, unsigned index)
{
    uint8_t *block = row + j / 16 * 2 * pair_bits;
    unsigned i = (unsigned)(j % 16), plane;
    if (pair_bits == 8) {
        block[i] = (uint8_t)index;
        return;
    }
    block[i % 8] |= (uint8_t)((index & 15u) << (i / 8 * 4));
    for (plane = 0; plane + 4 < pair_bits; plane++)
        block[8 + 2 * plane + i / 8] |= (uint8_t)((index >> (4 + plane) & 1u) << (i % 8));
}

/* One row's rounding of pairs to their nearest points at a fixed scale
 * (ldlq.h's pmpd_ldlq_round; a pair cut by an odd rotation has a zero
 * second coordinate). */
typedef struct vq_rounding {
    const float *book;
    const vq_sorted_book *sorted;
    unsigned pair_bits;
    float scale, inverse;
    uint8_t *row;
} vq_rounding;

static void vq_round(void *context, size_t begin, size_t end, const float *target, float *q)
{
    const vq_rounding *r = (const vq_rounding *)context;
    const float y = end - begin > 1 ? target[1] : 0.0f;
    const unsigned index = vq_nearest_sorted(r->sorted, target[0] * r->inverse, y * r->inverse);
    vq_put(r->row, begin / 2, r->pair_bits, index);
    q[0] = r->book[2 * index] * r->scale;
    if (end - begin > 1)
        q[1] = r->book[2 * index + 1] * r->scale;
}

/* Quantizes one rotated row v (n floats, zero up to 2 pairs) into row,
 * returns the scale; book is the codebook in floats, sorted its sorted
 * copy, work 2 n floats.  With ldlq the points are chosen by LDLQ at the
 * data-free scale, which is then refitted in H's norm. */
static float vq_quantize_row(const float *v, size_t n, const float *book, const vq_sorted_book *sorted,
                             unsigned pair_bits, const pmpd_ldlq *ldlq, uint8_t *row, float *work)
{
    const size_t pairs = (n + 1) / 2;
    vq_rounding rounding;
    double energy = 0;
    size_t j;
    int round;
    for (j = 0; j < 2 * pairs; j++)
        energy += (double)v[j] * v[j];
    if (!(energy > 0))
        return 0.0f; /* every index 0 (the row bytes are zeroed) */
    rounding.book = book;
    rounding.sorted = sorted;
    rounding.pair_bits = pair_bits;
    rounding.row = row;
    /* Start at the row's RMS (the book is for unit variance), then
     * alternate: nearest points for the scale, least-squares scale for the
     * points.  Each step lowers the squared error. */
    rounding.scale = (float)sqrt(energy / (double)(2 * pairs));
    for (round = 0; round < VQ_SCALE_ROUNDS; round++) {
        double vb = 0, bb = 0;
        float inverse = 1.0f / rounding.scale;
        for (j = 0; j < pairs; j++) {
            const float *point = book + 2 * vq_nearest_sorted(sorted, v[2 * j] * inverse, v[2 * j + 1] * inverse);
            vb += (double)v[2 * j] * point[0] + (double)v[2 * j + 1] * point[1];
            bb += (double)point[0] * point[0] + (double)point[1] * point[1];
        }
        if (!(vb > 0) || !(bb > 0))
            break;
        rounding.scale = (float)(vb / bb);
    }
    rounding.inverse = 1.0f / rounding.scale;
    pmpd_ldlq_row(ldlq, n, 2, v, vq_round, &rounding, work, work + n);
    return ldlq ? (float)(rounding.scale * pmpd_ldlq_rescale(ldlq, v, work + n)) : rounding.scale;
}

PMPD_INTERNAL pmpd_status pmpd_vq_encode(const float *values, size_t rows, size_t cols, unsigned quarter_bits,
                                         uint64_t seed, const pmpd_ldlq *ldlq, unsigned char *out, size_t size)
{
    const unsigned pair_bits = pmpd_vq_pair_bits(quarter_bits);
    pmpd_vq_layout layout;
    float book[2 * 256];
    vq_sorted_book sorted;
    pmpd_rotated rotated;
    float *v, *work;
    size_t r, k;
    if (pmpd_vq_compute_layout(rows, cols, pair_bits, &layout) != PMPD_OK || size != layout.total ||
        (ldlq && (ldlq->n != layout.rotation || ldlq->block != 2)))
        return PMPD_ERR_INVALID_ARGUMENT;
    rotated = pmpd_rotated_make(cols, layout.rotation, layout.padded, seed);
    /* padded >= 2 pairs: an odd rotation's last pair gets a zero second
     * coordinate. */
    v = (float *)malloc(layout.padded * sizeof *v);
    work = (float *)malloc(2 * layout.rotation * sizeof *work);
    if (!v || !work) {
        free(v);
        free(work);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    for (k = 0; k < 2u << pair_bits; k++)
        book[k] = (float)pmpd_vq_book(pair_bits)[k] * pmpd_vq_unit(pair_bits);
    vq_sort_book(book, 1u << pair_bits, &sorted);
    pmpd_rotated_put_header(out, size, "VQ2W", PMPD_VQ_VERSION, rows, cols, pair_bits, layout.rotation, seed);
    for (r = 0; r < rows; r++) {
        float scale;
        pmpd_rotated_rotate(&rotated, values + r * cols, v);
        scale = vq_quantize_row(v, layout.rotation, book, &sorted, pair_bits, ldlq,
                                out + layout.index_offset + r * layout.row_bytes, work);
        pmpd_le_put_f32(out + PMPD_VQ_HEADER_BYTES + 4 * r, scale);
    }
    free(v);
    free(work);
    return PMPD_OK;
}

#undef VQ_SCALE_ROUNDS
