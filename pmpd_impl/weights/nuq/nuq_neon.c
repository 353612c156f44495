/* NUQ product with NEON (AArch64): a block's 32 codes become 32 bytes in
 * column order (two q registers: columns 0-15 and 16-31) with one shift
 * and mask per 8 or 16 of them, TBL turns them into int8 levels, and the
 * levels are multiplied with the int8 activations exactly: SDOT where the
 * target has the dot-product extension, else SMULL + SMLAL2 (two products
 * of at most 127 * 127 fit an int16 lane) and SADALP.  Each block's int32
 * sums become floats times the block's activation step, added into one
 * float vector per token.  A tile is one row x up to 4 tokens, the
 * lookups shared by the tokens. */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

#define NUQ_NEON_TILE PMPD_ROTATED_TILE

/* The 32 codes of a block, in column order. */
static inline __attribute__((always_inline)) void nuq_neon_indices(const uint8_t *block, unsigned bits,
                                                                   uint8x16_t idx[2])
{
    if (bits == 4) {
        uint8x16_t b = vld1q_u8(block);
        idx[0] = vandq_u8(b, vdupq_n_u8(15));
        idx[1] = vshrq_n_u8(b, 4);
    } else {
        const uint8x8_t three = vdup_n_u8(3);
        uint8x8_t b = vld1_u8(block);
        uint8x8_t g0 = vand_u8(b, three), g1 = vand_u8(vshr_n_u8(b, 2), three);
        uint8x8_t g2 = vand_u8(vshr_n_u8(b, 4), three), g3 = vshr_n_u8(b, 6);
        if (bits == 3) {
            /* Lane j of group k: bit 4 j + k of the high plane, i.e. bit
             * 4 (j & 1) + k of its byte j / 2. */
            static const uint8_t spread[8] = {0, 0, 1, 1, 2, 2, 3, 3};
            static const int8_t shift[8] = {0, -4, 0, -4, 0, -4, 0, -4};
            const uint8x8_t one = vdup_n_u8(1);
            uint32_t high32;
            uint8x8_t high, base;
            memcpy(&high32, block + 8, 4); /* AArch64 is little-endian here (pmpd's files are) */
            high = vtbl1_u8(vcreate_u8((uint64_t)high32), vld1_u8(spread));
            base = vshl_u8(high, vld1_s8(shift));
            g0 = vorr_u8(g0, vshl_n_u8(vand_u8(base, one), 2));
            g1 = vorr_u8(g1, vshl_n_u8(vand_u8(vshr_n_u8(base, 1), one), 2));
            g2 = vorr_u8(g2, vshl_n_u8(vand_u8(vshr_n_u8(base, 2), one), 2));
            g3 = vorr_u8(g3, vshl_n_u8(vand_u8(vshr_n_u8(base, 3), one), 2));
        }
        idx[0] = vcombine_u8(g0, g1);
        idx[1] = vcombine_u8(g2, g3);
    }
}

/* Block b of row into acc[t] for tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void nuq_neon_block(const uint8_t *row, int8x16_t table, unsigned bits,
                                                                 const int8_t *q, const float *d, size_t stride,
                                                                 size_t n_blocks, size_t b, size_t t0, size_t nt,
                                                                 float32x4_t *acc)
{
    uint8x16_t idx[2];
    int8x16_t w0, w1;
    size_t t;
    nuq_neon_indices(row + b * 4 * (size_t)bits, bits, idx);
    w0 = vqtbl1q_s8(table, idx[0]);
    w1 = vqtbl1q_s8(table, idx[1]);
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t] = pmpd_rotated_neon_dot(w0, w1, q + (t0 + t) * stride + b * PMPD_NUQ_BLOCK, d[(t0 + t) * n_blocks + b],
                                       acc[t]);
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4), even and odd blocks into two
 * accumulators per token (two chains of dependent FMAs). */
static inline __attribute__((always_inline)) void nuq_neon_tile(const pmpd_nuq_matrix *m, int8x16_t table,
                                                                unsigned bits, const int8_t *q, const float *d,
                                                                size_t n_blocks, size_t r, size_t t0, size_t nt,
                                                                float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const float out = m->scale[r] * pmpd_nuq_unit(bits);
    float32x4_t even[NUQ_NEON_TILE], odd[NUQ_NEON_TILE];
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        even[t] = odd[t] = vdupq_n_f32(0.0f);
#define NUQ_NEON_BLOCK(b, acc) nuq_neon_block(row, table, bits, q, d, m->padded, n_blocks, b, t0, nt, acc)
    PMPD_ROTATED_BLOCKS(n_blocks, NUQ_NEON_BLOCK, even, odd);
#undef NUQ_NEON_BLOCK
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = out * vaddvq_f32(vaddq_f32(even[t], odd[t]));
}

static inline __attribute__((always_inline)) void nuq_neon_rows(const pmpd_nuq_matrix *m, unsigned bits,
                                                                const void *act, size_t n_tokens, size_t row_begin,
                                                                size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    const int8x16_t table = vld1q_s8(pmpd_nuq_levels_int8(bits));
    size_t r;
#define NUQ_NEON_CALL(t0, nt) nuq_neon_tile(m, table, bits, q, d, n_blocks, r, t0, nt, y, ldy)
    for (r = row_begin; r < row_end; r++)
        PMPD_ROTATED_TILES(n_tokens, NUQ_NEON_CALL);
#undef NUQ_NEON_CALL
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

#undef NUQ_NEON_TILE
#endif
