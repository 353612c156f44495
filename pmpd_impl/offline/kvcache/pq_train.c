/*
 * Offline training of PQ KV-cache codebooks: k-means per subspace on
 * calibration K or V vectors (post-rotary keys), seeded by k-means++ from a
 * deterministic generator so the same data and seed give the same
 * codebook on every machine; and the writer of the codebook section.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/kvcache/pq_codebook.h"
#include "pmpd_impl/kvcache/pq_codebook_set.h"


static double pq_train_distance(const float *a, const float *b, uint32_t sub_dim)
{
    double d = 0.0;
    uint32_t j;
    for (j = 0; j < sub_dim; j++) {
        double diff = (double)a[j] - b[j];
        d += diff * diff;
    }
    return d;
}

/* Nearest centroid, lowest index on ties. */
static uint32_t pq_train_nearest(const float *x, const float *centroids, uint32_t k, uint32_t sub_dim, double *best)
{
    uint32_t c, index = 0;
    *best = INFINITY;
    for (c = 0; c < k; c++) {
        double d = pq_train_distance(x, centroids + (size_t)c * sub_dim, sub_dim);
        if (d < *best) {
            *best = d;
            index = c;
        }
    }
    return index;
}

/* k-means++: each next centroid is a sample drawn with probability
 * proportional to its squared distance to the centroids chosen so far. */
static void pq_train_seed(const float *x, size_t n, uint32_t sub_dim, uint32_t k, uint64_t *rng, float *centroids,
                          double *nearest)
{
    size_t i, pick = (size_t)(pmpd_splitmix64_next(rng) % n);
    uint32_t c;
    memcpy(centroids, x + pick * sub_dim, sub_dim * sizeof(float));
    for (i = 0; i < n; i++)
        nearest[i] = pq_train_distance(x + i * sub_dim, centroids, sub_dim);
    for (c = 1; c < k; c++) {
        double total = 0.0, target;
        for (i = 0; i < n; i++)
            total += nearest[i];
        pick = (size_t)(pmpd_splitmix64_next(rng) % n);
        if (total > 0.0) {
            target = pmpd_splitmix64_unit(rng) * total;
            for (i = 0; i + 1 < n && target >= nearest[i]; i++)
                target -= nearest[i];
            pick = i;
        }
        memcpy(centroids + (size_t)c * sub_dim, x + pick * sub_dim, sub_dim * sizeof(float));
        for (i = 0; i < n; i++) {
            double d = pq_train_distance(x + i * sub_dim, centroids + (size_t)c * sub_dim, sub_dim);
            if (d < nearest[i])
                nearest[i] = d;
        }
    }
}

/* Lloyd iterations until no assignment changes; an empty cluster keeps its
 * centroid. */
static void pq_train_lloyd(const float *x, size_t n, uint32_t sub_dim, uint32_t k, uint32_t iterations,
                           float *centroids, uint32_t *assign, double *sums, size_t *counts)
{
    uint32_t it, c, j;
    size_t i;
    for (i = 0; i < n; i++)
        assign[i] = UINT32_MAX;
    for (it = 0; it < iterations; it++) {
        size_t changed = 0;
        memset(sums, 0, (size_t)k * sub_dim * sizeof(double));
        memset(counts, 0, (size_t)k * sizeof(size_t));
        for (i = 0; i < n; i++) {
            double best;
            uint32_t a = pq_train_nearest(x + i * sub_dim, centroids, k, sub_dim, &best);
            changed += a != assign[i];
            assign[i] = a;
            counts[a]++;
            for (j = 0; j < sub_dim; j++)
                sums[(size_t)a * sub_dim + j] += x[i * sub_dim + j];
        }
        if (changed == 0)
            break;
        for (c = 0; c < k; c++)
            if (counts[c])
                for (j = 0; j < sub_dim; j++)
                    centroids[(size_t)c * sub_dim + j] = (float)(sums[(size_t)c * sub_dim + j] / (double)counts[c]);
    }
}

