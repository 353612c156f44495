/* NUQ product with AVX2: a block's 32 codes become 32 bytes in column
 * order (4 bits: the low and high nibbles of 16 bytes as the two 128-bit
 * lanes, from one broadcast load; 2 bits: the 8 bytes in each 64-bit lane shifted by 0, 2, 4, 6;
 * 3 bits: those, plus the sign plane's bits spread to the bytes by PSHUFB
 * and tested with a per-byte mask), one PSHUFB turns them into 32 int8
 * levels, and VPMADDUBSW / VPMADDWD multiply them with the int8
 * activations exactly (|level| <= 127 and |q| <= 127: a pair of products
 * fits int16), as q4's kernel does.  Each block's 8 int32 sums become
 * floats times the block's activation step, added into one float vector
 * per token.  A tile is one row x up to 4 tokens: the levels are looked up
 * once per tile and used for every token (prefill). */
#include "pmpd_impl/weights/nuq/nuq.h"
#include "pmpd_impl/weights/rotated/rotated_simd.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 /* else nuq_avx512.c */
#include <immintrin.h>
#include <string.h>

#define NUQ_AVX2_TILE PMPD_ROTATED_TILE

typedef struct nuq_avx2_consts {
    __m256i table;     /* the 16 int8 levels, in both lanes */
    __m256i low2;      /* 0x03 in every byte */
    __m256i low4;      /* 0x0F in every byte */
    __m256i shifts;    /* 0, 2, 4, 6 per 64-bit lane */
    __m256i nibble;    /* 0, 0, 4, 4 per 64-bit lane */
    __m256i spread;    /* byte L: the sign plane's byte (L % 8) / 2 */
    __m256i bit;       /* byte L: 1 << (4 ((L % 8) & 1) + L / 8) */
    __m256i sign;      /* 0x04 in every byte: the 3-bit code's sign */
    __m256i ones;      /* int16 ones for VPMADDWD */
} nuq_avx2_consts;

/* The 32 int8 levels of one block, in column order. */
static inline __attribute__((always_inline)) __m256i nuq_avx2_levels(const uint8_t *block, unsigned bits,
                                                                     const nuq_avx2_consts *k)
{
    __m256i codes;
    if (bits == 4) {
        /* The 16 bytes in both lanes, the upper lane's shifted by a nibble:
         * a broadcast load, one shift, one mask. */
        __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)block));
        codes = _mm256_and_si256(_mm256_srlv_epi64(b, k->nibble), k->low4);
    } else {
        int64_t low;
        memcpy(&low, block, 8);
        codes = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(low), k->shifts), k->low2);
        if (bits == 3) {
            int32_t high;
            __m256i spread;
            memcpy(&high, block + 8, 4);
            spread = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(high), k->spread), k->bit);
            codes = _mm256_or_si256(codes, _mm256_and_si256(_mm256_cmpeq_epi8(spread, k->bit), k->sign));
        }
    }
    return _mm256_shuffle_epi8(k->table, codes);
}

/* Block b of row into acc[t] for tokens t0..t0+nt-1. */
static inline __attribute__((always_inline)) void nuq_avx2_block(const uint8_t *row, const nuq_avx2_consts *k,
                                                                 unsigned bits, const int8_t *q, const float *d,
                                                                 size_t stride, size_t n_blocks, size_t b, size_t t0,
                                                                 size_t nt, __m256 *acc)
{
    const __m256i w = nuq_avx2_levels(row + b * 4 * (size_t)bits, bits, k);
    const __m256i magnitude = _mm256_sign_epi8(w, w);
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t] = pmpd_rotated_avx2_dot(w, magnitude, q + (t0 + t) * stride + b * PMPD_NUQ_BLOCK,
                                       d[(t0 + t) * n_blocks + b], k->ones, acc[t]);
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4).  Even and odd blocks go to
 * two accumulators per token: one chain of dependent FMAs held a GEMV at
 * one block per FMA latency. */
static inline __attribute__((always_inline)) void nuq_avx2_tile(const pmpd_nuq_matrix *m, const nuq_avx2_consts *k,
                                                                unsigned bits, const int8_t *q, const float *d,
                                                                size_t n_blocks, size_t r, size_t t0, size_t nt,
                                                                float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const float out = m->scale[r] * pmpd_nuq_unit(bits);
    __m256 even[NUQ_AVX2_TILE], odd[NUQ_AVX2_TILE];
    size_t t;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        even[t] = odd[t] = _mm256_setzero_ps();
#define NUQ_AVX2_BLOCK(b, acc) nuq_avx2_block(row, k, bits, q, d, m->padded, n_blocks, b, t0, nt, acc)
    PMPD_ROTATED_BLOCKS(n_blocks, NUQ_AVX2_BLOCK, even, odd);
#undef NUQ_AVX2_BLOCK
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = out * pmpd_rotated_avx2_sum(_mm256_add_ps(even[t], odd[t]));
}

/* One width's loop, with bits a constant after inlining. */
static inline __attribute__((always_inline)) void nuq_avx2_rows(const pmpd_nuq_matrix *m, unsigned bits,
                                                                const void *act, size_t n_tokens, size_t row_begin,
                                                                size_t row_end, float *y, size_t ldy)
{
    const int8_t *q = pmpd_nuq_act_q(m, act, n_tokens);
    const float *d = pmpd_nuq_act_d(m, act, n_tokens);
    const size_t n_blocks = m->padded / PMPD_NUQ_BLOCK;
    nuq_avx2_consts k;
    size_t r;
    k.table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)pmpd_nuq_levels_int8(bits)));
    k.low2 = _mm256_set1_epi8(3);
    k.low4 = _mm256_set1_epi8(15);
    k.shifts = _mm256_setr_epi64x(0, 2, 4, 6);
    k.nibble = _mm256_setr_epi64x(0, 0, 4, 4);
    k.spread = _mm256_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2,
                                2, 3, 3);
    k.bit = _mm256_setr_epi8(1, 16, 1, 16, 1, 16, 1, 16, 2, 32, 2, 32, 2, 32, 2, 32, 4, 64, 4, 64, 4, 64, 4, 64,
                             8, -128, 8, -128, 8, -128, 8, -128);
    k.sign = _mm256_set1_epi8(4);
    k.ones = _mm256_set1_epi16(1);
#define NUQ_AVX2_CALL(t0, nt) nuq_avx2_tile(m, &k, bits, q, d, n_blocks, r, t0, nt, y, ldy)
    for (r = row_begin; r < row_end; r++)
        PMPD_ROTATED_TILES(n_tokens, NUQ_AVX2_CALL);
#undef NUQ_AVX2_CALL
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_avx2_rows(m, 4, act, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_avx2_rows(m, 3, act, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_avx2_rows(m, 2, act, n_tokens, row_begin, row_end, y, ldy);
}

#undef NUQ_AVX2_TILE
#endif
