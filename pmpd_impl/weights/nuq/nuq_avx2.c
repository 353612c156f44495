/* NUQ product with AVX2: each group of 8 codes is widened to 8 int32
 * lanes and turned into floats by one vpermps from the level magnitudes
 * held in a register (vpermps reads only a lane's low 3 bits, so bits
 * above need no mask), and the code's sign bit moved to the float's sign
 * and XORed in: 4 bits take the 8 magnitudes and bit 3, 3 bits the 4
 * magnitudes twice and the high plane's bit, 2 bits index the 4 levels
 * (twice) directly.  Floats are multiplied with the rotated input by FMA.
 * A tile is one row x up to 4 tokens: the weights are widened once per
 * tile and used for every token (prefill); for decode it is the GEMV with
 * two accumulators.  The loops over the 4 groups must unroll: left rolled,
 * GCC keeps the group arrays on the stack and the kernel runs 7x slower. */
#include "pmpd_impl/weights/nuq/nuq.h"

#if PMPD_USE_AVX2
#include <immintrin.h>

#define NUQ_AVX2_TILE 4

typedef struct nuq_avx2_levels {
    __m256 a;      /* 4 bits: the 8 magnitudes; 3: the 4 magnitudes twice; 2: the 4 codes' levels twice */
    __m256i sign;  /* the float sign bit in every lane */
} nuq_avx2_levels;

/* The level of code lanes whose sign bit is already at bit 31 of sign. */
static inline __m256 nuq_avx2_signed(const nuq_avx2_levels *l, __m256i code, __m256i sign)
{
    return _mm256_xor_ps(_mm256_permutevar8x32_ps(l->a, code), _mm256_castsi256_ps(sign));
}

static inline float nuq_avx2_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 32 weights of one block as 4 vectors of 8 floats (unscaled levels). */
static inline __attribute__((always_inline)) void nuq_avx2_block(const uint8_t *block, unsigned bits,
                                                                 const nuq_avx2_levels *l, __m256 w[4])
{
    if (bits == 4) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)block);
        __m256i v0 = _mm256_cvtepu8_epi32(b), v1 = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
        __m256i g[4];
        int k;
        g[0] = v0;
        g[1] = v1;
        g[2] = _mm256_srli_epi32(v0, 4);
        g[3] = _mm256_srli_epi32(v1, 4);
#pragma GCC unroll 4
        for (k = 0; k < 4; k++)
            w[k] = nuq_avx2_signed(l, g[k], _mm256_and_si256(_mm256_slli_epi32(g[k], 28), l->sign));
    } else {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)block));
        __m256i g[4];
        int k;
        g[0] = v;
        g[1] = _mm256_srli_epi32(v, 2);
        g[2] = _mm256_srli_epi32(v, 4);
        g[3] = _mm256_srli_epi32(v, 6);
        if (bits == 2) {
#pragma GCC unroll 4
            for (k = 0; k < 4; k++)
                w[k] = _mm256_permutevar8x32_ps(l->a, g[k]);
        } else {
            uint32_t high32 = (uint32_t)block[8] | (uint32_t)block[9] << 8 | (uint32_t)block[10] << 16 |
                              (uint32_t)block[11] << 24;
            const __m256i high = _mm256_set1_epi32((int)high32);
            /* Lane j of group k takes bit 4 j + k of the high plane. */
            const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
#pragma GCC unroll 4
            for (k = 0; k < 4; k++) {
                __m256i h = _mm256_srlv_epi32(high, _mm256_add_epi32(shifts, _mm256_set1_epi32(k)));
                w[k] = nuq_avx2_signed(l, g[k], _mm256_slli_epi32(h, 31));
            }
        }
    }
}

/* Row r times tokens t0..t0+nt-1 (nt <= 4). */
static inline __attribute__((always_inline)) void nuq_avx2_tile(const pmpd_nuq_matrix *m, const nuq_avx2_levels *l,
                                                                unsigned bits, const float *xr, size_t r, size_t t0,
                                                                size_t nt, float *y, size_t ldy)
{
    const uint8_t *row = m->index + r * m->row_bytes;
    const size_t block_bytes = 4 * (size_t)bits, stride = m->padded;
    __m256 acc[NUQ_AVX2_TILE][2];
    size_t b, t, c;
#pragma GCC unroll 4
    for (t = 0; t < nt; t++)
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (b = 0, c = 0; c < m->padded; b += block_bytes, c += PMPD_NUQ_BLOCK) {
        __m256 w[4];
        nuq_avx2_block(row + b, bits, l, w);
#pragma GCC unroll 4
        for (t = 0; t < nt; t++) {
            const float *x = xr + (t0 + t) * stride + c;
            acc[t][0] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), acc[t][1]);
            acc[t][0] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), acc[t][1]);
        }
    }
    for (t = 0; t < nt; t++)
        y[(t0 + t) * ldy + r] = m->scale[r] * nuq_avx2_sum(_mm256_add_ps(acc[t][0], acc[t][1]));
}

/* One width's loop, with bits a constant after inlining. */
static inline __attribute__((always_inline)) void nuq_avx2_rows(const pmpd_nuq_matrix *m, unsigned bits,
                                                                const float *xr, size_t n_tokens, size_t row_begin,
                                                                size_t row_end, float *y, size_t ldy)
{
    const float *lv = pmpd_nuq_levels(bits);
    nuq_avx2_levels l;
    size_t r, t0;
    l.sign = _mm256_set1_epi32(INT32_MIN);
    if (bits == 4)
        l.a = _mm256_loadu_ps(lv);
    else /* 3 bits: the magnitudes; 2 bits: the whole table */
        l.a = _mm256_setr_ps(lv[0], lv[1], lv[2], lv[3], lv[0], lv[1], lv[2], lv[3]);
    for (r = row_begin; r < row_end; r++) {
        for (t0 = 0; t0 + NUQ_AVX2_TILE <= n_tokens; t0 += NUQ_AVX2_TILE)
            nuq_avx2_tile(m, &l, bits, xr, r, t0, NUQ_AVX2_TILE, y, ldy);
        switch (n_tokens - t0) {
        case 3: nuq_avx2_tile(m, &l, bits, xr, r, t0, 3, y, ldy); break;
        case 2: nuq_avx2_tile(m, &l, bits, xr, r, t0, 2, y, ldy); break;
        case 1: nuq_avx2_tile(m, &l, bits, xr, r, t0, 1, y, ldy); break;
        default: break;
        }
    }
}

PMPD_INTERNAL void pmpd_nuq_matmul(const pmpd_nuq_matrix *m, const float *xr, size_t n_tokens, size_t row_begin,
                                   size_t row_end, float *y, size_t ldy)
{
    if (m->bits == 4)
        nuq_avx2_rows(m, 4, xr, n_tokens, row_begin, row_end, y, ldy);
    else if (m->bits == 3)
        nuq_avx2_rows(m, 3, xr, n_tokens, row_begin, row_end, y, ldy);
    else
        nuq_avx2_rows(m, 2, xr, n_tokens, row_begin, row_end, y, ldy);
}

#undef NUQ_AVX2_TILE
#endif
