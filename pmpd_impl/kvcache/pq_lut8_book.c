/* The key codebook's tables for the 8-bit key tables (pq_lut8.h), made
 * once with the cache: the codebook transposed and, for 2-dim subspaces,
 * the convex hull of each subspace's centroids.  A table build needs, per
 * query and subspace, the least and the largest q . c over the centroids,
 * which a linear function takes at hull vertices: some 20-40 of 256
 * k-means centroids in 2 dimensions, so that pass reads two or three
 * vectors of them instead of sixteen. */
#include "pmpd_impl/kvcache/pq_lut8.h"

/* Points a before b: by x, then by y. */
static int lut8_before(const float *p, uint32_t a, uint32_t b)
{
    return p[2 * a] < p[2 * b] || (p[2 * a] == p[2 * b] && p[2 * a + 1] < p[2 * b + 1]);
}

/* > 0 where o, a, b turn counterclockwise. */
static double lut8_turn(const float *p, uint32_t o, uint32_t a, uint32_t b)
{
    double ax = (double)p[2 * a] - p[2 * o], ay = (double)p[2 * a + 1] - p[2 * o + 1];
    double bx = (double)p[2 * b] - p[2 * o], by = (double)p[2 * b + 1] - p[2 * o + 1];
    return ax * by - ay * bx;
}

/* The hull's vertices of the n (<= 256) points p[i][2] (Andrew's monotone
 * chain: points on an edge are left out), in hull[]; returns their count,
 * or 0 where there are more than PMPD_PQ_LUT8_HULL. */
static uint32_t lut8_hull(const float *p, uint32_t n, uint32_t *hull)
{
    uint32_t order[256], chain[2 * 256 + 1], i, j, k = 0, lower;
    for (i = 0; i < n; i++) {
        /* Insertion sort: 256 points once per subspace and cache. */
        uint32_t x = i;
        for (j = i; j > 0 && lut8_before(p, x, order[j - 1]); j--)
            order[j] = order[j - 1];
        order[j] = x;
    }
    if (n == 1) {
        hull[0] = order[0];
        return 1;
    }
    for (i = 0; i < n; i++) {
        while (k >= 2 && lut8_turn(p, chain[k - 2], chain[k - 1], order[i]) <= 0.0)
            k--;
        chain[k++] = order[i];
    }
    lower = k + 1;
    for (i = n - 1; i-- > 0;) {
        while (k >= lower && lut8_turn(p, chain[k - 2], chain[k - 1], order[i]) <= 0.0)
            k--;
        chain[k++] = order[i];
    }
    /* The chain ends where it started. */
    k--;
    if (k > PMPD_PQ_LUT8_HULL)
        return 0;
    for (i = 0; i < k; i++)
        hull[i] = chain[i];
    return k;
}

void pmpd_pq_lut8_book(const pmpd_pq_codebook *book, float *tables)
{
    const pmpd_pq_layout *lay = &book->layout;
    const uint32_t nc = lay->n_centroids, sd = lay->sub_dim;
    uint32_t s, j, c, *count;
    for (s = 0; s < lay->n_sub; s++)
        for (j = 0; j < sd; j++)
            for (c = 0; c < nc; c++)
                tables[((size_t)s * sd + j) * nc + c] = book->centroids[((size_t)s * nc + c) * sd + j];
    if (sd != 2)
        return;
    count = (uint32_t *)(void *)(tables + (size_t)lay->dim * nc + (size_t)lay->n_sub * 2 * PMPD_PQ_LUT8_HULL);
    for (s = 0; s < lay->n_sub; s++) {
        const float *p = book->centroids + (size_t)s * nc * 2;
        float *hull = tables + (size_t)lay->dim * nc + (size_t)s * 2 * PMPD_PQ_LUT8_HULL;
        uint32_t vertex[PMPD_PQ_LUT8_HULL], k = lut8_hull(p, nc, vertex), padded = (k + 15) / 16 * 16;
        /* Copies of the first vertex fill the last vector (they change no minimum). */
        for (c = 0; c < PMPD_PQ_LUT8_HULL; c++) {
            uint32_t v = k && c < k ? vertex[c] : k ? vertex[0] : 0;
            hull[c] = c < padded ? p[2 * v] : 0.0f;
            hull[PMPD_PQ_LUT8_HULL + c] = c < padded ? p[2 * v + 1] : 0.0f;
        }
        count[s] = padded;
    }
}
