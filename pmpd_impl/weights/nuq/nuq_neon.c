/* NUQ product with NEON (AArch64): a block's 32 indices become 32 bytes
 * (two q registers: columns 0-15 and 16-31) with one shift and mask per 8
 * or 16 of them, then each 4 indices become 4 floats by TBL over the
 * levels' 64 bytes (vqtbl4q: byte 4 i + k of the table is byte k of level
 * i): a first TBL spreads index i to the 4 byte lanes of its float, the
 * OR adds k.  Floats are multiplied with the rotated input by FMA.  A tile
 * is one row x up to 4 tokens, the lookups shared by the tokens. */
#include "pmpd_impl/weights/nuq/nuq.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

#define NUQ_NEON_TILE 4

/* The 32 indices of a block, each times 4 (the byte offset of its level). */
static inline __attribute__((always_inline)) void nuq_neon_indices(const uint8_t *block, unsigned bits,
                                                                   uint8x16_t idx[2])
{
    if (bits == 4) {
        uint8x16_t b = vld1q_u8(block);
        idx[0] = vshlq_n_u8(vandq_u8(b, vdupq_n_u8(15)), 2);
        idx[1] = vshlq_n_u8(vshrq_n_u8(b, 4), 2);
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
        idx[0] = vshlq_n_u8(vcombine_u8(g0, g1), 2);
        idx[1] = vshlq_n_u8(vcombine_u8(g2, g3), 2);
    }
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4). */
static inline __attribute__((always_inline)) void nuq_neon_tile(const pmpd_nuq_matrix *m, const uint8x16x4_t *table,
                                                                const uint8x16_t spread[4], unsigned bits,
                                                                const float *xr, size_t r, size_t t0, size_t nt,
                                                                float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const size_t block_bytes = 4 * (size_t)bits, stride = m->padded;
    const uint8x16_t lanes = vreinterpretq_u8_u32(vdupq_n_u32(0x03020100u));
    float32x4_t acc[NUQ_NEON_TILE][2];
    size_t b, t, c;
    int h, q;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
    for (b = 0, c = 0; c < m->padded; b += block_bytes, c += PMPD_NUQ_BLOCK) {
        uint8x16_t idx[2];
        nuq_neon_indices(row + b, bits, idx);
#pragma GCC unroll 2
        for (h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (q = 0; q < 4; q++) {
                uint8x16_t bytes = vorrq_u8(vqtbl1q_u8(idx[h], spread[q]), lanes);
                float32x4_t w = vreinterpretq_f32_u8(vqtbl4q_u8(*table, bytes));
#pragma GCC unroll 4
                for (t = 0; t < nt; t++)
                    acc[t][q & 1] = vfmaq_f32(acc[t][q & 1], w,
                                              vld1q_f32(xr + (t0 + t) * stride + c + 16 * (size_t)h + 4 * (size_t)q));
            }
    }
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = m->scale[r] * vaddvq_f32(vaddq_f32(acc[t][0], acc[t][1]));
}

static inline __attribute__((always_inline)) void nuq_neon_rows(const pmpd_nuq_matrix *m, unsigned bits,
                                                                const float *xr, size_t n_tokens, size_t row_begin,
                                                                size_t row_end, float *y, size_t ldy)
{
    static const uint8_t spread_bytes[64] = {0,  0,  0,  0,  1,  1,  1,  1,  2,  2,  2,  2,  3,  3,  3,  3,
                                             4,  4,  4,  4,  5,  5,  5,  5,  6,  6,  6,  6,  7,  7,  7,  7,
                                             8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11,
                                             12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15};
    float levels[16];
    uint8x16x4_t table;
    uint8x16_t spread[4];
    size_t r, t0;
    int q;
    memset(levels, 0, sizeof levels);
    memcpy(levels, pmpd_nuq_levels(bits), ((size_t)1 << bits) * sizeof(float));
    table.val[0] = vreinterpretq_u8_f32(vld1q_f32(levels));
    table.val[1] = vreinterpretq_u8_f32(vld1q_f32(levels + 4));
    table.val[2] = vreinterpretq_u8_f32(vld1q_f32(levels + 8));
    table.val[3] = vreinterpretq_u8_f32(vld1q_f32(levels + 12));
    for (q = 0; q < 4; q++)
        spread[q] = vld1q_u8(spread_bytes + 16 * q);
    for (r = row_begin; r < row_end; r++) {
        for (t0 = 0; t0 + NUQ_NEON_TILE <= n_tokens; t0 += NUQ_NEON_TILE)
            nuq_neon_tile(m, &table, spread, bits, xr, r, t0, NUQ_NEON_TILE, y, ldy);
        switch (n_tokens - t0) {
        case 3: nuq_neon_tile(m, &table, spread, bits, xr, r, t0, 3, y, ldy); break;
        case 2: nuq_neon_tile(m, &table, spread, bits, xr, r, t0, 2, y, ldy); break;
        case 1: nuq_neon_tile(m, &table, spread, bits, xr, r, t0, 1, y, ldy); break;
        default: break;
        }
    }
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const float *xr, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_neon_rows(m, 4, xr, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_neon_rows(m, 3, xr, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_neon_rows(m, 2, xr, n_tokens, row_begin, row_end, y, ldy);
}

#undef NUQ_NEON_TILE
#endif
