/* AArch64 NEON any-precision kernels for widths 2..4 of tensors whose
 * planes 0 and 1 share a 2-bit slice, the same scheme as the AVX2 ones:
 * per slice one shift and one AND (byte shifts, so no bits cross lanes)
 * put the codes of column groups 2q and 2q+1 into the low and high nibble
 * of each byte, TBL looks them up in the row's 16-entry table of 7-bit
 * entries, and the GEMV multiplies with int8 activations (SDOT when the
 * target has it, widening multiplies otherwise) into int32 sums that
 * become float once per superblock (its groups share one activation
 * scale).  Four rows share the activation loads.  The GEMV goes 16
 * columns of four groups at a time (anyprec_neon_block_quarter), at 3 bits
 * with a cheaper bit placement read through a second table.  The GEMM
 * widens the entries to float once per group and reuses them for a tile
 * of input vectors. */
#include "pmpd_impl/weights/anyprec/anyprec.h"

#if PMPD_ANYPREC_USE_NEON
#include <arm_neon.h>

/* Tokens whose (row, token) sums a GEMM tile keeps (2 KB of vectors). */
#define ANYPREC_NEON_TOKEN_TILE 32
#if defined(__GNUC__)
#define ANYPREC_NEON_INLINE static inline __attribute__((always_inline))
#else
#define ANYPREC_NEON_INLINE static inline
#endif
/* A point no load moves across, and by which a block's four row sums are
 * complete (an empty volatile asm that may read and write them): GCC
 * otherwise hoists a superblock's 32 slice and activation loads to the top
 * of the loop body, spills half of them and pairs them into LDPs, and clang
 * (Armv8.0) leaves all the pairwise accumulations to the end, spilling
 * their operands. */
#if defined(__GNUC__)
#define ANYPREC_NEON_FENCE(dot)                                                                                      \
    __asm__ volatile("" : "+w"((dot)[0]), "+w"((dot)[1]), "+w"((dot)[2]), "+w"((dot)[3])::"memory")
#else
#define ANYPREC_NEON_FENCE(dot) (void)0
#endif

/* 32 bytes: columns 0..15 and 16..31 of a group, or of a slice row. */
typedef struct anyprec_neon_pair {
    uint8x16_t lo, hi;
} anyprec_neon_pair;

ANYPREC_NEON_INLINE anyprec_neon_pair anyprec_neon_load(const unsigned char *p)
{
    anyprec_neon_pair v;
    v.lo = vld1q_u8(p);
    v.hi = vld1q_u8(p + 16);
    return v;
}

/* The GEMM's codes of pairs 2h and 2h+1 of one row's superblock (pair q: group 2q
 * in the low nibble of each byte, 2q+1 in the high one), from its 32 bytes
 * of the 2-bit slice's half h (groups 4h, 4h+2, 4h+1, 4h+3 at bit pairs 0,
 * 2, 4, 6) and 32 bytes of each upper plane at plane[p] + at (bit b: group
 * 2 (b % 4) + b / 4), by bit selects (BSL), as the x86 kernels do:
 *   3 bits: the slice's fields of the pair beside plane 2 shifted into
 *           bits 2 and 6; bits 3 and 7 keep whatever the shift brought, and
 *           the row's table repeats its 8 entries so they do not matter.
 *   4 bits: planes 2 and 3 merged (e: their bits of groups 0, 4, 1, 5 at
 *           bit pairs 0, 2, 4, 6; o: of 2, 6, 3, 7); the odd pair comes out
 *           with its lower two code bits above the upper two and is read
 *           through the row's table with the index halves swapped
 *           (anyprec_neon_block_tables). */
