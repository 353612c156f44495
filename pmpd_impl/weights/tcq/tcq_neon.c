/* TCQ product with NEON (AArch64).  As the AVX2 kernel (tcq_avx2.c): a
 * sequence's bytes copied to the stack with its first 16 bytes after
 * them; 8 steps at a time, one 16-byte load, two TBL (3 bytes big-endian
 * into each 32-bit lane, 4 lanes each) and USHL by negative counts give 8
 * states; MUL, a shift and a mask give the HYB index.  NEON has no
 * gather, so the 8 table pairs are loaded one lane at a time; the first
 * value's sign is an XOR and subtract with a mask from bit 15 of h.  The
 * int16 values are multiplied with the int8 activations widened to int16
 * by SMLAL / SMLAL2 into int32 lanes (exact: |value| < 2^14), a block of
 * 32 columns scaled by its step in float.  A row is decoded one sequence
 * at a time and used for every token (prefill decodes each pair once). */
#include "pmpd_impl/weights/tcq/tcq.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

#define TCQ_NEON_VECTORS (PMPD_TCQ_SEQUENCE / 8) /* int16x8 per decoded sequence */

typedef struct tcq_neon_consts {
    uint8x16_t shuffle[2]; /* lanes 0-3 and 4-7: bytes (j s) / 8 + 2, + 1, + 0 into bits 8..31 */
    int32x4_t shift[2];    /* -(16 - (j s) % 8): USHL shifts right by the negated count */
} tcq_neon_consts;

static void tcq_neon_consts_for(unsigned shift, tcq_neon_consts *k)
{
    uint8_t shuffle[32];
    int32_t shifts[8];
    unsigned j;
    for (j = 0; j < 8; j++) {
        const unsigned at = j * shift / 8;
        shuffle[4 * j] = 0xFF; /* out of range: zero */
        shuffle[4 * j + 1] = (uint8_t)(at + 2);
        shuffle[4 * j + 2] = (uint8_t)(at + 1);
        shuffle[4 * j + 3] = (uint8_t)at;
        shifts[j] = -(int32_t)(16 - j * shift % 8);
    }
    k->shuffle[0] = vld1q_u8(shuffle);
    k->shuffle[1] = vld1q_u8(shuffle + 16);
    k->shift[0] = vld1q_s32(shifts);
    k->shift[1] = vld1q_s32(shifts + 4);
}

/* The 4 value pairs (int16 first, second) of 4 states' hashes h. */
static inline int16x8_t tcq_neon_values(uint32x4_t h, const int16_t *table)
{
    const uint32x4_t index = vandq_u32(vshrq_n_u32(h, 6), vdupq_n_u32(511));
    /* The low int16 of each lane all ones where bit 15 of h is set. */
    const int16x8_t flip = vshrq_n_s16(vreinterpretq_s16_u32(vandq_u32(h, vdupq_n_u32(0x8000))), 15);
    int32x4_t pairs = vdupq_n_s32(0);
    int32_t pair;
    memcpy(&pair, table + 2 * vgetq_lane_u32(index, 0), 4);
    pairs = vsetq_lane_s32(pair, pairs, 0);
    memcpy(&pair, table + 2 * vgetq_lane_u32(index, 1), 4);
    pairs = vsetq_lane_s32(pair, pairs, 1);
    memcpy(&pair, table + 2 * vgetq_lane_u32(index, 2), 4);
    pairs = vsetq_lane_s32(pair, pairs, 2);
    memcpy(&pair, table + 2 * vgetq_lane_u32(index, 3), 4);
    pairs = vsetq_lane_s32(pair, pairs, 3);
    return vsubq_s16(veorq_s16(vreinterpretq_s16_s32(pairs), flip), flip);
}

/* The 8 steps whose bits start at bytes (16 of them readable) as two
 * int16x8: steps 0-3 and 4-7, each (first, second) in column order. */
