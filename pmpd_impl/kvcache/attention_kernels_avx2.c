/* AVX2+FMA versions of the attention kernels (attention_kernels.h).  Lanes
 * come in multiples of four, so each group of four query heads is one
 * 128-bit vector; the exponential runs on 256-bit vectors. */
#include "pmpd_impl/kvcache/attention_kernels.h"

#if PMPD_USE_AVX2
#include <immintrin.h>
#include <math.h>

void pmpd_kv_row_scores_avx2(const float *qt, uint32_t lanes, uint32_t dim, const float *rows, size_t stride,
                             size_t n, float *scores, float *max)
{
    size_t t;
    uint32_t d, l;
    for (t = 0; t < n; t++) {
        const float *row = rows + t * stride;
        for (l = 0; l < lanes; l += 4) {
            __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps(), s;
            for (d = 0; d + 1 < dim; d += 2) {
                a0 = _mm_fmadd_ps(_mm_loadu_ps(qt + d * lanes + l), _mm_set1_ps(row[d]), a0);
                a1 = _mm_fmadd_ps(_mm_loadu_ps(qt + (d + 1) * lanes + l), _mm_set1_ps(row[d + 1]), a1);
            }
            if (d < dim)
                a0 = _mm_fmadd_ps(_mm_loadu_ps(qt + d * lanes + l), _mm_set1_ps(row[d]), a0);
            s = _mm_add_ps(a0, a1);
            _mm_storeu_ps(scores + t * lanes + l, s);
            _mm_storeu_ps(max + l, _mm_max_ps(_mm_loadu_ps(max + l), s));
        }
    }
}

/* Eight rows per pass over the accumulator: each accumulator vector is
 * loaded and stored once per eight rows instead of once per row. */
#define PQ_AVX2_ROW_BLOCK 8

void pmpd_kv_row_accumulate_avx2(const float *weights, uint32_t lanes, uint32_t dim, const float *rows,
                                 size_t stride, size_t n, float *acc)
{
    size_t first, t;
    uint32_t d, l;
    for (first = 0; first < n; first += PQ_AVX2_ROW_BLOCK) {
        size_t count = n - first < PQ_AVX2_ROW_BLOCK ? n - first : PQ_AVX2_ROW_BLOCK;
        const float *block = rows + first * stride;
        for (l = 0; l < lanes; l += 4) {
            __m128 w[PQ_AVX2_ROW_BLOCK];
            for (t = 0; t < count; t++)
                w[t] = _mm_loadu_ps(weights + (first + t) * lanes + l);
            for (d = 0; d < dim; d++) {
                __m128 a = _mm_loadu_ps(acc + d * lanes + l);
                for (t = 0; t < count; t++)
                    a = _mm_fmadd_ps(w[t], _mm_set1_ps(block[t * stride + d]), a);
                _mm_storeu_ps(acc + d * lanes + l, a);
            }
        }
    }
}

#undef PQ_AVX2_ROW_BLOCK

/* exp(x) for x <= 0: x = k ln2 + r with |r| <= ln2/2, a degree-6 polynomial
 * for e^r, and 2^k built in the exponent field.  Inputs below -87 are
 * clamped there (their weight, < 2^-125, is negligible next to the maximum's 1). */
static __m256 pq_avx2_exp(__m256 x)
{
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 k, r, p;
    __m256i pow2;
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(k, ln2_hi, x);
    r = _mm256_fnmadd_ps(k, ln2_lo, r);
    p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}

