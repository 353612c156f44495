/*
 * NEON unpacking of one q8 / q4 / q2cb block (qformat.h) into signed int8
 * vectors shaped for SDOT and SMMLA: w[2c + h] holds weights 8c..8c+7 of
 * rows 2h and 2h+1 ([row 2h: 8 bytes][row 2h+1: 8 bytes]), c = 0..3.
 *
 *   q8    straight loads;
 *   q4    (int8)(byte << 4) and (int8)(byte & 0xF0): the nibbles times 16,
 *         the 1/16 folded into the scales;
 *   q2cb  TBLs over the block's 4 codebooks, gathered from the tensor's
 *         64-byte table (4 registers) once per block.
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

PMPD_NEON_INLINE void pmpd_neon_unpack(uint32_t type, const unsigned char *block, const int8x16x4_t *codebooks,
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
        /* One 4-register TBL gathers the block's 4 codebooks (row i's at
         * bytes 4i..4i+3); the weights are then one-register TBLs with
         * index 4 * row + 2-bit index, which spares the compiler from
         * keeping (and copying) a 4-register table per lookup. */
        static const int16_t id_shift[4] = {0, -4, -8, -12};
        static const uint8_t spread[16] = {0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6};
        static const uint8_t level[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
        static const uint8_t row_base[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4},
                                                {8, 8, 8, 8, 8, 8, 8, 8, 12, 12, 12, 12, 12, 12, 12, 12}};
        uint16_t packed;
        uint16x4_t ids;
        uint8x16_t gather;
        int8x16_t table;
        memcpy(&packed, body, sizeof packed);
        ids = vand_u16(vshl_u16(vdup_n_u16(packed), vld1_s16(id_shift)), vdup_n_u16(15));
        gather = vqtbl1q_u8(vcombine_u8(vreinterpret_u8_u16(ids), vdup_n_u8(0)), vld1q_u8(spread));
        gather = vorrq_u8(vshlq_n_u8(gather, 2), vld1q_u8(level));
        table = vqtbl4q_s8(*codebooks, gather);
#pragma GCC unroll 8
        for (h = 0; h < 2; h++) {
            uint8x16_t raw = vld1q_u8(body + 2 + 16 * h), base = vld1q_u8(row_base[h]);
            b->w[h] = vqtbl1q_s8(table, vorrq_u8(vandq_u8(raw, vdupq_n_u8(3)), base));
            b->w[2 + h] = vqtbl1q_s8(table, vorrq_u8(vandq_u8(vshrq_n_u8(raw, 2), vdupq_n_u8(3)), base));
            b->w[4 + h] = vqtbl1q_s8(table, vorrq_u8(vandq_u8(vshrq_n_u8(raw, 4), vdupq_n_u8(3)), base));
            b->w[6 + h] = vqtbl1q_s8(table, vorrq_u8(vshrq_n_u8(raw, 6), base));
        }
    }
}

/* The q2cb codebook table of a tensor (unused for the other types). */
PMPD_NEON_INLINE int8x16x4_t pmpd_neon_codebooks(const pmpd_qmatrix *w)
{
    int8x16x4_t t;
    int i;
#pragma GCC unroll 8
    for (i = 0; i < 4; i++)
        t.val[i] = w->type == PMPD_TENSOR_Q2CB ? vld1q_s8((const int8_t *)(const void *)w->data + 16 * i)
                                               : vdupq_n_s8(0);
    return t;
}

#endif

#endif
