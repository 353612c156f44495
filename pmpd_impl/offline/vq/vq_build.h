/* Offline VQ encoding (weights/vq/vq.h): a float matrix's rows are
 * rotated as NUQ's (offline/nuq/nuq_build.h), their column pairs mapped to
 * the nearest codebook point times a per-row scale, the scale refined to
 * the least-squares optimum for the chosen points (alternating, as Lloyd's
 * algorithm does for the points). */
#ifndef PMPD_OFFLINE_VQ_BUILD_H
#define PMPD_OFFLINE_VQ_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"

#if PMPD_OFFLINE

/* Default width of a conversion in quarter bits (options->vq_quarter_bits
 * 0): 2 bits per weight. */
#define PMPD_VQ_DEFAULT_QUARTER_BITS 8

/* The index bits per pair of a width in quarter bits (8, 10, 12, 14, 16 ->
 * 4..8), or 0 for any other width. */
PMPD_INTERNAL unsigned pmpd_vq_pair_bits(unsigned quarter_bits);

/* Bytes of a rows x cols tensor at quarter_bits.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (zero dimension, a width not in 8..16 by 2,
 * more than 2^17 columns), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_vq_size(uint64_t rows, uint64_t cols, unsigned quarter_bits, uint64_t *bytes);

/* Encodes values (rows x cols host floats, finite) into out (size bytes,
 * pmpd_vq_size of it), signs from seed.  ldlq (may be NULL: nearest
 * points) rounds the pairs data-aware (offline/ldlq/ldlq.h; block 2, n
 * the rotation size).  Errors: PMPD_ERR_INVALID_ARGUMENT (a size that
 * does not match, a width or shape refused by pmpd_vq_size, a factor of
 * another size or block), PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_vq_encode(const float *values, size_t rows, size_t cols, unsigned quarter_bits,
                                         uint64_t seed, const pmpd_ldlq *ldlq, unsigned char *out, size_t size);

#endif /* PMPD_OFFLINE */

#endif
