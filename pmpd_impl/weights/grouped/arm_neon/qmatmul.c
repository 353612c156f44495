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

/* The q2cb GEMV in assembly (SDOT, little-endian), for the in-order
 * Cortex-A55: there TBL, SDOT and the shifts issue one 128-bit operation
 * per cycle with a 4-cycle latency (SDOT without accumulator forwarding)
 * and nothing waits out of order (llvm-mca's model also completes them in
 * order), so the instruction order is the schedule.  Neither GCC nor clang
 * keeps one that hides the latencies, and GCC 12 copies a two-register
 * TBL table before every use (docs/kernels.md has the figures).
 *
 * A step is groups g and g+1 of a row block (blocks blk, blk + 42) with
 * one token: x the group's 4 activation chunks and then g+1's (16 bytes
 * apart), xs the two activation scales.  Per row pair h and group, the id
 * byte's two codebooks give two TBL register pairs (lo and hi tables), the
 * 16 code bytes two 4-bit indices (SLI puts row 2h+1 at 16..31), and 4
 * TBLs and 4 SDOTs.  Group g's two SDOT chains run first and group g+1's
 * second, group g+1's loads and index shifts between them; group g+1's
 * sums (v11, v12) and float scales (v10) are left to the next step, which
 * adds them to odd while its own loads arrive, so no step ends waiting on
 * a chain of latencies.  Registers: x9..x16 codebook ids, x17, x19..x24
 * chunk addresses; v13 the row-2h+1 mask, v14/v15 group g+1's codes. */
#if PMPD_USE_DOTPROD && !defined(__ARM_BIG_ENDIAN) && defined(__GNUC__)
#define PMPD_NEON_Q2CB_ASM 1

/* The step's tables, from the tensor's 16 codebooks (header bytes
 * 4k..4k+3): lo[k][j] is level j & 3 of codebook k, hi[k][j] level j >> 2,
 * so a 4-bit index holding two 2-bit codes (bits 0..1: chunk c, 2..3:
 * chunk c+1) looks up either code without masking the other off.  512
 * bytes, built per call. */
typedef struct pmpd_neon_q2cb_luts {
    int8_t lo[PMPD_Q2CB_CODEBOOKS][16];
    int8_t hi[PMPD_Q2CB_CODEBOOKS][16];
} pmpd_neon_q2cb_luts;

static void pmpd_neon_q2cb_luts_build(const pmpd_qmatrix *w, pmpd_neon_q2cb_luts *luts)
{
    unsigned k, j;
    for (k = 0; k < PMPD_Q2CB_CODEBOOKS; k++) {
        for (j = 0; j < 16; j++) {
            luts->lo[k][j] = (int8_t)w->data[k * PMPD_Q2CB_LEVELS + (j & 3u)];
            luts->hi[k][j] = (int8_t)w->data[k * PMPD_Q2CB_LEVELS + (j >> 2)];
        }
    }
}

/* One step; it advances blk, x, xs and n (its flags say whether n reached
 * 0).  Shared with tests/mca/neon_gemv_regions.c. */
