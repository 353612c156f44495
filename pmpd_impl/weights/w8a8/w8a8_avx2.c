/* W8A8 product with AVX2.  Without VNNI the widest exact int8 multiply is
 * VPMADDUBSW (unsigned x signed bytes, adjacent pairs summed into int16),
 * so each product is formed as |w| x (q with w's sign), VPSIGNB: with
 * |w| <= 128 (a weight of -128 included) and |q| <= 127 a pair sums to at
 * most 32512 and never saturates.  VPMADDWD by ones widens the pairs into
 * int32 lanes.  That is 2 multiplies per 32 products, as widening the
 * weights to int16 for VPMADDWD is, but it keeps the activations in bytes
 * and drops the sign extension (VPMOVSXBW, a lane-crossing step Zen 3
 * issues at 1.5 cycles): 1.26x the int16 kernel's rate on a Zen 3 at
 * 5632 x 2048.  A tile is 4 rows x 2 tokens: 8 accumulators and 4 |w|
 * registers; the signed weights are reloaded from L1 as VPSIGNB's memory
 * operand.  Tokens go in blocks whose activations stay in L2 while every
 * row block passes over them. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 && !PMPD_USE_AVXVNNI
#include <immintrin.h>

#include "pmpd_impl/weights/w8a8/w8a8_x86.h"

/* The activations of 64 tokens as bytes: 352 KiB at K = 5632, in L2. */
#define W8A8_AVX2_TOKEN_BLOCK 64
#define W8A8_AVX2_TILE 2

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 2.
 * Forced inline with a constant nt, the loops unroll and the accumulators
 * live in registers (a plain inline call kept them in memory). */
static inline __attribute__((always_inline)) void w8a8_avx2_tile(const pmpd_w8a8_matrix *m, const int8_t *act,
                                                                 size_t r0, size_t row_end, size_t t0, size_t nt,
                                                                 float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[4][W8A8_AVX2_TILE];
    size_t i, j, c;
#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
#pragma GCC unroll 2
        for (j = 0; j < nt; j++)
            acc[i][j] = _mm256_setzero_si256();
    for (c = 0; c < k; c += 32) {
        __m256i wv[4], magnitude[4];
#pragma GCC unroll 4
        for (i = 0; i < 4; i++) {
            wv[i] = _mm256_loadu_si256((const __m256i *)(const void *)(w + i * k + c));
            magnitude[i] = _mm256_abs_epi8(wv[i]);
        }
#pragma GCC unroll 2
        for (j = 0; j < nt; j++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(act + (t0 + j) * k + c));
#pragma GCC unroll 4
            for (i = 0; i < 4; i++) {
                __m256i pairs = _mm256_maddubs_epi16(magnitude[i], _mm256_sign_epi8(a, wv[i]));
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, pmpd_w8a8_sum256(acc[i][j]));
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const int8_t *a = (const int8_t *)act;
    size_t b0, r0, t0;
    for (b0 = 0; b0 < n_tokens; b0 += W8A8_AVX2_TOKEN_BLOCK) {
        size_t b1 = n_tokens - b0 < W8A8_AVX2_TOKEN_BLOCK ? n_tokens : b0 + W8A8_AVX2_TOKEN_BLOCK;
        for (r0 = row_begin; r0 < row_end; r0 += 4) {
            for (t0 = b0; t0 + W8A8_AVX2_TILE <= b1; t0 += W8A8_AVX2_TILE)
                w8a8_avx2_tile(m, a, r0, row_end, t0, W8A8_AVX2_TILE, y, ldy);
            if (t0 < b1)
                w8a8_avx2_tile(m, a, r0, row_end, t0, 1, y, ldy);
        }
    }
}

#undef W8A8_AVX2_TOKEN_BLOCK
#undef W8A8_AVX2_TILE
#endif
