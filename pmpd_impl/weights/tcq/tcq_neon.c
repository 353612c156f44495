/* TCQ product with NEON (AArch64), on the int8 value table (format
 * version 2 on).  A row goes one sequence at a time; per 16 steps (32
 * columns):
 *
 *   hash     (NEON) two 16-byte loads, four TBL (3 bytes big-endian into
 *            bits 8..31 of each 32-bit lane), four USHL left by the lane's
 *            constant (j s) % 8 (the window then fills the lane's high
 *            half), two UZP2 (8 windows to a register, 16-bit lanes: only
 *            bits 6..15 of h matter, so h mod 2^16 does) and two MLA,
 *            h = S S + S;
 *   lookup   (integer pipes) h moves to general registers 4 steps at a
 *            time (UMOV); per step one UBFX of h's bits 6..15 and one
 *            LDRH of the value pair, two int8 in column order, from a
 *            1024-entry copy of the table whose upper half has the first
 *            value negated (bit 15 of h, the sign, is the index's top bit:
 *            no sign instructions; built once per call, 2 KiB on the
 *            stack); ORRs pack 4 pairs into 64 bits, FMOV / INS put them
 *            back into NEON registers;
 *   product  two SDOT of the int8 values with the int8 activations (exact
 *            int32: |value| <= 127), or on Armv8.0 SMULL, SMLAL2 and
 *            SADALP (|a b + c d| <= 2 127 128 < 2^15), the block of 32
 *            scaled by its step in float.
 *
 * NEON has no gather, and a lookup by TBL from the value's 512-byte byte
 * plane needs 8 TBX4 per 16 steps and value (eight 64-byte sub-tables by
 * the index's top bits, a select on one of them): 16 per 16 steps, 64
 * table registers that cannot all stay loaded, and each TBX4 is 9 uops
 * (4.5 cycles) on the A57, so the lookup is scalar, three instructions a
 * step on the integer and load pipes, which an in-order core issues
 * beside the hash's NEON instructions.
 *
 * One token (decode) multiplies the values straight from the registers;
 * several tokens (prefill) decode each sequence once to 256 int8 values
 * on the stack and use them for every token. */
#include "pmpd_impl/weights/tcq/tcq.h"

#if PMPD_USE_NEON && defined(__aarch64__) && !PMPD_USE_AVX2
#include <arm_neon.h>
#include <string.h>

/* GCC would otherwise call the lookup, whose hash arguments then travel
 * through memory. */
#if defined(__GNUC__)
#define TCQ_NEON_INLINE static inline __attribute__((always_inline))
#else
#define TCQ_NEON_INLINE static inline
#endif

#define TCQ_NEON_PAIRS (2 * PMPD_TCQ_TABLE_ENTRIES) /* the table, then again with the first value negated */

typedef struct tcq_neon_consts {
    uint8x16_t shuffle[2]; /* lanes 0-3 and 4-7: bytes (j s) / 8 + 2, + 1, + 0 into bits 8..31 */
    int32x4_t shift[2];    /* (j s) % 8: USHL left, the window in bits 16..31 */
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
        shifts[j] = (int32_t)(j * shift % 8);
    }
    k->shuffle[0] = vld1q_u8(shuffle);
    k->shuffle[1] = vld1q_u8(shuffle + 16);
    k->shift[0] = vld1q_s32(shifts);
    k->shift[1] = vld1q_s32(shifts + 4);
}

/* pairs[e] for e = sign << 9 | index (h's bits 6..15): the first value
 * (negated when sign is set) in the low byte, the second in the high byte,
 * so that a little-endian store puts them in column order. */
static void tcq_neon_pairs(uint16_t *pairs)
{
    const int16_t *table = pmpd_tcq_table();
    unsigned e;
    for (e = 0; e < PMPD_TCQ_TABLE_ENTRIES; e++) {
        const unsigned second = (uint8_t)table[2 * e + 1] << 8;
        pairs[e] = (uint16_t)((uint8_t)table[2 * e] | second);
        pairs[e + PMPD_TCQ_TABLE_ENTRIES] = (uint16_t)((uint8_t)-table[2 * e] | second);
    }
}

/* h mod 2^16 of the 16 steps whose bits start at bytes (the second 8 at
 * bytes + shift, 16 readable at each), steps 0-7 in h[0], 8-15 in h[1].
 * The two groups' instructions alternate, so that an in-order core has
 * the other group to issue while one waits on a result. */
