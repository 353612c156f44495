/*
 * VQ: 2-D vector quantization of Hadamard-rotated rows (seed 002's VQ,
 * the vector member of Q-Palette).  Rows are rotated exactly as NUQ's and
 * TCQ's (weights/rotated/rotated.h: random signs, Hadamard transform on
 * the input side, one scale per row), and consecutive rotated columns are taken in pairs: pair j of
 * a row, columns (2j, 2j + 1), is stored as the index of one point of a
 * 2-D codebook of 2^p points (p = 4..8 index bits per pair: 2, 2.5, 3,
 * 3.5 or 4 bits per weight).  The codebooks are Lloyd (k-means) points of
 * the standard 2-D Gaussian, in int8 multiples of one unit per width
 * (vq_codebooks.c, written by examples/pmpd-vq-codebooks.c); a pair
 * beats two scalar Lloyd-Max levels at the same rate (normalized MSE
 * 0.110 against 0.1175 at 2 bits) and gives the half-bit steps.
 *
 *   W_r = (W diag(s)) H^T ~= diag(scale) B[idx]
 *
 * Widths in the API and tools are in quarter bits (4 b: 8, 10, 12, 14,
 * 16), the unit VQ shares with TCQ; the header stores p = 2 b.
 *
 * Layout (version 1), little-endian:
 *   64-byte header: "VQ2W", u32 version 1, u32 rows, u32 cols, u32 p (4..8
 *     index bits per pair), u32 rotation (pmpd_rotated_rotation_fits), u64
 *     seed of the signs (as NUQ's), then zeros
 *   f32 scale[rows] (finite, >= 0), padded with zeros to 64 bytes
 *   indices: rows x row_bytes, row_bytes = ceil(rotation / 32) blocks of
 *     2 p bytes, each block 16 pairs = 32 consecutive rotated columns;
 *     pairs at or beyond the rotation (pair j with 2 j >= rotation) have
 *     index 0.  In a block, pair j (0..15):
 *     p = 8: byte j
 *     p = 4..7: the index's low 4 bits in byte j % 8, low nibble for j < 8
 *       and high nibble for j >= 8 (NUQ 4-bit's order on 16 codes), then
 *       p - 4 planes of 16 bits (u16 each), plane i's bit j being bit 4 + i
 *       of the index
 *   A SIMD kernel thus gets the 16 indices of a block in one 16-byte
 *   register: one load (p = 8), or one 8-byte load, a shift and a mask,
 *   plus per high plane a byte broadcast and a bit test.
 */
#ifndef PMPD_WEIGHTS_VQ_H
#define PMPD_WEIGHTS_VQ_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/rotated/rotated.h"

#define PMPD_VQ_HEADER_BYTES PMPD_ROTATED_HEADER_BYTES
#define PMPD_VQ_VERSION 1
#define PMPD_VQ_BLOCK 32 /* rotated columns per block of indices: 16 pairs */
#define PMPD_VQ_MIN_PAIR_BITS 4
#define PMPD_VQ_MAX_PAIR_BITS 8

/* A kernel's dispatch on m's width: ROWS(p) with p a constant, so that
 * each width's loop is compiled on its own. */
#define PMPD_VQ_DISPATCH(pair_bits, ROWS)                                                                          \
    do {                                                                                                           \
        switch (pair_bits) {                                                                                       \
        case 4: ROWS(4); break;                                                                                    \
        case 5: ROWS(5); break;                                                                                    \
        case 6: ROWS(6); break;                                                                                    \
        case 7: ROWS(7); break;                                                                                    \
        default: ROWS(8); break;                                                                                   \
        }                                                                                                          \
    } while (0)

#if PMPD_USE_AVX512
#define PMPD_VQ_KERNEL "avx512"
#elif PMPD_USE_AVX2
#define PMPD_VQ_KERNEL "avx2"
#elif PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_VQ_KERNEL "neon"
#else
#define PMPD_VQ_KERNEL "scalar"
#endif

