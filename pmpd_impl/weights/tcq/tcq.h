/*
 * TCQ: trellis-coded quantization of Hadamard-rotated rows (seed 002's
 * TCQ and half-TCQ, after QTIP's bitshift trellis with its "HYB" code).
 * Rows are rotated as NUQ's (weights/rotated/rotated.h: signs, Hadamard
 * of size rotation = pmpd_hadamard_size(cols), one scale per row), then
 * zero-padded to padded = a multiple of 128 rotated columns and cut into
 * sequences of T = 256, the last one 128 or 256 long (the encoder ignores
 * the padding columns, whose activations are zero: they cost bits, never
 * accuracy).  A 384-wide row (pycode21M's) thus takes 384 columns' bits,
 * where whole sequences took 512 (format version 2).
 *
 * A sequence of n steps (128, or 64 for a last one of 128 columns) is a
 * circular bitstream r of n s bits (s = the shift, 3..8, s / 2 bits per
 * weight).  Step i (0..n-1) reads the 16-bit window
 * S_i = r[i s .. i s + 16) (indices mod n s: tail-biting), first bit
 * most significant, so S_(i+1) = (S_i << s | the next s bits) mod 2^16,
 * and decodes rotated columns 2 i and 2 i + 1 (HYB):
 *   h = S (S + 1) mod 2^32,  (a, b) = table[(h >> 6) & 511],
 *   value = (h bit 15 ? -a : a, b)
 * with table 512 points in int8 multiples of one unit, W_r[r][c] =
 * scale[r] * unit * value.  The table is symmetric (format version 4):
 * entry i = r + 128 w + 256 n (r < 128) is representative r = (x_r, y_r),
 * 0 <= y_r <= x_r, as it stands (w = 0) or swapped (w = 1), its second
 * value negated where n = 1; with the first value's sign from bit 15 the
 * 1024 values a state reaches are the 8 images of the 128 representatives
 * under sign changes and the swap, whose k-means on 2-D standard normal
 * samples they are (tcq_table.c, made offline by
 * offline/tcq/tcq_table_build.c).  So the AVX-512 kernel looks up 128
 * entries where a table without the symmetry took 512.
 *
 * Bits in bytes: r[k] is bit 7 - k % 8 of byte k / 8 (MSB first), so a
 * window is 3 bytes read big-endian and shifted: 8 consecutive steps start
 * at bit offsets 8 g s + j s, i.e. at bytes g s + (j s) / 8, bits (j s) % 8,
 * constants per shift: one byte shuffle (PSHUFB / TBL) and one variable
 * shift decode 8 windows.
 *
 * Half-TCQ: the first sequences / 2 sequences of a row (rounded down) use
 * shift s1, the others s2 = s1 + 1 (s1 = s2: plain TCQ).  Widths in
 * quarter bits q (6..16, 1.5 to 4 bits per weight): s1 = floor(q / 2),
 * s2 = ceil(q / 2).
 *
 * Layout (version 4: the symmetric table; version 3 files, whose codes
 * address the unsymmetric k-means table of earlier builds, version 2's,
 * every sequence 256, and version 1's, with an int16 table, are refused:
 * convert again), little-endian; a row's last sequence may be 128 columns:
 *   64-byte header: "TCQW", u32 version 4, u32 rows, u32 cols, u32 s1,
 *     u32 s2, u32 rotation (pmpd_rotated_rotation_fits), u32 0, u64 seed
 *     of the signs, then zeros
 *   f32 scale[rows] (finite, >= 0), padded with zeros to 64 bytes
 *   bitstreams: rows x row_bytes, row_bytes = n1 16 s1 + (n - n1 - 1)
 *     16 s2 + m s2 / 8 for n = ceil(padded / 256) sequences, n1 = n / 2
 *     and m = (padded - 256 (n - 1)) / 2 steps in the last: each
 *     sequence's steps s / 8 bytes in order
 */
#ifndef PMPD_WEIGHTS_TCQ_H
#define PMPD_WEIGHTS_TCQ_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/weights/rotated/rotated.h"