TCQ_NEON_INLINE void tcq_neon_hash(const uint8_t *bytes, unsigned shift, const tcq_neon_consts *k, uint16x8_t *h)
{
    const uint8x16_t first = vld1q_u8(bytes), second = vld1q_u8(bytes + shift);
    const uint8x16_t f0 = vqtbl1q_u8(first, k->shuffle[0]), s0 = vqtbl1q_u8(second, k->shuffle[0]);
    const uint8x16_t f1 = vqtbl1q_u8(first, k->shuffle[1]), s1 = vqtbl1q_u8(second, k->shuffle[1]);
    const uint32x4_t wf0 = vshlq_u32(vreinterpretq_u32_u8(f0), k->shift[0]);
    const uint32x4_t ws0 = vshlq_u32(vreinterpretq_u32_u8(s0), k->shift[0]);
    const uint32x4_t wf1 = vshlq_u32(vreinterpretq_u32_u8(f1), k->shift[1]);
    const uint32x4_t ws1 = vshlq_u32(vreinterpretq_u32_u8(s1), k->shift[1]);
    const uint16x8_t sf = vuzp2q_u16(vreinterpretq_u16_u32(wf0), vreinterpretq_u16_u32(wf1));
    const uint16x8_t ss = vuzp2q_u16(vreinterpretq_u16_u32(ws0), vreinterpretq_u16_u32(ws1));
    h[0] = vmlaq_u16(sf, sf, sf);
    h[1] = vmlaq_u16(ss, ss, ss);
}

/* The value pairs of the 4 steps whose hashes are the 16-bit fields of
 * four, packed in step order: 8 int8 values in column order.  Two pairs
 * are joined before the halves, as ORR shifts only one operand. */
TCQ_NEON_INLINE uint64_t tcq_neon_four(uint64_t four, const uint16_t *pairs)
{
    const uint32_t p0 = pairs[four >> 6 & (TCQ_NEON_PAIRS - 1)], p1 = pairs[four >> 22 & (TCQ_NEON_PAIRS - 1)];
    const uint32_t p2 = pairs[four >> 38 & (TCQ_NEON_PAIRS - 1)], p3 = pairs[four >> 54];
    return (uint64_t)(p0 | p1 << 16) | (uint64_t)(p2 | p3 << 16) << 32;
}

/* The 32 int8 values (column order) of the 16 steps hashed in h, in two
 * NEON registers: FMOV / INS of the four 64-bit packs, fewer instructions
 * than storing them for a vector load, and no stores that the compiler
 * would have to keep between the table loads (it cannot tell the stack
 * buffer from the table). */
TCQ_NEON_INLINE void tcq_neon_lookup(const uint16x8_t *h, const uint16_t *pairs, int8x16_t *v)
{
    const uint64_t v0 = tcq_neon_four(vgetq_lane_u64(vreinterpretq_u64_u16(h[0]), 0), pairs);
    const uint64_t v1 = tcq_neon_four(vgetq_lane_u64(vreinterpretq_u64_u16(h[0]), 1), pairs);
    const uint64_t v2 = tcq_neon_four(vgetq_lane_u64(vreinterpretq_u64_u16(h[1]), 0), pairs);
    const uint64_t v3 = tcq_neon_four(vgetq_lane_u64(vreinterpretq_u64_u16(h[1]), 1), pairs);
    v[0] = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(v0), vcreate_u64(v1)));
    v[1] = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(v2), vcreate_u64(v3)));
}

/* One 32-column block's exact int32 sums: v its 32 int8 values, x its 32
 * int8 activations. */
TCQ_NEON_INLINE int32x4_t tcq_neon_block_sum(const int8x16_t *v, const int8_t *x)
{
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
#if PMPD_USE_DOTPROD
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), v[0], x0), v[1], x1);
#else
    const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(v[0]), vget_low_s8(x0)), v[0], x0);
    const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(v[1]), vget_low_s8(x1)), v[1], x1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
#endif
}

/* The steps s / 8 bytes of sequence j of row r with its first 16 after them (the
 * windows' tail-biting wrap), and its constants. */
static const tcq_neon_consts *tcq_neon_bytes(const pmpd_tcq_matrix *m, size_t r, size_t j,
                                             const tcq_neon_consts *consts, uint8_t *bytes, unsigned *shift)
{
    const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, shift);
    const size_t length = pmpd_tcq_bytes(pmpd_tcq_steps(m, j), *shift);
    memcpy(bytes, sequence, length);
    memcpy(bytes + length, sequence, 16);
    return &consts[*shift == m->shift[0] ? 0 : 1];
}

/* The hashes of the 32 steps whose bits start at bytes, into h[0..3]. */
TCQ_NEON_INLINE void tcq_neon_hash32(const uint8_t *bytes, unsigned shift, const tcq_neon_consts *k, uint16x8_t *h)
{
    tcq_neon_hash(bytes, shift, k, h);
    tcq_neon_hash(bytes + 2 * shift, shift, k, h + 2);
}

/* acc + the exact sums of the two blocks of 32 values in v with x, scaled
 * by their steps d[0], d[1]. */
TCQ_NEON_INLINE float32x4_t tcq_neon_two_blocks(const int8x16_t *v, const int8_t *x, const float *d,
                                                float32x4_t acc)
{
    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(tcq_neon_block_sum(v, x)), d[0]);
    return vfmaq_n_f32(acc, vcvtq_f32_s32(tcq_neon_block_sum(v + 2, x + 32)), d[1]);
}

/* The values of the 32 steps hashed in h (steps 32 u..32 u + 31): stored
 * at w (prefill), or with w NULL multiplied with one token's x, d in
 * registers and added to acc (decode). */
