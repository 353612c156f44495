/*
 * Nested ("any-precision") weights: one stored copy of a matrix serves every
 * width from the seed width up to the parent width.  The byte layout
 * (version 4) is documented in docs/pmpd.md ("ANYPREC tensors"); in short:
 *
 *   64-byte header: "ANYP", seed_bits, parent_bits, version 4 (or 3), 0,
 *     rows (u32), cols (u32)
 *   slices of code bits, coarsest first: when seed_bits >= 2, planes 0 and 1
 *     share one slice of 2-bit fields, every other plane has a slice of its
 *     own.  A slice holds rows in blocks of 4 (padded), each block column
 *     superblock by superblock (256 columns), 4 rows of it back to back:
 *     32 bytes per row for a 1-bit slice (byte j, bit b: column
 *     32*g + j with g = 2*(b%4) + b/4), 64 for the 2-bit slice (byte 32*h +
 *     j, bits 2f..2f+1: column 32*g + j with g = 4*h + 2*(f%2) + f/2, plane 0
 *     in the lower bit).  So one 32-byte load covers 256 columns of a plane,
 *     a shift and an AND put the bits of groups 2q and 2q+1 into the low and
 *     high nibble of each byte, and a k-bit product streams k/parent of the
 *     slice bytes, k sequential streams.  Slices are rounded up to 64 bytes.
 *   a partial last superblock of at most 128 columns (version 4) is shared
 *     by 2 row blocks, of at most 64 by 4 (tail_share): each group of 32
 *     slots holds span = 32 / tail_share real columns (slot 32 g + j, j <
 *     span, is tail column span g + j), so a row uses bytes [0, span) of
 *     its 32 (and [32, 32 + span) of its 64 in the 2-bit slice), and the
 *     other row blocks of its share lie at byte offsets span, 2 span, ...
 *     of the same superblock.  A share stores each of its row blocks' whole
 *     superblocks in turn, then the one they share.  The kernels load whole
 *     superblocks as ever: slots j >= span meet zero activations (the tail
 *     input is put in slot order), so what they read there does not matter,
 *     and each slice ends with 32 - span bytes of slack for those reads.
 *     Version 3 shares nothing (tail_share 1); for shapes without a partial
 *     superblock, or one of more than 128 columns, the versions agree.
 *   for every width k = seed..parent: rows f32 scales, rows f32 offsets,
 *     rows tables of 2^k u8 entries 0..pmpd_anyprec_table_max(k) (each
 *     block rounded up to 64)
 *
 * The table index of a weight at width k is sum of bit_p << p over planes
 * p < k (plane 0 the lowest bit), its value scales[k][row] *
 * tables[k][row][index] + offsets[k][row].  Entries of 7 bits let maddubs
 * multiply them with int8 activations without sign tricks; below 4 bits
 * entries of 6 bits let two groups' int16 pair sums add before they widen
 * to int32 (version 3; version 2 stored 7 bits at every width).  The
 * offset costs one multiply-add per row with the sum of the activations.
 * Switching width changes a number and a pointer, nothing is copied.
 */
#ifndef PMPD_PRECISION_ANYPREC_H
#define PMPD_PRECISION_ANYPREC_H

#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_ANYPREC_HEADER_BYTES 64
#define PMPD_ANYPREC_VERSION 4        /* written; version 3 still read */
#define PMPD_ANYPREC_VERSION_UNSHARED 3 /* the tail superblock padded, never shared */
#define PMPD_ANYPREC_GROUP 32        /* columns per activation scale */
#define PMPD_ANYPREC_SUPER 256       /* columns per 32-byte plane load */
#define PMPD_ANYPREC_ROW_BLOCK 4     /* rows interleaved in a slice */
#define PMPD_ANYPREC_TABLE_MAX 127   /* largest table entry at 4 bits and more */
#define PMPD_ANYPREC_NARROW_MAX 63   /* largest table entry below 4 bits */
/* The SIMD kernels keep the superblocks' activation scales on the stack
 * (1 KB). */
#define PMPD_ANYPREC_SIMD_MAX_COLS 65536

