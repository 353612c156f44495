/* What the rotated formats' encoders share beyond the rotation itself
 * (weights/rotated/rotated.h: pmpd_rotated_rotate): the header NUQ and VQ
 * tensors open with. */
#ifndef PMPD_OFFLINE_ROTATED_BUILD_H
#define PMPD_OFFLINE_ROTATED_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* Zeroes out (size bytes) and writes the 64-byte header of NUQ's and VQ's
 * layout: magic (4 bytes), u32 version, rows, cols, width (the format's
 * bits field), rotation, u64 sign seed, zeros to 64 bytes. */
PMPD_INTERNAL void pmpd_rotated_put_header(unsigned char *out, size_t size, const char *magic, uint32_t version,
                                           size_t rows, size_t cols, unsigned width, size_t rotation,
                                           uint64_t seed);

#endif /* PMPD_OFFLINE */

#endif