ANYPREC_NEON_INLINE void anyprec_neon_codes(const unsigned char *field, const unsigned char *const *plane, size_t at,
                                            unsigned h, anyprec_neon_pair *codes, const unsigned bits)
{
    const uint8x16_t m33 = vdupq_n_u8(0x33), m55 = vdupq_n_u8(0x55);
    const anyprec_neon_pair f = anyprec_neon_load(field + 32 * h), b2 = anyprec_neon_load(plane[2] + at);
    if (bits == 3) {
        codes[0].lo = vbslq_u8(m33, f.lo, h ? b2.lo : vshlq_n_u8(b2.lo, 2));
        codes[0].hi = vbslq_u8(m33, f.hi, h ? b2.hi : vshlq_n_u8(b2.hi, 2));
        codes[1].lo = vbslq_u8(m33, vshrq_n_u8(f.lo, 2), h ? vshrq_n_u8(b2.lo, 1) : vshlq_n_u8(b2.lo, 1));
        codes[1].hi = vbslq_u8(m33, vshrq_n_u8(f.hi, 2), h ? vshrq_n_u8(b2.hi, 1) : vshlq_n_u8(b2.hi, 1));
    } else {
        const anyprec_neon_pair b3 = anyprec_neon_load(plane[3] + at);
        const uint8x16_t e_lo = vbslq_u8(m55, b2.lo, vshlq_n_u8(b3.lo, 1)),
                         e_hi = vbslq_u8(m55, b2.hi, vshlq_n_u8(b3.hi, 1));
        const uint8x16_t o_lo = vbslq_u8(m55, vshrq_n_u8(b2.lo, 1), b3.lo),
                         o_hi = vbslq_u8(m55, vshrq_n_u8(b2.hi, 1), b3.hi);
        codes[0].lo = vbslq_u8(m33, f.lo, h ? e_lo : vshlq_n_u8(e_lo, 2));
        codes[0].hi = vbslq_u8(m33, f.hi, h ? e_hi : vshlq_n_u8(e_hi, 2));
        codes[1].lo = vbslq_u8(m33, h ? vshrq_n_u8(o_lo, 2) : o_lo, f.lo);
        codes[1].hi = vbslq_u8(m33, h ? vshrq_n_u8(o_hi, 2) : o_hi, f.hi);
    }
}

/* The table pair q's codes index: the swapped one for odd pairs at 4 bits. */
ANYPREC_NEON_INLINE uint8x16_t anyprec_neon_pair_table(const uint8x16_t *table, unsigned i, unsigned q,
                                                       const unsigned bits)
{
    return bits == 4 && q % 2 ? table[PMPD_ANYPREC_ROW_BLOCK + i] : table[i];
}

/* The low (half 0) or high nibbles of codes. */
ANYPREC_NEON_INLINE anyprec_neon_pair anyprec_neon_nibbles(anyprec_neon_pair codes, unsigned half)
{
    const uint8x16_t low = vdupq_n_u8(0x0F);
    anyprec_neon_pair n;
    n.lo = half ? vshrq_n_u8(codes.lo, 4) : vandq_u8(codes.lo, low);
    n.hi = half ? vshrq_n_u8(codes.hi, 4) : vandq_u8(codes.hi, low);
    return n;
}

static int32x4_t anyprec_neon_dot(int32x4_t acc, uint8x16_t w, int8x16_t x)
{
#if PMPD_USE_DOTPROD
    return vdotq_s32(acc, vreinterpretq_s8_u8(w), x);
#else
    /* Two products of at most 127*128 fit an int16 lane. */
    int8x16_t s = vreinterpretq_s8_u8(w);
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(s), vget_low_s8(x)), s, x));
#endif
}

/* Row r's table, zero past the last row (the padding rows of a block). */
static uint8x16_t anyprec_neon_row_table(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r)
{
    unsigned char entries[16];
    pmpd_anyprec_row_entries(m, bits, r, entries);
    return vld1q_u8(entries);
}

