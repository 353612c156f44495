/* AVX-512 (VBMI) 8-bit key tables (pq_lut8.h).  A subspace's 256-byte
 * table for one query lane is four registers; VPERMI2B looks the block's
 * 64 codes up in the lower and the upper half (the codes' low seven bits)
 * and the top bit of each code picks between the two.  Bytes are summed
 * into 16-bit counters, even and odd tokens apart, so one query lane costs
 * six operations per subspace and 64 tokens where the float path loads
 * and adds once per token.  The maximum comes from the byte sums, not from
 * another pass over the scores. */
#include "pmpd_impl/kvcache/pq_lut8.h"

#if PMPD_USE_AVX512
#include <immintrin.h>
#include <math.h>

#if defined(__GNUC__)
#define LUT8_INLINE static inline __attribute__((always_inline))
#else
#define LUT8_INLINE static inline
#endif

/* Sixteen centroids' q . c from their columns (column[j * nc]), starting
 * from x (or from the first product where x is NULL), in dimension order. */
LUT8_INLINE __m512 lut8_dot(const __m512 *q, const float *column, uint32_t nc, const __m512 *x, const uint32_t sd)
{
    __m512 sum = x ? _mm512_fmadd_ps(q[0], _mm512_loadu_ps(column), *x) : _mm512_mul_ps(q[0], _mm512_loadu_ps(column));
    uint32_t j;
    for (j = 1; j < sd; j++)
        sum = _mm512_fmadd_ps(q[j], _mm512_loadu_ps(column + j * nc), sum);
    return sum;
}

/* Lane k's sd query values of subspace s, each times by. */
LUT8_INLINE void lut8_query(const float *qt, uint32_t lanes, uint32_t lane, uint32_t s, float by, __m512 *q,
                            const uint32_t sd)
{
    uint32_t j;
    for (j = 0; j < sd; j++)
        q[j] = _mm512_set1_ps(qt[((size_t)s * sd + j) * lanes + lane] * by);
}

/* The least and largest T of lane k, and what they make of its minimum,
 * offset and range. */
