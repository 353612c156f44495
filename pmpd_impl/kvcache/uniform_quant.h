/*
 * The naive baseline PQ is measured against: every K or V head vector
 * ("row") quantized on its own to 2, 4 or 8 bits, uniformly between its
 * minimum and maximum.  A row is [f32 scale][f32 minimum][codes], codes
 * packed low bits first; value = minimum + scale * code.  One outlier
 * stretches the whole row's step, which is what PQ avoids.
 */
#ifndef PMPD_KVCACHE_UNIFORM_QUANT_H
#define PMPD_KVCACHE_UNIFORM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

/* Bytes of one row of dim values at bits (2, 4 or 8) per value; 0 when
 * bits is not one of those or the size overflows. */
PMPD_INTERNAL size_t pmpd_kv_uniform_row_bytes(uint32_t dim, uint32_t bits);

PMPD_INTERNAL void pmpd_kv_uniform_encode(const float *x, uint32_t dim, uint32_t bits, unsigned char *row);
PMPD_INTERNAL void pmpd_kv_uniform_decode(const unsigned char *row, uint32_t dim, uint32_t bits, float *x);

#endif
