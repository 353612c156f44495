/* Viterbi search over a bitshift trellis (tcq_viterbi.h). */
#include "pmpd_impl/offline/tcq/tcq_viterbi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if PMPD_USE_AVX2
#include <immintrin.h>
#endif

#define TCQ_CHUNK 8

PMPD_INTERNAL pmpd_status pmpd_tcq_search_init(pmpd_tcq_search *search, const pmpd_tcq_trellis *trellis)
{
    const unsigned l = trellis->state_bits, s = trellis->shift, n = trellis->steps;
    const size_t states = (size_t)1 << l;
    memset(search, 0, sizeof *search);
    if (l < 2 || l > 16 || s < 1 || s > 8 || s >= l || n < 1 || (size_t)n * s < l)
        return PMPD_ERR_INVALID_ARGUMENT;
    search->cost = (float *)malloc(states * sizeof(float));
    search->best = (float *)malloc((states >> s) * sizeof(float));
    search->target = (float *)malloc(2 * (size_t)n * sizeof(float));
    search->weight = (float *)malloc(4 * (size_t)n * sizeof(float)); /* and rotated */
    search->back = (uint8_t *)malloc((size_t)n * (states >> s));
    search->path = (uint32_t *)malloc((size_t)n * sizeof(uint32_t));
    search->from = (int32_t *)malloc((states >> s) * sizeof(int32_t));
    if (!search->from || !search->cost || !search->best || !search->target || !search->weight ||
        !search->back || !search->path) {
        pmpd_tcq_search_free(search);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_tcq_search_free(pmpd_tcq_search *search)
{
    free(search->cost);
    free(search->best);
    free(search->target);
    free(search->weight);
    free(search->back);
    free(search->path);
    free(search->from);
    memset(search, 0, sizeof *search);
}

static inline float tcq_distortion(const float *restrict first, const float *restrict second, size_t state,
                                   float t0, float t1, float w0, float w1)
{
    const float a = first[state] - t0, b = second[state] - t1;
    return w0 * a * a + w1 * b * b;
}

/* next[i] = base + the distortion of state first_state + i, i < n (target
 * t, weight w: 2 each).  With AVX2 8 states at a time (FMA: the last bit
 * may differ from the scalar loop's), then the rest. */
static inline void tcq_costs(const pmpd_tcq_trellis *trellis, size_t first_state, const float *t, const float *w,
                             float base, float *restrict next, size_t n)
{
    const float *restrict first = trellis->first + first_state, *restrict second = trellis->second + first_state;
    const float t0 = t[0], t1 = t[1], w0 = w[0], w1 = w[1];
    size_t i = 0;
#if PMPD_USE_AVX2
    for (; i + TCQ_CHUNK <= n; i += TCQ_CHUNK) {
        const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(first + i), _mm256_set1_ps(t0));
        const __m256 b = _mm256_sub_ps(_mm256_loadu_ps(second + i), _mm256_set1_ps(t1));
        const __m256 wb = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(w1), b), b);
        _mm256_storeu_ps(next + i, _mm256_add_ps(_mm256_set1_ps(base),
                                                 _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w0), a), a, wb)));
    }
#endif
    for (; i < n; i++)
        next[i] = base + tcq_distortion(first, second, i, t0, t1, w0, w1);
}

/* best[o] = min(best[o], c[o]), back[o] = d where c won. */
static inline void tcq_min_at(const float *restrict c, float *restrict best, int32_t *restrict back, size_t o,
                              int32_t d)
{
    const int better = c[o] < best[o];
    best[o] = better ? c[o] : best[o];
    back[o] = better ? d : back[o];
}

static void tcq_min_into(const float *restrict c, float *restrict best, int32_t *restrict back, size_t n, int32_t d)
{
    size_t o = 0;
#if PMPD_USE_AVX2
    const __m256i dv = _mm256_set1_epi32(d);
    for (; o + TCQ_CHUNK <= n; o += TCQ_CHUNK) {
        const __m256 cv = _mm256_loadu_ps(c + o), bv = _mm256_loadu_ps(best + o);
        const __m256 better = _mm256_cmp_ps(cv, bv, _CMP_LT_OQ);
        const __m256i from = _mm256_loadu_si256((const __m256i *)(const void *)(back + o));
        _mm256_storeu_ps(best + o, _mm256_blendv_ps(bv, cv, better));
        _mm256_storeu_si256((__m256i *)(void *)(back + o),
                            _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(from), _mm256_castsi256_ps(dv),
                                                                 better)));
    }
#endif
    for (; o < n; o++)
        tcq_min_at(c, best, back, o, d);
}

/* out[i] = in[i] (< 256), i < n: the step's back pointers into bytes. */
static void tcq_narrow(const int32_t *in, uint8_t *out, size_t n)
{
    size_t i = 0;
#if PMPD_USE_AVX2
    /* Two saturating packs interleave the 128-bit lanes: the permutation
     * puts the 4-byte groups back in order. */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 4 * TCQ_CHUNK <= n; i += 4 * TCQ_CHUNK) {
        const __m256i *v = (const __m256i *)(const void *)(in + i);
        const __m256i low = _mm256_packus_epi32(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1));
        const __m256i high = _mm256_packus_epi32(_mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 3));
        _mm256_storeu_si256((__m256i *)(void *)(out + i),
                            _mm256_permutevar8x32_epi32(_mm256_packus_epi16(low, high), order));
    }
