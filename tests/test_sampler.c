/* Sampler: greedy is the brute-force argmax; temperature, top-k and top-p
 * draw with the frequencies of the distribution computed here directly
 * (sorted with qsort in double precision); the same seed repeats. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "tests/support/test_support.h"

#define VOCAB 40
#define DRAWS 20000

static unsigned char sampler_raw[VOCAB * 64 + 2 * PMPD_ARENA_ALIGNMENT];

static void make_sampler(pmpd_sampler *s, float temperature, uint32_t top_k, float top_p)
{
    pmpd_arena arena;
    pmpd_sampler_config config;
    config.temperature = temperature;
    config.top_k = top_k;
    config.top_p = top_p;
    assert_int_equal(pmpd_arena_init(&arena, sampler_raw, sizeof sampler_raw), PMPD_OK);
    assert_int_equal(pmpd_sampler_init(s, &config, VOCAB, &arena), PMPD_OK);
}

static void random_logits(float *logits, uint64_t seed)
{
    test_rng rng;
    int i;
    test_rng_seed(&rng, seed);
    for (i = 0; i < VOCAB; i++)
        logits[i] = 3.0f * test_rng_normal(&rng);
}

typedef struct ranked {
    double p;
    int id;
} ranked;

static int by_probability(const void *a, const void *b)
{
    const ranked *x = (const ranked *)a, *y = (const ranked *)b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return x->id - y->id;
}

/* The distribution a temperature / top-k / top-p sampler must follow. */
static void expected_distribution(const float *logits, double temperature, int top_k, double top_p,
                                  double *expect)
{
    ranked r[VOCAB];
    double max = logits[0], sum = 0, mass = 0;
    int i, kept;
    for (i = 1; i < VOCAB; i++)
        if (logits[i] > max)
            max = logits[i];
    for (i = 0; i < VOCAB; i++) {
        r[i].p = exp((logits[i] - max) / temperature);
        r[i].id = i;
        sum += r[i].p;
    }
    for (i = 0; i < VOCAB; i++)
        r[i].p /= sum;
    qsort(r, VOCAB, sizeof r[0], by_probability);
    if (top_k == 0 || top_k > VOCAB)
        top_k = VOCAB;
    for (kept = 0; kept < top_k && (kept == 0 || mass < top_p); kept++)
        mass += r[kept].p;
    memset(expect, 0, sizeof(double) * VOCAB);
    for (i = 0; i < kept; i++)
        expect[r[i].id] = r[i].p / mass;
}

static void check_frequencies(float temperature, uint32_t top_k, float top_p, uint64_t seed)
{
    pmpd_sampler s;
    pmpd_rng rng;
    float logits[VOCAB];
    double expect[VOCAB];
    unsigned counts[VOCAB] = {0};
    int i;
    random_logits(logits, seed);
    expected_distribution(logits, temperature, (int)top_k, top_p > 0 && top_p < 1 ? top_p : 1.0,
                          expect);
    make_sampler(&s, temperature, top_k, top_p);
    pmpd_rng_seed(&rng, seed);
    for (i = 0; i < DRAWS; i++) {
        int32_t token = -1;
        assert_int_equal(pmpd_sampler_sample(&s, logits, &rng, &token), PMPD_OK);
        assert_in_range(token, 0, VOCAB - 1);
        /* Never a token outside the kept set. */
        assert_true(expect[token] > 0.0);
        counts[token]++;
    }
    for (i = 0; i < VOCAB; i++) {
        /* Five standard deviations of a binomial count (plus one draw). */
        double sd = sqrt(DRAWS * expect[i] * (1.0 - expect[i]));
        double diff = fabs((double)counts[i] - DRAWS * expect[i]);
        if (diff > 5.0 * sd + 1.0)
            fail_msg("token %d: %u draws, expected %.1f", i, counts[i], DRAWS * expect[i]);
    }
}