void pmpd_kv_exp_avx2(float *x, uint32_t lanes, size_t n, const float *max, float *sum)
{
    size_t t;
    uint32_t l;
    if (lanes == 4) {
        /* Two tokens per 256-bit vector. */
        __m128 m4 = _mm_loadu_ps(max);
        __m256 m = _mm256_set_m128(m4, m4), s = _mm256_setzero_ps();
        __m128 tail;
        for (t = 0; t + 1 < n; t += 2) {
            __m256 e = pq_avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(x + t * 4), m));
            _mm256_storeu_ps(x + t * 4, e);
            s = _mm256_add_ps(s, e);
        }
        tail = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        if (t < n) {
            __m128 e = _mm256_castps256_ps128(
                pq_avx2_exp(_mm256_castps128_ps256(_mm_sub_ps(_mm_loadu_ps(x + t * 4), m4))));
            _mm_storeu_ps(x + t * 4, e);
            tail = _mm_add_ps(tail, e);
        }
        _mm_storeu_ps(sum, _mm_add_ps(_mm_loadu_ps(sum), tail));
        return;
    }
    for (t = 0; t < n; t++)
        for (l = 0; l < lanes; l += 4) {
            __m128 e = _mm256_castps256_ps128(
                pq_avx2_exp(_mm256_castps128_ps256(_mm_sub_ps(_mm_loadu_ps(x + t * lanes + l), _mm_loadu_ps(max + l)))));
            _mm_storeu_ps(x + t * lanes + l, e);
            _mm_storeu_ps(sum + l, _mm_add_ps(_mm_loadu_ps(sum + l), e));
        }
}

void pmpd_kv_f16_to_f32_avx2(const uint16_t *src, size_t n, float *dst)
{
#if defined(__F16C__)
    size_t i;
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    pmpd_kv_f16_to_f32_scalar(src + i, n - i, dst + i);
#else
    pmpd_kv_f16_to_f32_scalar(src, n, dst);
#endif
}

void pmpd_pq_lut_avx2(const pmpd_pq_codebook *book, const float *qt, uint32_t lanes, float *lut)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++) {
        const float *q_sub = qt + (size_t)s * lay->sub_dim * lanes;
        for (c = 0; c < lay->n_centroids; c++) {
            const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
            float *out = lut + ((size_t)s * lay->n_centroids + c) * lanes;
            for (l = 0; l < lanes; l += 4) {
                __m128 a = _mm_mul_ps(_mm_loadu_ps(q_sub + l), _mm_set1_ps(centroid[0]));
                for (j = 1; j < lay->sub_dim; j++)
                    a = _mm_fmadd_ps(_mm_loadu_ps(q_sub + j * lanes + l), _mm_set1_ps(centroid[j]), a);
                _mm_storeu_ps(out + l, a);
            }
        }
    }
}

void pmpd_pq_scores_avx2(const float *lut, const pmpd_pq_layout *layout, uint32_t lanes, const uint8_t *codes,
                         size_t n, float *scores, float *max)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    for (t = 0; t < n; t++) {
        const uint8_t *code = codes + t * layout->code_bytes;
        for (l = 0; l < lanes; l += 4) {
            const float *table = lut + l;
            __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps(), sum;
            for (s = 0; s + 1 < n_sub; s += 2) {
                /* A pair of subspaces: two bytes, or the two nibbles of one. */
                uint32_t c0 = layout->packed ? code[s / 2] & 15u : code[s];
                uint32_t c1 = layout->packed ? (uint32_t)code[s / 2] >> 4 : code[s + 1];
                a0 = _mm_add_ps(a0, _mm_loadu_ps(table + s * row + (size_t)c0 * lanes));
                a1 = _mm_add_ps(a1, _mm_loadu_ps(table + (s + 1) * row + (size_t)c1 * lanes));
            }
            if (s < n_sub)
                a0 = _mm_add_ps(a0, _mm_loadu_ps(table + s * row + (size_t)pmpd_pq_code(layout, code, s) * lanes));
            sum = _mm_add_ps(a0, a1);
            _mm_storeu_ps(scores + t * lanes + l, sum);
            _mm_storeu_ps(max + l, _mm_max_ps(_mm_loadu_ps(max + l), sum));
        }
    }
}

void pmpd_pq_bins_avx2(const float *weights, uint32_t lanes, const pmpd_pq_layout *layout, const uint8_t *codes,
                       size_t n, float *bins)
{
    size_t t, row = (size_t)layout->n_centroids * lanes;
    uint32_t s, l, n_sub = layout->n_sub;
    for (t = 0; t < n; t++) {
        const uint8_t *code = codes + t * layout->code_bytes;
        for (l = 0; l < lanes; l += 4) {
            __m128 w = _mm_loadu_ps(weights + t * lanes + l);
            for (s = 0; s < n_sub; s++) {
                float *bin = bins + s * row + (size_t)pmpd_pq_code(layout, code, s) * lanes + l;
                _mm_storeu_ps(bin, _mm_add_ps(_mm_loadu_ps(bin), w));
            }
        }
    }
}