#define LUT8_RANGE_LANE(k)                                                                         \
    do {                                                                                           \
        __m512 x_ = lut8_dot(q##k, points + c, stride, NULL, sd);                                  \
        low##k = _mm512_min_ps(low##k, x_);                                                        \
        high##k = _mm512_max_ps(high##k, x_);                                                      \
    } while (0)
#define LUT8_RANGE_END(k)                                                                          \
    do {                                                                                           \
        float lo_ = _mm512_reduce_min_ps(low##k), hi_ = _mm512_reduce_max_ps(high##k);            \
        lut->minimum[(size_t)s * lanes + l + k] = lo_;                                             \
        lut->offset[l + k] += lo_;                                                                 \
        range[k] = hi_ - lo_ > range[k] ? hi_ - lo_ : range[k];                                    \
    } while (0)

/* Lanes [l, l + 4): each subspace's minimum of T (over the points of
 * pmpd_pq_lut8_range_points), the offsets, steps and scales.  sd is a constant where this is inlined; the four lanes are
 * written out, so every vector stays in a register. */
LUT8_INLINE void lut8_ranges4(const pmpd_pq_layout *lay, const float *qt, uint32_t lanes, uint32_t l,
                              const pmpd_pq_lut8 *lut, float scale[4], const uint32_t sd)
{
    float range[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t s, c, k;
    for (k = 0; k < 4; k++)
        lut->offset[l + k] = 0.0f;
    for (s = 0; s < lay->n_sub; s++) {
        uint32_t count, stride;
        const float *points = pmpd_pq_lut8_range_points(lut, lay, s, &count, &stride);
        __m512 q0[4], q1[4], q2[4], q3[4];
        __m512 low0 = _mm512_set1_ps(INFINITY), low1 = low0, low2 = low0, low3 = low0;
        __m512 high0 = _mm512_set1_ps(-INFINITY), high1 = high0, high2 = high0, high3 = high0;
        lut8_query(qt, lanes, l, s, 1.0f, q0, sd);
        lut8_query(qt, lanes, l + 1, s, 1.0f, q1, sd);
        lut8_query(qt, lanes, l + 2, s, 1.0f, q2, sd);
        lut8_query(qt, lanes, l + 3, s, 1.0f, q3, sd);
        for (c = 0; c < count; c += 16) {
            LUT8_RANGE_LANE(0);
            LUT8_RANGE_LANE(1);
            LUT8_RANGE_LANE(2);
            LUT8_RANGE_LANE(3);
        }
        LUT8_RANGE_END(0);
        LUT8_RANGE_END(1);
        LUT8_RANGE_END(2);
        LUT8_RANGE_END(3);
    }
    for (k = 0; k < 4; k++) {
        scale[k] = range[k] > 0.0f ? 255.0f / range[k] : 0.0f;
        lut->step[l + k] = range[k] / 255.0f;
    }
}
#undef LUT8_RANGE_LANE
#undef LUT8_RANGE_END

/* Sixteen bytes as 32-bit numbers: x capped at 255 (NaN stays NaN and
 * converts to a negative number), truncated; zeros past the centroids. */
LUT8_INLINE __m512i lut8_bytes16(const __m512 *q, __m512 bias, const float *column, uint32_t c, uint32_t nc,
                                 const uint32_t sd)
{
    if (c >= nc)
        return _mm512_setzero_si512();
    return _mm512_cvttps_epi32(_mm512_min_ps(_mm512_set1_ps(255.0f), lut8_dot(q, column + c, nc, &bias, sd)));
}

/* Lane l's bytes, 64 entries of a table per store: four vectors of 32-bit
 * bytes packed with signed saturation to words, then to unsigned bytes
 * (negative numbers to 0), and the packs' 128-bit interleave undone by
 * one permutation. */
LUT8_INLINE void lut8_bytes(const pmpd_pq_layout *lay, const float *columns, const float *qt, uint32_t lanes,
                            uint32_t l, const pmpd_pq_lut8 *lut, float scale, const uint32_t sd)
{
    const uint32_t nc = lay->n_centroids;
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    uint32_t s, c;
    for (s = 0; s < lay->n_sub; s++) {
        const float *column = columns + (size_t)s * sd * nc;
        const __m512 bias = _mm512_set1_ps(fmaf(-lut->minimum[(size_t)s * lanes + l], scale, 0.5f));
        uint8_t *table = lut->table + ((size_t)s * lanes + l) * 256;
        __m512 q[4];
        lut8_query(qt, lanes, l, s, scale, q, sd);
        for (c = 0; c < 256; c += 64) {
            __m512i v0 = lut8_bytes16(q, bias, column, c, nc, sd), v1 = lut8_bytes16(q, bias, column, c + 16, nc, sd);
            __m512i v2 = lut8_bytes16(q, bias, column, c + 32, nc, sd), v3 = lut8_bytes16(q, bias, column, c + 48, nc, sd);
            __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(v0, v1), _mm512_packus_epi32(v2, v3));
            _mm512_storeu_si512(table + c, _mm512_permutexvar_epi32(order, bytes));
        }
    }
}

LUT8_INLINE void lut8_build(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes, const pmpd_pq_lut8 *lut,
                            const uint32_t sd)
{
    uint32_t l;
    for (l = 0; l < lanes; l += 4) {
        float scale[4];
        uint32_t k;
        lut8_ranges4(&book->layout, qt, lanes, l, lut, scale, sd);
        for (k = 0; k < 4; k++)
            lut8_bytes(&book->layout, lut->columns, qt, lanes, l + k, lut, scale[k], sd);
    }
}

void pmpd_pq_lut8_build_avx512(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes,
                               const pmpd_pq_lut8 *lut)
{
    if (book->layout.sub_dim == 2)
        lut8_build(book, qt, lanes, lut, 2);
    else
        lut8_build(book, qt, lanes, lut, 4);
}

/* One query lane's table of subspace s looked up for a block's 64 codes. */
static inline __m512i lut8_lookup(const uint8_t *table, __m512i codes, __mmask64 upper)
{
    __m512i lower = _mm512_permutex2var_epi8(_mm512_loadu_si512(table), codes, _mm512_loadu_si512(table + 64));
    __m512i higher =
        _mm512_permutex2var_epi8(_mm512_loadu_si512(table + 128), codes, _mm512_loadu_si512(table + 192));
    return _mm512_mask_blend_epi8(upper, lower, higher);
}

/* Four tokens' float scores [t][4 lanes] from 16 byte sums: 16-bit sums
 * widened, times step, plus offset (in that order, as the scalar kernel). */
static inline __m512 lut8_scale(__m256i sums, __m512 step, __m512 offset)
{
    __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(sums)), step);
    return _mm512_add_ps(x, offset);
}

