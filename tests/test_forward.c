/* The float forward pass against llama2.c's run.c on stories260K (model
 * assembled in memory straight from the checkpoint, see
 * test_forward_fixture.h): logits of the first 16 positions, the 256-token
 * greedy run from BOS, batched prefill against token-by-token decode, f16
 * weights, f16 KV cache, a separate classifier and thread counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/support/test_models.h"
#include "tests/test_forward_fixture.h"

#define MAX_IDS 600

static fixture_model *f32_model;
static int32_t bos_ids[MAX_IDS];
static size_t n_bos_ids;

static int setup(void **state)
{
    (void)state;
    f32_model = fixture_load("stories260K.bin", 0, 0);
    n_bos_ids = test_read_vector_ids("stories260K_bos_greedy.ids", bos_ids, MAX_IDS);
    if (!f32_model || n_bos_ids != 257) {
        fprintf(stderr, "test_forward: ../shared/models or vectors missing\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fixture_free(f32_model);
    return 0;
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float worst = 0.0f;
    size_t i;
    for (i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= worst))
            worst = d;
    }
    return worst;
}

static void test_first_16_logits_match_llama2c(void **state)
{
    char path[512];
    size_t size = 0, pos;
    float *expect = (float *)test_read_file(test_shared_path(path, sizeof path, "vectors/stories260K_bos_logits16.f32"), &size);
    void *memory;
    pmpd_session *s;
    float worst = 0.0f;
    (void)state;
    assert_non_null(expect);
    assert_int_equal(size, 16 * 512 * sizeof(float));
    s = test_session_open(&f32_model->model, NULL, &memory);
    for (pos = 0; pos < 16; pos++) {
        const float *logits = NULL;
        float d;
        assert_int_equal(pmpd_session_decode(s, bos_ids[pos], &logits), PMPD_OK);
        d = max_abs_diff(logits, expect + pos * 512, 512);
        if (d > worst)
            worst = d;
    }
    printf("stories260K logits, positions 0..15: max |pmpd - llama2.c| = %.3g\n", (double)worst);
    assert_true(worst <= 1e-4f);
    test_session_close(s, memory);
    free(expect);
}

/* Greedy generation: prefill the first n_prompt ids, then take the argmax
 * each step; every generated id must equal the reference. */
static void check_greedy(const pmpd_model *model, const pmpd_session_config *config, const int32_t *ids,
                         size_t n_ids, size_t n_prompt)
{
    void *memory;
    pmpd_session *s = test_session_open(model, config, &memory);
    const float *logits = NULL;
    size_t i;
    assert_int_equal(pmpd_session_prefill(s, ids, n_prompt, &logits), PMPD_OK);
    for (i = n_prompt; i < n_ids; i++) {
        int32_t best = test_argmax(logits, 512);
        if (best != ids[i])
            fail_msg("position %zu: greedy token %d, llama2.c %d", i, (int)best, (int)ids[i]);
        if (i + 1 < n_ids)
            assert_int_equal(pmpd_session_decode(s, best, &logits), PMPD_OK);
    }
    test_session_close(s, memory);
}

static void test_greedy_from_bos_matches_llama2c(void **state)
{
    (void)state;
    check_greedy(&f32_model->model, NULL, bos_ids, n_bos_ids, 1);
}

static void test_greedy_with_two_threads_and_batched_prompt(void **state)
{
    pmpd_session_config config;
    (void)state;
    pmpd_session_config_init(&config);
    config.n_threads = 2;
    config.prefill_batch = 7;
    config.context_length = 300;
    check_greedy(&f32_model->model, &config, bos_ids, n_bos_ids, 50);
}

/* Logits after a prompt fed in batches of b equal those fed one by one,
 * and so do the decode steps that follow (the KV cache is the same). */