void pmpd_pq_bins_times_codebook_avx2(const float *bins, const pmpd_pq_codebook *book, uint32_t lanes, float *acc)
{
    const pmpd_pq_layout *lay = &book->layout;
    uint32_t s, c, j, l;
    for (s = 0; s < lay->n_sub; s++)
        for (l = 0; l < lanes; l += 4) {
            float *out = acc + (size_t)s * lay->sub_dim * lanes + l;
            __m128 a[4];
            for (j = 0; j < lay->sub_dim; j++)
                a[j] = _mm_loadu_ps(out + j * lanes);
            for (c = 0; c < lay->n_centroids; c++) {
                const float *centroid = book->centroids + ((size_t)s * lay->n_centroids + c) * lay->sub_dim;
                __m128 bin = _mm_loadu_ps(bins + ((size_t)s * lay->n_centroids + c) * lanes + l);
                for (j = 0; j < lay->sub_dim; j++)
                    a[j] = _mm_fmadd_ps(bin, _mm_set1_ps(centroid[j]), a[j]);
            }
            for (j = 0; j < lay->sub_dim; j++)
                _mm_storeu_ps(out + j * lanes, a[j]);
        }
}

/* Squared distances from x to centroids [c, c + 8), summed over j in order
 * with separate multiply and add, exactly like the scalar loop. */
static __m256 pq_avx2_distances(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x,
                                uint32_t c)
{
    __m256 diff = _mm256_sub_ps(_mm256_loadu_ps(columns + c), _mm256_set1_ps(x[0]));
    __m256 d = _mm256_mul_ps(diff, diff);
    uint32_t j;
    for (j = 1; j < sub_dim; j++) {
        diff = _mm256_sub_ps(_mm256_loadu_ps(columns + j * n_centroids + c), _mm256_set1_ps(x[j]));
        d = _mm256_add_ps(d, _mm256_mul_ps(diff, diff));
    }
    return d;
}

/* Keeps, per lane, the first strict minimum. */
static void pq_avx2_keep_closer(__m256 d, __m256i index, __m256 *best, __m256i *best_index)
{
    __m256 closer = _mm256_cmp_ps(d, *best, _CMP_LT_OQ);
    *best = _mm256_blendv_ps(*best, d, closer);
    *best_index =
        _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*best_index), _mm256_castsi256_ps(index), closer));
}

/* Sixteen centroids per step in two independent chains (the compare-blend
 * chain, not arithmetic, limits the search); the 16 lanes are then reduced
 * by (distance, index), so ties go to the lowest index as in the scalar
 * search. */
uint32_t pmpd_pq_nearest_avx2(const float *columns, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    __m256 best[2];
    __m256i best_index[2], index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    float distance[16];
    int32_t position[16];
    uint32_t c, j, result;
    float result_distance;
    if (n_centroids % 16 != 0)
        return pmpd_pq_nearest_scalar(columns, n_centroids, sub_dim, x);
    best[0] = best[1] = _mm256_set1_ps(INFINITY);
    best_index[0] = best_index[1] = _mm256_setzero_si256();
    for (c = 0; c < n_centroids; c += 16) {
        pq_avx2_keep_closer(pq_avx2_distances(columns, n_centroids, sub_dim, x, c), index, &best[0], &best_index[0]);
        index = _mm256_add_epi32(index, eight);
        pq_avx2_keep_closer(pq_avx2_distances(columns, n_centroids, sub_dim, x, c + 8), index, &best[1],
                            &best_index[1]);
        index = _mm256_add_epi32(index, eight);
    }
    _mm256_storeu_ps(distance, best[0]);
    _mm256_storeu_ps(distance + 8, best[1]);
    _mm256_storeu_si256((__m256i *)(void *)position, best_index[0]);
    _mm256_storeu_si256((__m256i *)(void *)(position + 8), best_index[1]);
    result = (uint32_t)position[0];
    result_distance = distance[0];
    for (j = 1; j < 16; j++)
        if (distance[j] < result_distance || (distance[j] == result_distance && (uint32_t)position[j] < result)) {
            result = (uint32_t)position[j];
            result_distance = distance[j];
        }
    return result;
}

#else
typedef int pq_attention_kernels_avx2_not_compiled;
#endif