/* The codes of row i for groups 4h..4h+3, columns 16c..16c+15 of each:
 * codes[0] holds group 4h's table index in the low nibble of each byte and
 * 4h+1's in the high one, for the row's first table; codes[1] groups 4h+2
 * and 4h+3 for its second (anyprec_neon_block_tables).  One AND or one
 * shift per lookup takes an index out.
 *   2 bits: a nibble of the slice holds two whole codes (groups 4h and
 *           4h+2 low, 4h+1 and 4h+3 high), read by tables by low and by
 *           high bits: both are the slice's bytes themselves.
 *   3 bits: one bit select per pair of groups: groups 4h, 4h+1 take the
 *           slice's fields at bit pairs 0 and 4 and plane 2 (shifted by 2
 *           at h = 0) at bits 2 and 6; groups 4h+2, 4h+3 keep the slice's
 *           fields where they lie (bits 2-3, 6-7) and take plane 2 (shifted
 *           right by 2 at h = 1) at bits 1 and 5, which the second table
 *           reads in that order.  The remaining bit of each nibble carries
 *           whatever the operands held there, and both tables ignore it.
 *           Three operations per row and 16 columns of four groups, where
 *           moving both pairs' fields into the first table's order took
 *           four or five.
 *   4 bits: as the GEMM's codes (anyprec_neon_codes), 16 columns of them:
 *           the second table is the one with the index halves swapped.
 *           Planes 2 and 3 are merged into eo at h = 0 and reused at h = 1
 *           (the caller takes the two halves of a 16-column chunk in
 *           turn): 4 of 7 operations per row and chunk saved at h = 1. */
ANYPREC_NEON_INLINE void anyprec_neon_quarter_codes(const unsigned char *field, const unsigned char *const *plane,
                                                    size_t at, unsigned h, uint8x16_t *codes, uint8x16_t *eo,
                                                    const unsigned bits)
{
    const uint8x16_t f = vld1q_u8(field + 32 * h);
    if (bits == 2) {
        codes[0] = f;
        codes[1] = f;
    } else if (bits == 4) {
        const uint8x16_t m33 = vdupq_n_u8(0x33), m55 = vdupq_n_u8(0x55);
        uint8x16_t e, o;
        if (h == 0) {
            const uint8x16_t b2 = vld1q_u8(plane[2] + at), b3 = vld1q_u8(plane[3] + at);
            eo[0] = vbslq_u8(m55, b2, vshlq_n_u8(b3, 1));
            eo[1] = vbslq_u8(m55, vshrq_n_u8(b2, 1), b3);
        }
        e = eo[0];
        o = eo[1];
        codes[0] = vbslq_u8(m33, f, h ? e : vshlq_n_u8(e, 2));
        codes[1] = vbslq_u8(m33, h ? vshrq_n_u8(o, 2) : o, f);
    } else {
        const uint8x16_t m33 = vdupq_n_u8(0x33), b2 = vld1q_u8(plane[2] + at);
        codes[0] = vbslq_u8(m33, f, h ? b2 : vshlq_n_u8(b2, 2));
        codes[1] = vbslq_u8(m33, h ? vshrq_n_u8(b2, 2) : b2, f);
    }
}

/* Groups 4h..4h+3, columns 16c..16c+15 of each, of the four rows of a
 * block.  One 16-byte load per row and slice, none next to
 * another (they lie 32 or 64 bytes apart, so no LDP pairs them), the
 * activations of the four groups loaded once for the four rows, and the
 * products issued row after row for each group, so that on an in-order
 * core each SDOT's accumulator was written four SDOTs before.  Indices are
 * taken out of the codes just before their lookup: all 16 live at once
 * made clang spill. */
