/* Offline NUQ encoding (weights/nuq/nuq.h): a float matrix's rows are
 * sign-flipped, Hadamard-rotated and quantized to the nearest Lloyd-Max
 * level times a per-row scale, the scale refined to the least-squares
 * optimum for the chosen indices (alternating, as Lloyd's algorithm does
 * for the levels). */
#ifndef PMPD_OFFLINE_NUQ_BUILD_H
#define PMPD_OFFLINE_NUQ_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/ldlq/ldlq.h"

#if PMPD_OFFLINE

/* The seed of every matrix's signs.  One seed for all: matrices reading
 * one input (q, k, v; gate, up) then get the same signs and share one
 * rotation at run time; the signs of different widths are prefixes of one
 * stream, which costs nothing (they never meet). */
#define PMPD_NUQ_SEED UINT64_C(0x6e75713230323521)

/* Default width of a conversion (options->nuq_bits 0). */
#define PMPD_NUQ_DEFAULT_BITS 4

/* Bytes of a rows x cols tensor at bits.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (zero dimension, bits outside 2..4, more than
 * 2^17 columns: the rotation's limit), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_nuq_size(uint64_t rows, uint64_t cols, unsigned bits, uint64_t *bytes);

/* Encodes values (rows x cols host floats, finite) into out (size bytes,
 * pmpd_nuq_size of it).  ldlq (may be NULL: nearest levels) rounds the
 * levels data-aware (offline/ldlq/ldlq.h; block 1, n the rotation size).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (a size that does not match, bits or
 * shape refused by pmpd_nuq_size, a factor of another size or block),
 * PMPD_ERR_OUT_OF_MEMORY. */
PMPD_INTERNAL pmpd_status pmpd_nuq_encode(const float *values, size_t rows, size_t cols, unsigned bits,
                                          uint64_t seed, const pmpd_ldlq *ldlq, unsigned char *out, size_t size);

#endif /* PMPD_OFFLINE */

#endif