static void test_batched_prefill_equals_token_by_token(void **state)
{
    static const uint32_t batches[] = {2, 5, 16, 32, 64};
    pmpd_session_config one, many;
    void *m1, *m2;
    pmpd_session *s1, *s2;
    size_t b, i, n_prompt = 45;
    (void)state;
    pmpd_session_config_init(&one);
    one.prefill_batch = 1;
    s1 = test_session_open(&f32_model->model, &one, &m1);
    for (b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        const float *l1 = NULL, *l2 = NULL;
        pmpd_session_config_init(&many);
        many.prefill_batch = batches[b];
        s2 = test_session_open(&f32_model->model, &many, &m2);
        assert_int_equal(pmpd_session_reset(s1), PMPD_OK);
        for (i = 0; i < n_prompt; i++)
            assert_int_equal(pmpd_session_decode(s1, bos_ids[i], &l1), PMPD_OK);
        /* Two prefill calls continue one another (a prompt in parts, or a
         * second turn of a conversation). */
        assert_int_equal(pmpd_session_prefill(s2, bos_ids, 20, &l2), PMPD_OK);
        assert_int_equal(pmpd_session_prefill(s2, bos_ids + 20, n_prompt - 20, &l2), PMPD_OK);
        assert_int_equal(pmpd_session_position(s2), n_prompt);
        assert_true(max_abs_diff(l1, l2, 512) <= 1e-6f);
        for (i = n_prompt; i < n_prompt + 5; i++) {
            assert_int_equal(pmpd_session_decode(s1, bos_ids[i], &l1), PMPD_OK);
            assert_int_equal(pmpd_session_decode(s2, bos_ids[i], &l2), PMPD_OK);
            assert_true(max_abs_diff(l1, l2, 512) <= 1e-6f);
        }
        test_session_close(s2, m2);
    }
    test_session_close(s1, m1);
}

/* Runs the first n reference ids and returns the final logits in out. */
static void logits_after(const pmpd_model *model, const pmpd_session_config *config, size_t n, float *out)
{
    void *memory;
    pmpd_session *s = test_session_open(model, config, &memory);
    const float *logits = NULL;
    assert_int_equal(pmpd_session_prefill(s, bos_ids, n, &logits), PMPD_OK);
    memcpy(out, logits, 512 * sizeof(float));
    test_session_close(s, memory);
}

static void test_variants_stay_close_to_f32(void **state)
{
    fixture_model *f16_weights = fixture_load("stories260K.bin", 1, 0);
    fixture_model *separate = fixture_load("stories260K.bin", 0, 1);
    pmpd_session_config config;
    float ref[512], got[512];
    size_t n = 100;
    unsigned threads;
    (void)state;
    assert_non_null(f16_weights);
    assert_non_null(separate);
    logits_after(&f32_model->model, NULL, n, ref);

    /* A classifier stored separately computes the same thing. */
    logits_after(&separate->model, NULL, n, got);
    assert_true(max_abs_diff(ref, got, 512) == 0.0f);

    /* Splitting rows and heads over threads changes nothing. */
    for (threads = 2; threads <= 4 && threads <= PMPD_MAX_THREADS; threads++) {
        pmpd_session_config_init(&config);
        config.n_threads = threads;
        logits_after(&f32_model->model, &config, n, got);
        assert_true(max_abs_diff(ref, got, 512) == 0.0f);
    }

    /* Rounding K/V or the weights to binary16 moves logits a little. */
    pmpd_session_config_init(&config);
    config.kv_type = PMPD_KV_F16;
    logits_after(&f32_model->model, &config, n, got);
    printf("f16 KV cache after %zu tokens: max logit difference %.3g\n", n, (double)max_abs_diff(ref, got, 512));
    assert_true(max_abs_diff(ref, got, 512) <= 0.03f);
    assert_true(max_abs_diff(ref, got, 512) > 0.0f);

    logits_after(&f16_weights->model, NULL, n, got);
    printf("f16 weights after %zu tokens: max logit difference %.3g\n", n, (double)max_abs_diff(ref, got, 512));
    assert_true(max_abs_diff(ref, got, 512) <= 0.03f);
    assert_true(max_abs_diff(ref, got, 512) > 0.0f);

    fixture_free(f16_weights);
    fixture_free(separate);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_16_logits_match_llama2c),
        cmocka_unit_test(test_greedy_from_bos_matches_llama2c),
        cmocka_unit_test(test_greedy_with_two_threads_and_batched_prompt),
        cmocka_unit_test(test_batched_prefill_equals_token_by_token),
        cmocka_unit_test(test_variants_stay_close_to_f32),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