ANYPREC_NEON_INLINE void anyprec_neon_block_quarter(int32x4_t *dot, const uint8x16_t *table, const unsigned char *field,
                                                    const unsigned char *const *plane, unsigned h, unsigned c,
                                                    const int8_t *x, uint8x16_t (*eo)[2], const unsigned bits)
{
    const uint8x16_t low = vdupq_n_u8(0x0F);
    uint8x16_t codes[PMPD_ANYPREC_ROW_BLOCK][2];
    int8x16_t xv[4];
    unsigned i, k;
#pragma GCC unroll 4
    for (k = 0; k < 4; k++)
        xv[k] = vld1q_s8(x + 32 * (4 * h + k) + 16 * c);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        anyprec_neon_quarter_codes(field + 64 * i + 16 * c, plane, 32 * i + 16 * c, h, codes[i], eo[i], bits);
#pragma GCC unroll 4
    for (k = 0; k < 4; k++)
#pragma GCC unroll 4
        for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
            const uint8x16_t idx = k % 2 ? vshrq_n_u8(codes[i][k / 2], 4) : vandq_u8(codes[i][k / 2], low);
            dot[i] = anyprec_neon_dot(dot[i], vqtbl1q_u8(table[k < 2 ? i : PMPD_ANYPREC_ROW_BLOCK + i], idx), xv[k]);
        }
}

/* Superblock s of the four rows of block r0, added to acc: the loop body
 * (and the region tests/mca/neon_gemv_regions.c measures), a quarter (4
 * groups, 16 columns of each) at a time, with a fence after each.  Only
 * columns 0..15 of each group when halves is 1: a partial superblock
 * shared by row blocks (anyprec.h) gives each block at most 16 of a
 * group's 32 slots, the rest meeting zero activations (pycode21M's 384
 * columns: 6 quarters per row block instead of 8).  At 4
 * bits both halves of columns 0..15, then of 16..31, so the merged upper
 * planes of a chunk serve two quarters (kept in registers across the
 * fence; the other widths measured the same or 0.1 cycle worse in that
 * order).  Half a superblock at a time (32 columns of 4 groups, the
 * previous kernel) cost more spills and LDPs: llvm-mca's Cortex-A55 model
 * issues an LDP of Q registers in 6 cycles, two LDRs in 2. */
ANYPREC_NEON_INLINE void anyprec_neon_block_super(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                  const pmpd_anyprec_units *u, uint32_t r0, uint32_t s,
                                                  const uint8x16_t *table, float32x4_t *acc, const unsigned halves,
                                                  const unsigned bits)
{
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS];
    const int8_t *x = pmpd_anyprec_super_input(xq, u, m->cols, s);
    const unsigned char *field = pmpd_anyprec_super_slices(m, r0, s, bits, plane);
    int32x4_t dot[PMPD_ANYPREC_ROW_BLOCK];
    uint8x16_t eo[PMPD_ANYPREC_ROW_BLOCK][2];
    uint32_t i, q;
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        dot[i] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (q = 0; q < 4; q++) {
        const unsigned c = bits == 4 ? q / 2 : q % 2;
        if (c >= halves)
            continue;
        anyprec_neon_block_quarter(dot, table, field, plane, bits == 4 ? q % 2 : q / 2, c, x, eo, bits);
        ANYPREC_NEON_FENCE(dot);
    }
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = vfmaq_n_f32(acc[i], vcvtq_f32_s32(dot[i]), u->scale[s]);
}

/* Entry n of the 2-bit tables by low / by high bits: entry n%4 / n/4; of
 * the second 3-bit table, entry 4 * (n >> 1 & 1) + (n >> 2) (index bit 1
 * plane 2, bits 2-3 planes 0-1; anyprec_neon_quarter_codes).  A
 * block without padding rows reads its entries straight from the matrix
 * (as the x86 kernels do): the padding rows' zeroed 16-byte copy costs a
 * stalled load per row and block. */
