/* W8A8 product with AVX2: weights widened to int16 once per 16 columns and
 * multiplied with int16 activations by vpmaddwd (16 exact products per
 * instruction, summed in pairs into int32 lanes).  A tile is 4 rows x 2
 * tokens: 8 accumulators, 4 weight registers and the products' temporaries
 * fit the 16 ymm registers (4 x 3 made GCC spill accumulators every step);
 * the activations are memory operands.  Tokens go in blocks
 * whose activations stay in L2 while every row block passes over them. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVX2 && !PMPD_USE_AVX512 && !PMPD_USE_AVXVNNI
#include <immintrin.h>

#include "pmpd_impl/weights/w8a8/w8a8_x86.h"

/* The activations of 24 tokens as int16: 192 KiB at K = 4096, in L2. */
#define W8A8_AVX2_TOKEN_BLOCK 24
#define W8A8_AVX2_TILE 2

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 2.
 * Forced inline with a constant nt, the loops unroll and the accumulators
 * live in registers (a plain inline call kept them in memory). */
static inline __attribute__((always_inline)) void w8a8_avx2_tile(const pmpd_w8a8_matrix *m, const int16_t *act, size_t r0, size_t row_end,
                                  size_t t0, size_t nt, float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    __m256i acc[4][W8A8_AVX2_TILE];
    size_t i, j, c;
#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
#pragma GCC unroll 2
        for (j = 0; j < nt; j++)
            acc[i][j] = _mm256_setzero_si256();
    for (c = 0; c < k; c += 16) {
        __m256i wv[4];
#pragma GCC unroll 4
        for (i = 0; i < 4; i++)
            wv[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w + i * k + c)));
#pragma GCC unroll 2
        for (j = 0; j < nt; j++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(act + (t0 + j) * k + c));
#pragma GCC unroll 4
            for (i = 0; i < 4; i++)
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(wv[i], a));
        }
    }
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, pmpd_w8a8_sum256(acc[i][j]));
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const int16_t *a = (const int16_t *)act;
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
