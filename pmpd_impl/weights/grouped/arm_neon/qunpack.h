/*
 * NEON unpacking of one q8 / q4 / q2cb block (qformat.h) into signed int8
 * vectors shaped for SDOT and SMMLA: w[2c + h] holds weights 8c..8c+7 of
 * rows 2h and 2h+1 ([row 2h: 8 bytes][row 2h+1: 8 bytes]), c = 0..3.
 *
 *   q8    straight loads;
 *   q4    (int8)(byte << 4) and (int8)(byte & 0xF0): the nibbles times 16,
 *         the 1/16 folded into the scales;
 *   q2cb  TBLs over the block's 4 codebooks, two 8-byte loads from the
 *         call's table of codebook pairs (pmpd_q2cb_codebook_pairs).
 * AArch64 only (the 32-bit Arm NEON lacks TBL over 4 q-registers and the
 * pairwise adds the kernels use).
 */
#ifndef PMPD_KERNELS_ARM_NEON_QUNPACK_H
#define PMPD_KERNELS_ARM_NEON_QUNPACK_H

#include "pmpd_impl/weights/grouped/qmatmul.h"

#if PMPD_QMATMUL_NEON

#include <arm_neon.h>
#include <string.h>

#if defined(__GNUC__)
#define PMPD_NEON_INLINE static inline __attribute__((always_inline))
#else
#define PMPD_NEON_INLINE static inline
#endif

typedef struct pmpd_neon_block {
    int8x16_t w[8];
    float32x4_t scale; /* rows 0..3 */
} pmpd_neon_block;

PMPD_NEON_INLINE float32x4_t pmpd_neon_scales(const unsigned char *block)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)block)));
}

PMPD_NEON_INLINE void pmpd_neon_unpack(uint32_t type, const unsigned char *block, const uint64_t *pairs,
                                       pmpd_neon_block *b)
{
    const unsigned char *body = block + 2 * PMPD_QROWS;
    int c, h;
    b->scale = pmpd_neon_scales(block);
    if (type == PMPD_TENSOR_Q8) {
#pragma GCC unroll 8
        for (c = 0; c < 8; c++)
            b->w[c] = vld1q_s8((const int8_t *)(const void *)body + 16 * c);
    } else if (type == PMPD_TENSOR_Q4) {
#pragma GCC unroll 8
        for (c = 0; c < 2; c++) {
#pragma GCC unroll 8
            for (h = 0; h < 2; h++) {
                int8x16_t raw = vld1q_s8((const int8_t *)(const void *)body + 32 * c + 16 * h);
                b->w[2 * c + h] = vshlq_n_s8(raw, 4);
                b->w[2 * (c + 2) + h] = vandq_s8(raw, vdupq_n_s8((int8_t)0xF0));
            }
        }
        b->scale = vmulq_n_f32(b->scale, 1.0f / 16.0f);
    } else {
        /* Row i's levels at table bytes 4i..4i+3: each id byte (rows 0, 1
         * and rows 2, 3) selects 8 of them from the pair table; the
         * weights are then one-register TBLs with index 4 * row + 2-bit
         * index. */
        static const uint8_t row_base[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4},
                                                {8, 8, 8, 8, 8, 8, 8, 8, 12, 12, 12, 12, 12, 12, 12, 12}};
        int8x16_t table = vcombine_s8(vld1_s8((const int8_t *)(const void *)&pairs[body[0]]),
                                      vld1_s8((const int8_t *)(const void *)&pairs[body[1]]));
#pragma GCC unroll 8
        for (h = 0; h < 2; h++) {
            /* Index bits 0..1 from the codes, the rest from the row base:
             * one bit select (BIF) instead of an AND and an ORR. */
            uint8x16_t raw = vld1q_u8(body + 2 + 16 * h), base = vld1q_u8(row_base[h]), three = vdupq_n_u8(3);
            b->w[h] = vqtbl1q_s8(table, vbslq_u8(three, raw, base));
            b->w[2 + h] = vqtbl1q_s8(table, vbslq_u8(three, vshrq_n_u8(raw, 2), base));
            b->w[4 + h] = vqtbl1q_s8(table, vbslq_u8(three, vshrq_n_u8(raw, 4), base));
            b->w[6 + h] = vqtbl1q_s8(table, vorrq_u8(vshrq_n_u8(raw, 6), base));
        }
    }
}

#endif

#endif
