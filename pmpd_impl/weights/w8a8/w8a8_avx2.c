/* W8A8 product with AVX2.  Without VNNI the widest exact int8 multiply is
 * VPMADDUBSW (unsigned x signed bytes, adjacent pairs summed into int16),
 * so each product is formed as |w| x (q with w's sign), VPSIGNB: with
 * |w| <= 128 (a weight of -128 included) and |q| <= 127 a pair sums to at
 * most 32512 and never saturates.  VPMADDWD by ones widens the pairs into
 * int32 lanes.  That is 2 multiplies per 32 products, as widening the
 * weights to int16 for VPMADDWD is, but it keeps the activations in bytes
 * and drops the sign extension (VPMOVSXBW, a lane-crossing step Zen 3
 * issues at 1.5 cycles): 1.26x the int16 kernel's rate on a Zen 3 at
 * 5632 x 2048 x 64 tokens, and prefill 1.2x.  A tile is 4 rows x 2 tokens (8 accumulators), taken
 * row by row.  Tokens go in blocks whose activations stay in L2 while
 * every row block passes over them. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 && !PMPD_USE_AVXVNNI
#include <immintrin.h>

#include "pmpd_impl/weights/w8a8/w8a8_x86.h"

/* The activations of 64 tokens as bytes: 352 KiB at K = 5632, in L2. */
#define W8A8_AVX2_TOKEN_BLOCK 64
#define W8A8_AVX2_TILE 2
#define W8A8_AVX2_PREFETCH 1024 /* bytes ahead in the row stream (512: 0.95x, 2048: 0.9x) */

/* One row's 32 columns against tokens a0 and (when nt is 2) a1. */
static inline __attribute__((always_inline)) void w8a8_avx2_row(const int8_t *w, __m256i a0, __m256i a1, size_t nt,
                                                                __m256i *acc0, __m256i *acc1)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)w), magnitude = _mm256_abs_epi8(wv);
    *acc0 = _mm256_add_epi32(*acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(a0, wv)), ones));
    if (nt > 1)
        *acc1 = _mm256_add_epi32(*acc1,
                                 _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(a1, wv)), ones));
}

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 2.
 * Forced inline with a constant nt.  The accumulators are named
 * variables, not an array: GCC kept an array's in registers only by
 * copying them each step and spilled two (5% slower on Zen 3). */
static inline __attribute__((always_inline)) void w8a8_avx2_tile(const pmpd_w8a8_matrix *m, const int8_t *act,
                                                                 size_t r0, size_t row_end, size_t t0, size_t nt,
                                                                 float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k, *x0 = act + t0 * k, *x1 = nt > 1 ? x0 + k : x0;
    __m256i acc[8];
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    size_t i, j, c;
    for (c = 0; c < k; c += 32) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)(x0 + c));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(x1 + c));
        w8a8_avx2_row(w + c, a0, a1, nt, &s00, &s01);
        w8a8_avx2_row(w + k + c, a0, a1, nt, &s10, &s11);
        w8a8_avx2_row(w + 2 * k + c, a0, a1, nt, &s20, &s21);
        w8a8_avx2_row(w + 3 * k + c, a0, a1, nt, &s30, &s31);
    }
    acc[0] = s00, acc[1] = s01, acc[2] = s10, acc[3] = s11, acc[4] = s20, acc[5] = s21, acc[6] = s30, acc[7] = s31;
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, pmpd_w8a8_sum256(acc[2 * i + j]));
}

/* One token (decode): every weight comes from RAM once.  Rows go one
 * after another, so the matrix streams as one sequential read, prefetched
 * ahead, with two accumulators for independent chains: 1.5x the decode
 * rate of the 4-row tile, which reads four short streams at once (Zen 3,
 * 1.1B model). */
static void w8a8_avx2_gemv(const pmpd_w8a8_matrix *m, const int8_t *act, size_t row_begin, size_t row_end, float *y)
{
    const size_t k = m->padded_cols;
    size_t r, c;
    for (r = row_begin; r < row_end; r++) {
        const int8_t *w = m->weights + r * k;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (c = 0; c < k; c += 64) {
            __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)(act + c));
            __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(act + c + 32));
            _mm_prefetch((const char *)(w + c + W8A8_AVX2_PREFETCH), _MM_HINT_T0);
            w8a8_avx2_row(w + c, a0, a0, 1, &s0, &s0);
            w8a8_avx2_row(w + c + 32, a1, a1, 1, &s1, &s1);
        }
        y[r] = pmpd_w8a8_output(m, r, pmpd_w8a8_sum256(_mm256_add_epi32(s0, s1)));
    }
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const int8_t *a = (const int8_t *)act;
    size_t b0, r0, t0;
    if (n_tokens == 1) {
        w8a8_avx2_gemv(m, a, row_begin, row_end, y);
        return;
    }
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
#undef W8A8_AVX2_PREFETCH
#endif
