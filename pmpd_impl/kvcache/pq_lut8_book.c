/* The key codebook's tables for the 8-bit key tables (pq_lut8.h), made
 * once with the cache: the codebook transposed and, for 2-dim subspaces,
 * the convex hull of each subspace's centroids.  A table build needs, per
 * query and subspace, the least and the largest q . c over the centroids,
 * which a linear function takes at hull vertices: some 20-40 of 256
 * k-means centroids in 2 dimensions, so that pass reads two or three
 * vectors of them instead of sixteen. */
#include "pmpd_impl/kvcache/pq_lut8.h"

/* The hull's vertices of the n (<= 256) points p[i][2] in hull[] (gift
 * wrapping, counterclockwise from the leftmost point; points on an edge
 * and copies of a vertex are left out); returns their count, or 0 where
 * there are more than PMPD_PQ_LUT8_HULL.  n turn tests per vertex, in
 * double (the differences of floats and their products are exact there
 * unless the coordinates' exponents lie far apart), no array on the stack:
 * a sort of the points first took a millisecond per layer. */
#define LUT8_X(i) ((double)p[2 * (i)])
#define LUT8_Y(i) ((double)p[2 * (i) + 1])
static uint32_t lut8_hull(const float *p, uint32_t n, uint32_t *hull)
{
    uint32_t start = 0, cur, i, k = 0;
    for (i = 1; i < n; i++)
        if (LUT8_X(i) < LUT8_X(start) || (LUT8_X(i) == LUT8_X(start) && LUT8_Y(i) < LUT8_Y(start)))
            start = i;
    cur = start;
    do {
        uint32_t next = cur;
        double nx = 0.0, ny = 0.0, far = 0.0;
        if (k == PMPD_PQ_LUT8_HULL)
            return 0;
        hull[k++] = cur;
        /* The point with every other on its left (the farthest of those in
         * line); nx, ny: next less cur. */
        for (i = 0; i < n; i++) {
            double ix = LUT8_X(i) - LUT8_X(cur), iy = LUT8_Y(i) - LUT8_Y(cur);
            double turn = nx * iy - ny * ix, d = ix * ix + iy * iy;
            if (d > 0.0 && (next == cur || turn < 0.0 || (turn == 0.0 && d > far))) {
                next = i;
                nx = ix;
                ny = iy;
                far = d;
            }
        }
        cur = next;
    } while (LUT8_X(cur) != LUT8_X(start) || LUT8_Y(cur) != LUT8_Y(start));
    return k;
}
#undef LUT8_X
#undef LUT8_Y

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