#define PMPD_NEON_Q2CB_STEP \
    /* integer work first: in llvm-mca's A55 model instructions complete in \
     * order, so an integer operation within two cycles after a vector one \
     * waits for it */ \
    "ldrh w9, [%[blk], #8]\n\t" \
    "add x17, %[x], #16\n\t" \
    "ldrh w13, [%[blk], #50]\n\t" \
    "add x19, %[x], #32\n\t" \
    "ldur q24, [%[blk], #10]\n\t" \
    "add x20, %[x], #48\n\t" \
    "ldur q26, [%[blk], #26]\n\t" \
    "add x21, %[x], #64\n\t" \
    "ldur q14, [%[blk], #52]\n\t" \
    "add x22, %[x], #80\n\t" \
    "ldur q15, [%[blk], #68]\n\t" \
    "add x23, %[x], #96\n\t" \
    "ldr d30, [%[blk]]\n\t" \
    "add x24, %[x], #112\n\t" \
    "ldr d31, [%[xs]]\n\t" \
    "ubfx x10, x9, #4, #4\n\t" \
    "ld1r {v0.2d}, [%[x]]\n\t" \
    "ubfx x11, x9, #8, #4\n\t" \
    "ubfx x12, x9, #12, #4\n\t" \
    "and x9, x9, #15\n\t" \
    "ubfx x14, x13, #4, #4\n\t" \
    "ubfx x15, x13, #8, #4\n\t" \
    "ubfx x16, x13, #12, #4\n\t" \
    "and x13, x13, #15\n\t" \
    "add %[blk], %[blk], #84\n\t" \
    "add %[x], %[x], #128\n\t" \
    "add %[xs], %[xs], #8\n\t" \
    "subs %[n], %[n], #1\n\t" \
    /* group g's tables and indices; the previous step's group g+1 */ \
    "ldr q16, [%[lo], x9, lsl #4]\n\t" \
    "addp v11.4s, v11.4s, v12.4s\n\t" \
    "ldr q17, [%[lo], x10, lsl #4]\n\t" \
    "ushr v25.16b, v24.16b, #4\n\t" \
    "ldr q20, [%[lo], x11, lsl #4]\n\t" \
    "ushr v27.16b, v26.16b, #4\n\t" \
    "ldr q21, [%[lo], x12, lsl #4]\n\t" \
    "sli v24.16b, v13.16b, #4\n\t" \
    "ldr q18, [%[hi], x9, lsl #4]\n\t" \
    "sli v26.16b, v13.16b, #4\n\t" \
    "ldr q19, [%[hi], x10, lsl #4]\n\t" \
    "scvtf v11.4s, v11.4s\n\t" \
    "ldr q22, [%[hi], x11, lsl #4]\n\t" \
    "sli v25.16b, v13.16b, #4\n\t" \
    "ldr q23, [%[hi], x12, lsl #4]\n\t" \
    "sli v27.16b, v13.16b, #4\n\t" \
    "ld1r {v1.2d}, [x17]\n\t" \
    "movi d28, #0\n\t" \
    "ld1r {v2.2d}, [x19]\n\t" \
    "movi d29, #0\n\t" \
    "ld1r {v3.2d}, [x20]\n\t" \
    /* group g: each SDOT 4 operations after the TBL it reads and after the \
     * previous SDOT of its chain; group g+1's loads and indices as registers \
     * come free */ \
    "tbl v4.16b, {v16.16b, v17.16b}, v24.16b\n\t" \
    "fmla %[od].4s, v11.4s, v10.4s\n\t" \
    "tbl v5.16b, {v20.16b, v21.16b}, v26.16b\n\t" \
    "fcvtl v30.4s, v30.4h\n\t" \
    "tbl v6.16b, {v18.16b, v19.16b}, v24.16b\n\t" \
    "tbl v7.16b, {v22.16b, v23.16b}, v26.16b\n\t" \
    "sdot v28.4s, v4.16b, v0.16b\n\t" \
    "tbl v4.16b, {v16.16b, v17.16b}, v25.16b\n\t" \
    "ldr q16, [%[lo], x13, lsl #4]\n\t" \
    "sdot v29.4s, v5.16b, v0.16b\n\t" \
    "ldr q17, [%[lo], x14, lsl #4]\n\t" \
    "tbl v5.16b, {v20.16b, v21.16b}, v27.16b\n\t" \
    "ld1r {v0.2d}, [x21]\n\t" \
    "sdot v28.4s, v6.16b, v1.16b\n\t" \
    "ldr q20, [%[lo], x15, lsl #4]\n\t" \
    "tbl v6.16b, {v18.16b, v19.16b}, v25.16b\n\t" \
    "ldr q21, [%[lo], x16, lsl #4]\n\t" \
    "sdot v29.4s, v7.16b, v1.16b\n\t" \
    "ldr q18, [%[hi], x13, lsl #4]\n\t" \
    "tbl v7.16b, {v22.16b, v23.16b}, v27.16b\n\t" \
    "ldr q19, [%[hi], x14, lsl #4]\n\t" \
    "sdot v28.4s, v4.16b, v2.16b\n\t" \
    "ld1r {v1.2d}, [x22]\n\t" \
    "ushr v25.16b, v14.16b, #4\n\t" \
    "ldr q22, [%[hi], x15, lsl #4]\n\t" \
    "sdot v29.4s, v5.16b, v2.16b\n\t" \
    "ldr q23, [%[hi], x16, lsl #4]\n\t" \
    "ushr v27.16b, v15.16b, #4\n\t" \
    "ld1r {v2.2d}, [x23]\n\t" \
    "sdot v28.4s, v6.16b, v3.16b\n\t" \
    "movi d11, #0\n\t" \
    "sli v14.16b, v13.16b, #4\n\t" \
    "movi d12, #0\n\t" \
    "sdot v29.4s, v7.16b, v3.16b\n\t" \
    "sli v15.16b, v13.16b, #4\n\t" \
    "fmul v30.4s, v30.4s, v31.s[0]\n\t" \
    "sli v25.16b, v13.16b, #4\n\t" \
    "ld1r {v3.2d}, [x24]\n\t" \
    "sli v27.16b, v13.16b, #4\n\t" \
    /* group g+1 (its sums stay in v11, v12 for the next step, its scales \
     * in v10); group g's float sum */ \
    "tbl v4.16b, {v16.16b, v17.16b}, v14.16b\n\t" \
    "addp v28.4s, v28.4s, v29.4s\n\t" \
    "tbl v5.16b, {v20.16b, v21.16b}, v15.16b\n\t" \
    "ldur d24, [%[blk], #-42]\n\t" \
    "tbl v6.16b, {v18.16b, v19.16b}, v14.16b\n\t" \
    "tbl v7.16b, {v22.16b, v23.16b}, v15.16b\n\t" \
    "sdot v11.4s, v4.16b, v0.16b\n\t" \
    "scvtf v28.4s, v28.4s\n\t" \
    "tbl v4.16b, {v16.16b, v17.16b}, v25.16b\n\t" \
    "sdot v12.4s, v5.16b, v0.16b\n\t" \
    "fcvtl v24.4s, v24.4h\n\t" \
    "tbl v5.16b, {v20.16b, v21.16b}, v27.16b\n\t" \
    "sdot v11.4s, v6.16b, v1.16b\n\t" \
    "fmla %[ev].4s, v28.4s, v30.4s\n\t" \
    "tbl v6.16b, {v18.16b, v19.16b}, v25.16b\n\t" \
    "sdot v12.4s, v7.16b, v1.16b\n\t" \
    "tbl v7.16b, {v22.16b, v23.16b}, v27.16b\n\t" \
    "sdot v11.4s, v4.16b, v2.16b\n\t" \
    "fmul v10.4s, v24.4s, v31.s[1]\n\t" \
    "sdot v12.4s, v5.16b, v2.16b\n\t" \
    "sdot v11.4s, v6.16b, v3.16b\n\t" \
    "sdot v12.4s, v7.16b, v3.16b\n\t"