ANYPREC_NEON_INLINE void anyprec_neon_block_tables(const pmpd_anyprec_matrix *m, uint32_t r0, const unsigned bits,
                                                   uint8x16_t *table)
{
    const unsigned char *entries = m->tables[bits] + ((size_t)r0 << bits);
    const int whole = r0 + PMPD_ANYPREC_ROW_BLOCK <= m->rows;
    static const uint8_t low_bits[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    static const uint8_t high_bits[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    static const uint8_t repeat8[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
    static const uint8_t swapped[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    static const uint8_t plane2_low[16] = {0, 0, 4, 4, 1, 1, 5, 5, 2, 2, 6, 6, 3, 3, 7, 7};
    uint32_t i;
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        uint8x16_t t;
        if (!whole) {
            t = anyprec_neon_row_table(m, bits, r0 + i);
        } else if (bits == 4) {
            t = vld1q_u8(entries + 16 * i);
        } else if (bits == 3) {
            t = vcombine_u8(vld1_u8(entries + 8 * i), vdup_n_u8(0));
        } else {
            uint32_t four;
            memcpy(&four, entries + 4 * i, sizeof four);
            t = vreinterpretq_u8_u32(vdupq_n_u32(four));
        }
        table[i] = bits == 2 ? vqtbl1q_u8(t, vld1q_u8(low_bits)) : bits == 3 ? vqtbl1q_u8(t, vld1q_u8(repeat8)) : t;
        table[PMPD_ANYPREC_ROW_BLOCK + i] =
            vqtbl1q_u8(t, vld1q_u8(bits == 2 ? high_bits : bits == 3 ? plane2_low : swapped));
    }
}

/* pmpd_anyprec_store_block for the four accumulators: their sums by
 * pairwise adds (the order vaddvq_f32 adds in, so the same floats) and, for
 * a block inside the range, the scales, offsets and store in vector
 * registers, as the x86 kernels do (anyprec_store_x86.h: there the sums'
 * trip through a stack copy stalled the scalar loads on the vector store). */
ANYPREC_NEON_INLINE void anyprec_neon_store_block(const pmpd_anyprec_matrix *m, unsigned bits, float xsum,
                                                  const float32x4_t *acc, float *y, uint32_t r0, uint32_t row_begin,
                                                  uint32_t row_end)
{
    const float32x4_t sums = vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3]));
    if (r0 >= row_begin && r0 + PMPD_ANYPREC_ROW_BLOCK <= row_end) {
        const float32x4_t scaled = vmulq_f32(sums, vld1q_f32(m->scales[bits] + r0));
        const float32x4_t offset = vmulq_f32(vdupq_n_f32(xsum), vld1q_f32(m->offsets[bits] + r0));
        vst1q_f32(y + r0, vaddq_f32(scaled, offset));
    } else {
        float lanes[PMPD_ANYPREC_ROW_BLOCK];
        vst1q_f32(lanes, sums);
        pmpd_anyprec_store_block(m, bits, xsum, lanes, y, r0, row_begin, row_end);
    }
}

/* The four rows of block r0; stores those inside [row_begin, row_end). */
ANYPREC_NEON_INLINE void anyprec_neon_gemv_block(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                 const pmpd_anyprec_units *u, float *y, uint32_t r0,
                                                 uint32_t row_begin, uint32_t row_end, const unsigned bits)
{
    uint8x16_t table[2 * PMPD_ANYPREC_ROW_BLOCK];
    float32x4_t acc[PMPD_ANYPREC_ROW_BLOCK];
    uint32_t s, i;
    anyprec_neon_block_tables(m, r0, bits, table);
#pragma GCC unroll 4
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
        acc[i] = vdupq_n_f32(0.0f);
    for (s = 0; s < m->full; s++)
        anyprec_neon_block_super(m, xq, u, r0, s, table, acc, 2, bits);
    if (s < m->superblocks) {
        if (m->tail_shift > 0)
            anyprec_neon_block_super(m, xq, u, r0, s, table, acc, 1, bits);
        else
            anyprec_neon_block_super(m, xq, u, r0, s, table, acc, 2, bits);
    }
    anyprec_neon_store_block(m, bits, u->sum, acc, y, r0, row_begin, row_end);
}

