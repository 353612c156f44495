/* AVX2 any-precision kernels for widths up to 4.  A plane's 32-bit word of
 * a column group, broadcast to every byte lane, holds column j's bit at a
 * fixed position of lane j (the layout's 4x8 transpose), so one AND and one
 * compare spread a plane to bytes; the top k planes fold into 32 codes and
 * one in-lane byte shuffle looks them up in the row's 16-entry int8 table.
 * The GEMV multiplies those int8 weights with int8 activations (maddubs); the GEMM widens the weights
 * to float once per group and reuses them for a tile of input vectors. */
#include "pmpd_impl/precision/anyprec.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <string.h>

#define ANYPREC_AVX2_TOKEN_TILE 4
#if defined(__GNUC__)
#define ANYPREC_AVX2_INLINE static inline __attribute__((always_inline))
#else
#define ANYPREC_AVX2_INLINE static inline
#endif

/* Lane j holds column j: bit j/4 of byte j%4 of the broadcast word. */
static __m256i anyprec_avx2_lane_bit(void)
{
    return _mm256_setr_epi8(1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 32, 64, 64,
                            64, 64, -128, -128, -128, -128);
}

/* The 32 int8 weights of one column group (before the row scale). */
ANYPREC_AVX2_INLINE __m256i anyprec_avx2_group_weights(const unsigned char *group, size_t plane_stride, unsigned bits,
                                          __m256i table)
{
    const __m256i lane_bit = anyprec_avx2_lane_bit();
    __m256i codes = _mm256_setzero_si256();
    unsigned p;
    for (p = 0; p < bits; p++) {
        int32_t word;
        __m256i set;
        memcpy(&word, group + p * plane_stride, sizeof word);
        set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_set1_epi32(word), lane_bit), lane_bit);
        /* codes = 2*codes + (bit set ? 1 : 0); the compare gives -1 where set. */
        codes = _mm256_sub_epi8(_mm256_add_epi8(codes, codes), set);
    }
    return _mm256_shuffle_epi8(table, codes);
}

static __m256i anyprec_avx2_row_table(const pmpd_anyprec_matrix *m, unsigned bits, uint32_t r)
{
    /* Tables of fewer than 16 entries are copied so no read runs past them. */
    int8_t entries[16] = {0};
    memcpy(entries, m->tables[bits] + ((size_t)r << bits), (size_t)1 << bits);
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)entries));
}

static float anyprec_avx2_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One row's contribution of one column group, added to acc. */
ANYPREC_AVX2_INLINE __m256 anyprec_avx2_gemv_step(__m256 acc, const unsigned char *group, size_t plane_stride,
                                                  const unsigned bits, __m256i table, __m256i x, __m256 xs)
{
    __m256i w = anyprec_avx2_group_weights(group, plane_stride, bits, table);
    /* |w| * (x with w's sign): maddubs needs an unsigned operand. */
    __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)),
                                    _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), xs, acc);
}

static const int8_t *anyprec_avx2_group_input(const int8_t *xq, uint32_t g)
{
    return xq + (size_t)g * PMPD_ANYPREC_GROUP;
}

/* Four rows at once: the activation loads are shared and four independent
 * accumulator chains hide the FMA latency. */
ANYPREC_AVX2_INLINE void anyprec_avx2_gemv_four_rows(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                     const float *xscale, float *y, uint32_t r,
                                                     const unsigned bits)
{
    const uint32_t groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    const size_t stride = m->plane_stride, rb = m->row_bytes;
    const unsigned char *row = m->planes + (size_t)r * rb;
    const __m256i t0 = anyprec_avx2_row_table(m, bits, r), t1 = anyprec_avx2_row_table(m, bits, r + 1);
    const __m256i t2 = anyprec_avx2_row_table(m, bits, r + 2), t3 = anyprec_avx2_row_table(m, bits, r + 3);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    uint32_t g;
    for (g = 0; g < groups; g++, row += 4) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)anyprec_avx2_group_input(xq, g));
        const __m256 xs = _mm256_set1_ps(xscale[g]);
        a0 = anyprec_avx2_gemv_step(a0, row, stride, bits, t0, x, xs);
        a1 = anyprec_avx2_gemv_step(a1, row + rb, stride, bits, t1, x, xs);
        a2 = anyprec_avx2_gemv_step(a2, row + 2 * rb, stride, bits, t2, x, xs);
        a3 = anyprec_avx2_gemv_step(a3, row + 3 * rb, stride, bits, t3, x, xs);
    }
    y[r] = anyprec_avx2_sum(a0) * m->scales[bits][r];
    y[r + 1] = anyprec_avx2_sum(a1) * m->scales[bits][r + 1];
    y[r + 2] = anyprec_avx2_sum(a2) * m->scales[bits][r + 2];
    y[r + 3] = anyprec_avx2_sum(a3) * m->scales[bits][r + 3];
}

