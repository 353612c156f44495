/* VQ product with NEON (AArch64).  A block's 16 indices land in one q
 * register (vq.h's layout); TBL looks them up in the book's first and
 * second coordinates, held as 64-entry tables of four registers each: a
 * book of up to 64 points takes one TBL per coordinate, 128 and 256
 * points two and four, each further TBX on index - 64 c filling the lanes
 * whose index lies in its chunk (TBX leaves out-of-range lanes as they
 * are).  The 16 first coordinates meet the block's first 16 prepared
 * activations and the second coordinates the other 16 (vq.h), exactly in
 * int32: SDOT where the target has the dot-product extension, else SMULL
 * + SMLAL2 and SADALP, as NUQ's kernel (nuq_neon.c).  A tile is one row x
 * up to 4 tokens, the lookups shared by the tokens. */
#include "pmpd_impl/weights/rotated/rotated_simd.h"
#include "pmpd_impl/weights/vq/vq.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

#define VQ_NEON_TILE PMPD_ROTATED_TILE
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

/* The 16 indices of one block, in pair order. */
static inline __attribute__((always_inline)) uint8x16_t vq_neon_indices(const uint8_t *block, unsigned pair_bits)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    /* Plane i's low byte to lanes 0-7, its high byte to lanes 8-15. */
    static const uint8_t spread[3][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
                                          {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}};
    uint8x8_t low;
    uint8x16_t idx, planes;
    uint16x4_t words = vdup_n_u16(0);
    unsigned plane;
    if (pair_bits == 8)
        return vld1q_u8(block);
    low = vld1_u8(block);
    idx = vcombine_u8(vand_u8(low, vdup_n_u8(15)), vshr_n_u8(low, 4));
    /* The planes as u16 lanes (never past the block's end), then one TBL
     * per plane spreads its bits to the 16 lanes. */
    words = vld1_lane_u16((const uint16_t *)(const void *)(block + 8), words, 0);
    if (pair_bits >= 6)
        words = vld1_lane_u16((const uint16_t *)(const void *)(block + 10), words, 1);
    if (pair_bits == 7)
        words = vld1_lane_u16((const uint16_t *)(const void *)(block + 12), words, 2);
    planes = vcombine_u8(vreinterpret_u8_u16(words), vreinterpret_u8_u16(words));
    for (plane = 0; plane + 4 < pair_bits; plane++) {
        const uint8x16_t bytes = vqtbl1q_u8(planes, vld1q_u8(spread[plane]));
        idx = vorrq_u8(idx, vandq_u8(vtstq_u8(bytes, vld1q_u8(bit)), vdupq_n_u8((uint8_t)(16u << plane))));
    }
    return idx;
}

/* Coordinates of the 16 points: one TBL, then a TBX per further chunk. */
static inline __attribute__((always_inline)) int8x16_t vq_neon_lookup(const int8x16x4_t *table, unsigned pair_bits,
                                                                      uint8x16_t idx)
{
    int8x16_t w;
    unsigned c;
    if (pair_bits == 4)
        return vqtbl1q_s8(table[0].val[0], idx);
    if (pair_bits == 5) {
        int8x16x2_t two = {{table[0].val[0], table[0].val[1]}};
        return vqtbl2q_s8(two, idx);
    }
    w = vqtbl4q_s8(table[0], idx);
    for (c = 1; c < 1u << (pair_bits - 6); c++)
        w = vqtbx4q_s8(w, table[c], vsubq_u8(idx, vdupq_n_u8((uint8_t)(64 * c))));
    return w;
}

/* Block b of row into acc[t] for tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void vq_neon_block(const uint8_t *row, const vq_neon_tables *k,
                                                                unsigned pair_bits, const int8_t *q, const float *d,
                                                                size_t stride, size_t n_blocks, size_t b, size_t t0,
                                                                size_t nt, float32x4_t *acc)
{
    const uint8x16_t idx = vq_neon_indices(row + b * 2 * (size_t)pair_bits, pair_bits);
    const int8x16_t w0 = vq_neon_lookup(k->first, pair_bits, idx), w1 = vq_neon_lookup(k->second, pair_bits, idx);
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t] = pmpd_rotated_neon_dot(w0, w1, q + (t0 + t) * stride + b * PMPD_VQ_BLOCK, d[(t0 + t) * n_blocks + b],
                                       acc[t]);
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4), even and odd blocks into two
 * accumulators per token (two chains of dependent FMAs). */
static inline __attribute__((always_inline)) void vq_neon_tile(const pmpd_vq_matrix *m, const vq_neon_tables *k,
                                                               unsigned pair_bits, const int8_t *q, const float *d,
                                                               size_t n_blocks, size_t r, size_t t0, size_t nt,
                                                               float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const float out = m->scale[r] * pmpd_vq_unit(pair_bits);
    float32x4_t even[VQ_NEON_TILE], odd[VQ_NEON_TILE];
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        even[t] = odd[t] = vdupq_n_f32(0.0f);
#define VQ_NEON_BLOCK(b, acc) vq_neon_block(row, k, pair_bits, q, d, m->padded, n_blocks, b, t0, nt, acc)
    PMPD_ROTATED_BLOCKS(n_blocks, VQ_NEON_BLOCK, even, odd);
#undef VQ_NEON_BLOCK
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = out * vaddvq_f32(vaddq_f32(even[t], odd[t]));
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
    size_t r;
    q = pmpd_rotated_act_q(act);
    d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    vq_neon_load_tables(pair_bits, &k);
#define VQ_NEON_CALL(t0, nt) vq_neon_tile(m, &k, pair_bits, q, d, n_blocks, r, t0, nt, y, ldy)
    for (r = row_begin; r < row_end; r++)
        PMPD_ROTATED_TILES(n_tokens, VQ_NEON_CALL);
#undef VQ_NEON_CALL
}

PMPD_INTERNAL void pmpd_vq_matmul(const pmpd_vq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                  size_t row_end, float *y, size_t ldy)
{
#define VQ_NEON_ROWS(p) vq_neon_rows(m, p, act, n_tokens, row_begin, row_end, y, ldy)
    PMPD_VQ_DISPATCH(m->pair_bits, VQ_NEON_ROWS);
#undef VQ_NEON_ROWS
}

#undef VQ_NEON_TILE
#undef VQ_NEON_CHUNKS
#endif