/* Stores 64 tokens' scores of lanes [l, l + 4) from the block's even and
 * odd tokens' sums (even[k] word i: token 2i of lane k).  Interleaving
 * lane pairs by words, then by double words, then even with odd tokens by
 * quad words leaves g[m] with, in each 128-bit chunk c, tokens 16c + 2m
 * and 16c + 2m + 1 of the four lanes. */
static inline void lut8_store_block(const __m512i even[4], const __m512i odd[4], __m512 step, __m512 offset, float *out,
                             size_t lanes)
{
    __m512i e01 = _mm512_unpacklo_epi16(even[0], even[1]), e01h = _mm512_unpackhi_epi16(even[0], even[1]);
    __m512i e23 = _mm512_unpacklo_epi16(even[2], even[3]), e23h = _mm512_unpackhi_epi16(even[2], even[3]);
    __m512i o01 = _mm512_unpacklo_epi16(odd[0], odd[1]), o01h = _mm512_unpackhi_epi16(odd[0], odd[1]);
    __m512i o23 = _mm512_unpacklo_epi16(odd[2], odd[3]), o23h = _mm512_unpackhi_epi16(odd[2], odd[3]);
    __m512i e[4], o[4], g[8];
    int m, h;
    e[0] = _mm512_unpacklo_epi32(e01, e23);
    e[1] = _mm512_unpackhi_epi32(e01, e23);
    e[2] = _mm512_unpacklo_epi32(e01h, e23h);
    e[3] = _mm512_unpackhi_epi32(e01h, e23h);
    o[0] = _mm512_unpacklo_epi32(o01, o23);
    o[1] = _mm512_unpackhi_epi32(o01, o23);
    o[2] = _mm512_unpacklo_epi32(o01h, o23h);
    o[3] = _mm512_unpackhi_epi32(o01h, o23h);
    for (m = 0; m < 4; m++) {
        g[2 * m] = _mm512_unpacklo_epi64(e[m], o[m]);
        g[2 * m + 1] = _mm512_unpackhi_epi64(e[m], o[m]);
    }
    for (m = 0; m < 8; m++)
        for (h = 0; h < 2; h++) {
            /* Chunks 2h and 2h + 1: tokens 32h + 2m, +1 and 32h + 16 + 2m, +1. */
            __m512 x = lut8_scale(h ? _mm512_extracti64x4_epi64(g[m], 1) : _mm512_castsi512_si256(g[m]), step, offset);
            float *first = out + (size_t)(32 * h + 2 * m) * lanes, *second = first + 16 * lanes;
            if (lanes == 4) {
                _mm256_storeu_ps(first, _mm512_castps512_ps256(x));
                _mm256_storeu_ps(second, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
            } else {
                _mm_storeu_ps(first, _mm512_castps512_ps128(x));
                _mm_storeu_ps(first + lanes, _mm512_extractf32x4_ps(x, 1));
                _mm_storeu_ps(second, _mm512_extractf32x4_ps(x, 2));
                _mm_storeu_ps(second + lanes, _mm512_extractf32x4_ps(x, 3));
            }
        }
}

/* One subspace of a block for the quad of lanes: lane k's table (at
 * table + 256k) looked up for the block's 64 codes.  The odd tokens'
 * bytes (high bytes of the words) are summed apart, in sums[4 + k]; the
 * even ones are left in the low bytes of whole-word sums, sums[k], from
 * which the odd sums times 256 are taken off at the end (mod 2^16, exact:
 * an even token's sum fits 16 bits), which saves masking every lookup. */
#define LUT8_LANE(k)                                                                               \
    do {                                                                                           \
        __m512i v_ = lut8_lookup(table + (k) * 256, code, upper);                                  \
        sums[k] = _mm512_add_epi16(sums[k], v_);                                                   \
        sums[4 + k] = _mm512_add_epi16(sums[4 + k], _mm512_srli_epi16(v_, 8));                     \
    } while (0)
LUT8_INLINE void lut8_subspace(const uint8_t *table, const uint8_t *codes, __m512i sums[8])
{
    __m512i code = _mm512_loadu_si512(codes);
    __mmask64 upper = _mm512_movepi8_mask(code);
    LUT8_LANE(0);
    LUT8_LANE(1);
    LUT8_LANE(2);
    LUT8_LANE(3);
}
#undef LUT8_LANE

/* The block's even and odd sums of lane k, and the running maximum of its
 * first count tokens' sums. */
#define LUT8_FINISH(k)                                                                             \
    do {                                                                                           \
        even[k] = _mm512_sub_epi16(sums[k], _mm512_slli_epi16(sums[4 + k], 8));                    \
        odd[k] = sums[4 + k];                                                                      \
        top[k] = _mm512_max_epu16(top[k], _mm512_max_epu16(_mm512_maskz_mov_epi16(even_valid, even[k]), \
                                                            _mm512_maskz_mov_epi16(odd_valid, odd[k]))); \
    } while (0)

/* max[l] over a lane's tokens from its largest byte sum: float(sum) * step
 * + offset does not decrease as the sum grows, so this is the largest of
 * the scores, the same float (two statements: no contraction to FMA). */
static void lut8_max(const __m512i top, float step, float offset, float *max)
{
    uint16_t words[32];
    uint32_t i, largest = 0;
    float x;
    _mm512_storeu_si512(words, top);
    for (i = 0; i < 32; i++)
        largest = words[i] > largest ? words[i] : largest;
    x = (float)largest * step;
    x = x + offset;
    *max = x > *max ? x : *max;
}

void pmpd_pq_lut8_scores_avx512(const pmpd_pq_lut8 *lut, const pmpd_pq_layout *layout, uint32_t lanes,
                                const uint8_t *codes, size_t n, float *scores, float *max)
{
    const size_t n_sub = layout->n_sub, block_bytes = n_sub * PMPD_PQ_BLOCK;
    size_t l, b, s, t;
    int k;
    if (n == 0)
        return;
    for (l = 0; l < lanes; l += 4) {
        __m512 step = _mm512_broadcast_f32x4(_mm_loadu_ps(lut->step + l));
        __m512 offset = _mm512_broadcast_f32x4(_mm_loadu_ps(lut->offset + l));
        __m512i top[4];
        for (k = 0; k < 4; k++)
            top[k] = _mm512_setzero_si512();
        for (b = 0; b < n; b += PMPD_PQ_BLOCK) {
            const uint8_t *block = codes + b / PMPD_PQ_BLOCK * block_bytes;
            const size_t count = n - b < PMPD_PQ_BLOCK ? n - b : PMPD_PQ_BLOCK;
            /* Words i of the even (token 2i) and odd (2i + 1) sums that are tokens. */
            const __mmask32 even_valid = (__mmask32)(((uint64_t)1 << ((count + 1) / 2)) - 1);
            const __mmask32 odd_valid = (__mmask32)(((uint64_t)1 << (count / 2)) - 1);
            /* The four lanes' sums, in registers. */
            __m512i sums[8], even[4], odd[4];
            for (k = 0; k < 8; k++)
                sums[k] = _mm512_setzero_si512();
            for (s = 0; s < n_sub; s++)
                lut8_subspace(lut->table + (s * lanes + l) * 256, block + s * PMPD_PQ_BLOCK, sums);
            LUT8_FINISH(0);
            LUT8_FINISH(1);
            LUT8_FINISH(2);
            LUT8_FINISH(3);
            if (count == PMPD_PQ_BLOCK) {
                lut8_store_block(even, odd, step, offset, scores + b * lanes + l, lanes);
            } else {
                /* The last, partial block: through a buffer, the valid tokens only. */
                float part[PMPD_PQ_BLOCK * 4];
                lut8_store_block(even, odd, step, offset, part, 4);
                for (t = 0; t < count; t++)
                    _mm_storeu_ps(scores + (b + t) * lanes + l, _mm_loadu_ps(part + t * 4));
            }
        }
        for (k = 0; k < 4; k++)
            lut8_max(top[k], lut->step[l + k], lut->offset[l + k], max + l + k);
    }
}
#undef LUT8_FINISH

#else
typedef int pq_lut8_avx512_not_compiled;
#endif