/* The NEON kernels use AArch64-only table lookups and reductions. */
#if PMPD_USE_NEON && defined(__aarch64__)
#define PMPD_ANYPREC_USE_NEON 1
#else
#define PMPD_ANYPREC_USE_NEON 0
#endif

typedef struct pmpd_anyprec_matrix {
    uint32_t rows;
    uint32_t cols;
    uint32_t seed_bits;
    uint32_t parent_bits;
    uint32_t superblocks; /* 256-column blocks per row, the partial one included */
    uint32_t full;        /* whole 256-column blocks per row */
    unsigned tail_shift;  /* log2 of tail_share: row blocks sharing the partial superblock */
    unsigned tail_span;   /* real columns per 32-column group of the partial superblock (32 >> tail_shift) */
    int paired;           /* planes 0 and 1 share a slice of 2-bit fields */
    const unsigned char *slice[PMPD_ANYPREC_MAX_BITS]; /* the slice holding plane p */
    const float *scales[PMPD_ANYPREC_MAX_BITS + 1];   /* [k][row]; NULL outside seed..parent */
    const float *offsets[PMPD_ANYPREC_MAX_BITS + 1];  /* [k][row] */
    const unsigned char *tables[PMPD_ANYPREC_MAX_BITS + 1]; /* [k][row * 2^k + index] */
} pmpd_anyprec_matrix;

/* Where each part of a tensor lies, from the shape alone (checked sizes). */
typedef struct pmpd_anyprec_layout {
    size_t slice_offset[PMPD_ANYPREC_MAX_BITS];     /* of the slice holding plane p */
    size_t width_offset[PMPD_ANYPREC_MAX_BITS + 1]; /* scales of width k; offsets, then its table follow */
    size_t offset_offset[PMPD_ANYPREC_MAX_BITS + 1];
    size_t table_offset[PMPD_ANYPREC_MAX_BITS + 1];
    size_t total;
} pmpd_anyprec_layout;

/* The largest table entry at width bits: with 6-bit entries (below 4 bits)
 * a maddubs pair is at most 2 * 63 * 127, so two groups' pairs add in
 * int16 (4 * 63 * 127 < 2^15) before one madd widens them. */
static inline unsigned pmpd_anyprec_table_max(unsigned bits)
{
    return bits < 4 ? PMPD_ANYPREC_NARROW_MAX : PMPD_ANYPREC_TABLE_MAX;
}

/* Bytes per row per superblock in the slice of plane p. */
static inline size_t pmpd_anyprec_super_bytes(int paired, unsigned p)
{
    return paired && p < 2 ? 64 : 32;
}

/* log2 of the row blocks sharing the partial last superblock of a cols-wide
 * layout (version 4): 2 at most 64 columns past the last whole superblock,
 * 1 at most 128, else 0 (also with none past it). */
static inline unsigned pmpd_anyprec_tail_shift(uint64_t cols)
{
    uint64_t tail = cols % PMPD_ANYPREC_SUPER;
    return tail == 0 || tail > PMPD_ANYPREC_SUPER / 2 ? 0 : tail > PMPD_ANYPREC_SUPER / 4 ? 1 : 2;
}

/* Row r's bytes of superblock s in the slice of plane p: a share of row
 * blocks (tail_share of them) stores each block's full superblocks in
 * turn, then the partial one they share, block b of the share at byte
 * offset b * tail_span in it. */
static inline const unsigned char *pmpd_anyprec_block(const pmpd_anyprec_matrix *m, unsigned p, uint32_t r,
                                                      uint32_t s)
{
    const size_t bytes = pmpd_anyprec_super_bytes(m->paired, p), block = r / PMPD_ANYPREC_ROW_BLOCK;
    const size_t member = block & (((size_t)1 << m->tail_shift) - 1), full = m->full;
    /* superblock slots (4 rows each) before this block's share */
    const size_t before = (block >> m->tail_shift) * ((full << m->tail_shift) + (m->superblocks - full));
    const size_t at = s < full ? (before + member * full + s) * PMPD_ANYPREC_ROW_BLOCK * bytes
                               : (before + (full << m->tail_shift)) * PMPD_ANYPREC_ROW_BLOCK * bytes +
                                     member * m->tail_span;
    return m->slice[p] + at + (size_t)(r % PMPD_ANYPREC_ROW_BLOCK) * bytes;
}

