/*
 * AArch64 NEON GEMV and GEMM for q8 / q4 / q2cb (qformat.h) with int8
 * activations.  Each unpacked weight vector holds 8 weights of 2 rows
 * (arm_neon/qunpack.h), so the integer sums of a block end in one lane per
 * row after a single pairwise add: no horizontal reductions in the loop.
 *
 * The per-group step is chosen at compile time:
 *   SDOT (Armv8.2 dotprod)  8 SDOTs per block and token, each 4 rows x 4
 *                           multiply-adds into int32 lanes;
 *   SMULL (Armv8.0)         SMULL/SMLAL pairs into int16 (two products of
 *                           at most 128 * 127 each fit) and SADALP.
 * GEMM walks 4 tokens at a time so an unpacked block serves 4 tokens; GEMV
 * is the same walk with one.  With i8mm, 2+ tokens go to qgemm_smmla.c.
 */
#include "pmpd_impl/weights/grouped/arm_neon/qunpack.h"

#if PMPD_QMATMUL_NEON

/* Tokens per GEMM tile: the SMULL step needs 4 int32 row accumulators per
 * token besides the 8 weight registers, so it takes 2 tokens to stay
 * within the 32 vector registers. */
#if PMPD_USE_DOTPROD
#define PMPD_NEON_TOKENS 4
#else
#define PMPD_NEON_TOKENS 2
#endif

#if PMPD_USE_DOTPROD
/* One token's chunk c (8 bytes) in both halves of a vector. */
PMPD_NEON_INLINE int8x16_t pmpd_neon_chunk2(const int8_t *x)
{
    return vreinterpretq_s8_s64(vld1q_dup_s64((const int64_t *)(const void *)x));
}
#endif

/* Integer dot products of a block with one token's group (its 4 chunks 16
 * bytes apart): one lane per row. */
PMPD_NEON_INLINE int32x4_t pmpd_neon_dot(const pmpd_neon_block *b, const int8_t *x)
{
#if PMPD_USE_DOTPROD
    int32x4_t rows01 = vdupq_n_s32(0), rows23 = vdupq_n_s32(0);
    int c;
#pragma GCC unroll 8
    for (c = 0; c < 4; c++) {
        int8x16_t xc = pmpd_neon_chunk2(x + 16 * c);
        rows01 = vdotq_s32(rows01, b->w[2 * c], xc);
        rows23 = vdotq_s32(rows23, b->w[2 * c + 1], xc);
    }
    return vpaddq_s32(rows01, rows23);
#else
    int32x4_t row[4];
    int c, h;
#pragma GCC unroll 8
    for (c = 0; c < 4; c += 2) {
        int8x8_t x0 = vld1_s8(x + 16 * c), x1 = vld1_s8(x + 16 * (c + 1));
#pragma GCC unroll 8
        for (h = 0; h < 2; h++) {
            int16x8_t even = vmlal_s8(vmull_s8(vget_low_s8(b->w[2 * c + h]), x0), vget_low_s8(b->w[2 * c + 2 + h]), x1);
            int16x8_t odd = vmlal_s8(vmull_s8(vget_high_s8(b->w[2 * c + h]), x0), vget_high_s8(b->w[2 * c + 2 + h]), x1);
            row[2 * h] = c == 0 ? vpaddlq_s16(even) : vpadalq_s16(row[2 * h], even);
            row[2 * h + 1] = c == 0 ? vpaddlq_s16(odd) : vpadalq_s16(row[2 * h + 1], odd);
        }
    }
    return vpaddq_s32(vpaddq_s32(row[0], row[1]), vpaddq_s32(row[2], row[3]));
#endif
}

/* One group of the GEMV: acc + the block's products with token t. */
PMPD_NEON_INLINE float32x4_t pmpd_neon_gemv_group(uint32_t type, const unsigned char *block, const pmpd_qact *act,
                                                  const uint64_t *pairs, size_t t, size_t g, float32x4_t acc)
{
    pmpd_neon_block b;
    pmpd_neon_unpack(type, block, pairs, &b);
    return vfmaq_f32(acc, vcvtq_f32_s32(pmpd_neon_dot(&b, pmpd_qact_chunk(act, t, 4 * g))),
                     vmulq_n_f32(b.scale, act->scale[t * act->n_groups + g]));
}

/* GEMV of row block rb with token t: even and odd groups go to separate
 * accumulators, halving the chain of dependent FMAs. */
