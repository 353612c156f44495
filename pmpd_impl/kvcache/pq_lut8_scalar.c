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
            float *row = lut->work + ((size_t)s * lanes + l) * nc, lo = INFINITY, hi = -INFINITY;
            for (c = 0; c < nc; c++) {
                const float *centroid = book->centroids + ((size_t)s * nc + c) * sd;
                float x = qt[(size_t)s * sd * lanes + l] * centroid[0];
                for (j = 1; j < sd; j++)
                    x = fmaf(qt[((size_t)s * sd + j) * lanes + l], centroid[j], x);
                row[c] = x;
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
            const float *row = lut->work + ((size_t)s * lanes + l) * nc;
            uint8_t *bytes = lut->table + ((size_t)s * lanes + l) * 256;
            for (c = 0; c < 256; c++) {
                float x;
                uint32_t q;
                if (c >= nc) {
                    bytes[c] = 0;
                    continue;
                }
                x = (row[c] - lut->minimum[(size_t)s * lanes + l]) * scale;
                x = x + 0.5f;
                q = (uint32_t)x;
                bytes[c] = (uint8_t)(q > 255 ? 255 : q);
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
