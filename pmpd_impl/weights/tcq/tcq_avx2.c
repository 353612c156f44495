/* TCQ product with AVX2.  8 consecutive steps start at bit offsets that are
 * constants per shift (tcq.h), so one 16-byte load broadcast to both
 * lanes, one PSHUFB (3 bytes big-endian into each 32-bit lane) and one
 * VPSRLVD give 8 states.  HYB: VPMULLD for S (S + 1), a shift and a mask
 * for the index, VPGATHERDD of the 8 (first, second) int16 pairs, and
 * VPSIGNW with bit 15 of h for the first value's sign.  VPMADDWD with the
 * int8 activations widened to int16 then sums each pair exactly, so a
 * block of 32 columns (2 groups of 8 steps) is 8 int32 sums, scaled by the
 * block's step in float.
 *
 * A row is decoded one sequence at a time into 32 vectors on the stack
 * and used for every token in tiles of 4 (prefill decodes each pair once);
 * each (token, sequence) adds its sum to y. */
#include "pmpd_impl/weights/tcq/tcq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_AVX2 && !PMPD_TCQ_USE_AVX512 /* else tcq_avx512.c */
#include <immintrin.h>
#include <string.h>

#define TCQ_AVX2_TILE 4
#define TCQ_AVX2_GROUPS (PMPD_TCQ_STEPS / 8) /* groups of 8 steps per sequence */

typedef struct tcq_avx2_consts {
    __m256i shuffle; /* lane j: bytes (j s) / 8 + 2, + 1, + 0 into bits 8..31 */
    __m256i shift;   /* lane j: 16 - (j s) % 8 */
    __m256i low16, one, index_mask, bit15, sign_ones;
} tcq_avx2_consts;

static void tcq_avx2_consts_for(unsigned shift, tcq_avx2_consts *k)
{
    int8_t shuffle[32];
    int32_t shifts[8];
    unsigned j;
    for (j = 0; j < 8; j++) {
        const unsigned at = j * shift / 8;
        shuffle[4 * j] = (int8_t)0x80; /* zero */
        shuffle[4 * j + 1] = (int8_t)(at + 2);
        shuffle[4 * j + 2] = (int8_t)(at + 1);
        shuffle[4 * j + 3] = (int8_t)at;
        shifts[j] = (int32_t)(16 - j * shift % 8);
    }
    k->shuffle = _mm256_loadu_si256((const __m256i *)(const void *)shuffle);
    k->shift = _mm256_loadu_si256((const __m256i *)(const void *)shifts);
    k->low16 = _mm256_set1_epi32(0xFFFF);
    k->one = _mm256_set1_epi32(1);
    k->index_mask = _mm256_set1_epi32(511);
    k->bit15 = _mm256_set1_epi32(0x8000);
    k->sign_ones = _mm256_set1_epi32(0x00010001);
}

/* The 8 value pairs (int16 first, second per 32-bit lane) of the steps
 * whose bits start at bytes (16 of them readable). */
static inline __m256i tcq_avx2_group(const uint8_t *bytes, const int16_t *table, const tcq_avx2_consts *k)
{
    const __m256i loaded = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bytes));
    const __m256i windows = _mm256_srlv_epi32(_mm256_shuffle_epi8(loaded, k->shuffle), k->shift);
    const __m256i state = _mm256_and_si256(windows, k->low16);
    const __m256i h = _mm256_mullo_epi32(state, _mm256_add_epi32(state, k->one));
    const __m256i index = _mm256_and_si256(_mm256_srli_epi32(h, 6), k->index_mask);
    const __m256i pairs = _mm256_i32gather_epi32((const int *)(const void *)table, index, 4);
    /* Low int16 0x8001 (negative) where bit 15 is set, else 0x0001; high 1. */
    return _mm256_sign_epi16(pairs, _mm256_or_si256(_mm256_and_si256(h, k->bit15), k->sign_ones));
}

/* Sums of the decoded sequence w (2 groups per block, blocks blocks)
 * with nt tokens, token t's int8 columns at q + t * stride and its block
 * steps at d + t * n_blocks, into sums[t]. */