TCQ_NEON_INLINE float32x4_t tcq_neon_use(const uint16x8_t *h, const uint16_t *pairs, unsigned u, int8_t *w,
                                         const int8_t *x, const float *d, float32x4_t acc)
{
    int8x16_t v[4];
    unsigned i;
    tcq_neon_lookup(h, pairs, v);
    tcq_neon_lookup(h + 2, pairs, v + 2);
    if (!w)
        return tcq_neon_two_blocks(v, x + 64 * u, d + 2 * u, acc);
    for (i = 0; i < 4; i++)
        vst1q_s8(w + 64 * u + 16 * i, v[i]);
    return acc;
}

/* Sequence j of row r through tcq_neon_use (w, or x and d).
 * Software-pipelined by 32 steps: the hashes of the next 32 are made
 * beside the lookups of the current 32, in one basic block (the last
 * lookups peeled, not behind a branch), so that the compiler may
 * interleave them; 32 steps rather than 16 give it more independent
 * work for an in-order core's two issue slots (llvm-mca, A55, GCC: 52
 * cycles per 32 weights against 62).  Inlined into its two callers, so
 * that each compiles without the other's branch. */
TCQ_NEON_INLINE float tcq_neon_walk(const pmpd_tcq_matrix *m, size_t r, size_t j, const tcq_neon_consts *consts,
                                    const uint16_t *pairs, int8_t *w, const int8_t *x, const float *d)
{
    uint8_t bytes[16 * PMPD_TCQ_MAX_SHIFT + 16];
    float32x4_t acc = vdupq_n_f32(0.0f);
    uint16x8_t h[4];
    unsigned shift, u;
    const tcq_neon_consts *k = tcq_neon_bytes(m, r, j, consts, bytes, &shift);
    const unsigned units = pmpd_tcq_steps(m, j) / 32;
    tcq_neon_hash32(bytes, shift, k, h);
    for (u = 0; u + 1 < units; u++) {
        const uint16x8_t current[4] = {h[0], h[1], h[2], h[3]};
        tcq_neon_hash32(bytes + (size_t)(u + 1) * 4 * shift, shift, k, h);
        acc = tcq_neon_use(current, pairs, u, w, x, d, acc);
    }
    return vaddvq_f32(tcq_neon_use(h, pairs, u, w, x, d, acc));
}

/* Sequence j of row r decoded into w (up to 256 int8 values in column order). */
static void tcq_neon_decode(const pmpd_tcq_matrix *m, size_t r, size_t j, const tcq_neon_consts *consts,
                            const uint16_t *pairs, int8_t *w)
{
    (void)tcq_neon_walk(m, r, j, consts, pairs, w, NULL, NULL);
}

/* One token's sum over sequence j of row r without the stack copy of its
 * values (decode, one token: x its int8 columns, d its block steps). */
static float tcq_neon_sequence(const pmpd_tcq_matrix *m, size_t r, size_t j, const tcq_neon_consts *consts,
                               const uint16_t *pairs, const int8_t *x, const float *d)
{
    return tcq_neon_walk(m, r, j, consts, pairs, NULL, x, d);
}

/* One token's sum over a decoded sequence of blocks blocks: x its int8
 * columns, d its block steps. */
static inline float tcq_neon_token(const int8_t *w, size_t blocks, const int8_t *x, const float *d)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    size_t b;
    for (b = 0; b < blocks; b++) {
        const int8x16_t v[2] = {vld1q_s8(w + b * PMPD_ROTATED_BLOCK), vld1q_s8(w + b * PMPD_ROTATED_BLOCK + 16)};
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(tcq_neon_block_sum(v, x + b * PMPD_ROTATED_BLOCK)), d[b]);
    }
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
    uint16_t pairs[TCQ_NEON_PAIRS];
    int8_t w[PMPD_TCQ_SEQUENCE];
    size_t r, j, t;
    tcq_neon_consts_for(m->shift[0], &consts[0]);
    tcq_neon_consts_for(m->shift[1], &consts[1]);
    tcq_neon_pairs(pairs);
    for (r = row_begin; r < row_end; r++) {
        const float out = m->scale[r] * pmpd_tcq_unit();
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] = 0.0f;
        for (j = 0; j < m->sequences && n_tokens == 1; j++)
            y[r] += tcq_neon_sequence(m, r, j, consts, pairs, q + j * PMPD_TCQ_SEQUENCE, d + j * blocks_per_sequence);
        for (j = 0; j < m->sequences && n_tokens > 1; j++) {
            const size_t blocks = 2 * (size_t)pmpd_tcq_steps(m, j) / PMPD_ROTATED_BLOCK;
            tcq_neon_decode(m, r, j, consts, pairs, w);
            for (t = 0; t < n_tokens; t++)
                y[t * ldy + r] += tcq_neon_token(w, blocks, q + t * m->padded + j * PMPD_TCQ_SEQUENCE,
                                                 d + t * n_blocks + j * blocks_per_sequence);
        }
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] *= out;
    }
}

#undef TCQ_NEON_PAIRS
#undef TCQ_NEON_INLINE
#endif