PMPD_NEON_INLINE void pmpd_neon_gemv(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                     const uint64_t *pairs, size_t rb, size_t t, size_t row_end, float *y,
                                     size_t ldy)
{
    const unsigned char *blocks = pmpd_qformat_block(w, rb, 0);
    size_t g, n_groups = act->n_groups, step = pmpd_qformat_block_bytes(type);
    float32x4_t even = vdupq_n_f32(0.0f), odd = vdupq_n_f32(0.0f);
    float result[4];
    for (g = 0; g + 2 <= n_groups; g += 2) {
        even = pmpd_neon_gemv_group(type, blocks + g * step, act, pairs, t, g, even);
        odd = pmpd_neon_gemv_group(type, blocks + (g + 1) * step, act, pairs, t, g + 1, odd);
    }
    if (g < n_groups)
        even = pmpd_neon_gemv_group(type, blocks + g * step, act, pairs, t, g, even);
    vst1q_f32(result, vaddq_f32(even, odd));
    pmpd_qmatmul_store(y, ldy, t, rb * PMPD_QROWS, row_end, result);
}

/* GEMM: row block rb by tokens t0..t0+PMPD_NEON_TOKENS-1, each unpacked
 * block serving every token of the tile. */
PMPD_NEON_INLINE void pmpd_neon_gemm_tile(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                          const uint64_t *pairs, size_t rb, size_t t0, size_t row_end,
                                          float *y, size_t ldy)
{
    const size_t n_tokens = PMPD_NEON_TOKENS;
    float32x4_t acc[PMPD_NEON_TOKENS];
    pmpd_neon_block b;
    size_t g, j, n_groups = act->n_groups;
    const unsigned char *blocks = pmpd_qformat_block(w, rb, 0);
#pragma GCC unroll 8
    for (j = 0; j < n_tokens; j++)
        acc[j] = vdupq_n_f32(0.0f);
    for (g = 0; g < n_groups; g++) {
        pmpd_neon_unpack(type, blocks + g * pmpd_qformat_block_bytes(type), pairs, &b);
#pragma GCC unroll 8
        for (j = 0; j < n_tokens; j++) {
            size_t t = t0 + j;
            int32x4_t dot = pmpd_neon_dot(&b, pmpd_qact_chunk(act, t, 4 * g));
            acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(dot), vmulq_n_f32(b.scale, act->scale[t * n_groups + g]));
        }
    }
#pragma GCC unroll 8
    for (j = 0; j < n_tokens; j++) {
        float result[4];
        vst1q_f32(result, acc[j]);
        pmpd_qmatmul_store(y, ldy, t0 + j, rb * PMPD_QROWS, row_end, result);
    }
}

PMPD_NEON_INLINE void pmpd_neon_walk(uint32_t type, const pmpd_qmatrix *w, const pmpd_qact *act,
                                     size_t row_begin, size_t row_end, float *y, size_t ldy)
{
    /* 2 KB of stack, rebuilt per call (256 entries, less work than any
     * matrix's blocks); only q2cb reads it. */
    uint64_t pairs[256];
    size_t rb, t0, first;
    if (type == PMPD_TENSOR_Q2CB)
        pmpd_q2cb_codebook_pairs(w, 0, pairs);
    for (first = 0; first < act->n_tokens; first += PMPD_QMATMUL_TOKEN_BLOCK) {
        size_t last = act->n_tokens - first < PMPD_QMATMUL_TOKEN_BLOCK ? act->n_tokens
                                                                       : first + PMPD_QMATMUL_TOKEN_BLOCK;
        for (rb = row_begin / PMPD_QROWS; rb * PMPD_QROWS < row_end; rb++) {
            for (t0 = first; t0 + PMPD_NEON_TOKENS <= last; t0 += PMPD_NEON_TOKENS)
                pmpd_neon_gemm_tile(type, w, act, pairs, rb, t0, row_end, y, ldy);
            for (; t0 < last; t0++)
                pmpd_neon_gemv(type, w, act, pairs, rb, t0, row_end, y, ldy);
        }
    }
}

PMPD_INTERNAL void pmpd_qmatmul_neon(const pmpd_qmatrix *w, const pmpd_qact *act, size_t row_begin,
                                     size_t row_end, float *y, size_t ldy)
{
    switch (w->type) {
    case PMPD_TENSOR_Q8:
        pmpd_neon_walk(PMPD_TENSOR_Q8, w, act, row_begin, row_end, y, ldy);
        break;
    case PMPD_TENSOR_Q4:
        pmpd_neon_walk(PMPD_TENSOR_Q4, w, act, row_begin, row_end, y, ldy);
        break;
    default:
        pmpd_neon_walk(PMPD_TENSOR_Q2CB, w, act, row_begin, row_end, y, ldy);
        break;
    }
}

#undef PMPD_NEON_TOKENS

#endif
