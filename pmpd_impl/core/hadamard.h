/*
 * Normalized Hadamard transforms of float vectors, in place, with no heap:
 * the rotation that spreads a weight row's outliers over all its columns
 * before scalar or vector quantization (seed 002's incoherence
 * processing).  A matrix stored as W_r = (W diag(s)) H^T is multiplied by
 * rotating its input once, x' = H (x o s), so the transform runs once per
 * input vector, not per weight.
 *
 * Sizes n = m * 2^k with m in {1, 12, 20, 28, 44}: H = H_m (x) H_{2^k} /
 * sqrt(n), where H_{2^k} is Sylvester's matrix (the fast Walsh-Hadamard
 * butterflies) and H_m a fixed Hadamard matrix of order m (Paley's
 * constructions: orders 12, 20 and 44 from the quadratic residues mod 11,
 * 19 and 43, order 28 from those mod 13, hadamard.c).  Element i * 2^k + j
 * of x is entry (i, j) of an m x 2^k matrix: the butterflies run along
 * each of its m rows, then H_m mixes the rows column by column.  Other
 * lengths are padded with zeros to pmpd_hadamard_size(): from 16 columns
 * on, at most 25% more (the steps 2^k, 1.25 * 2^k = 20 * 2^(k-4), 1.375 *
 * 2^k = 44 * 2^(k-5), 1.5 * 2^k, 1.75 * 2^k, 2^(k+1)) where powers of two
 * alone can nearly double a row (Llama 2 7B's 11008 -> 16384; here 11264 =
 * 44 * 2^8; TinyLlama's 5632 = 44 * 2^7 and 14336 = 28 * 2^9 need none).
 *
 * Sylvester's matrix is symmetric, H_12, H_20 and H_44 are not (H_28 is), so the
 * transpose is a separate flag: the encoder rotates rows with H, the row
 * lookup of a stored matrix undoes it with H^T.
 */
#ifndef PMPD_CORE_HADAMARD_H
#define PMPD_CORE_HADAMARD_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd_impl/core/config.h"

/* The longest transform: 2^17 (weight formats have at most 2^17 columns). */
#define PMPD_HADAMARD_MAX ((size_t)1 << 17)

/* The odd part m of a size n this file transforms (1, 12, 20, 28 or 44), or 0
 * when n is not m * 2^k with such an m, or n is 0 or above the maximum. */
PMPD_INTERNAL unsigned pmpd_hadamard_order(size_t n);

/* The smallest size >= cols that pmpd_hadamard transforms, or 0 for cols 0
 * or above PMPD_HADAMARD_MAX. */
PMPD_INTERNAL size_t pmpd_hadamard_size(size_t cols);

/* Row i of H_m as a bit mask (bit j set: entry (i, j) is -1), m in {12, 20,
 * 28, 44}, i < m; entries of H_1 are +1. */
PMPD_INTERNAL uint64_t pmpd_hadamard_small_row(unsigned m, unsigned i);

/* x (n floats, pmpd_hadamard_order(n) != 0) becomes H x, or H^T x with
 * transpose, H normalized (orthonormal).  The compiled kernel (AVX2 or
 * NEON butterflies where built for them); the same result bit for bit as
 * the scalar oracle, since every step is an exact-order add or subtract. */
PMPD_INTERNAL void pmpd_hadamard(float *x, size_t n, int transpose);

/* The scalar oracle, always compiled. */
PMPD_INTERNAL void pmpd_hadamard_scalar(float *x, size_t n, int transpose);

/* The unnormalized Sylvester butterflies over p = 2^k floats: the compiled
 * kernel and the scalar one (hadamard_avx2.c, hadamard_neon.c). */
PMPD_INTERNAL void pmpd_hadamard_pow2(float *x, size_t p);
PMPD_INTERNAL void pmpd_hadamard_pow2_scalar(float *x, size_t p);

#if PMPD_USE_AVX2
/* Four rows of the m-point mix over PMPD_HADAMARD_MIX4_COLUMNS columns
 * (hadamard_avx2.c, 512-bit vectors where PMPD_USE_AVX512; hadamard.c
 * calls it where PMPD_USE_AVX2): out[r * p + j] = scale * sum
 * over l in order of signs[r * m + l] * in[l * in_stride + j] for r < 4
 * and j < PMPD_HADAMARD_MIX4_COLUMNS, each sign +-1.  Four rows' sums are
 * eight independent chains, where one row's two waited on each add's
 * latency; each step is the scalar mix's exact add or subtract. */
#define PMPD_HADAMARD_MIX4_COLUMNS (PMPD_USE_AVX512 ? 32 : 16)
PMPD_INTERNAL void pmpd_hadamard_mix4(float *out, size_t p, const float *in, size_t in_stride, const float *signs,
                                      unsigned m, float scale);
#endif

#endif