PMPD_INTERNAL void pmpd_anyprec_gemv_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    PMPD_ANYPREC_GEMV_BLOCKS(anyprec_neon_gemv_block, m, bits, xq, xscale, y, row_begin, row_end);
}

/* Group g of row i of a block, as looked-up entries: e[8 * i + g]. */
ANYPREC_NEON_INLINE void anyprec_neon_block_entries(const pmpd_anyprec_matrix *m, uint32_t r0, uint32_t s,
                                                    const uint8x16_t *table, anyprec_neon_pair *e, const unsigned bits)
{
    const unsigned char *plane[PMPD_ANYPREC_MAX_BITS];
    const unsigned char *field = pmpd_anyprec_super_slices(m, r0, s, bits, plane);
    unsigned i, h, q;
    for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
        anyprec_neon_pair *row = e + 8 * i;
        if (bits == 2) {
            for (h = 0; h < 2; h++) {
                anyprec_neon_pair f = anyprec_neon_load(field + 64 * i + 32 * h);
                anyprec_neon_pair lo = anyprec_neon_nibbles(f, 0), hi = anyprec_neon_nibbles(f, 1);
                const uint8x16_t by_low = table[i], by_high = table[PMPD_ANYPREC_ROW_BLOCK + i];
                row[4 * h].lo = vqtbl1q_u8(by_low, lo.lo);
                row[4 * h].hi = vqtbl1q_u8(by_low, lo.hi);
                row[4 * h + 1].lo = vqtbl1q_u8(by_low, hi.lo);
                row[4 * h + 1].hi = vqtbl1q_u8(by_low, hi.hi);
                row[4 * h + 2].lo = vqtbl1q_u8(by_high, lo.lo);
                row[4 * h + 2].hi = vqtbl1q_u8(by_high, lo.hi);
                row[4 * h + 3].lo = vqtbl1q_u8(by_high, hi.lo);
                row[4 * h + 3].hi = vqtbl1q_u8(by_high, hi.hi);
            }
        } else {
            anyprec_neon_pair codes[2];
            for (q = 0; q < 4; q++) {
                anyprec_neon_pair lo, hi;
                uint8x16_t t = anyprec_neon_pair_table(table, i, q, bits);
                if (q % 2 == 0)
                    anyprec_neon_codes(field + 64 * i, plane, 32 * i, q / 2, codes, bits);
                lo = anyprec_neon_nibbles(codes[q % 2], 0);
                hi = anyprec_neon_nibbles(codes[q % 2], 1);
                row[2 * q].lo = vqtbl1q_u8(t, lo.lo);
                row[2 * q].hi = vqtbl1q_u8(t, lo.hi);
                row[2 * q + 1].lo = vqtbl1q_u8(t, hi.lo);
                row[2 * q + 1].hi = vqtbl1q_u8(t, hi.hi);
            }
        }
    }
}

/* Slot group g (32 slots) of a token's superblock at xt, its activations
 * in column order: span of them, the rest zero (span < 32 in a shared
 * partial superblock, anyprec.h; the token's row is zero past cols up to
 * its stride, so the loads stay inside it). */
ANYPREC_NEON_INLINE int8x16x2_t anyprec_neon_group_input(const int8_t *xt, unsigned g, unsigned span)
{
    int8x16x2_t x;
    if (span == PMPD_ANYPREC_GROUP) {
        x.val[0] = vld1q_s8(xt + PMPD_ANYPREC_GROUP * g);
        x.val[1] = vld1q_s8(xt + PMPD_ANYPREC_GROUP * g + 16);
    } else {
        x.val[0] = span == PMPD_ANYPREC_GROUP / 2 ? vld1q_s8(xt + span * g)
                                                  : vcombine_s8(vld1_s8(xt + span * g), vdup_n_s8(0));
        x.val[1] = vdupq_n_s8(0);
    }
    return x;
}

