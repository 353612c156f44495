/* W8A8 product with AVX-512 VNNI: vpdpbusd multiplies 64 unsigned
 * activation bytes (q + 128) with 64 signed weights and adds each 4
 * products into an int32 lane, 64 exact products per instruction with no
 * int16 step.  The +128 adds 128 * (the row's weight sum) to every output,
 * taken back out with the sum of each row computed once per row block.
 * A tile is 4 rows x 4 tokens: 16 accumulators of 32 zmm registers. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVX512 && !PMPD_USE_AMX
#include <immintrin.h>

/* The activations of 64 tokens as bytes: 256 KiB at K = 4096, in L2. */
#define W8A8_AVX512_TOKEN_BLOCK 64
#define W8A8_AVX512_TILE 4

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 4. */
static inline __attribute__((always_inline)) void w8a8_avx512_tile(const pmpd_w8a8_matrix *m, const uint8_t *act,
                                                                   const int32_t bias[4], size_t r0, size_t row_end,
                                                                   size_t t0, size_t nt, float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    __m512i acc[4][W8A8_AVX512_TILE];
    size_t i, j, c;
#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (j = 0; j < nt; j++)
            acc[i][j] = _mm512_setzero_si512();
    for (c = 0; c < k; c += 64) {
        __m512i wv[4];
#pragma GCC unroll 4
        for (i = 0; i < 4; i++)
            wv[i] = _mm512_loadu_si512((const void *)(w + i * k + c));
#pragma GCC unroll 4
        for (j = 0; j < nt; j++) {
            __m512i a = _mm512_loadu_si512((const void *)(act + (t0 + j) * k + c));
#pragma GCC unroll 4
            for (i = 0; i < 4; i++)
                acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, wv[i]);
        }
    }
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, _mm512_reduce_add_epi32(acc[i][j]) - bias[i]);
}

/* 128 times the weight sum of each of the 4 rows from r0. */
static void w8a8_avx512_bias(const pmpd_w8a8_matrix *m, size_t r0, int32_t bias[4])
{
    const __m512i ones = _mm512_set1_epi8(1);
    size_t i, c;
    for (i = 0; i < 4; i++) {
        __m512i sum = _mm512_setzero_si512();
        for (c = 0; c < m->padded_cols; c += 64)
            sum = _mm512_dpbusd_epi32(sum, ones, _mm512_loadu_si512((const void *)(m->weights + (r0 + i) * m->padded_cols + c)));
        bias[i] = 128 * _mm512_reduce_add_epi32(sum);
    }
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const uint8_t *a = (const uint8_t *)act;
    int32_t bias[4];
    size_t b0, r0, t0;
    for (b0 = 0; b0 < n_tokens; b0 += W8A8_AVX512_TOKEN_BLOCK) {
        size_t b1 = n_tokens - b0 < W8A8_AVX512_TOKEN_BLOCK ? n_tokens : b0 + W8A8_AVX512_TOKEN_BLOCK;
        for (r0 = row_begin; r0 < row_end; r0 += 4) {
            w8a8_avx512_bias(m, r0, bias);
            for (t0 = b0; t0 + W8A8_AVX512_TILE <= b1; t0 += W8A8_AVX512_TILE)
                w8a8_avx512_tile(m, a, bias, r0, row_end, t0, W8A8_AVX512_TILE, y, ldy);
            for (; t0 < b1; t0++)
                w8a8_avx512_tile(m, a, bias, r0, row_end, t0, 1, y, ldy);
        }
    }
}

#undef W8A8_AVX512_TOKEN_BLOCK
#undef W8A8_AVX512_TILE
#endif