static inline void tcq_neon_group(const uint8_t *bytes, const int16_t *table, const tcq_neon_consts *k,
                                  int16x8_t *out)
{
    const uint8x16_t loaded = vld1q_u8(bytes);
    unsigned half;
#pragma GCC unroll 2
    for (half = 0; half < 2; half++) {
        const uint32x4_t windows =
            vshlq_u32(vreinterpretq_u32_u8(vqtbl1q_u8(loaded, k->shuffle[half])), k->shift[half]);
        const uint32x4_t state = vandq_u32(windows, vdupq_n_u32(0xFFFF));
        out[half] = tcq_neon_values(vmulq_u32(state, vaddq_u32(state, vdupq_n_u32(1))), table);
    }
}

/* Sequence j of row r decoded into w (32 int16x8: 256 values). */
static void tcq_neon_decode(const pmpd_tcq_matrix *m, size_t r, size_t j, const tcq_neon_consts *consts,
                            int16x8_t *w)
{
    const int16_t *table = pmpd_tcq_table();
    uint8_t bytes[16 * PMPD_TCQ_MAX_SHIFT + 16];
    unsigned shift, g;
    const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
    const tcq_neon_consts *k = &consts[shift == m->shift[0] ? 0 : 1];
    memcpy(bytes, sequence, 16 * (size_t)shift);
    memcpy(bytes + 16 * (size_t)shift, sequence, 16);
    for (g = 0; g < PMPD_TCQ_STEPS / 8; g++)
        tcq_neon_group(bytes + (size_t)g * shift, table, k, w + 2 * g);
}

/* One 32-column block's exact int32 sums: w its 4 decoded int16x8, x its
 * 32 int8 activations. */
static inline int32x4_t tcq_neon_block_sum(const int16x8_t *w, const int8_t *x)
{
    int32x4_t sum = vdupq_n_s32(0);
    unsigned v;
#pragma GCC unroll 2
    for (v = 0; v < 2; v++) {
        const int8x16_t xs = vld1q_s8(x + 16 * v);
        const int16x8_t low = vmovl_s8(vget_low_s8(xs)), high = vmovl_high_s8(xs);
        sum = vmlal_s16(sum, vget_low_s16(w[2 * v]), vget_low_s16(low));
        sum = vmlal_high_s16(sum, w[2 * v], low);
        sum = vmlal_s16(sum, vget_low_s16(w[2 * v + 1]), vget_low_s16(high));
        sum = vmlal_high_s16(sum, w[2 * v + 1], high);
    }
    return sum;
}

/* One token's sum over a decoded sequence: x its 256 int8 columns, d its
 * 8 block steps. */
static inline float tcq_neon_token(const int16x8_t *w, const int8_t *x, const float *d)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    unsigned b;
    for (b = 0; b < PMPD_TCQ_SEQUENCE / PMPD_ROTATED_BLOCK; b++)
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(tcq_neon_block_sum(w + 4 * b, x + b * PMPD_ROTATED_BLOCK)), d[b]);
    return vaddvq_f32(acc);
}

PMPD_INTERNAL void pmpd_tcq_matmul(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_ROTATED_BLOCK;
    const size_t blocks_per_sequence = PMPD_TCQ_SEQUENCE / PMPD_ROTATED_BLOCK;
    tcq_neon_consts consts[2];
    int16x8_t w[TCQ_NEON_VECTORS];
    size_t r, j, t;
    tcq_neon_consts_for(m->shift[0], &consts[0]);
    tcq_neon_consts_for(m->shift[1], &consts[1]);
    for (r = row_begin; r < row_end; r++) {
        const float out = m->scale[r] * pmpd_tcq_unit();
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] = 0.0f;
        for (j = 0; j < m->sequences; j++) {
            tcq_neon_decode(m, r, j, consts, w);
            for (t = 0; t < n_tokens; t++)
                y[t * ldy + r] += tcq_neon_token(w, q + t * m->padded + j * PMPD_TCQ_SEQUENCE,
                                                 d + t * n_blocks + j * blocks_per_sequence);
        }
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] *= out;
    }
}

#undef TCQ_NEON_VECTORS
#endif