/* Tokens t0 .. t0+tile-1 against the block at r0: per superblock the
 * block's entries are looked up once and serve every token of the tile. */
static void anyprec_neon_gemm_tile(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq, const float *xscale,
                                   const float *xsum, size_t t0, size_t tile, const uint8x16_t *table, float *y,
                                   size_t y_stride, uint32_t r0, uint32_t row_begin, uint32_t row_end)
{
    const size_t stride = pmpd_anyprec_token_stride(m->cols);
    anyprec_neon_pair e[8 * PMPD_ANYPREC_ROW_BLOCK];
    float32x4_t acc[PMPD_ANYPREC_ROW_BLOCK * ANYPREC_NEON_TOKEN_TILE];
    uint32_t s, i, g;
    size_t t;
    for (t = 0; t < PMPD_ANYPREC_ROW_BLOCK * tile; t++)
        acc[t] = vdupq_n_f32(0.0f);
    for (s = 0; s < m->superblocks; s++) {
        const unsigned span = s < m->full ? PMPD_ANYPREC_GROUP : m->tail_span;
        anyprec_neon_block_entries(m, r0, s, table, e, bits);
        for (t = 0; t < tile; t++) {
            const int8_t *xt = xq + (t0 + t) * stride + (size_t)s * PMPD_ANYPREC_SUPER;
            const float scale = xscale[(t0 + t) * (stride / PMPD_ANYPREC_GROUP) + 8 * s];
            int8x16x2_t x[8];
            for (g = 0; g < 8; g++)
                x[g] = anyprec_neon_group_input(xt, g, span);
            for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++) {
                int32x4_t dot = vdupq_n_s32(0);
                for (g = 0; g < 8; g++) {
                    dot = anyprec_neon_dot(dot, e[8 * i + g].lo, x[g].val[0]);
                    dot = anyprec_neon_dot(dot, e[8 * i + g].hi, x[g].val[1]);
                }
                acc[i * tile + t] = vfmaq_n_f32(acc[i * tile + t], vcvtq_f32_s32(dot), scale);
            }
        }
    }
    for (t = 0; t < tile; t++) {
        float32x4_t rows[PMPD_ANYPREC_ROW_BLOCK];
        for (i = 0; i < PMPD_ANYPREC_ROW_BLOCK; i++)
            rows[i] = acc[i * tile + t];
        anyprec_neon_store_block(m, bits, xsum[t0 + t], rows, y + (t0 + t) * y_stride, r0, row_begin, row_end);
    }
}

PMPD_INTERNAL void pmpd_anyprec_gemm_neon(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, const float *xsum, size_t n, float *y,
                                          size_t y_stride, uint32_t row_begin, uint32_t row_end)
{
    uint8x16_t table[2 * PMPD_ANYPREC_ROW_BLOCK];
    uint32_t r0;
    size_t t0;
    for (r0 = row_begin / PMPD_ANYPREC_ROW_BLOCK * PMPD_ANYPREC_ROW_BLOCK; r0 < row_end; r0 += PMPD_ANYPREC_ROW_BLOCK) {
        switch (bits) {
        case 2: anyprec_neon_block_tables(m, r0, 2, table); break;
        case 3: anyprec_neon_block_tables(m, r0, 3, table); break;
        default: anyprec_neon_block_tables(m, r0, 4, table); break;
        }
        for (t0 = 0; t0 < n; t0 += ANYPREC_NEON_TOKEN_TILE) {
            size_t tile = n - t0 < ANYPREC_NEON_TOKEN_TILE ? n - t0 : ANYPREC_NEON_TOKEN_TILE;
            anyprec_neon_gemm_tile(m, bits, xq, xscale, xsum, t0, tile, table, y, y_stride, r0, row_begin, row_end);
        }
    }
}

#undef ANYPREC_NEON_TOKEN_TILE
#undef ANYPREC_NEON_INLINE
#endif
