/* VQ product with NEON (AArch64), in the rotated formats' NEON tiles
 * (rotated_simd.h): 4 rows, one from each quarter of the caller's rows, x
 * up to 4 tokens, one block of 16 pairs a step.  A block's 16 indices land
 * in one q register (vq.h's layout): the low nibbles by one AND and one
 * shift, each further index bit by one TBL that spreads its plane's bytes
 * to the lanes, a CMTST against each lane's bit and a BSL.  TBL looks the
 * indices up in the book's first and second coordinates, held as 64-entry
 * tables of four registers each: a book of up to 64 points takes one TBL
 * per coordinate, 128 and 256 points two and four, each further TBX on
 * index - 64 c filling the lanes whose index lies in its chunk (TBX leaves
 * out-of-range lanes as they are).  The 16 first coordinates meet the
 * block's first 16 prepared activations and the second coordinates the
 * other 16 (vq.h) in rotated_simd.h's exact int32 sums (SDOT, or SMULL +
 * SMLAL2 + SADALP on Armv8.0), one SCVTF and one FMLA with the block's
 * activation step per row and token. */
#include "pmpd_impl/weights/rotated/rotated_simd.h"
#include "pmpd_impl/weights/vq/vq.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

#define VQ_NEON_CHUNKS 4 /* of 64 points, at 256 points */

typedef struct vq_neon_tables {
    int8x16x4_t first[VQ_NEON_CHUNKS], second[VQ_NEON_CHUNKS];
} vq_neon_tables;

static void vq_neon_load_tables(unsigned pair_bits, vq_neon_tables *k)
{
    const int8_t *book = pmpd_vq_book(pair_bits);
    int8_t first[256], second[256];
    unsigned i, c;
    memset(first, 0, sizeof first);
    memset(second, 0, sizeof second);
    for (i = 0; i < 1u << pair_bits; i++) {
        first[i] = book[2 * i];
        second[i] = book[2 * i + 1];
    }
    /* Register by register: vld1q_s8_x4 is missing from older compilers. */
    for (c = 0; c < VQ_NEON_CHUNKS; c++)
        for (i = 0; i < 4; i++) {
            k->first[c].val[i] = vld1q_s8(first + 64 * c + 16 * i);
            k->second[c].val[i] = vld1q_s8(second + 64 * c + 16 * i);
        }
}

/* The 16 indices of block b of rows rows[0..n), in pair order, each step
 * for all rows before the next. */
static inline __attribute__((always_inline)) void vq_neon_indices(const uint8_t *const *rows, size_t n, size_t b,
                                                                  unsigned pair_bits,
                                                                  uint8x16_t idx[PMPD_ROTATED_NEON_ROWS])
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    /* Plane i's low byte to lanes 0-7, its high byte to lanes 8-15. */
    static const uint8_t spread[3][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
                                          {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}};
    const size_t at = b * 2 * (size_t)pair_bits;
    uint16x8_t words[PMPD_ROTATED_NEON_ROWS];
    uint8x16_t bits[PMPD_ROTATED_NEON_ROWS];
    size_t i;
    unsigned plane;
    if (pair_bits == 8) {
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            idx[i] = vld1q_u8(rows[i] + at);
        return;
    }
#pragma GCC unroll 4
    for (i = 0; i < n; i++) {
        const uint8x8_t low = vld1_u8(rows[i] + at);
        idx[i] = vcombine_u8(vand_u8(low, vdup_n_u8(15)), vshr_n_u8(low, 4));
        /* The planes as u16 lanes (never past the block's end). */
        words[i] = vld1q_lane_u16((const uint16_t *)(const void *)(rows[i] + at + 8), vdupq_n_u16(0), 0);
        if (pair_bits >= 6)
            words[i] = vld1q_lane_u16((const uint16_t *)(const void *)(rows[i] + at + 10), words[i], 1);
        if (pair_bits == 7)
            words[i] = vld1q_lane_u16((const uint16_t *)(const void *)(rows[i] + at + 12), words[i], 2);
    }
    /* Per plane one TBL spreads its bits to the 16 lanes, CMTST makes each
     * lane's bit a mask and BSL sets index bit 4 + plane from it. */
#pragma GCC unroll 3
    for (plane = 0; plane + 4 < pair_bits; plane++) {
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            bits[i] = vqtbl1q_u8(vreinterpretq_u8_u16(words[i]), vld1q_u8(spread[plane]));
        PMPD_ROTATED_NEON_FENCE(bits, n);
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            bits[i] = vtstq_u8(bits[i], vld1q_u8(bit));
        PMPD_ROTATED_NEON_FENCE(bits, n);
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            idx[i] = vbslq_u8(vdupq_n_u8((uint8_t)(16u << plane)), bits[i], idx[i]);
    }
}