#define PMPD_NEON_Q2CB_CLOBBERS                                                                                   \
    "cc", "memory", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x19", "x20", "x21", "x22",    \
        "x23", "x24", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v10", "v11", "v12", "v13", "v14", "v15",   \
        "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30",  \
        "v31"

/* q2cb GEMV of row block rb with token t: the steps over pairs of groups
 * in one loop, the last step's group g+1 added after it, an odd last
 * group by the generic path. */
PMPD_NEON_INLINE void pmpd_neon_q2cb_gemv(const pmpd_qmatrix *w, const pmpd_qact *act, const uint64_t *pairs,
                                          const pmpd_neon_q2cb_luts *luts, size_t rb, size_t t, size_t row_end,
                                          float *y, size_t ldy)
{
    const unsigned char *block = pmpd_qformat_block(w, rb, 0);
    const int8_t *x = pmpd_qact_chunk(act, t, 0);
    const float *xs = act->scale + t * act->n_groups;
    size_t n = act->n_groups / 2;
    float32x4_t even = vdupq_n_f32(0.0f), odd = vdupq_n_f32(0.0f);
    float result[4];
    if (n > 0)
        __asm__("movi v13.16b, #1\n\t"
                "mov v13.d[0], xzr\n\t"
                "movi d10, #0\n\t"
                "movi d11, #0\n\t"
                "movi d12, #0\n"
                "1:\n\t" PMPD_NEON_Q2CB_STEP "b.ne 1b\n\t"
                "addp v11.4s, v11.4s, v12.4s\n\t"
                "scvtf v11.4s, v11.4s\n\t"
                "fmla %[od].4s, v11.4s, v10.4s"
                : [blk] "+r"(block), [x] "+r"(x), [xs] "+r"(xs), [n] "+r"(n), [ev] "+w"(even), [od] "+w"(odd)
                : [lo] "r"(luts->lo), [hi] "r"(luts->hi)
                : PMPD_NEON_Q2CB_CLOBBERS);
    if (act->n_groups % 2)
        even = pmpd_neon_gemv_group(PMPD_TENSOR_Q2CB, block, act, pairs, t, act->n_groups - 1, even);
    vst1q_f32(result, vaddq_f32(even, odd));
    pmpd_qmatmul_store(y, ldy, t, rb * PMPD_QROWS, row_end, result);
}
#else
#define PMPD_NEON_Q2CB_ASM 0
#endif

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
#if PMPD_NEON_Q2CB_ASM
    pmpd_neon_q2cb_luts luts; /* the assembly GEMV's tables, 512 bytes */
#endif
    size_t rb, t0, first;
    if (type == PMPD_TENSOR_Q2CB) {
        pmpd_q2cb_codebook_pairs(w, 0, pairs);
#if PMPD_NEON_Q2CB_ASM
        pmpd_neon_q2cb_luts_build(w, &luts);
#endif
    }
    for (first = 0; first < act->n_tokens; first += PMPD_QMATMUL_TOKEN_BLOCK) {
        size_t last = act->n_tokens - first < PMPD_QMATMUL_TOKEN_BLOCK ? act->n_tokens
                                                                       : first + PMPD_QMATMUL_TOKEN_BLOCK;
        for (rb = row_begin / PMPD_QROWS; rb * PMPD_QROWS < row_end; rb++) {
            for (t0 = first; t0 + PMPD_NEON_TOKENS <= last; t0 += PMPD_NEON_TOKENS)
                pmpd_neon_gemm_tile(type, w, act, pairs, rb, t0, row_end, y, ldy);
            for (; t0 < last; t0++) {
#if PMPD_NEON_Q2CB_ASM
                if (type == PMPD_TENSOR_Q2CB) {
                    pmpd_neon_q2cb_gemv(w, act, pairs, &luts, rb, t0, row_end, y, ldy);
                    continue;
                }
#endif
                pmpd_neon_gemv(type, w, act, pairs, rb, t0, row_end, y, ldy);
            }
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
