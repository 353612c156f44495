/* The scalar reference of the 8-bit key tables (pq_lut8.h): plain loops
 * doing the header's operations one at a time, each in its own statement
 * so that no compiler fuses a multiply and an add the SIMD kernels keep
 * apart. */
#include <math.h>

#include "pmpd_impl/kvcache/pq_lut8.h"

void pmpd_pq_lut8_build_scalar(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes,
                               const pmpd_pq_lut8 *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    const uint32_t nc = lay->n_centroids, sd = lay->sub_dim;
    uint32_t s, l, c, j;
    for (l = 0; l < lanes; l++) {
        float range = 0.0f, scale;
        lut->offset[l] = 0.0f;
        for (s = 0; s < lay->n_sub; s++) {
            float lo = INFINITY, hi = -INFINITY;
            /* Over the hull's vertices where the tables have them (pq_lut8.h). */
            const uint32_t hull = lut->hull_count ? lut->hull_count[s] : 0, n = hull ? hull : nc;
            for (c = 0; c < n; c++) {
                /* Coordinate j of the point at point[j * apart]. */
                const float *point = hull ? lut->hull + (size_t)s * 2 * PMPD_PQ_LUT8_HULL + c
                                          : book->centroids + ((size_t)s * nc + c) * sd;
                const size_t apart = hull ? PMPD_PQ_LUT8_HULL : 1;
                float x = qt[(size_t)s * sd * lanes + l] * point[0];
                for (j = 1; j < sd; j++)
                    x = fmaf(qt[((size_t)s * sd + j) * lanes + l], point[j * apart], x);
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
            lut->minimum[(size_t)s * lanes + l] = lo;
            lut->offset[l] += lo;
            range = hi - lo > range ? hi - lo : range;
        }
        scale = range > 0.0f ? 255.0f / range : 0.0f;
        lut->step[l] = range / 255.0f;
        for (s = 0; s < lay->n_sub; s++) {
            uint8_t *bytes = lut->table + ((size_t)s * lanes + l) * 256;
            float bias = fmaf(-lut->minimum[(size_t)s * lanes + l], scale, 0.5f);
            for (c = 0; c < 256; c++) {
                const float *centroid = book->centroids + ((size_t)s * nc + c) * sd;
                float x = bias;
                if (c >= nc) {
                    bytes[c] = 0;
                    continue;
                }
                for (j = 0; j < sd; j++) {
                    float q = qt[((size_t)s * sd + j) * lanes + l] * scale;
                    x = fmaf(q, centroid[j], x);
                }
                bytes[c] = !(x >= 1.0f) ? 0 : x >= 255.0f ? 255 : (uint8_t)x;
            }
        }
    }
}

void pmpd_pq_lut8_scores_scalar(const pmpd_pq_lut8 *lut, const pmpd_pq_layout *layout, uint32_t lanes,
                                const uint8_t *codes, size_t n, float *scores, float *max)
{
    size_t t;
    uint32_t s, l;
    for (t = 0; t < n; t++)
        for (l = 0; l < lanes; l++) {
            uint32_t sum = 0;
            float x;
            for (s = 0; s < layout->n_sub; s++)
                sum += lut->table[((size_t)s * lanes + l) * 256 + pmpd_pq_code(layout, codes, t, s)];
            x = (float)sum * lut->step[l];
            x = x + lut->offset[l];
            scores[t * lanes + l] = x;
            max[l] = x > max[l] ? x : max[l];
        }
}