ANYPREC_AVX2_INLINE void anyprec_avx2_gemv_one_row(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                   const float *xscale, float *y, uint32_t r, const unsigned bits)
{
    const uint32_t groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
    const __m256i table = anyprec_avx2_row_table(m, bits, r);
    __m256 acc = _mm256_setzero_ps();
    uint32_t g;
    for (g = 0; g < groups; g++, row += 4)
        acc = anyprec_avx2_gemv_step(acc, row, m->plane_stride, bits, table,
                                     _mm256_loadu_si256((const __m256i *)(const void *)anyprec_avx2_group_input(xq, g)),
                                     _mm256_set1_ps(xscale[g]));
    y[r] = anyprec_avx2_sum(acc) * m->scales[bits][r];
}

ANYPREC_AVX2_INLINE void anyprec_avx2_gemv_rows(const pmpd_anyprec_matrix *m, const int8_t *xq,
                                                const float *xscale, float *y, uint32_t row_begin,
                                                uint32_t row_end, const unsigned bits)
{
    uint32_t r = row_begin;
    for (; r + 4 <= row_end; r += 4)
        anyprec_avx2_gemv_four_rows(m, xq, xscale, y, r, bits);
    for (; r < row_end; r++)
        anyprec_avx2_gemv_one_row(m, xq, xscale, y, r, bits);
}

PMPD_INTERNAL void pmpd_anyprec_gemv_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    switch (bits) {
    case 1: anyprec_avx2_gemv_rows(m, xq, xscale, y, row_begin, row_end, 1); break;
    case 2: anyprec_avx2_gemv_rows(m, xq, xscale, y, row_begin, row_end, 2); break;
    case 3: anyprec_avx2_gemv_rows(m, xq, xscale, y, row_begin, row_end, 3); break;
    default: anyprec_avx2_gemv_rows(m, xq, xscale, y, row_begin, row_end, 4); break;
    }
}

/* Eight floats of input vector xt from column c, zero past cols. */
static __m256 anyprec_avx2_load_input(const float *xt, uint32_t c, uint32_t cols)
{
    float tail[8] = {0};
    if (c + 8 <= cols)
        return _mm256_loadu_ps(xt + c);
    if (c < cols)
        memcpy(tail, xt + c, (cols - c) * sizeof(float));
    return _mm256_loadu_ps(tail);
}

PMPD_INTERNAL void pmpd_anyprec_gemm_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const float *x,
                                          size_t n, size_t x_stride, float *y, size_t y_stride,
                                          uint32_t row_begin, uint32_t row_end)
{
    const uint32_t cols = m->cols;
    uint32_t r, c0, q;
    size_t t0, t;
    for (r = row_begin; r < row_end; r++) {
        const __m256i table = anyprec_avx2_row_table(m, bits, r);
        const __m256 scale = _mm256_set1_ps(m->scales[bits][r]);
        const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
        for (t0 = 0; t0 < n; t0 += ANYPREC_AVX2_TOKEN_TILE) {
            size_t tile = n - t0 < ANYPREC_AVX2_TOKEN_TILE ? n - t0 : ANYPREC_AVX2_TOKEN_TILE;
            __m256 acc[ANYPREC_AVX2_TOKEN_TILE];
            for (t = 0; t < tile; t++)
                acc[t] = _mm256_setzero_ps();
            for (c0 = 0; c0 < cols; c0 += PMPD_ANYPREC_GROUP) {
                __m256i w8 = anyprec_avx2_group_weights(row + c0 / 8, m->plane_stride, bits, table);
                __m256 w[4];
                w[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm256_castsi256_si128(w8)));
                w[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(_mm256_castsi256_si128(w8), 8)));
                w[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm256_extracti128_si256(w8, 1)));
                w[3] = _mm256_cvtepi32_ps(
                    _mm256_cvtepi8_epi32(_mm_srli_si128(_mm256_extracti128_si256(w8, 1), 8)));
                for (t = 0; t < tile; t++) {
                    const float *xt = x + (t0 + t) * x_stride;
                    for (q = 0; q < 4; q++)
                        acc[t] = _mm256_fmadd_ps(w[q], anyprec_avx2_load_input(xt, c0 + 8 * q, cols), acc[t]);
                }
            }
            for (t = 0; t < tile; t++)
                y[(t0 + t) * y_stride + r] = anyprec_avx2_sum(_mm256_mul_ps(acc[t], scale));
        }
    }
}

#undef ANYPREC_AVX2_TOKEN_TILE
#undef ANYPREC_AVX2_INLINE
#endif
