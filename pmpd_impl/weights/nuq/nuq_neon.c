/* NUQ product with NEON (AArch64), in the rotated formats' NEON tiles
 * (rotated_simd.h): 4 rows, one from each quarter of the caller's rows, x
 * up to 4 tokens, one block of 32 columns a step.  A row's 32 codes of a
 * block become two q registers of codes in column order (columns 0-15 and
 * 16-31), one TBL each turns them into int8 levels:
 *   4 bits: the 16 code bytes, masked and shifted (one AND, one USHR);
 *   2 bits: the 8 code bytes loaded into both halves (LD1R), one USHL by
 *     per-lane amounts and one AND per register (byte j % 8, bits 2 (j / 8));
 *   3 bits: the same, then the sign bit of each lane from the block's u32
 *     sign word (spread to the lanes by one TBL, tested by CMTST against
 *     each lane's bit, inserted as bit 2 by BSL).
 * The levels meet the activations in rotated_simd.h's exact int32 sums
 * (SDOT, or SMULL + SMLAL2 + SADALP on Armv8.0), one SCVTF and one FMLA
 * with the block's activation step per row and token. */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>

/* The per-call constants of one width: the level table and the 2- and
 * 3-bit unpacking's shifts and sign bits. */
typedef struct nuq_neon_consts {
    int8x16_t levels;
    int8x16_t shift[2];  /* 2, 3 bits: right shifts of register k's lanes */
    uint8x16_t spread;   /* 3 bits: sign word byte of each lane */
    uint8x16_t sign[2];  /* 3 bits: register k's lane j: its sign bit in that byte */
} nuq_neon_consts;

static inline __attribute__((always_inline)) void nuq_neon_make_consts(unsigned bits, nuq_neon_consts *k)
{
    /* Column j of register k (column 16 k + j) is field (16 k + j) / 8 of
     * byte j % 8: shifted right by 2 (2 k + j / 8). */
    static const int8_t shift[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, -2, -2, -2, -2, -2, -2, -2, -2},
                                        {-4, -4, -4, -4, -4, -4, -4, -4, -6, -6, -6, -6, -6, -6, -6, -6}};
    /* Column c's sign: bit 4 (c % 8) + c / 8 of the u32, i.e. of byte
     * (c % 8) / 2 the bit 4 (c % 2) + c / 8. */
    static const uint8_t spread[16] = {0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3};
    static const uint8_t sign[2][16] = {{1, 16, 1, 16, 1, 16, 1, 16, 2, 32, 2, 32, 2, 32, 2, 32},
                                        {4, 64, 4, 64, 4, 64, 4, 64, 8, 128, 8, 128, 8, 128, 8, 128}};
    k->levels = vld1q_s8(pmpd_nuq_levels_int8(bits));
    k->shift[0] = vld1q_s8(shift[0]);
    k->shift[1] = vld1q_s8(shift[1]);
    k->spread = vld1q_u8(spread);
    k->sign[0] = vld1q_u8(sign[0]);
    k->sign[1] = vld1q_u8(sign[1]);
}

/* Rows rows[0..n)'s 32 levels of block b, each step written for all rows
 * before the next (their chains interleave on an in-order core). */
static inline __attribute__((always_inline)) void nuq_neon_weights(const uint8_t *const *rows, size_t n, size_t b,
                                                                   unsigned bits, const nuq_neon_consts *k,
                                                                   int8x16_t w[2][PMPD_ROTATED_NEON_ROWS])
{
    const size_t at = b * 4 * (size_t)bits;
    uint8x16_t idx[2][PMPD_ROTATED_NEON_ROWS];
    size_t i, h;
#pragma GCC unroll 4
    for (i = 0; i < n; i++) {
        if (bits == 4) {
            const uint8x16_t codes = vld1q_u8(rows[i] + at);
            idx[0][i] = vandq_u8(codes, vdupq_n_u8(15));
            idx[1][i] = vshrq_n_u8(codes, 4);
        } else {
            const uint8x16_t codes = vreinterpretq_u8_u64(vld1q_dup_u64((const uint64_t *)(const void *)(rows[i] + at)));
#pragma GCC unroll 2
            for (h = 0; h < 2; h++)
                idx[h][i] = vandq_u8(vshlq_u8(codes, k->shift[h]), vdupq_n_u8(3));
        }
    }
    PMPD_ROTATED_NEON_FENCE(idx[0], n);
    PMPD_ROTATED_NEON_FENCE(idx[1], n);
    if (bits == 3) {
#pragma GCC unroll 4
        for (i = 0; i < n; i++) {
            /* The u32 sign word in each 4-byte lane; one TBL puts byte
             * (c % 8) / 2 under each column. */
            const uint8x16_t word = vreinterpretq_u8_u32(vld1q_dup_u32((const uint32_t *)(const void *)(rows[i] + at + 8)));
            const uint8x16_t bytes = vqtbl1q_u8(word, k->spread);
#pragma GCC unroll 2
            for (h = 0; h < 2; h++)
                idx[h][i] = vbslq_u8(vdupq_n_u8(4), vtstq_u8(bytes, k->sign[h]), idx[h][i]);
        }
    }
    PMPD_ROTATED_NEON_FENCE(idx[0], n);
    PMPD_ROTATED_NEON_FENCE(idx[1], n);
#pragma GCC unroll 2
    for (h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (i = 0; i < n; i++)
            w[h][i] = vqtbl1q_s8(k->levels, idx[h][i]);
        PMPD_ROTATED_NEON_FENCE(w[h], n);
    }
}

/* Rows r0 + i stride (i < nr) times tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void nuq_neon_tile(const pmpd_nuq_matrix *m, const nuq_neon_consts *k,
                                                                unsigned bits, const int8_t *q, const float *d,
                                                                size_t n_blocks, size_t r0, size_t stride, size_t nr,
                                                                size_t t0, size_t nt, float *y, size_t ldy)
{
    const float unit = pmpd_nuq_unit(bits);
#define NUQ_NEON_WEIGHTS(rows, b, n, w) nuq_neon_weights(rows, n, b, bits, k, w)
    PMPD_ROTATED_NEON_TILE(m->index, m->row_bytes, m->padded, n_blocks, q, d, m->scale, unit, r0, stride, nr, t0, nt, y,
                           ldy, NUQ_NEON_WEIGHTS);
#undef NUQ_NEON_WEIGHTS
}

static inline __attribute__((always_inline)) void nuq_neon_rows(const pmpd_nuq_matrix *m, unsigned bits,
                                                                const void *act, size_t n_tokens, size_t row_begin,
                                                                size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    nuq_neon_consts k;
    nuq_neon_make_consts(bits, &k);
#define NUQ_NEON_TILE(r0, stride, nr, t0, nt) nuq_neon_tile(m, &k, bits, q, d, n_blocks, r0, stride, nr, t0, nt, y, ldy)
    PMPD_ROTATED_TILE_GRID(row_begin, row_end, PMPD_ROTATED_ROWS, n_tokens, PMPD_ROTATED_TOKENS_BY_4, NUQ_NEON_TILE);
#undef NUQ_NEON_TILE
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_neon_rows(m, 4, act, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_neon_rows(m, 3, act, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_neon_rows(m, 2, act, n_tokens, row_begin, row_end, y, ldy);
}
#endif