typedef struct pmpd_vq_matrix {
    uint32_t rows, cols, pair_bits, rotation;
    uint32_t padded;      /* rotation rounded up to a block: floats per rotated input */
    uint32_t row_bytes;   /* index bytes per row */
    uint64_t seed;
    const float *scale;   /* [rows] */
    const uint8_t *index; /* [rows][row_bytes] */
} pmpd_vq_matrix;

typedef pmpd_rotated_layout pmpd_vq_layout;

/* Where the parts of a rows x cols tensor with p index bits per pair lie.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (a zero dimension, p outside 4..8,
 * more than 2^31 rows or 2^17 columns), PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_vq_compute_layout(uint64_t rows, uint64_t cols, uint64_t pair_bits,
                                                 pmpd_vq_layout *out);

/* Checks a stored tensor (every header field, size, scales, the zero
 * indices beyond the rotation) whose bytes lie at file offset base_offset
 * (for error offsets), and fills m. */
PMPD_INTERNAL pmpd_status pmpd_vq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                       uint64_t base_offset, pmpd_vq_matrix *m, pmpd_error *err);

/* The same for a tensor the loader has accepted: no checks. */
PMPD_INTERNAL void pmpd_vq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_vq_matrix *m);

/* The codebook of 2^pair_bits points (p 4..8): point k is (book[2k],
 * book[2k + 1]) times pmpd_vq_unit(p) (vq_codebooks.c). */
PMPD_INTERNAL const int8_t *pmpd_vq_book(unsigned pair_bits);
PMPD_INTERNAL float pmpd_vq_unit(unsigned pair_bits);

/* The index of pair j in a row's index bytes. */
static inline unsigned pmpd_vq_get(const uint8_t *row, size_t j, unsigned pair_bits)
{
    const uint8_t *block = row + j / 16 * 2 * pair_bits;
    unsigned i = (unsigned)(j % 16), index, plane;
    if (pair_bits == 8)
        return block[i];
    index = (unsigned)(block[i % 8] >> (i / 8 * 4)) & 15u;
    for (plane = 0; plane + 4 < pair_bits; plane++)
        index |= (unsigned)(block[8 + 2 * plane + i / 8] >> (i % 8) & 1u) << (4 + plane);
    return index;
}

/* The prepared input (scratch of prepare/rows) is the rotated formats'
 * (rotated.h: x' = H (x o s) in int8 steps per block of 32, one float step
 * per block) with each block's 32 steps reordered: the 16 even columns
 * (the pairs' first coordinates), then the 16 odd ones.  A kernel's 16
 * looked-up first coordinates then meet their activations with no
 * shuffle.  The rotated input of m's products: */
static inline pmpd_rotated pmpd_vq_rotated(const pmpd_vq_matrix *m)
{
    return pmpd_rotated_make(m->cols, m->rotation, m->padded, m->seed);
}

/* Reorders the int8 steps of tokens [begin, end) of the prepared input act
 * of r into pairs' order, as above. */
PMPD_INTERNAL void pmpd_vq_pair_order(const pmpd_rotated *r, void *act, size_t begin, size_t end);

/* Rotates, quantizes and reorders tokens [begin, end) of x into act
 * (pmpd_rotated_act_bytes of pmpd_vq_rotated), rotating in work (padded
 * floats). */
PMPD_INTERNAL void pmpd_vq_prepare_tokens(const pmpd_vq_matrix *m, const float *x, size_t begin, size_t end,
                                          size_t n_tokens, void *act, float *work);

/* y[t * ldy + r] = scale[r] * unit * sum over blocks b of d[t][b] *
 * sum_{j in b} (book[2 idx] q[t][2j] + book[2 idx + 1] q[t][2j + 1]) for
 * tokens t < n_tokens and rows r in [row_begin, row_end): the compiled
 * kernel, and the scalar oracle (always compiled; the blocks' exact
 * integer sums scaled and added in order, in float). */
PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy);
PMPD_INTERNAL void pmpd_vq_matmul_scalar(const pmpd_vq_matrix *m, const void *act, size_t n_tokens,
                                         size_t row_begin, size_t row_end, float *y, size_t ldy);

/* Row r of W (cols floats), rotated back (pmpd_rotated_row). */
PMPD_INTERNAL void pmpd_vq_row(const pmpd_vq_matrix *m, size_t r, float *out);

#endif
