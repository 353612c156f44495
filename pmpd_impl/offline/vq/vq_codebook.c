/* Lloyd's algorithm for the 2-D VQ codebooks (vq_codebook.h). */
#include "pmpd_impl/offline/vq/vq_codebook.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/splitmix.h"

PMPD_INTERNAL void pmpd_vq_gaussian_pairs(uint64_t seed, size_t n, float *pairs)
{
    const double two_pi = 6.283185307179586;
    size_t i;
    for (i = 0; i < n; i++) {
        /* 1 - u lies in (0, 1]: the logarithm stays finite. */
        double radius = sqrt(-2.0 * log(1.0 - pmpd_splitmix64_unit(&seed)));
        double angle = two_pi * pmpd_splitmix64_unit(&seed);
        pairs[2 * i] = (float)(radius * cos(angle));
        pairs[2 * i + 1] = (float)(radius * sin(angle));
    }
}

PMPD_INTERNAL unsigned pmpd_vq_nearest(const float *codebook, unsigned points, float x, float y)
{
    unsigned k, best = 0;
    float best_distance = INFINITY;
    for (k = 0; k < points; k++) {
        float dx = x - codebook[2 * k], dy = y - codebook[2 * k + 1];
        float distance = dx * dx + dy * dy;
        if (distance < best_distance) {
            best_distance = distance;
            best = k;
        }
    }
    return best;
}

PMPD_INTERNAL double pmpd_vq_lloyd_step(float *codebook, unsigned points, const float *pairs, size_t n)
{
    double *sums = (double *)calloc(3 * (size_t)points, sizeof *sums), error = 0;
    size_t i;
    unsigned k;
    if (!sums)
        return -1.0;
    for (i = 0; i < n; i++) {
        float x = pairs[2 * i], y = pairs[2 * i + 1];
        k = pmpd_vq_nearest(codebook, points, x, y);
        error += (double)(x - codebook[2 * k]) * (x - codebook[2 * k]) +
                 (double)(y - codebook[2 * k + 1]) * (y - codebook[2 * k + 1]);
        sums[3 * k] += x;
        sums[3 * k + 1] += y;
        sums[3 * k + 2] += 1;
    }
    for (k = 0; k < points; k++)
        if (sums[3 * k + 2] > 0) {
            codebook[2 * k] = (float)(sums[3 * k] / sums[3 * k + 2]);
            codebook[2 * k + 1] = (float)(sums[3 * k + 1] / sums[3 * k + 2]);
        }
    free(sums);
    return error / (2.0 * (double)n);
}

PMPD_INTERNAL pmpd_status pmpd_vq_train(unsigned points, size_t n, uint64_t seed, unsigned iterations,
                                        float *codebook)
{
    float *pairs;
    double previous = INFINITY;
    unsigned step;
    if (points < 16 || points > 256 || (points & (points - 1)) || n < points)
        return PMPD_ERR_INVALID_ARGUMENT;
    pairs = (float *)malloc(2 * n * sizeof *pairs);
    if (!pairs)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_vq_gaussian_pairs(seed, n, pairs);
    memcpy(codebook, pairs, 2 * (size_t)points * sizeof *codebook);
    for (step = 0; step < iterations; step++) {
        double error = pmpd_vq_lloyd_step(codebook, points, pairs, n);
        if (error < 0) {
            free(pairs);
            return PMPD_ERR_OUT_OF_MEMORY;
        }
        if (previous - error < 1e-7 * error)
            break;
        previous = error;
    }
    free(pairs);
    return PMPD_OK;
}

PMPD_INTERNAL float pmpd_vq_round_int8(const float *codebook, unsigned points, int8_t *q)
{
    float largest = 0.0f, unit;
    unsigned i;
    for (i = 0; i < 2 * points; i++)
        largest = fabsf(codebook[i]) > largest ? fabsf(codebook[i]) : largest;
    unit = largest / 127.0f;
    for (i = 0; i < 2 * points; i++)
        q[i] = (int8_t)lrintf(codebook[i] / unit);
    return unit;
}