/* How far a block's whole superblock s + 1 lies past s in the slice of
 * plane p (s + 1 < full): they follow one another, 4 rows each
 * (pmpd_anyprec_block), so a kernel can step its slice pointers. */
static inline size_t pmpd_anyprec_whole_step(const pmpd_anyprec_matrix *m, unsigned p)
{
    return PMPD_ANYPREC_ROW_BLOCK * pmpd_anyprec_super_bytes(m->paired, p);
}

/* The SIMD kernels' view of superblock s for row r (a block's first row:
 * the block's four rows follow 64 bytes apart in the 2-bit slice, 32 in the
 * others): the 2-bit slice and planes 2..bits-1. */
static inline const unsigned char *pmpd_anyprec_super_slices(const pmpd_anyprec_matrix *m, uint32_t r, uint32_t s,
                                                             unsigned bits, const unsigned char **plane)
{
    unsigned p;
    for (p = 2; p < bits; p++)
        plane[p] = pmpd_anyprec_block(m, p, r, s);
    return pmpd_anyprec_block(m, 0, r, s);
}

/* Column c of a row: its superblock *s and the slot that holds it there
 * (0..255, what pmpd_anyprec_bit_place takes): c's place in a whole
 * superblock; in the partial one tail column t at slot 32 (t / span) +
 * t % span. */
static inline unsigned pmpd_anyprec_slot(const pmpd_anyprec_matrix *m, uint32_t c, uint32_t *s)
{
    uint32_t t;
    *s = c / PMPD_ANYPREC_SUPER;
    if (*s < m->full)
        return c % PMPD_ANYPREC_SUPER;
    t = c - m->full * PMPD_ANYPREC_SUPER;
    return PMPD_ANYPREC_GROUP * (t / m->tail_span) + t % m->tail_span;
}

/* Within a row's superblock bytes of plane p: the byte and bit of slot
 * c (0..255).  The one statement of the bit order, for the reference
 * kernels and the quantizer. */
