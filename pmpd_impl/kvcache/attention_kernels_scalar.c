/* The scalar reference of every KV-cache kernel: plain loops in the order
 * the definitions in attention_kernels.h read, the oracle for the SIMD sets. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/kvcache/attention_kernels.h"

/* Bit-level conversion so that the reference needs no compiler half type. */
static float pq_scalar_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (exponent == 0x1fu) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else {
        /* Zero or subnormal: the value is mantissa * 2^-24 exactly. */
        f = ldexpf((float)mantissa, -24);
        return sign ? -f : f;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element d of row t, stored as f32 or binary16. */
static float kv_scalar_row_value(const void *rows, size_t stride, size_t t, uint32_t d, int half)
{
    if (half)
        return pq_scalar_half_to_float(((const uint16_t *)rows)[t * stride + d]);
    return ((const float *)rows)[t * stride + d];
}

/* Key d of position t: f32 rows, or binary16 blocks (blocked). */
static float kv_scalar_key(const void *keys, size_t stride, size_t t, uint32_t d, uint32_t dim, int blocked)
{
    if (blocked)
        return pq_scalar_half_to_float(((const uint16_t *)keys)[pmpd_kv_key_at(t, d, dim)]);
    return ((const float *)keys)[t * stride + d];
}

static void kv_scalar_row_scores(const float *qt, uint32_t lanes, uint32_t dim, const void *keys, size_t stride,
                                 size_t n, float *scores, float *max, int blocked)
{
    size_t t;
    uint32_t d, l;
    for (t = 0; t < n; t++) {
        float *s = scores + t * lanes;
        for (l = 0; l < lanes; l++)
            s[l] = 0.0f;
        for (d = 0; d < dim; d++) {
            float v = kv_scalar_key(keys, stride, t, d, dim, blocked);
            for (l = 0; l < lanes; l++)
                s[l] += qt[d * lanes + l] * v;
        }
        for (l = 0; l < lanes; l++)
            if (s[l] > max[l])
                max[l] = s[l];
    }
}

static void kv_scalar_row_accumulate(const float *weights, uint32_t lanes, uint32_t dim, const void *rows,
                                     size_t stride, size_t n, float *acc, int half)
{
    size_t t;
    uint32_t d, l;
    for (t = 0; t < n; t++) {
        const float *w = weights + t * lanes;
        for (d = 0; d < dim; d++) {
            float v = kv_scalar_row_value(rows, stride, t, d, half);
            for (l = 0; l < lanes; l++)
                acc[d * lanes + l] += w[l] * v;
        }
    }
}

void pmpd_kv_row_scores_scalar(const float *qt, uint32_t lanes, uint32_t dim, const float *rows, size_t stride,
                               size_t n, float *scores, float *max)
{
    kv_scalar_row_scores(qt, lanes, dim, rows, stride, n, scores, max, 0);
}

void pmpd_kv_row_accumulate_scalar(const float *weights, uint32_t lanes, uint32_t dim, const float *rows,
                                   size_t stride, size_t n, float *acc)
{
    kv_scalar_row_accumulate(weights, lanes, dim, rows, stride, n, acc, 0);
}

void pmpd_kv_block_scores_f16_scalar(const float *qt, uint32_t lanes, uint32_t dim, const uint16_t *blocks,
                                     size_t n, float *scores, float *max)
{
    kv_scalar_row_scores(qt, lanes, dim, blocks, 0, n, scores, max, 1);
}

void pmpd_kv_row_accumulate_f16_scalar(const float *weights, uint32_t lanes, uint32_t dim, const uint16_t *rows,
                                       size_t stride, size_t n, float *acc)
{
    kv_scalar_row_accumulate(weights, lanes, dim, rows, stride, n, acc, 1);
}

void pmpd_kv_exp_scalar(float *x, uint32_t lanes, size_t n, const float *max, float *sum)
{
    size_t t;
    uint32_t l;
    for (t = 0; t < n; t++)
        for (l = 0; l < lanes; l++) {
            float e = expf(x[t * lanes + l] - max[l]);
            x[t * lanes + l] = e;
            sum[l] += e;
        }
}


void pmpd_kv_f16_to_f32_scalar(const uint16_t *src, size_t n, float *dst)
{
    size_t i;
    for (i = 0; i < n; i++)
        dst[i] = pq_scalar_half_to_float(src[i]);
}

void pmpd_pq_lut_scalar(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes, float *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++)
        for (c = 0; c < lay->n_centroids; c++) {
            const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
            float *out = lut + ((size_t)s * lay->n_centroids + c) * lanes;
            for (l = 0; l < lanes; l++)
                out[l] = 0.0f;
            for (j = 0; j < lay->sub_dim; j++)
                for (l = 0; l < lanes; l++)
                    out[l] += qt[(s * lay->sub_dim + j) * lanes + l] * centroid[j];
        }
}

void pmpd_pq_scores_scalar(const float *lut, const pmpd_pq_layout *layout, uint32_t lanes,
                           const uint8_t *codes, size_t n, float *scores, float *max)
{
    size_t t;
    uint32_t s, l;
    for (t = 0; t < n; t++) {
        float *out = scores + t * lanes;
        for (l = 0; l < lanes; l++)
            out[l] = 0.0f;
        for (s = 0; s < layout->n_sub; s++) {
            const float *entry = lut + ((size_t)s * layout->n_centroids + pmpd_pq_code(layout, codes, t, s)) * lanes;
            for (l = 0; l < lanes; l++)
                out[l] += entry[l];
        }
        for (l = 0; l < lanes; l++)
            if (out[l] > max[l])
                max[l] = out[l];
    }
}

void pmpd_pq_bins_scalar(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout,
                         const uint8_t *codes, size_t n, float *bins)
{
    size_t t;
    uint32_t s, l;
    for (t = 0; t < n; t++) {
        const float *w = weights + t * lanes;
        for (s = 0; s < layout->n_sub; s++) {
            float *bin = bins + ((size_t)s * layout->n_centroids + pmpd_pq_code(layout, codes, t, s)) * lanes;
            for (l = 0; l < lanes; l++)
                bin[l] += w[l];
        }
    }
}

void pmpd_pq_bins_times_codebook_scalar(const float *bins, const pmpd_pq_codebook *book, uint32_t lanes,
                                        float *acc)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++)
        for (c = 0; c < lay->n_centroids; c++) {
            const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
            const float *bin = bins + ((size_t)s * lay->n_centroids + c) * lanes;
            for (j = 0; j < lay->sub_dim; j++)
                for (l = 0; l < lanes; l++)
                    acc[(s * lay->sub_dim + j) * lanes + l] += bin[l] * centroid[j];
        }
}

void pmpd_pq_values_scalar(const float *weights, uint32_t lanes, const pmpd_pq_codebook *book, const uint8_t *codes,
                         size_t n, float *bins, float *acc)
{
    PMPD_PQ_VALUES_BY_BINS(scalar, weights, lanes, book, codes, n, bins, acc);
}

uint32_t pmpd_pq_nearest_scalar(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    uint32_t c, j, best = 0;
    float best_distance = INFINITY;
    for (c = 0; c < n_centroids; c++) {
        float distance = 0.0f;
        for (j = 0; j < sub_dim; j++) {
            float diff = columns[j * n_centroids + c] - x[j];
            distance += diff * diff;
        }
        if (distance < best_distance) {
            best = c;
            best_distance = distance;
        }
    }
    return best;
}