static inline __attribute__((always_inline)) void tcq_avx2_tile(const __m256i *w, size_t blocks, const int8_t *q,
                                                                const float *d, size_t stride, size_t n_blocks,
                                                                size_t nt, float *sums)
{
    __m256 acc[TCQ_AVX2_TILE];
    size_t t, b;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t] = _mm256_setzero_ps();
    for (b = 0; b < blocks; b++) {
#pragma GCC unroll 4
        for (t = 0; t < nt; t++) {
            const int8_t *x = q + t * stride + b * PMPD_ROTATED_BLOCK;
            const __m256i low = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)x));
            const __m256i high = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(x + 16)));
            const __m256i block =
                _mm256_add_epi32(_mm256_madd_epi16(w[2 * b], low), _mm256_madd_epi16(w[2 * b + 1], high));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block), _mm256_set1_ps(d[t * n_blocks + b]), acc[t]);
        }
    }
    for (t = 0; t < nt; t++)
        sums[t] = pmpd_rotated_avx2_sum(acc[t]);
}

/* Sequence j of row r (steps steps) decoded into w.  Groups whose 16-byte
 * load stays inside the sequence read it in place; the last few read a
 * copy of its last 16 bytes followed by its first 16 (the wrap; a
 * sequence has at least 64 s / 8 >= 24 bytes). */
static void tcq_avx2_decode(const pmpd_tcq_matrix *m, size_t r, size_t j, unsigned steps,
                            const tcq_avx2_consts *consts, __m256i *w)
{
    const int16_t *table = pmpd_tcq_table();
    uint8_t tail[32];
    unsigned shift, g;
    const uint8_t *sequence = pmpd_tcq_sequence(m, r, j, &shift);
    const tcq_avx2_consts *k = &consts[shift == m->shift[0] ? 0 : 1];
    const size_t bytes = pmpd_tcq_bytes(steps, shift), inside = (bytes - 16) / shift + 1; /* groups read in place */
    for (g = 0; g < inside; g++)
        w[g] = tcq_avx2_group(sequence + (size_t)g * shift, table, k);
    memcpy(tail, sequence + bytes - 16, 16);
    memcpy(tail + 16, sequence, 16);
    for (; g < steps / 8; g++)
        w[g] = tcq_avx2_group(tail + (size_t)g * shift - (bytes - 16), table, k);
}

PMPD_INTERNAL void pmpd_tcq_matmul(const pmpd_tcq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    const pmpd_rotated rotated = pmpd_tcq_rotated(m);
    const int8_t *q = pmpd_rotated_act_q(act);
    const float *d = pmpd_rotated_act_d(&rotated, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_ROTATED_BLOCK;
    const size_t blocks_per_sequence = PMPD_TCQ_SEQUENCE / PMPD_ROTATED_BLOCK;
    tcq_avx2_consts consts[2];
    __m256i w[TCQ_AVX2_GROUPS];
    size_t r, j, t, t0;
    tcq_avx2_consts_for(m->shift[0], &consts[0]);
    tcq_avx2_consts_for(m->shift[1], &consts[1]);
    for (r = row_begin; r < row_end; r++) {
        const float out = m->scale[r] * pmpd_tcq_unit();
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] = 0.0f;
        for (j = 0; j < m->sequences; j++) {
            const int8_t *qj = q + j * PMPD_TCQ_SEQUENCE;
            const float *dj = d + j * blocks_per_sequence;
            const unsigned steps = pmpd_tcq_steps(m, j);
            const size_t blocks = 2 * (size_t)steps / PMPD_ROTATED_BLOCK;
            float sums[TCQ_AVX2_TILE];
            tcq_avx2_decode(m, r, j, steps, consts, w);
            for (t0 = 0; t0 < n_tokens; t0 += TCQ_AVX2_TILE) {
                const size_t nt = n_tokens - t0 < TCQ_AVX2_TILE ? n_tokens - t0 : TCQ_AVX2_TILE;
                const int8_t *qt = qj + t0 * m->padded;
                const float *dt = dj + t0 * n_blocks;
                /* The tile's token count a constant in each call. */
                switch (nt) {
                case 4: tcq_avx2_tile(w, blocks, qt, dt, m->padded, n_blocks, 4, sums); break;
                case 3: tcq_avx2_tile(w, blocks, qt, dt, m->padded, n_blocks, 3, sums); break;
                case 2: tcq_avx2_tile(w, blocks, qt, dt, m->padded, n_blocks, 2, sums); break;
                default: tcq_avx2_tile(w, blocks, qt, dt, m->padded, n_blocks, 1, sums); break;
                }
                for (t = 0; t < nt; t++)
                    y[(t0 + t) * ldy + r] += sums[t];
            }
        }
        for (t = 0; t < n_tokens; t++)
            y[t * ldy + r] *= out;
    }
}

#undef TCQ_AVX2_TILE
#undef TCQ_AVX2_GROUPS
#endif
