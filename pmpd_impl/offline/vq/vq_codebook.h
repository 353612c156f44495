/* Offline derivation of the 2-D VQ codebooks (weights/vq/vq.h): Lloyd's
 * algorithm (k-means) on standard 2-D Gaussian pairs drawn from a fixed
 * seed, then each coordinate rounded to an int8 multiple of one unit per
 * width, the form the runtime holds (weights/vq/vq_codebooks.c, written by
 * examples/pmpd-vq-codebooks.c).  Tests use the same functions to check
 * that the stored tables are Lloyd fixed points on a fresh sample. */
#ifndef PMPD_OFFLINE_VQ_CODEBOOK_H
#define PMPD_OFFLINE_VQ_CODEBOOK_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* The seed of the stored codebooks' training sample. */
#define PMPD_VQ_CODEBOOK_SEED UINT64_C(0x7671326432303032)

/* n standard normal pairs (Box-Muller over splitmix64 from seed) into
 * pairs[2 n]. */
PMPD_INTERNAL void pmpd_vq_gaussian_pairs(uint64_t seed, size_t n, float *pairs);

/* The index of the point of codebook (points x 2 floats) nearest (x, y),
 * the lowest index among equals: brute force, the definition the encoder
 * follows. */
PMPD_INTERNAL unsigned pmpd_vq_nearest(const float *codebook, unsigned points, float x, float y);

/* One Lloyd step on pairs[2 n]: each point moves to the mean of the pairs
 * nearest it (a point with none keeps its place).  Returns the mean
 * squared error per coordinate of the codebook before the step, or -1
 * when out of memory. */
PMPD_INTERNAL double pmpd_vq_lloyd_step(float *codebook, unsigned points, const float *pairs, size_t n);

/* Trains a codebook of points (a power of two, 16..256) on n pairs from
 * seed, starting from the first points pairs, for at most iterations
 * steps (stopping once a step improves the error by less than 1e-7
 * relative), into codebook[2 points].  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (points, or n < points),
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_vq_train(unsigned points, size_t n, uint64_t seed, unsigned iterations,
                                        float *codebook);

/* The coordinates of codebook rounded to int8 multiples of unit = the
 * largest |coordinate| / 127: int8 values in q[2 points], unit returned. */
PMPD_INTERNAL float pmpd_vq_round_int8(const float *codebook, unsigned points, int8_t *q);

#endif /* PMPD_OFFLINE */

#endif
