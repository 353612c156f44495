/*
 * AArch64 i8mm GEMM for q8 / q4 / q2cb (qformat.h): SMMLA multiplies a
 * 2 x 8 int8 block of activations (two tokens, as qact.h lays them out:
 * one 16-byte load) by a 2 x 8 block of weights (two rows, as
 * arm_neon/qunpack.h yields them: one register) into a 2 x 2 int32 tile,
 * 32 multiply-adds per instruction and no reductions at all.
 *
 * Micro-kernel: one row block (4 rows) by 2 token pairs; per group that is
 * 16 SMMLAs on 8 weight registers, 4 integer and 4 float accumulators,
 * leaving room for the activations without spilling (see docs/kernels.md for
 * the disassembly check).
 */
#include "pmpd_impl/weights/grouped/arm_neon/qunpack.h"

#if PMPD_QMATMUL_SMMLA

#define PMPD_SMMLA_PAIRS 2

/* Row block rb for token pairs p0..p0+n_pairs-1 (n_pairs 1 or PMPD_SMMLA_PAIRS). */
PMPD_NEON_INLINE void pmpd_smmla_tile(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                      const uint64_t *pairs, size_t rb, size_t p0, size_t n_pairs,
                                      size_t row_end, float *y, size_t ldy)
{
    /* acc[p][h]: tokens 2p, 2p+1 by rows 2h, 2h+1, as [t0r0 t0r1 t1r0 t1r1]. */
    float32x4_t acc[PMPD_SMMLA_PAIRS][2];
    pmpd_neon_block b;
    size_t g, p, n_groups = act->n_groups;
    const unsigned char *blocks = pmpd_qformat_block(w, rb, 0);
    int h, c;
#pragma GCC unroll 8
    for (p = 0; p < n_pairs; p++)
        acc[p][0] = acc[p][1] = vdupq_n_f32(0.0f);
    for (g = 0; g < n_groups; g++) {
        float32x4_t row_scale[2];
        pmpd_neon_unpack(type, blocks + g * pmpd_qformat_block_bytes(type), pairs, &b);
        row_scale[0] = vcombine_f32(vget_low_f32(b.scale), vget_low_f32(b.scale));
        row_scale[1] = vcombine_f32(vget_high_f32(b.scale), vget_high_f32(b.scale));
#pragma GCC unroll 8
        for (p = 0; p < n_pairs; p++) {
            size_t t = 2 * (p0 + p);
            const int8_t *x = pmpd_qact_chunk(act, t, 4 * g);
            int32x4_t dot[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            float32x4_t token_scale = vcombine_f32(vdup_n_f32(act->scale[t * n_groups + g]),
                                                   vdup_n_f32(act->scale[(t + 1) * n_groups + g]));
#pragma GCC unroll 8
            for (c = 0; c < 4; c++) {
                int8x16_t xc = vld1q_s8(x + 16 * c);
                dot[0] = vmmlaq_s32(dot[0], xc, b.w[2 * c]);
                dot[1] = vmmlaq_s32(dot[1], xc, b.w[2 * c + 1]);
            }
#pragma GCC unroll 8
            for (h = 0; h < 2; h++)
                acc[p][h] = vfmaq_f32(acc[p][h], vcvtq_f32_s32(dot[h]), vmulq_f32(row_scale[h], token_scale));
        }
    }
#pragma GCC unroll 8
    for (p = 0; p < n_pairs; p++) {
        size_t t = 2 * (p0 + p), i;
        for (i = 0; i < 2 && t + i < act->n_tokens; i++) {
            float result[4];
            vst1_f32(result, i == 0 ? vget_low_f32(acc[p][0]) : vget_high_f32(acc[p][0]));
            vst1_f32(result + 2, i == 0 ? vget_low_f32(acc[p][1]) : vget_high_f32(acc[p][1]));
            pmpd_qmatmul_store(y, ldy, t + i, rb * PMPD_QROWS, row_end, result);
        }
    }
}

PMPD_NEON_INLINE void pmpd_smmla_walk(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                      size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    /* 2 KB of stack, rebuilt per call (256 entries, less work than any
     * matrix's blocks); only q2cb reads it. */
    uint64_t pairs[256];
    size_t rb, p0, first, n_pairs = (act->n_tokens + 1) / 2, block = PMPD_QMATMUL_TOKEN_BLOCK / 2;
    if (type == PMPD_TENSOR_Q2CB)
        pmpd_q2cb_codebook_pairs(w, 0, pairs);
    for (first = 0; first < n_pairs; first += block) {
        size_t last = n_pairs - first < block ? n_pairs : first + block;
        for (rb = row_begin / PMPD_QROWS; rb * PMPD_QROWS < row_end; rb++) {
            for (p0 = first; p0 + PMPD_SMMLA_PAIRS <= last; p0 += PMPD_SMMLA_PAIRS)
                pmpd_smmla_tile(type, w, act, pairs, rb, p0, PMPD_SMMLA_PAIRS, row_end, y, ldy);
            for (; p0 < last; p0++)
                pmpd_smmla_tile(type, w, act, pairs, rb, p0, 1, row_end, y, ldy);
        }
    }
}

PMPD_INTERNAL void pmpd_qgemm_smmla(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    switch (w->type) {
    case PMPD_TENSOR_Q8:
        pmpd_smmla_walk(PMPD_TENSOR_Q8, w, act, row_begin, row_end, y, ldy);
        break;
    case PMPD_TENSOR_Q4:
        pmpd_smmla_walk(PMPD_TENSOR_Q4, w, act, row_begin, row_end, y, ldy);
        break;
    default:
        pmpd_smmla_walk(PMPD_TENSOR_Q2CB, w, act, row_begin, row_end, y, ldy);
        break;
    }
}

#undef PMPD_SMMLA_PAIRS

#endif