static inline unsigned pmpd_anyprec_bit_place(int paired, unsigned p, unsigned c, unsigned *bit)
{
    unsigned g = c / PMPD_ANYPREC_GROUP, j = c % PMPD_ANYPREC_GROUP;
    if (paired && p < 2) {
        *bit = 2 * (2 * (g % 2) + (g % 4) / 2) + p;
        return 32 * (g / 4) + j;
    }
    *bit = g / 2 + 4 * (g % 2);
    return j;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_compute_layout(uint64_t rows, uint64_t cols, unsigned seed_bits,
                                                      unsigned parent_bits, unsigned version,
                                                      pmpd_anyprec_layout *out);

/* Checks a tensor's bytes (header, shape, size, finite scales) and fills m
 * with pointers into data.  rows and cols come from the tensor directory;
 * error offsets are reported as base_offset + offset inside the tensor. */
PMPD_INTERNAL pmpd_status pmpd_anyprec_view(const void *data, uint64_t size, uint64_t rows, uint64_t cols,
                                            uint64_t base_offset, pmpd_anyprec_matrix *m, pmpd_error *err);

/* The same pointers for a tensor pmpd_anyprec_view has accepted before
 * (the loader checks every tensor once): no checks, no scan of the scales. */
PMPD_INTERNAL void pmpd_anyprec_bind(const void *data, uint64_t rows, uint64_t cols, pmpd_anyprec_matrix *m);

/* The width a product with this matrix runs at when asked for bits: bits
 * clamped into seed_bits..parent_bits, 0 meaning parent_bits. */
static inline unsigned pmpd_anyprec_width(const pmpd_anyprec_matrix *m, unsigned bits)
{
    if (bits == 0 || bits > m->parent_bits)
        return m->parent_bits;
    return bits < m->seed_bits ? m->seed_bits : bits;
}

/* Row r decoded at width bits into out[cols] (the embedding lookup). */
PMPD_INTERNAL void pmpd_anyprec_row(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r, float *out);

/* Activations for the integer GEMV: int8 values in groups of
 * PMPD_ANYPREC_GROUP with one float scale each, zero-padded to a whole group.
 * xq holds padded_cols bytes, xscale padded_cols / 32 floats.  The groups of
 * one 256-column superblock share its scale (max |x| / 127 there), so the
 * SIMD kernels sum a superblock in integers and convert to float once, and
 * int16 pair sums of different groups may add.  Measured on pycode21M
 * (decode, 1,024 tokens): KL to f32 the same as with a scale per group of 32
 * at 2, 3 and 4 bits. */
PMPD_INTERNAL void pmpd_anyprec_quantize_input(const float *x, uint32_t cols, int8_t *xq, float *xscale);

/* The activations as the SIMD GEMVs use them: per superblock its scale, the
 * sum of all activations (for the table offsets) and the partial last
 * superblock's values in slot order (pmpd_anyprec_slot), zero elsewhere. */
typedef struct pmpd_anyprec_units {
    float scale[PMPD_ANYPREC_SIMD_MAX_COLS / PMPD_ANYPREC_SUPER];
    float sum;
    int8_t tail[PMPD_ANYPREC_SUPER];
} pmpd_anyprec_units;

/* Fills u for m (cols <= PMPD_ANYPREC_SIMD_MAX_COLS). */
PMPD_INTERNAL void pmpd_anyprec_prepare_units(const pmpd_anyprec_matrix *m, const int8_t *xq, const float *xscale,
                                              pmpd_anyprec_units *u);

/* Row r's 2^bits table entries in entries[0..16), zero past them and, for
 * a block's padding rows past the last row, zero throughout: what the SIMD
 * kernels load into a register table. */
static inline void pmpd_anyprec_row_entries(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r,
                                            unsigned char entries[16])
{
    memset(entries, 0, 16);
    if (r < m->rows)
        memcpy(entries, m->tables[bits] + ((size_t)r << bits), (size_t)1 << bits);
}

/* The slot columns a row of cols columns stores: its whole superblocks and
 * its share of the partial one (tail_shift: pmpd_anyprec_tail_shift, or 0
 * in version 3). */
static inline uint64_t pmpd_anyprec_stored_cols(uint64_t cols, unsigned tail_shift)
{
    return cols / PMPD_ANYPREC_SUPER * PMPD_ANYPREC_SUPER +
           (cols % PMPD_ANYPREC_SUPER ? PMPD_ANYPREC_SUPER >> tail_shift : 0);
}

/* Bytes a bits-wide product over rows x stored_cols reads: bits bits of
 * every stored column, then each row's scale, offset and width-bits table. */
static inline uint64_t pmpd_anyprec_read_bytes(uint64_t rows, uint64_t stored_cols, unsigned bits)
{
    return rows * (stored_cols / 8 * bits + 2 * sizeof(float) + ((uint64_t)1 << bits));
}

/* A SIMD product's results for the block at r0 and one token: y[r] =
 * sums[r - r0] * scale + xsum (the sum of the token's activations) *
 * offset, for the rows inside [row_begin, row_end). */
static inline void pmpd_anyprec_store_block(const pmpd_anyprec_matrix *m, unsigned bits, float xsum, const float *sums,
                                            float *y, uint32_t r0, uint32_t row_begin, uint32_t row_end)
{
    uint32_t i;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        if (r0 + i >= row_begin && r0 + i < row_end)
            y[r0 + i] = sums[i] * m->scales[bits][r0 + i] + xsum * m->offsets[bits][r0 + i];
}

/* The body of each SIMD GEMV: the activations' units, then rows
 * [row_begin, row_end) a block of 4 at a time through
 * block(m, xq, &units, y, r0, row_begin, row_end, k), k a constant 2, 3 or 4
 * in each call so every width compiles to a loop of its own. */
#define PMPD_ANYPREC_GEMV_BLOCKS(block, m, bits, xq, xscale, y, row_begin, row_end)                                 \
    do {                                                                                                             \
        pmpd_anyprec_units units_;                                                                                   \
        uint32_t r0_;                                                                                                \
        pmpd_anyprec_prepare_units(m, xq, xscale, &units_);                                                          \
        for (r0_ = (row_begin) / PMPD_ANYPREC_ROW_BLOCK * PMPD_ANYPREC_ROW_BLOCK; r0_ < (row_end);                  \
             r0_ += PMPD_ANYPREC_ROW_BLOCK) {                                                                        \
            if ((bits) == 2)                                                                                         \
                block(m, xq, &units_, y, r0_, row_begin, row_end, 2);                                                \
            else if ((bits) == 3)                                                                                    \
                block(m, xq, &units_, y, r0_, row_begin, row_end, 3);                                                \
            else                                                                                                     \
                block(m, xq, &units_, y, r0_, row_begin, row_end, 4);                                                \
        }                                                                                                            \
    } while (0)

/* Superblock s's 256 activations: in place, or the zero-padded tail. */
static inline const int8_t *pmpd_anyprec_super_input(const int8_t *xq, const pmpd_anyprec_units *u, uint32_t cols,
                                                     uint32_t s)
{
    return (size_t)(s + 1) * PMPD_ANYPREC_SUPER <= cols ? xq + (size_t)s * PMPD_ANYPREC_SUPER : u->tail;
}

/* y[r] = sum_c W_bits[r][c] x[c] for rows [row_begin, row_end), with the
 * activations as given by pmpd_anyprec_quantize_input.  bits must lie in
 * seed_bits..parent_bits.  The dispatcher picks the compiled SIMD kernel;
 * the _scalar one is the reference. */
PMPD_INTERNAL void pmpd_anyprec_gemv(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                     const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemv_scalar(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin,
                                            uint32_t row_end);

/* Bytes between tokens in the activations of pmpd_anyprec_gemm: whole
 * superblocks, so the SIMD kernels read no zero-padded tail copy. */
static inline size_t pmpd_anyprec_token_stride(uint32_t cols)
{
    return ((size_t)cols + PMPD_ANYPREC_SUPER - 1) / PMPD_ANYPREC_SUPER * PMPD_ANYPREC_SUPER;
}

/* n tokens' activations for pmpd_anyprec_gemm: token t's int8 values at
 * xq + t * stride (stride = pmpd_anyprec_token_stride(cols); zero past
 * cols), its group scales at xscale + t * stride / 32, both as
 * pmpd_anyprec_quantize_input writes them, and xsum[t] = the sum of its
 * dequantized values (for the table offsets). */
PMPD_INTERNAL void pmpd_anyprec_quantize_tokens(const float *x, size_t n, uint32_t cols, int8_t *xq, float *xscale,
                                                float *xsum);

/* Prefill: y[t * y_stride + r] = the GEMV of token t (activations from
 * pmpd_anyprec_quantize_tokens) for rows [row_begin, row_end), bits in
 * seed_bits..parent_bits.  The SIMD kernels decode a row block's codes once
 * per tile of tokens; the reference is one GEMV per token. */
PMPD_INTERNAL void pmpd_anyprec_gemm(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                     const float *xscale, const float *xsum, size_t n, float *y, size_t y_stride,
                                     uint32_t row_begin, uint32_t row_end);

#if PMPD_USE_AVX2
PMPD_INTERNAL void pmpd_anyprec_gemv_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemm_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, const float *xsum, size_t n, float *y,
                                          size_t y_stride, uint32_t row_begin, uint32_t row_end);
#endif
#if PMPD_USE_AVX512
PMPD_INTERNAL void pmpd_anyprec_gemv_avx512(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                            const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
#endif
#if PMPD_ANYPREC_USE_NEON
PMPD_INTERNAL void pmpd_anyprec_gemv_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end);
PMPD_INTERNAL void pmpd_anyprec_gemm_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, const float *xsum, size_t n, float *y,
                                          size_t y_stride, uint32_t row_begin, uint32_t row_end);
#endif

/* Padded column count (a whole number of groups). */
static inline uint32_t pmpd_anyprec_padded_cols(uint32_t cols)
{
    return (cols + PMPD_ANYPREC_GROUP - 1) / PMPD_ANYPREC_GROUP * PMPD_ANYPREC_GROUP;
}

#endif
