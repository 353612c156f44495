/* PQ KV cache: attention over codes + recent window equals brute-force
 * softmax attention (double precision) over the dequantized history and the
 * exact recent tokens, for contexts that cross several window flushes and
 * for several head / grouped-query shapes.  Where the build scores keys
 * through 8-bit tables, the history's scores are those tables' (from
 * their scalar reference) and the rest is as above; where it sums values
 * with bfloat16 products, their bound (pq_values_bf16.h) is added to the
 * tolerance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/kvcache/attention_partial.h"
#include "pmpd_impl/kvcache/pq_cache.h"
#include "pmpd_impl/kvcache/pq_lut8.h"
#include "pmpd_impl/kvcache/pq_values_bf16.h"
#include "tests/support/test_support.h"

typedef struct pq_shape {
    uint32_t n_heads, n_kv_heads, head_dim, key_sub_dim, value_sub_dim, bits, window, tokens;
} pq_shape;

/* The index of the nearest centroid, computed in double by the test. */
static uint32_t oracle_nearest(const float *centroids, uint32_t n_centroids, uint32_t sub_dim, const float *x)
{
    uint32_t c, j, best = 0;
    double best_d = INFINITY;
    for (c = 0; c < n_centroids; c++) {
        double d = 0.0;
        for (j = 0; j < sub_dim; j++) {
            double diff = (double)x[j] - centroids[c * sub_dim + j];
            d += diff * diff;
        }
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best;
}

/* The vector the oracle attends to for a coded token: each subspace replaced
 * by its nearest centroid. */
static void oracle_dequantize(const pmpd_pq_codebook *book, const float *x, double *out)
{
    const pmpd_pq_layout *l = &book->layout;
    uint32_t s, j;
    for (s = 0; s < l->n_sub; s++) {
        const float *sub_book = book->centroids + (size_t)s * l->n_centroids * l->sub_dim;
        uint32_t c = oracle_nearest(sub_book, l->n_centroids, l->sub_dim, x + s * l->sub_dim);
        for (j = 0; j < l->sub_dim; j++)
            out[s * l->sub_dim + j] = sub_book[c * l->sub_dim + j];
    }
}

/* Where the build scores keys through 8-bit tables (pq_lut8.h), the
 * scores of coded tokens [n_heads][n_coded] as the scalar reference of
 * those tables gives them (their error bound is test_pq_kernels'
 * concern); NULL where the build uses float tables. */
static double *lut8_scores(const pq_shape *sh, const pmpd_pq_cache *cache, const float *q, size_t n_coded)
{
    uint32_t group = sh->n_heads / sh->n_kv_heads, lanes = pmpd_kv_lanes(group), kv, h;
    const pmpd_pq_layout *kl = &cache->keys.layout;
    pmpd_pq_lut8 lut;
    float *qt, *scores, max[64];
    double *out;
    size_t t;
    if (!PMPD_PQ_USE_LUT8 || !pmpd_pq_lut8_fits(kl) || n_coded == 0)
        return NULL;
    qt = malloc((size_t)sh->head_dim * lanes * sizeof(float));
    scores = malloc(n_coded * lanes * sizeof(float));
    out = malloc((size_t)sh->n_heads * n_coded * sizeof(double));
    /* The cache made the tables (the scalar build reads their hulls). */
    assert_non_null(cache->key_tables);
    pmpd_pq_lut8_book_view(kl, cache->key_tables, &lut);
    lut.minimum = malloc((size_t)kl->n_sub * lanes * sizeof(float));
    lut.step = malloc(lanes * sizeof(float));
    lut.offset = malloc(lanes * sizeof(float));
    lut.table = malloc((size_t)kl->n_sub * lanes * 256);
    assert_true(qt && scores && out && lut.minimum && lut.step && lut.offset && lut.table);
    assert_true(lanes <= 64);
    for (kv = 0; kv < sh->n_kv_heads; kv++) {
        pmpd_attn_transpose_query(q + (size_t)kv * group * sh->head_dim, sh->head_dim, group, sh->head_dim,
                                  1.0f / sqrtf((float)sh->head_dim), qt);
        pmpd_pq_lut8_build_scalar(&cache->keys, qt, lanes, &lut);
        pmpd_pq_lut8_scores_scalar(&lut, kl, lanes, pmpd_pq_cache_head_codes(cache, cache->key_codes, kl, kv),
                                   n_coded, scores, max);
        for (h = 0; h < group; h++)
            for (t = 0; t < n_coded; t++)
                out[(size_t)(kv * group + h) * n_coded + t] = scores[t * lanes + h];
    }
    free(qt);
    free(scores);
    free(lut.minimum);
    free(lut.step);
    free(lut.offset);
    free(lut.table);
    return out;
}

/* Plain softmax attention in double: tokens below n_coded are read from the
 * dequantized copies (their scores from coded_scores where not NULL), the
 * rest exact. */
/* slack (where not NULL) gets 2^-8 of sum_t w_t |v_t[i]| / sum_t w_t over
 * the coded tokens: the bound pq_values_bf16.h gives its products. */
static void oracle_attention(const pq_shape *sh, const double *coded_keys, const double *coded_values,
                             const double *coded_scores, const float *q, const float *keys, const float *values,
                             size_t length, size_t n_coded, double *out, double *slack)
{
    uint32_t d = sh->head_dim, group = sh->n_heads / sh->n_kv_heads, h, i;
    double *scores = malloc(length * sizeof(double)), *k = malloc(d * sizeof(double)),
           *v = malloc(d * sizeof(double));
    size_t t;
    assert_non_null(scores);
    assert_non_null(k);
    assert_non_null(v);
    for (h = 0; h < sh->n_heads; h++) {
        uint32_t kv = h / group;
        double max = -INFINITY, sum = 0.0;
        for (t = 0; t < length; t++) {
            const float *kt = keys + (t * sh->n_kv_heads + kv) * d;
            double dot = 0.0;
            if (t < n_coded)
                memcpy(k, coded_keys + (kt - keys), d * sizeof(double));
            else
                for (i = 0; i < d; i++)
                    k[i] = kt[i];
            for (i = 0; i < d; i++)
                dot += (double)q[h * d + i] * k[i];
            scores[t] = t < n_coded && coded_scores ? coded_scores[h * n_coded + t] : dot / sqrt((double)d);
            max = scores[t] > max ? scores[t] : max;
        }
        for (i = 0; i < d; i++)
            out[h * d + i] = 0.0;
        if (slack)
            for (i = 0; i < d; i++)
                slack[h * d + i] = 0.0;
        for (t = 0; t < length; t++) {
            const float *vt = values + (t * sh->n_kv_heads + kv) * d;
            double w = exp(scores[t] - max);
            sum += w;
            if (t < n_coded)
                memcpy(v, coded_values + (vt - values), d * sizeof(double));
            else
                for (i = 0; i < d; i++)
                    v[i] = vt[i];
            for (i = 0; i < d; i++)
                out[h * d + i] += w * v[i];
            if (slack && t < n_coded)
                for (i = 0; i < d; i++)
                    slack[h * d + i] += w * fabs(v[i]) / 256.0;
        }
        for (i = 0; i < d; i++)
            out[h * d + i] /= sum;
        if (slack)
            for (i = 0; i < d; i++)
                slack[h * d + i] /= sum;
    }
    free(scores);
    free(k);
    free(v);
}

/* Heavy-tailed data: mostly normal, with some large outliers, as real K/V. */
static float test_value(test_rng *rng)
{
    float x = test_rng_normal(rng);
    return test_rng_u32(rng) % 16 == 0 ? 6.0f * x : x;
}

static float *random_codebook(test_rng *rng, const pmpd_pq_layout *layout)
{
    size_t i, n = pmpd_pq_codebook_floats(layout);
    float *c = malloc(n * sizeof(float));
    assert_non_null(c);
    for (i = 0; i < n; i++)
        c[i] = 1.5f * test_rng_normal(rng);
    return c;
}

static void check_shape(const pq_shape *sh, uint64_t seed)
{
    test_rng rng;
    pmpd_pq_layout kl, vl;
    pmpd_pq_codebook kb, vb;
    pmpd_pq_cache cache;
    pmpd_arena arena;
    size_t arena_bytes, scratch_floats, t, i, per_token = (size_t)sh->n_kv_heads * sh->head_dim;
    size_t q_floats = (size_t)sh->n_heads * sh->head_dim;
    void *arena_buffer;
    float *keys, *values, *q, *out, *scratch;
    double *expect, *coded_keys, *coded_values, *coded_scores, *slack = NULL;
    int checks = 0;

    test_rng_seed(&rng, seed);
    assert_int_equal(pmpd_pq_layout_init(&kl, sh->head_dim, sh->key_sub_dim, sh->bits), PMPD_OK);
    assert_int_equal(pmpd_pq_layout_init(&vl, sh->head_dim, sh->value_sub_dim, sh->bits), PMPD_OK);
    kb.layout = kl;
    vb.layout = vl;
    kb.centroids = random_codebook(&rng, &kl);
    vb.centroids = random_codebook(&rng, &vl);

    /* Plan with a measuring arena, then allocate exactly that. */
    assert_int_equal(pmpd_arena_init(&arena, NULL, SIZE_MAX), PMPD_OK);
    assert_int_equal(pmpd_pq_cache_init(&cache, &kb, &vb, sh->n_kv_heads, sh->tokens, sh->window, &arena), PMPD_OK);
    arena_bytes = arena.used + PMPD_ARENA_ALIGNMENT;
    arena_buffer = malloc(arena_bytes);
    assert_non_null(arena_buffer);
    assert_int_equal(pmpd_arena_init(&arena, arena_buffer, arena_bytes), PMPD_OK);
    assert_int_equal(pmpd_pq_cache_init(&cache, &kb, &vb, sh->n_kv_heads, sh->tokens, sh->window, &arena), PMPD_OK);
    assert_int_equal(pmpd_pq_attention_scratch_floats(&cache, sh->n_heads, &scratch_floats), PMPD_OK);

    keys = malloc(sh->tokens * per_token * sizeof(float));
    values = malloc(sh->tokens * per_token * sizeof(float));
    q = malloc(q_floats * sizeof(float));
    out = malloc(q_floats * sizeof(float));
    expect = malloc(q_floats * sizeof(double));
    scratch = malloc(scratch_floats * sizeof(float));
    assert_true(keys && values && q && out && expect && scratch);
    /* Values summed with bfloat16 products: their bound on top. */
    if (PMPD_PQ_USE_VALUES_BF16 && pmpd_pq_bf16_fits(&vl)) {
        slack = malloc(q_floats * sizeof(double));
        assert_non_null(slack);
    }
    coded_keys = malloc(sh->tokens * per_token * sizeof(double));
    coded_values = malloc(sh->tokens * per_token * sizeof(double));
    assert_true(coded_keys && coded_values);
    for (i = 0; i < sh->tokens * per_token; i++) {
        keys[i] = test_value(&rng);
        values[i] = test_value(&rng);
    }
    for (i = 0; i < sh->tokens * per_token; i += sh->head_dim) {
        oracle_dequantize(&kb, keys + i, coded_keys + i);
        oracle_dequantize(&vb, values + i, coded_values + i);
    }

    for (t = 0; t < sh->tokens; t++) {
        size_t length = t + 1, expected_coded = t / sh->window * sh->window;
        assert_int_equal(pmpd_pq_cache_append(&cache, keys + t * per_token, values + t * per_token), PMPD_OK);
        /* The window flushes only when full and another token arrives. */
        assert_int_equal(cache.n_coded, expected_coded);
        assert_int_equal(cache.n_recent, length - expected_coded);
        /* Check around every flush, and a causal prefix shorter than the
         * cache; under an emulator around the last window's flush only (the
         * flushes before it are the same host-independent bookkeeping, and
         * the double-precision oracle over thousands of tokens took a minute
         * there). */
        if (t % sh->window > 2 && t % sh->window < sh->window - 2 && t + 1 != sh->tokens)
            continue;
        if (test_emulated() && t + sh->window + 2 < sh->tokens)
            continue;
        for (i = 0; i < q_floats; i++)
            q[i] = 2.0f * test_rng_normal(&rng);
        assert_int_equal(pmpd_pq_cache_attend(&cache, q, sh->n_heads, length, out, scratch), PMPD_OK);
        coded_scores = lut8_scores(sh, &cache, q, expected_coded);
        oracle_attention(sh, coded_keys, coded_values, coded_scores, q, keys, values, length, expected_coded, expect,
                         slack);
        free(coded_scores);
        for (i = 0; i < q_floats; i++)
            assert_true(fabs(out[i] - expect[i]) <= 2e-4 * (1.0 + fabs(expect[i])) + (slack ? slack[i] : 0.0));
        if (expected_coded > 3) {
            size_t prefix = expected_coded - 3;
            assert_int_equal(pmpd_pq_cache_attend(&cache, q, sh->n_heads, prefix, out, scratch), PMPD_OK);
            coded_scores = lut8_scores(sh, &cache, q, prefix);
            oracle_attention(sh, coded_keys, coded_values, coded_scores, q, keys, values, prefix, prefix, expect,
                             slack);
            free(coded_scores);
            for (i = 0; i < q_floats; i++)
                assert_true(fabs(out[i] - expect[i]) <= 2e-4 * (1.0 + fabs(expect[i])) + (slack ? slack[i] : 0.0));
        }
        checks++;
    }
    assert_true(checks >= 3);

    /* The encoder itself: every stored code is the nearest centroid. */
    for (t = 0; t < cache.n_coded; t++)
        for (i = 0; i < sh->n_kv_heads; i++) {
            uint32_t s;
            /* Blocks of 64 tokens, code byte by code byte. */
            const uint8_t *codes = cache.key_codes + (size_t)i * cache.code_capacity * kl.code_bytes +
                                   (t / 64 * kl.code_bytes) * 64 + t % 64;
            for (s = 0; s < kl.n_sub; s++)
                /* 8-bit codes are bytes; 4-bit ones nibbles, even subspaces low. */
                assert_int_equal(kl.n_centroids == 256 ? codes[s * 64] : (codes[s / 2 * 64] >> (s % 2 * 4)) & 15,
                                 oracle_nearest(kb.centroids + (size_t)s * kl.n_centroids * kl.sub_dim,
                                                          kl.n_centroids, kl.sub_dim,
                                                          keys + t * per_token + i * sh->head_dim + s * kl.sub_dim));
        }

    /* Full cache, bad lengths and group shapes are refused. */
    assert_int_equal(pmpd_pq_cache_append(&cache, keys, values), PMPD_ERR_CONTEXT_FULL);
    assert_int_equal(pmpd_pq_cache_attend(&cache, q, sh->n_heads, sh->tokens + 1, out, scratch),
                     PMPD_ERR_INVALID_ARGUMENT);
    if (sh->n_kv_heads > 1)
        assert_int_equal(pmpd_pq_cache_attend(&cache, q, sh->n_heads + 1, 1, out, scratch),
                         PMPD_ERR_INVALID_ARGUMENT);

    free(keys);
    free(values);
    free(q);
    free(out);
    free(expect);
    free(slack);
    free(coded_keys);
    free(coded_values);
    free(scratch);
    free(arena_buffer);
    free((void *)kb.centroids);
    free((void *)vb.centroids);
}

static void test_multi_head(void **state)
{
    pq_shape sh = {4, 4, 16, 2, 2, 8, 8, 30};
    (void)state;
    check_shape(&sh, 1);
}

static void test_gqa_group_of_four_4d_subspaces(void **state)
{
    pq_shape sh = {8, 2, 32, 4, 4, 8, 16, 53};
    (void)state;
    check_shape(&sh, 2);
}

static void test_group_of_three_small_codebook(void **state)
{
    pq_shape sh = {6, 2, 8, 2, 4, 4, 4, 19};
    (void)state;
    check_shape(&sh, 3);
}

static void test_packed_4bit_codes_odd_subspaces(void **state)
{
    /* Keys: 3 subspaces of 4 (two codes per byte, the last byte half used);
     * values: 6 subspaces of 2; 16 centroids each. */
    pq_shape sh = {4, 2, 12, 4, 2, 4, 5, 23};
    (void)state;
    check_shape(&sh, 5);
}

static void test_real_head_shape(void **state)
{
    /* 8 query heads per KV head, head_dim 64, window = head_dim. */
    pq_shape sh = {16, 2, 64, 2, 4, 8, 64, 140};
    (void)state;
    check_shape(&sh, 4);
}

static void test_history_in_passes(void **state)
{
    /* A history longer than one pass of the attention (2048 tokens): 4000
     * coded tokens go in a whole pass and a partial one whose partials are
     * merged, and the prefixes end inside a 64-token block. */
    pq_shape sh = {8, 2, 64, 2, 4, 8, 1000, 4300};
    (void)state;
    /* Under an emulator 2304 coded tokens (a whole pass and 256 more) with
     * a window of 256: the oracle's nearest-centroid search over every
     * token is most of this test's time there. */
    if (test_emulated()) {
        sh.window = 256;
        sh.tokens = 2400;
    }
    check_shape(&sh, 6);
}

static void test_layout_validation(void **state)
{
    pmpd_pq_layout l;
    (void)state;
    assert_int_equal(pmpd_pq_layout_init(&l, 64, 3, 8), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pq_layout_init(&l, 66, 4, 8), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pq_layout_init(&l, 64, 2, 9), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pq_layout_init(&l, 0, 2, 8), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pq_layout_init(&l, 64, 4, 8), PMPD_OK);
    assert_int_equal(l.n_sub, 16);
    assert_int_equal(l.n_centroids, 256);
}

static void test_bytes_per_token(void **state)
{
    pmpd_pq_layout two, four;
    (void)state;
    /* The targets: head_dim 64 in f16 is 128 bytes per vector. */
    assert_int_equal(pmpd_pq_layout_init(&two, 64, 2, 8), PMPD_OK);
    assert_int_equal(pmpd_pq_layout_init(&four, 64, 4, 8), PMPD_OK);
    assert_int_equal(pmpd_pq_cache_bytes_per_token(&two, &two, 8), 8 * 2 * 32);
    assert_int_equal(pmpd_pq_cache_bytes_per_token(&four, &four, 8), 8 * 2 * 16);
    assert_true(8 * 2 * 64 * 2 >= 4 * pmpd_pq_cache_bytes_per_token(&two, &two, 8));
    assert_true(8 * 2 * 64 * 2 >= 8 * pmpd_pq_cache_bytes_per_token(&four, &four, 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_validation),
        cmocka_unit_test(test_bytes_per_token),
        cmocka_unit_test(test_multi_head),
        cmocka_unit_test(test_gqa_group_of_four_4d_subspaces),
        cmocka_unit_test(test_group_of_three_small_codebook),
        cmocka_unit_test(test_packed_4bit_codes_odd_subspaces),
        cmocka_unit_test(test_real_head_shape),
        cmocka_unit_test(test_history_in_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