#define PMPD_TCQ_HEADER_BYTES 64
#define PMPD_TCQ_VERSION 4
#define PMPD_TCQ_SEQUENCE 256   /* rotated columns per trellis sequence (T) */
#define PMPD_TCQ_STEPS 128      /* steps (column pairs) per sequence */
#define PMPD_TCQ_SHORT 128      /* columns of a short last sequence; padded is a multiple */
#define PMPD_TCQ_STATE_BITS 16  /* the window (L) */
#define PMPD_TCQ_TABLE_ENTRIES 512
#define PMPD_TCQ_TABLE_REPS 128 /* the symmetric table's representatives: entries 0..127 */
#define PMPD_TCQ_MIN_SHIFT 3
#define PMPD_TCQ_MAX_SHIFT 8
#define PMPD_TCQ_MIN_QUARTER_BITS (2 * PMPD_TCQ_MIN_SHIFT)
#define PMPD_TCQ_MAX_QUARTER_BITS (2 * PMPD_TCQ_MAX_SHIFT)

/* The AVX-512 kernel also needs VBMI2 (VPSHLDVW), which every VBMI core
 * since Ice Lake and Zen4 has. */
#if PMPD_USE_AVX512 && defined(__AVX512VBMI2__)
#define PMPD_TCQ_USE_AVX512 1
#else
#define PMPD_TCQ_USE_AVX512 0
#endif

#if PMPD_TCQ_USE_AVX512
#define PMPD_TCQ_KERNEL "avx512"
#elif PMPD_USE_AVX2
#define PMPD_TCQ_KERNEL "avx2"
#elif PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_TCQ_KERNEL "neon"
#else
#define PMPD_TCQ_KERNEL "scalar"
#endif

typedef struct pmpd_tcq_matrix {
    uint32_t rows, cols, rotation;
    uint32_t padded;     /* rotation rounded up to PMPD_TCQ_SHORT */
    uint32_t shift[2];   /* s1, s2 */
    uint32_t sequences;  /* per row */
    uint32_t first_half; /* sequences at s1 */
    uint32_t last_steps; /* steps of a row's last sequence: 128, or 64 */
    uint32_t row_bytes;
    uint64_t seed;
    const float *scale;  /* [rows] */
    const uint8_t *bits; /* [rows][row_bytes] */
} pmpd_tcq_matrix;

typedef struct pmpd_tcq_layout {
    size_t rotation, padded, sequences, first_half, last_steps, row_bytes, bits_offset, total;
} pmpd_tcq_layout;

/* Where the parts of a rows x cols tensor at shifts s1, s2 lie.  Errors:
 * PMPD_ERR_INVALID_ARGUMENT (a zero dimension, s1 outside 3..8, s2 not s1
 * or s1 + 1 or above 8, more than 2^31 rows or 2^17 columns),
 * PMPD_ERR_OVERFLOW. */
PMPD_INTERNAL pmpd_status pmpd_tcq_compute_layout(uint64_t rows, uint64_t cols, uint64_t s1, uint64_t s2,
                                                  pmpd_tcq_layout *out);

/* Checks a stored tensor (every header field, the size, the scales) whose
 * bytes lie at file offset base_offset (for error offsets), and fills m. */
PMPD_INTERNAL pmpd_status pmpd_tcq_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                        uint64_t base_offset, pmpd_tcq_matrix *m, pmpd_error *err);

/* The same for a tensor the loader has accepted: no checks. */
PMPD_INTERNAL void pmpd_tcq_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_tcq_matrix *m);

/* The shifts of a width in quarter bits (6..16). */
static inline void pmpd_tcq_shifts(unsigned quarter_bits, unsigned *s1, unsigned *s2)
{
    *s1 = quarter_bits / 2;
    *s2 = (quarter_bits + 1) / 2;
}

/* The value table: 512 pairs (first, second value of each entry; the
 * symmetry above), each within -127..127 (int8 values in int16 storage),
 * and the unit they are multiples of. */
PMPD_INTERNAL const int16_t *pmpd_tcq_table(void);
PMPD_INTERNAL float pmpd_tcq_unit(void);

