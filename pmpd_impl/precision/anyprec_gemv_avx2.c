/* AVX2 any-precision kernels for widths up to 4.  Each plane's 32-bit word
 * of a column group is spread to one byte per column (shuffle + bit test),
 * the bytes of the top k planes are folded into 32 codes, and one in-lane
 * byte shuffle looks the codes up in the row's 16-entry int8 table.  The
 * GEMV multiplies those int8 weights with int8 activations (maddubs); the
 * GEMM widens them to float once per group and reuses them for a tile of
 * input vectors. */
#include "pmpd_impl/precision/anyprec.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <string.h>

#define ANYPREC_AVX2_TOKEN_TILE 4

/* Byte j of the result: byte j/8 of the word (lanes see their own copy). */
static __m256i anyprec_avx2_spread(void)
{
    return _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                            3, 3, 3, 3, 3);
}

static __m256i anyprec_avx2_bit_of_byte(void)
{
    return _mm256_set1_epi64x((long long)0x8040201008040201ULL);
}

/* The 32 int8 weights of one column group (before the row scale). */
static __m256i anyprec_avx2_group_weights(const unsigned char *group, size_t plane_stride, unsigned bits,
                                          __m256i table)
{
    const __m256i spread = anyprec_avx2_spread(), bit = anyprec_avx2_bit_of_byte();
    __m256i codes = _mm256_setzero_si256();
    unsigned p;
    for (p = 0; p < bits; p++) {
        int32_t word;
        __m256i set;
        memcpy(&word, group + p * plane_stride, sizeof word);
        set = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(word), spread), bit);
        /* codes = 2*codes + (bit set ? 1 : 0); cmpeq gives -1 where set. */
        codes = _mm256_sub_epi8(_mm256_add_epi8(codes, codes), _mm256_cmpeq_epi8(set, bit));
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

PMPD_INTERNAL void pmpd_anyprec_gemv_avx2(const pmpd_anyprec_matrix *m, unsigned bits, const int8_t *xq,
                                          const float *xscale, float *y, uint32_t row_begin, uint32_t row_end)
{
    const uint32_t groups = pmpd_anyprec_padded_cols(m->cols) / PMPD_ANYPREC_GROUP;
    const __m256i ones = _mm256_set1_epi16(1);
    uint32_t r, g;
    for (r = row_begin; r < row_end; r++) {
        const __m256i table = anyprec_avx2_row_table(m, bits, r);
        const unsigned char *row = m->planes + (size_t)r * m->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (g = 0; g < groups; g++) {
            __m256i w = anyprec_avx2_group_weights(row + (size_t)g * 4, m->plane_stride, bits, table);
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xq + (size_t)g * PMPD_ANYPREC_GROUP));
            /* |w| * (x with w's sign): maddubs needs an unsigned operand. */
            __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
            __m256i dot = _mm256_madd_epi16(pairs, ones);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(xscale[g]), acc);
        }
        y[r] = anyprec_avx2_sum(acc) * m->scales[bits][r];
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
#endif