pmpd_status pmpd_pq_train_codebook(const float *vectors, size_t count, uint32_t dim, uint32_t sub_dim, uint32_t bits,
                                   uint32_t iterations, uint64_t seed, float *centroids)
{
    pmpd_pq_layout layout;
    float *x = NULL;
    double *nearest = NULL, *sums = NULL;
    uint32_t *assign = NULL;
    size_t *counts = NULL, i, bytes;
    uint64_t rng = seed;
    uint32_t s, j;
    pmpd_status status = PMPD_OK;
    if (!vectors || !centroids || count == 0 || pmpd_pq_layout_init(&layout, dim, sub_dim, bits) != PMPD_OK)
        return PMPD_ERR_INVALID_ARGUMENT;
    for (i = 0; i < count * dim; i++)
        if (!isfinite(vectors[i]))
            return PMPD_ERR_INVALID_ARGUMENT;
    if (!pmpd_checked_mul(count, sub_dim * sizeof(float), &bytes))
        return PMPD_ERR_OVERFLOW;
    x = (float *)malloc(bytes);
    nearest = (double *)malloc(count * sizeof(double));
    assign = (uint32_t *)malloc(count * sizeof(uint32_t));
    sums = (double *)malloc((size_t)layout.n_centroids * sub_dim * sizeof(double));
    counts = (size_t *)malloc((size_t)layout.n_centroids * sizeof(size_t));
    if (!x || !nearest || !assign || !sums || !counts) {
        status = PMPD_ERR_OUT_OF_MEMORY;
    } else {
        for (s = 0; s < layout.n_sub; s++) {
            float *book = centroids + (size_t)s * layout.n_centroids * sub_dim;
            for (i = 0; i < count; i++)
                for (j = 0; j < sub_dim; j++)
                    x[i * sub_dim + j] = vectors[i * dim + (size_t)s * sub_dim + j];
            pq_train_seed(x, count, sub_dim, layout.n_centroids, &rng, book, nearest);
            pq_train_lloyd(x, count, sub_dim, layout.n_centroids, iterations, book, assign, sums, counts);
        }
    }
    free(x);
    free(nearest);
    free(assign);
    free(sums);
    free(counts);
    return status;
}

pmpd_status pmpd_pq_section_write(uint32_t head_dim, uint32_t key_sub_dim, uint32_t value_sub_dim, uint32_t bits,
                                  uint32_t n_books, const float *centroids, void *out, size_t out_size,
                                  size_t *written)
{
    pmpd_pq_layout keys, values;
    size_t floats, bytes, i;
    unsigned char *p = (unsigned char *)out;
    uint32_t header[8];
    if (!written || n_books == 0 || pmpd_pq_layout_init(&keys, head_dim, key_sub_dim, bits) != PMPD_OK ||
        pmpd_pq_layout_init(&values, head_dim, value_sub_dim, bits) != PMPD_OK)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (!pmpd_checked_mul(pmpd_pq_codebook_floats(&keys) + pmpd_pq_codebook_floats(&values), n_books, &floats) ||
        !pmpd_checked_mul(floats, sizeof(float), &bytes) ||
        !pmpd_checked_add(bytes, PMPD_PQ_SECTION_HEADER_BYTES, &bytes))
        return PMPD_ERR_OVERFLOW;
    *written = bytes;
    if (!out)
        return PMPD_OK;
    if (!centroids || out_size < bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(header, 0, sizeof header);
    header[0] = head_dim;
    header[1] = key_sub_dim;
    header[2] = value_sub_dim;
    header[3] = bits;
    header[4] = n_books;
    for (i = 0; i < 8; i++)
        pmpd_le_put_u32(p + 4 * i, header[i]);
    for (i = 0; i < floats; i++) {
        uint32_t word;
        memcpy(&word, centroids + i, sizeof word);
        pmpd_le_put_u32(p + PMPD_PQ_SECTION_HEADER_BYTES + 4 * i, word);
    }
    return PMPD_OK;
}
