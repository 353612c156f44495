/* W8A8 product with AVX-VNNI, the 256-bit VPDPBUSD of AVX2 cores without
 * AVX-512 (Alder Lake and its N-series board chips, Zen 5 in AVX2 builds):
 * 32 exact products of unsigned activation bytes (q + 128) and signed
 * weights per instruction, four of them summed into each int32 lane, where
 * plain AVX2 needs a widening step, VPMADDWD and an add per 16.  The +128
 * adds 128 * (the row's weight sum) to every output, taken back out with
 * the sum of each row computed once per row block, as the AVX-512 kernel
 * does.  A tile is 4 rows x 2 tokens: 8 accumulators, 4 weight registers
 * and the activation fit the 16 ymm registers. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_AVXVNNI && !PMPD_USE_AVX512
#include <immintrin.h>

#include "pmpd_impl/weights/w8a8/w8a8_x86.h"

/* The activations of 64 tokens as bytes: 128 KiB at K = 2048, in L2. */
#define W8A8_VNNI_TOKEN_BLOCK 64
#define W8A8_VNNI_TILE 2

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 2;
 * forced inline with a constant nt so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void w8a8_vnni_tile(const pmpd_w8a8_matrix *m, const uint8_t *act,
                                                                 const int32_t bias[4], size_t r0, size_t row_end,
                                                                 size_t t0, size_t nt, float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    __m256i acc[4][W8A8_VNNI_TILE];
    size_t i, j, c;
#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
#pragma GCC unroll 2
        for (j = 0; j < nt; j++)
            acc[i][j] = _mm256_setzero_si256();
    for (c = 0; c < k; c += 32) {
        __m256i wv[4];
#pragma GCC unroll 4
        for (i = 0; i < 4; i++)
            wv[i] = _mm256_loadu_si256((const __m256i *)(const void *)(w + i * k + c));
#pragma GCC unroll 2
        for (j = 0; j < nt; j++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(act + (t0 + j) * k + c));
#pragma GCC unroll 4
            for (i = 0; i < 4; i++)
                acc[i][j] = _mm256_dpbusd_avx_epi32(acc[i][j], a, wv[i]);
        }
    }
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, pmpd_w8a8_sum256(acc[i][j]) - bias[i]);
}

/* 128 times the weight sum of each of the 4 rows from r0. */
static void w8a8_vnni_bias(const pmpd_w8a8_matrix *m, size_t r0, int32_t bias[4])
{
    const __m256i ones = _mm256_set1_epi8(1);
    size_t i, c;
    for (i = 0; i < 4; i++) {
        __m256i sum = _mm256_setzero_si256();
        for (c = 0; c < m->padded_cols; c += 32)
            sum = _mm256_dpbusd_avx_epi32(
                sum, ones, _mm256_loadu_si256((const __m256i *)(const void *)(m->weights + (r0 + i) * m->padded_cols + c)));
        bias[i] = 128 * pmpd_w8a8_sum256(sum);
    }
}

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const uint8_t *a = (const uint8_t *)act;
    int32_t bias[4];
    size_t b0, r0, t0;
    for (b0 = 0; b0 < n_tokens; b0 += W8A8_VNNI_TOKEN_BLOCK) {
        size_t b1 = n_tokens - b0 < W8A8_VNNI_TOKEN_BLOCK ? n_tokens : b0 + W8A8_VNNI_TOKEN_BLOCK;
        for (r0 = row_begin; r0 < row_end; r0 += 4) {
            w8a8_vnni_bias(m, r0, bias);
            for (t0 = b0; t0 + W8A8_VNNI_TILE <= b1; t0 += W8A8_VNNI_TILE)
                w8a8_vnni_tile(m, a, bias, r0, row_end, t0, W8A8_VNNI_TILE, y, ldy);
            if (t0 < b1)
                w8a8_vnni_tile(m, a, bias, r0, row_end, t0, 1, y, ldy);
        }
    }
}

#undef W8A8_VNNI_TOKEN_BLOCK
#undef W8A8_VNNI_TILE
#endif