static void test_greedy_is_argmax_lowest_id_on_ties(void **state)
{
    pmpd_sampler s;
    float logits[VOCAB];
    uint64_t seed;
    (void)state;
    make_sampler(&s, 0.0f, 0, 0.0f);
    for (seed = 1; seed < 50; seed++) {
        int32_t token = -1;
        int i, best = 0;
        random_logits(logits, seed);
        for (i = 1; i < VOCAB; i++)
            if (logits[i] > logits[best])
                best = i;
        assert_int_equal(pmpd_sampler_sample(&s, logits, NULL, &token), PMPD_OK);
        assert_int_equal(token, best);
    }
    for (seed = 0; seed < VOCAB; seed++)
        logits[seed] = seed % 7 == 3 ? 2.0f : 1.0f;
    {
        int32_t token = -1;
        assert_int_equal(pmpd_sampler_sample(&s, logits, NULL, &token), PMPD_OK);
        assert_int_equal(token, 3);
    }
}

/* Greedy over vocabularies around the kernel's 16 lanes (a tail, one
 * lane, a real vocabulary), with values drawn from a few levels so ties are
 * common, and NaNs, infinities and signed zeros mixed in: the first id of
 * the largest non-NaN value, found by the plainest loop. */
static void test_greedy_any_size_ties_nans(void **state)
{
    static const uint32_t sizes[] = { 1, 2, 15, 16, 17, 31, 33, 255, 32000 };
    static const float specials[] = { (float)NAN, (float)INFINITY, -(float)INFINITY, 0.0f, -0.0f };
    static unsigned char raw[32000 * 64 + 2 * PMPD_ARENA_ALIGNMENT];
    static float logits[32000];
    size_t si;
    (void)state;
    for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t n = sizes[si], i, trial;
        pmpd_arena arena;
        pmpd_sampler s;
        pmpd_sampler_config config = { 0.0f, 0, 0.0f };
        test_rng rng;
        assert_int_equal(pmpd_arena_init(&arena, raw, sizeof raw), PMPD_OK);
        assert_int_equal(pmpd_sampler_init(&s, &config, n, &arena), PMPD_OK);
        test_rng_seed(&rng, 77 + n);
        for (trial = 0; trial < 40; trial++) {
            int32_t token = -1, best = -1;
            for (i = 0; i < n; i++) {
                uint32_t r = test_rng_u32(&rng);
                logits[i] = r % 9 == 0 ? specials[(r >> 8) % 5] : (float)((int)((r >> 8) % 7) - 3);
            }
            if (trial == 0)
                logits[0] = (float)NAN; /* nothing compares greater than it */
            if (trial == 1)
                for (i = 0; i < n; i++)
                    logits[i] = (float)NAN;
            for (i = 0; i < n; i++)
                if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best]))
                    best = (int32_t)i;
            if (best < 0 || isnan(logits[0]))
                best = 0;
            assert_int_equal(pmpd_sampler_sample(&s, logits, NULL, &token), PMPD_OK);
            if (token != best)
                fail_msg("vocabulary %u, trial %u: token %d, expected %d", n, trial, token, best);
        }
    }
}

static void test_temperature_follows_softmax(void **state)
{
    (void)state;
    check_frequencies(1.0f, 0, 0.0f, 11);
    check_frequencies(0.5f, 0, 1.0f, 12);
    check_frequencies(2.0f, 0, 0.0f, 13);
}

static void test_top_k_keeps_k_most_probable(void **state)
{
    (void)state;
    check_frequencies(1.0f, 1, 0.0f, 21);
    check_frequencies(1.0f, 5, 0.0f, 22);
    check_frequencies(1.5f, 17, 0.0f, 23);
    check_frequencies(1.0f, VOCAB + 3, 0.0f, 24);
}