/* One chunk of 64 points (or the whole book of 16 or 32): TBL, or TBX
 * (merge) on lanes whose index minus 64 chunk lies in it. */
static inline __attribute__((always_inline)) int8x16_t vq_neon_chunk(const int8x16x4_t *table, unsigned pair_bits,
                                                                     unsigned chunk, int8x16_t w, uint8x16_t idx)
{
    if (pair_bits == 4)
        return vqtbl1q_s8(table[0].val[0], idx);
    if (pair_bits == 5) {
        int8x16x2_t two = {{table[0].val[0], table[0].val[1]}};
        return vqtbl2q_s8(two, idx);
    }
    return chunk == 0 ? vqtbl4q_s8(table[0], idx) : vqtbx4q_s8(w, table[chunk], idx);
}

/* Rows rows[0..n)'s 32 coordinates of block b, each step written for all
 * rows before the next (their chains interleave on an in-order core):
 * the indices, then per chunk of the book both coordinates' lookups. */
static inline __attribute__((always_inline)) void vq_neon_weights(const uint8_t *const *rows, size_t n, size_t b,
                                                                  unsigned pair_bits, const vq_neon_tables *k,
                                                                  int8x16_t w[2][PMPD_ROTATED_NEON_ROWS])
{
    const unsigned chunks = pair_bits <= 6 ? 1 : 1u << (pair_bits - 6);
    uint8x16_t idx[PMPD_ROTATED_NEON_ROWS], at[PMPD_ROTATED_NEON_ROWS];
    size_t i;
    unsigned c;
    vq_neon_indices(rows, n, b, pair_bits, idx);
    PMPD_ROTATED_NEON_FENCE(idx, n);
#pragma GCC unroll 4
    for (c = 0; c < chunks; c++) {
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            at[i] = c == 0 ? idx[i] : vsubq_u8(idx[i], vdupq_n_u8((uint8_t)(64 * c)));
        PMPD_ROTATED_NEON_FENCE(at, n);
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            w[0][i] = vq_neon_chunk(k->first, pair_bits, c, w[0][i], at[i]);
        PMPD_ROTATED_NEON_FENCE(w[0], n);
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            w[1][i] = vq_neon_chunk(k->second, pair_bits, c, w[1][i], at[i]);
        PMPD_ROTATED_NEON_FENCE(w[1], n);
    }
}

/* Rows r0 + i stride (i < nr) times tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void vq_neon_tile(const pmpd_vq_matrix *m, const vq_neon_tables *k,
                                                               unsigned pair_bits, const int8_t *q, const float *d,
                                                               size_t n_blocks, size_t r0, size_t stride, size_t nr,
                                                               size_t t0, size_t nt, float *y, size_t ldy)
{
    const float unit = pmpd_vq_unit(pair_bits);
#define VQ_NEON_WEIGHTS(rows, b, n, w) vq_neon_weights(rows, n, b, pair_bits, k, w)
    PMPD_ROTATED_NEON_TILE(m->index, m->row_bytes, m->padded, n_blocks, q, d, m->scale, unit, r0, stride, nr, t0,
                           nt, y, ldy, VQ_NEON_WEIGHTS);
#undef VQ_NEON_WEIGHTS
}

static inline __attribute__((always_inline)) void vq_neon_rows(const pmpd_vq_matrix *m, unsigned pair_bits,
                                                               const void *act, size_t n_tokens, size_t row_begin,
                                                               size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_vq_rotated(m);
    const int8_t *q;
    const float *d;
    const size_t n_blocks = m->padded / PMPD_VQ_BLOCK;
    vq_neon_tables k;
    q = pmpd_rotated_act_q(act);
    d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    vq_neon_load_tables(pair_bits, &k);
#define VQ_NEON_TILE(r0, stride, nr, t0, nt) vq_neon_tile(m, &k, pair_bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, PMPD_ROTATED_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_4, VQ_NEON_TILE);
#undef VQ_NEON_TILE
}

PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
#define VQ_NEON_DISPATCH(p) vq_neon_rows(m, p, act, n_tokens, row_begin, row_end, y, ldy)
    PMPD_VQ_DISPATCH(m->pair_bits, VQ_NEON_DISPATCH);
#undef VQ_NEON_DISPATCH
}

#undef VQ_NEON_CHUNKS
#endif
