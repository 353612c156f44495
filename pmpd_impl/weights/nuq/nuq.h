/*
 * NUQ: non-uniform scalar quantization of Hadamard-rotated rows (seed
 * 002's NUQ, the scalar member of Q-Palette).  A row rotated by a random
 * sign flip and a Hadamard transform has nearly Gaussian entries whatever
 * its outliers were, so each entry is stored as the b-bit code of the
 * nearest of the 2^b Lloyd-Max levels of N(0, 1) (on an integer grid,
 * nuq_levels.c; normalized MSE 0.1175, 0.0346, 0.0095 at 2, 3, 4 bits)
 * times one scale per row.
 * Codes are sign-magnitude: the top bit is the sign, the others index the
 * positive levels increasing (L[k] for code k is pmpd_nuq_levels' entry k).
 *
 *   W ~= diag(scale) L[idx] H diag(s),   W_r = (W diag(s)) H^T = diag(scale) L[idx]
 *
 * with s in {-1, +1}^n and H the normalized Hadamard matrix of size n =
 * rotation >= cols (core/hadamard.h; W is padded with zero columns up to
 * n when cols is not a size H takes: 172 -> 176 = 44 * 4).  The product
 * rotates its input once, x' = H (x o s) (x padded with zeros), and then
 * y[r] = scale[r] * sum_c L[idx[r][c]] x'[c] over the n rotated columns
 * (with x' in int8 per block of 32 and L in int8 units, below):
 * q, k and v (and gate and up) read one input with the same signs and
 * share one rotation (nuq_format.c).
 *
 * Layout (version 2: levels of at most 64 units, nuq_levels.c; version 1
 * files, made with the former levels of up to 127 units, are refused),
 * little-endian:
 *   64-byte header: "NUQW", u32 version 2, u32 rows, u32 cols, u32 bits (2,
 *     3 or 4), u32 rotation (pmpd_rotated_rotation_fits), u64 seed of the
 *     signs, then zeros
 *   f32 scale[rows] (finite, >= 0), padded with zeros to 64 bytes
 *   codes: rows x row_bytes, row_bytes = ceil(rotation / 32) blocks of
 *     4 * bits bytes, each block 32 consecutive rotated columns; code bits
 *     of columns >= rotation are zero.  In block b, with j = column % 32:
 *     4 bits: byte j % 16, low nibble for j < 16, high nibble for j >= 16
 *     2 bits: byte j % 8, bits 2 (j / 8) and up
 *     3 bits: the low two bits as the 2-bit block (8 bytes), then a u32
 *       whose bit 4 (j % 8) + j / 8 is the code's third (sign) bit
 *   These orders let a SIMD kernel widen 8 (AVX2) or 16 (NEON) bytes once
 *   and take each group of 8 consecutive columns with one shift.
 * Signs and the prepared input: weights/rotated/rotated.h.
 */
#ifndef PMPD_WEIGHTS_NUQ_H
#define PMPD_WEIGHTS_NUQ_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/rotated/rotated.h"

#define PMPD_NUQ_HEADER_BYTES PMPD_ROTATED_HEADER_BYTES
#define PMPD_NUQ_VERSION 2
#define PMPD_NUQ_BLOCK 32 /* rotated columns per block of indices */
#define PMPD_NUQ_MIN_BITS 2
#define PMPD_NUQ_MAX_BITS 4

#if PMPD_USE_AVX512
#define PMPD_NUQ_KERNEL "avx512"
#elif PMPD_USE_AVX2
#define PMPD_NUQ_KERNEL "avx2"
#elif PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_NUQ_KERNEL "neon"
#else
#define PMPD_NUQ_KERNEL "scalar"
#endif

typedef struct pmpd_nuq_matrix {
    uint32_t rows, cols, bits, rotation;
    uint32_t padded;      /* rotation rounded up to a block: floats per rotated input */
    uint32_t row_bytes;   /* index bytes per row */
    uint64_t seed;
    const float *scale;   /* [rows] */
    const uint8_t *index; /* [rows][row_bytes] */
} pmpd_nuq_matrix;

typedef pmpd_rotated_layout pmpd_nuq_layout;

/* Where the parts of a rows x cols tensor at bits lie.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (a zero dimension, bits outside 2..4, more
 * than 2^31 rows or 2^17 columns), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_nuq_compute_layout(uint64_t rows, uint64_t cols, uint64_t bits,
                                                  pmpd_nuq_layout *out);

/* Checks a stored tensor (every header field, size, scales, the zero index
 * bits beyond the rotation) whose bytes lie at file offset base_offset (for
 * error offsets), and fills m. */
PMPD_INTERNAL pmpd_status pmpd_nuq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                        uint64_t base_offset, pmpd_nuq_matrix *m, pmpd_error *err);