static void test_top_p_keeps_the_nucleus(void **state)
{
    (void)state;
    check_frequencies(1.0f, 0, 0.5f, 31);
    check_frequencies(1.0f, 0, 0.9f, 32);
    check_frequencies(2.0f, 0, 0.95f, 33);
    check_frequencies(1.0f, 0, 1e-6f, 34);
    check_frequencies(1.0f, 4, 0.9f, 35);
}

static void test_same_seed_same_tokens(void **state)
{
    pmpd_sampler s;
    pmpd_rng a, b, c;
    float logits[VOCAB];
    int i, differ = 0;
    (void)state;
    random_logits(logits, 5);
    make_sampler(&s, 1.0f, 10, 0.9f);
    pmpd_rng_seed(&a, 42);
    pmpd_rng_seed(&b, 42);
    pmpd_rng_seed(&c, 43);
    for (i = 0; i < 200; i++) {
        int32_t ta, tb, tc;
        assert_int_equal(pmpd_sampler_sample(&s, logits, &a, &ta), PMPD_OK);
        assert_int_equal(pmpd_sampler_sample(&s, logits, &b, &tb), PMPD_OK);
        assert_int_equal(pmpd_sampler_sample(&s, logits, &c, &tc), PMPD_OK);
        assert_int_equal(ta, tb);
        differ += ta != tc;
    }
    assert_true(differ > 0);
}

static void test_rng_is_uniform_and_portable(void **state)
{
    pmpd_rng rng;
    unsigned buckets[10] = {0};
    int i;
    (void)state;
    pmpd_rng_seed(&rng, 0);
    for (i = 0; i < 100000; i++) {
        float u = pmpd_rng_float(&rng);
        assert_true(u >= 0.0f && u < 1.0f);
        buckets[(int)(u * 10)]++;
    }
    for (i = 0; i < 10; i++)
        assert_in_range(buckets[i], 9000, 11000);
}

static void test_plan_and_bad_configs(void **state)
{
    pmpd_arena arena;
    pmpd_sampler s;
    pmpd_sampler_config config;
    size_t bytes = 0;
    int32_t token;
    float logits[VOCAB] = {0};
    unsigned char *aligned = sampler_raw + (PMPD_ARENA_ALIGNMENT - (uintptr_t)sampler_raw % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
    (void)state;
    config.temperature = 1.0f;
    config.top_k = 0;
    config.top_p = 0.0f;
    assert_int_equal(pmpd_sampler_plan(VOCAB, &bytes), PMPD_OK);
    assert_int_equal(pmpd_arena_init(&arena, aligned, bytes - 1), PMPD_OK);
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_ERR_OUT_OF_MEMORY);
    assert_int_equal(pmpd_arena_init(&arena, aligned, bytes), PMPD_OK);
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_OK);
    assert_int_equal(arena.used, bytes);
    assert_int_equal(pmpd_sampler_sample(&s, logits, NULL, &token), PMPD_ERR_INVALID_ARGUMENT);

    assert_int_equal(pmpd_arena_init(&arena, aligned, bytes), PMPD_OK);
    config.temperature = -1.0f;
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_ERR_INVALID_ARGUMENT);
    config.temperature = (float)NAN;
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_ERR_INVALID_ARGUMENT);
    config.temperature = 1.0f;
    config.top_p = 1.5f;
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_ERR_INVALID_ARGUMENT);
    config.top_p = -0.1f;
    assert_int_equal(pmpd_sampler_init(&s, &config, VOCAB, &arena), PMPD_ERR_INVALID_ARGUMENT);
    config.top_p = 0.5f;
    assert_int_equal(pmpd_sampler_init(&s, &config, 0, &arena), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_sampler_plan(0, &bytes), PMPD_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_greedy_any_size_ties_nans),
        cmocka_unit_test(test_temperature_follows_softmax),
        cmocka_unit_test(test_top_k_keeps_k_most_probable),
        cmocka_unit_test(test_top_p_keeps_the_nucleus),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_rng_is_uniform_and_portable),
        cmocka_unit_test(test_plan_and_bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
