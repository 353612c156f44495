/* W8A8 product with NEON.  With the int8 matrix-multiply extension, SMMLA
 * multiplies a 2-row x 8 block of weights with a 2-token x 8 block of
 * activations into a 2 x 2 block of int32 sums (32 products per
 * instruction): a 4 x 4 tile is 4 of them per 8 columns.  Otherwise SDOT
 * (4 exact int8 products into each int32 lane) where the target has the
 * dot-product extension, else SMULL + SMLAL2 (two products of at most
 * 128 * 127 fit an int16 lane) and SADALP into int32, with a tile of 4 rows
 * x 4 tokens: 16 accumulators, 4 weight and 4 activation registers of the
 * 32. */
#include "pmpd_impl/weights/w8a8/w8a8.h"

#if PMPD_USE_NEON && defined(__aarch64__)
#include <arm_neon.h>

#define W8A8_NEON_TOKEN_BLOCK 64
#define W8A8_NEON_TILE 4

static inline __attribute__((always_inline)) int32x4_t w8a8_neon_dot(int32x4_t acc, int8x16_t w, int8x16_t x)
{
#if PMPD_USE_DOTPROD
    return vdotq_s32(acc, w, x);
#else
    int16x8_t p = vmull_s8(vget_low_s8(w), vget_low_s8(x));
    p = vmlal_high_s8(p, w, x);
    return vpadalq_s16(acc, p);
#endif
}

/* Rows r0..r0+3 (valid below row_end) times tokens t0..t0+nt-1, nt <= 4. */
static inline __attribute__((always_inline)) void w8a8_neon_tile(const pmpd_w8a8_matrix *m, const int8_t *act,
                                                                 size_t r0, size_t row_end, size_t t0, size_t nt,
                                                                 float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k;
    int32x4_t acc[4][W8A8_NEON_TILE];
    size_t i, j, c;
#pragma GCC unroll 4
    for (i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (j = 0; j < nt; j++)
            acc[i][j] = vdupq_n_s32(0);
    for (c = 0; c < k; c += 16) {
        int8x16_t wv[4];
#pragma GCC unroll 4
        for (i = 0; i < 4; i++)
            wv[i] = vld1q_s8(w + i * k + c);
#pragma GCC unroll 4
        for (j = 0; j < nt; j++) {
            int8x16_t a = vld1q_s8(act + (t0 + j) * k + c);
#pragma GCC unroll 4
            for (i = 0; i < 4; i++)
                acc[i][j] = w8a8_neon_dot(acc[i][j], wv[i], a);
        }
    }
    for (i = 0; i < 4 && r0 + i < row_end; i++)
        for (j = 0; j < nt; j++)
            y[(t0 + j) * ldy + r0 + i] = pmpd_w8a8_output(m, r0 + i, vaddvq_s32(acc[i][j]));
}

#if PMPD_USE_I8MM
/* Rows r0..r0+3 times tokens t0..t0+nt-1 (nt <= 4; a missing token of a
 * pair repeats the last one and is not stored). */
static void w8a8_smmla_tile(const pmpd_w8a8_matrix *m, const int8_t *act, size_t r0, size_t row_end, size_t t0,
                            size_t nt, float *y, size_t ldy)
{
    const size_t k = m->padded_cols;
    const int8_t *w = m->weights + r0 * k, *x[4];
    int32x4_t acc[2][2];
    int32_t lanes[4];
    size_t i, j, c;
    for (j = 0; j < 4; j++)
        x[j] = act + (t0 + (j < nt ? j : nt - 1)) * k;
    for (i = 0; i < 2; i++)
        for (j = 0; j < 2; j++)
            acc[i][j] = vdupq_n_s32(0);
    for (c = 0; c < k; c += 8) {
        int8x16_t w01 = vcombine_s8(vld1_s8(w + c), vld1_s8(w + k + c));
        int8x16_t w23 = vcombine_s8(vld1_s8(w + 2 * k + c), vld1_s8(w + 3 * k + c));
        int8x16_t x01 = vcombine_s8(vld1_s8(x[0] + c), vld1_s8(x[1] + c));
        int8x16_t x23 = vcombine_s8(vld1_s8(x[2] + c), vld1_s8(x[3] + c));
        acc[0][0] = vmmlaq_s32(acc[0][0], w01, x01);
        acc[0][1] = vmmlaq_s32(acc[0][1], w01, x23);
        acc[1][0] = vmmlaq_s32(acc[1][0], w23, x01);
        acc[1][1] = vmmlaq_s32(acc[1][1], w23, x23);
    }
    /* Lanes of acc[p][q]: (row 2p, token 2q), (2p, 2q+1), (2p+1, 2q),
     * (2p+1, 2q+1). */
    for (i = 0; i < 2; i++)
        for (j = 0; j < 2; j++) {
            size_t lane;
            vst1q_s32(lanes, acc[i][j]);
            for (lane = 0; lane < 4; lane++) {
                size_t r = r0 + 2 * i + lane / 2, t = 2 * j + lane % 2;
                if (r < row_end && t < nt)
                    y[(t0 + t) * ldy + r] = pmpd_w8a8_output(m, r, lanes[lane]);
            }
        }
}
#endif

PMPD_INTERNAL void pmpd_w8a8_matmul(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin,
                                    size_t row_end, float *y, size_t ldy)
{
    const int8_t *a = (const int8_t *)act;
    size_t b0, r0, t0;
    for (b0 = 0; b0 < n_tokens; b0 += W8A8_NEON_TOKEN_BLOCK) {
        size_t b1 = n_tokens - b0 < W8A8_NEON_TOKEN_BLOCK ? n_tokens : b0 + W8A8_NEON_TOKEN_BLOCK;
        for (r0 = row_begin; r0 < row_end; r0 += 4) {
#if PMPD_USE_I8MM
            /* One token (decode) wastes three quarters of SMMLA: SDOT. */
            if (b1 - b0 > 1) {
                for (t0 = b0; t0 < b1; t0 += W8A8_NEON_TILE)
                    w8a8_smmla_tile(m, a, r0, row_end, t0, b1 - t0 < W8A8_NEON_TILE ? b1 - t0 : W8A8_NEON_TILE, y,
                                    ldy);
                continue;
            }
#endif
            for (t0 = b0; t0 + W8A8_NEON_TILE <= b1; t0 += W8A8_NEON_TILE)
                w8a8_neon_tile(m, a, r0, row_end, t0, W8A8_NEON_TILE, y, ldy);
            for (; t0 < b1; t0++)
                w8a8_neon_tile(m, a, r0, row_end, t0, 1, y, ldy);
        }
    }
}

#undef W8A8_NEON_TOKEN_BLOCK
#undef W8A8_NEON_TILE
#endif