/* The same for a tensor the loader has accepted: no checks. */
PMPD_INTERNAL void pmpd_nuq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_nuq_matrix *m);

/* The 2^bits Lloyd-Max levels of N(0, 1) in code order (bits 2..4): the
 * 2^(bits-1) positive levels increasing, then their negatives; each an
 * int8 multiple of the width's unit (nuq_levels.c).  The int8 table has 16
 * entries (zeros past 2^bits: one TBL / PSHUFB register). */
PMPD_INTERNAL const float *pmpd_nuq_levels(unsigned bits);
PMPD_INTERNAL const int8_t *pmpd_nuq_levels_int8(unsigned bits);
PMPD_INTERNAL float pmpd_nuq_unit(unsigned bits);

/* The code of rotated column c in a row's index bytes. */
static inline unsigned pmpd_nuq_get(const uint8_t *row, size_t c, unsigned bits)
{
    const uint8_t *block = row + c / PMPD_NUQ_BLOCK * 4 * bits;
    unsigned j = (unsigned)(c % PMPD_NUQ_BLOCK);
    uint32_t high;
    if (bits == 4)
        return (unsigned)(block[j % 16] >> (j / 16 * 4)) & 15u;
    if (bits == 2)
        return (unsigned)(block[j % 8] >> (j / 8 * 2)) & 3u;
    high = (uint32_t)block[8] | (uint32_t)block[9] << 8 | (uint32_t)block[10] << 16 | (uint32_t)block[11] << 24;
    return ((unsigned)(block[j % 8] >> (j / 8 * 2)) & 3u) | (unsigned)(high >> (4 * (j % 8) + j / 8) & 1u) << 2;
}

/* Fills signs[0..words) with the sign bits of columns 64 w .. 64 w + 63. */
PMPD_INTERNAL void pmpd_nuq_signs(uint64_t seed, uint64_t *signs, size_t words);

/* The rotated input as weights/rotated/rotated.h describes it (the
 * prepared input: int8 x' per block of 32 and a float step per block).
 * The product's inner sums are exact integers (level units times q), as
 * in q4's and q8's kernels; only the activations' rounding (half a step d
 * per element) separates it from the float product with W. */
static inline pmpd_rotated pmpd_nuq_rotated(const pmpd_nuq_matrix *m)
{
    return pmpd_rotated_make(m->cols, m->rotation, m->padded, m->seed);
}
static inline size_t pmpd_nuq_act_bytes(const pmpd_nuq_matrix *m, size_t n_tokens)
{
    const pmpd_rotated r = pmpd_nuq_rotated(m);
    return pmpd_rotated_act_bytes(&r, n_tokens);
}
static inline const int8_t *pmpd_nuq_act_q(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens)
{
    (void)m;
    (void)n_tokens;
    return pmpd_rotated_act_q(act);
}
static inline const float *pmpd_nuq_act_d(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens)
{
    const pmpd_rotated r = pmpd_nuq_rotated(m);
    return pmpd_rotated_act_d(&r, act, n_tokens);
}
static inline const float *pmpd_nuq_act_sum(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens)
{
    const pmpd_rotated r = pmpd_nuq_rotated(m);
    return pmpd_rotated_act_sum(&r, act, n_tokens);
}

/* Rotates and quantizes tokens [begin, end) of x (n_tokens rows of cols
 * floats) into act (pmpd_nuq_act_bytes for n_tokens), rotating in work
 * (padded floats; it keeps the last token's x').  Shared by every ISA (the
 * butterflies inside are the compiled kernel). */
PMPD_INTERNAL void pmpd_nuq_prepare_tokens(const pmpd_nuq_matrix *m, const float *x, size_t begin, size_t end,
                                           size_t n_tokens, void *act, float *work);

/* y[t * ldy + r] = scale[r] * unit * sum over blocks b of d[t][b] *
 * sum_{c in b} int8level[code[r][c]] q[t][c], for every token t <
 * n_tokens and r in [row_begin, row_end), from act made by
 * pmpd_nuq_prepare_tokens: the compiled kernel, and the scalar oracle
 * (always compiled; the blocks summed in order, in float). */
PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy);
PMPD_INTERNAL void pmpd_nuq_matmul_scalar(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens,
                                          size_t row_begin, size_t row_end, float *y, size_t ldy);

/* Row r of W (cols floats), rotated back: s o (H^T (scale[r] L[idx[r]])).
 * With cols equal to the rotation the fast transform runs in out itself;
 * a padded row (no room for its rotation columns in out, and no heap)
 * sums H's entries directly, cols x rotation steps: the embedding lookup
 * and tests only, as the converter keeps embeddings in q8. */
PMPD_INTERNAL void pmpd_nuq_row(const pmpd_nuq_matrix *m, size_t r, float *out);

#endif