/* The HYB code of a 16-bit state: its two values in table units. */
static inline void pmpd_tcq_decode(uint32_t state, const int16_t *table, int32_t *a, int32_t *b)
{
    const uint32_t h = state * (state + 1u);
    const int16_t *entry = table + 2 * ((h >> 6) & 511u);
    *a = (h & 0x8000u) ? -(int32_t)entry[0] : (int32_t)entry[0];
    *b = entry[1];
}

/* The bytes of a sequence of steps steps at shift. */
static inline size_t pmpd_tcq_bytes(unsigned steps, unsigned shift)
{
    return (size_t)steps * shift / 8;
}

/* The window of step (0..steps-1) in a sequence of steps steps, its
 * pmpd_tcq_bytes (MSB first, circular). */
static inline uint32_t pmpd_tcq_window(const uint8_t *sequence, unsigned shift, unsigned steps, unsigned step)
{
    const size_t bytes = pmpd_tcq_bytes(steps, shift);
    const size_t at = (size_t)step * shift, first = at / 8;
    uint32_t v = (uint32_t)sequence[first] << 16 | (uint32_t)sequence[(first + 1) % bytes] << 8 |
                 (uint32_t)sequence[(first + 2) % bytes];
    return v >> (8 - at % 8) & 0xFFFFu;
}

/* The steps of sequence j of a row: 128, or last_steps for the last. */
static inline unsigned pmpd_tcq_steps(const pmpd_tcq_matrix *m, size_t j)
{
    return j + 1 == m->sequences ? m->last_steps : PMPD_TCQ_STEPS;
}

/* Sequence j of a row of n sequences (first_half of them at shift s1, the
 * others at s2, the last of last_steps steps): its offset in the row's
 * bytes, its shift and its steps.  The layout's order, for the encoder's
 * layout and the runtime's matrix alike. */
static inline size_t pmpd_tcq_place(size_t j, size_t n, size_t first_half, size_t last_steps, unsigned s1,
                                    unsigned s2, unsigned *shift, unsigned *steps)
{
    *steps = j + 1 == n ? (unsigned)last_steps : PMPD_TCQ_STEPS;
    *shift = j < first_half ? s1 : s2;
    return j < first_half ? j * pmpd_tcq_bytes(PMPD_TCQ_STEPS, s1)
                          : first_half * pmpd_tcq_bytes(PMPD_TCQ_STEPS, s1) +
                                (j - first_half) * pmpd_tcq_bytes(PMPD_TCQ_STEPS, s2);
}

/* Sequence j of row r: its bytes, and its shift. */
static inline const uint8_t *pmpd_tcq_sequence(const pmpd_tcq_matrix *m, size_t r, size_t j, unsigned *shift)
{
    unsigned steps;
    return m->bits + r * m->row_bytes +
           pmpd_tcq_place(j, m->sequences, m->first_half, m->last_steps, m->shift[0], m->shift[1], shift, &steps);
}

/* The rotated input (rotated.h) of m's products. */
static inline pmpd_rotated pmpd_tcq_rotated(const pmpd_tcq_matrix *m)
{
    return pmpd_rotated_make(m->cols, m->rotation, m->padded, m->seed);
}

/* y[t * ldy + r] = scale[r] * unit * sum over blocks b of 32 rotated
 * columns of d[t][b] * sum_{c in b} value[r][c] q[t][c], for every token
 * t < n_tokens and r in [row_begin, row_end), from the prepared input act
 * (rotated.h): the compiled kernel, and the scalar oracle (always
 * compiled; exact integer block sums, the blocks added in order in
 * float). */
PMPD_INTERNAL void pmpd_tcq_matmul(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy);
PMPD_INTERNAL void pmpd_tcq_matmul_scalar(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens,
                                          size_t row_begin, size_t row_end, float *y, size_t ldy);

/* Rotated row r (padded floats): scale[r] * unit * value. */
PMPD_INTERNAL void pmpd_tcq_rotated_row(const pmpd_tcq_matrix *m, size_t r, float *out);

/* Row r of W (cols floats), rotated back: s o (H^T W_r[r]) (a padded row
 * sums H's entries directly, cols x rotation steps: the embedding lookup
 * and tests only). */
PMPD_INTERNAL void pmpd_tcq_row(const pmpd_tcq_matrix *m, size_t r, float *out);

#endif
