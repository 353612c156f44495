/* The k-means behind TCQ's 512 x 2 value table (tcq_build.h). */
#include "pmpd_impl/offline/tcq/tcq_build.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/synth/synth.h"

/* The centroid nearest point p among k. */
static size_t tcq_nearest_centroid(const float *centroids, size_t k, const float *p)
{
    float best = FLT_MAX;
    size_t j, at = 0;
    for (j = 0; j < k; j++) {
        float dx = p[0] - centroids[2 * j], dy = p[1] - centroids[2 * j + 1];
        float d = dx * dx + dy * dy;
        if (d < best) {
            best = d;
            at = j;
        }
    }
    return at;
}

PMPD_INTERNAL pmpd_status pmpd_tcq_build_table(uint64_t seed, size_t samples, unsigned iterations, float *table,
                                               double *mse)
{
    const size_t k = PMPD_TCQ_TABLE_ENTRIES;
    float *points = (float *)malloc(2 * samples * sizeof *points);
    double *sums = (double *)malloc(3 * k * sizeof *sums);
    uint64_t state = seed;
    size_t i, j;
    unsigned it;
    double error = 0;
    if (!points || !sums || samples < k) {
        free(points);
        free(sums);
        return points && sums ? PMPD_ERR_INVALID_ARGUMENT : PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_synth_normal(&state, 1.0f, points, 2 * samples);
    /* Lloyd's algorithm from the first k samples; an empty cluster keeps
     * its centroid. */
    memcpy(table, points, 2 * k * sizeof *table);
    for (it = 0; it <= iterations; it++) {
        memset(sums, 0, 3 * k * sizeof *sums);
        error = 0;
        for (i = 0; i < samples; i++) {
            const float *p = points + 2 * i;
            size_t at = tcq_nearest_centroid(table, k, p);
            double dx = p[0] - table[2 * at], dy = p[1] - table[2 * at + 1];
            error += dx * dx + dy * dy;
            sums[3 * at] += p[0];
            sums[3 * at + 1] += p[1];
            sums[3 * at + 2] += 1;
        }
        if (it == iterations)
            break; /* the last pass only measures */
        for (j = 0; j < k; j++)
            if (sums[3 * j + 2] > 0) {
                table[2 * j] = (float)(sums[3 * j] / sums[3 * j + 2]);
                table[2 * j + 1] = (float)(sums[3 * j + 1] / sums[3 * j + 2]);
            }
    }
    if (mse)
        *mse = error / (2.0 * (double)samples);
    free(points);
    free(sums);
    return PMPD_OK;
}