#endif
    for (; i < n; i++)
        out[i] = (uint8_t)in[i];
}

/* One search: overlap < 0 leaves both ends free; otherwise S_0's high and
 * S_(n-1)'s low L - s bits must equal overlap (the wrap of a circular
 * stream).  Returns the least distortion (infinity when nothing meets the
 * constraint) and its path. */
static double tcq_search(const pmpd_tcq_trellis *trellis, pmpd_tcq_search *search, const float *target,
                         const float *weight, long overlap, uint32_t *states)
{
    const unsigned l = trellis->state_bits, s = trellis->shift;
    const size_t n_states = (size_t)1 << l, overlaps = n_states >> s, drops = (size_t)1 << s;
    float *cost = search->cost, *best = search->best;
    size_t i, o, d, at = 0;
    unsigned step;
    float least = INFINITY;
    tcq_costs(trellis, 0, target, weight, 0.0f, cost, n_states);
    if (overlap >= 0)
        for (i = 0; i < n_states; i++)
            if ((long)(i >> s) != overlap)
                cost[i] = INFINITY;
    for (step = 1; step < trellis->steps; step++) {
        uint8_t *back = search->back + (size_t)step * overlaps;
        /* The best predecessor of each overlap: states d << (L - s) | o. */
        memcpy(best, cost, overlaps * sizeof *best);
        memset(search->from, 0, overlaps * sizeof *search->from);
        for (d = 1; d < drops; d++)
            tcq_min_into(cost + d * overlaps, best, search->from, overlaps, (int32_t)d);
        tcq_narrow(search->from, back, overlaps);
        for (o = 0; o < overlaps; o++)
            tcq_costs(trellis, o << s, target + 2 * (size_t)step, weight + 2 * (size_t)step, best[o], cost + (o << s),
                      drops);
    }
    for (i = 0; i < n_states; i++)
        if ((overlap < 0 || (long)(i & (overlaps - 1)) == overlap) && cost[i] < least) {
            least = cost[i];
            at = i;
        }
    /* Back from the last state: S_(i-1) = back << (L - s) | S_i >> s. */
    states[trellis->steps - 1] = (uint32_t)at;
    for (step = trellis->steps - 1; step > 0; step--) {
        const size_t o_prev = states[step] >> s;
        states[step - 1] = (uint32_t)((size_t)search->back[(size_t)step * overlaps + o_prev] << (l - s) | o_prev);
    }
    return least;
}

PMPD_INTERNAL double pmpd_tcq_viterbi(const pmpd_tcq_trellis *trellis, pmpd_tcq_search *search,
                                      const float *target, const float *weight, pmpd_tcq_ends ends,
                                      uint32_t *states)
{
    const size_t n = trellis->steps, overlaps = (size_t)1 << (trellis->state_bits - trellis->shift);
    float *w = search->weight;
    size_t i;
    long o;
    double least, d;
    for (i = 0; i < 2 * n; i++)
        w[i] = weight ? weight[i] : 1.0f;
    if (ends == PMPD_TCQ_OPEN)
        return tcq_search(trellis, search, target, w, -1, states);
    if (ends == PMPD_TCQ_TAIL_BITING_EXACT) {
        least = INFINITY;
        for (o = 0; o < (long)overlaps; o++) {
            d = tcq_search(trellis, search, target, w, o, search->path);
            if (d < least) {
                least = d;
                memcpy(states, search->path, n * sizeof *states);
            }
        }
        return least;
    }
    /* Rotated by half, the wrap falls mid-sequence: the free path's state
     * there (original step 0 is rotated step n - n / 2) is rarely hurt by
     * the ends, and its overlap fixes the wrap of the second search. */
    for (i = 0; i < n; i++) {
        const size_t from = (i + n / 2) % n;
        search->target[2 * i] = target[2 * from];
        search->target[2 * i + 1] = target[2 * from + 1];
        w[2 * n + 2 * i] = w[2 * from];
        w[2 * n + 2 * i + 1] = w[2 * from + 1];
    }
    tcq_search(trellis, search, search->target, w + 2 * n, -1, search->path);
    o = (long)(search->path[n - n / 2] >> trellis->shift);
    return tcq_search(trellis, search, target, w, o, states);
}

PMPD_INTERNAL void pmpd_tcq_path_bits(unsigned state_bits, unsigned shift, const uint32_t *states, size_t count,
                                      size_t n_bits, uint8_t *out)
{
    size_t k = 0, i;
    unsigned b;
    memset(out, 0, (n_bits + 7) / 8);
#define TCQ_PUT_BIT(value)                                                                                             \
    do {                                                                                                               \
        if (k < n_bits && (value))                                                                                     \
            out[k / 8] |= (uint8_t)(0x80u >> (k % 8));                                                                 \
        k++;                                                                                                           \
    } while (0)
    for (b = state_bits; b-- > 0;)
        TCQ_PUT_BIT(states[0] >> b & 1u);
    for (i = 1; i < count; i++)
        for (b = shift; b-- > 0;)
            TCQ_PUT_BIT(states[i] >> b & 1u);
#undef TCQ_PUT_BIT
}

#undef TCQ_CHUNK
