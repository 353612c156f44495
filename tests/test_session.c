/* The session API: exact arena planning, statuses for bad requests, reset
 * and destroy, and two sessions on one model in two threads giving the
 * tokens of one (no shared mutable state). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/support/test_models.h"
#include "tests/test_forward_fixture.h"

static fixture_model *model;

static int setup(void **state)
{
    (void)state;
    model = fixture_load("stories260K.bin", 0, 0);
    return model ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fixture_free(model);
    return 0;
}

static void test_plan_is_exact(void **state)
{
    static const uint32_t contexts[] = {0, 1, 7, 100};
    static const uint32_t batches[] = {0, 1, 5, 64};
    static const uint32_t threads[] = {0, 1, 3};
    size_t c, b, t, k;
    (void)state;
    for (c = 0; c < 4; c++)
        for (b = 0; b < 4; b++)
            for (t = 0; t < 3; t++)
                for (k = 0; k < 2; k++) {
                    pmpd_session_config config;
                    pmpd_session *s = (pmpd_session *)1;
                    pmpd_arena arena;
                    size_t bytes = 0;
                    void *block;
                    pmpd_session_config_init(&config);
                    config.context_length = contexts[c];
                    config.prefill_batch = batches[b];
                    config.n_threads = threads[t] > PMPD_MAX_THREADS ? PMPD_MAX_THREADS : threads[t];
                    config.kv_type = k ? PMPD_KV_F16 : PMPD_KV_F32;
                    assert_int_equal(pmpd_session_plan(&model->model, &config, &bytes), PMPD_OK);
                    assert_int_equal(bytes % PMPD_ARENA_ALIGNMENT, 0);
                    block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
                    /* One byte short fails cleanly and leaves the arena as it was. */
                    assert_int_equal(pmpd_arena_init(&arena, test_aligned(block), bytes - 1), PMPD_OK);
                    assert_int_equal(pmpd_session_create(&model->model, &config, &arena, &s),
                                     PMPD_ERR_OUT_OF_MEMORY);
                    assert_null(s);
                    assert_int_equal(arena.used, 0);
                    /* Exactly the planned bytes work, and the session runs in them. */
                    assert_int_equal(pmpd_arena_init(&arena, test_aligned(block), bytes), PMPD_OK);
                    assert_int_equal(pmpd_session_create(&model->model, &config, &arena, &s), PMPD_OK);
                    assert_int_equal(arena.used, bytes);
                    {
                        int32_t prompt[3] = {1, 400, 300};
                        size_t n = contexts[c] == 1 ? 1 : 3;
                        assert_int_equal(pmpd_session_prefill(s, prompt, n, NULL), PMPD_OK);
                    }
                    assert_int_equal(arena.high_water, bytes);
                    pmpd_session_destroy(s);
                    free(block);
                }
}

/* Planned figures add up: two sessions (with worker threads) and a sampler
 * fit in one arena of the sum of their figures, and not in one byte less. */
static void test_plans_add_up(void **state)
{
    pmpd_session_config a, b;
    pmpd_sampler_config sampling = {1.0f, 0, 0.9f};
    size_t bytes_a, bytes_b, bytes_s, total, shortfall;
    (void)state;
    pmpd_session_config_init(&a);
    a.n_threads = PMPD_MAX_THREADS >= 2 ? 2 : 1;
    a.prefill_batch = 7;
    pmpd_session_config_init(&b);
    b.n_threads = PMPD_MAX_THREADS >= 3 ? 3 : 1;
    b.context_length = 33;
    b.kv_type = PMPD_KV_F16;
    assert_int_equal(pmpd_session_plan(&model->model, &a, &bytes_a), PMPD_OK);
    assert_int_equal(pmpd_session_plan(&model->model, &b, &bytes_b), PMPD_OK);
    assert_int_equal(pmpd_sampler_plan(model->model.info.vocab_size, &bytes_s), PMPD_OK);
    total = bytes_a + bytes_s + bytes_b;
    for (shortfall = 0; shortfall < 2; shortfall++) {
        void *block = malloc(total + PMPD_ARENA_ALIGNMENT);
        pmpd_arena arena;
        pmpd_session *sa = NULL, *sb = NULL;
        pmpd_sampler sampler;
        pmpd_status st;
        assert_int_equal(pmpd_arena_init(&arena, test_aligned(block), total - shortfall), PMPD_OK);
        assert_int_equal(pmpd_session_create(&model->model, &a, &arena, &sa), PMPD_OK);
        assert_int_equal(pmpd_sampler_init(&sampler, &sampling, model->model.info.vocab_size, &arena), PMPD_OK);
        st = pmpd_session_create(&model->model, &b, &arena, &sb);
        assert_int_equal(st, shortfall ? PMPD_ERR_OUT_OF_MEMORY : PMPD_OK);
        if (st == PMPD_OK)
            assert_int_equal(arena.used, total);
        pmpd_session_destroy(sb);
        pmpd_session_destroy(sa);
        free(block);
    }
}

static pmpd_session *small_session(uint32_t context, void **block)
{
    pmpd_session_config config;
    pmpd_session_config_init(&config);
    config.context_length = context;
    config.prefill_batch = 4;
    return test_session_open(&model->model, &config, block);
}

static void test_bad_requests_get_statuses(void **state)
{
    int32_t prompt[10] = {1, 400, 300, 200, 100, 50, 60, 70, 80, 90};
    int32_t bad[3] = {1, 512, 3};
    int32_t negative[2] = {1, -1};
    const float *logits = (const float *)1;
    void *block;
    pmpd_session *s = small_session(8, &block);
    (void)state;

    assert_int_equal(pmpd_session_logits(s, &logits), PMPD_ERR_STATE);
    assert_null(logits);
    assert_int_equal(pmpd_session_prefill(s, bad, 3, &logits), PMPD_ERR_TOKEN_RANGE);
    assert_int_equal(pmpd_session_prefill(s, negative, 2, &logits), PMPD_ERR_TOKEN_RANGE);
    assert_int_equal(pmpd_session_decode(s, 512, &logits), PMPD_ERR_TOKEN_RANGE);
    assert_int_equal(pmpd_session_prefill(s, prompt, 0, &logits), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_prefill(s, NULL, 2, &logits), PMPD_ERR_INVALID_ARGUMENT);
    /* A prompt longer than the whole context. */
    assert_int_equal(pmpd_session_prefill(s, prompt, 9, &logits), PMPD_ERR_CONTEXT_FULL);
    assert_int_equal(pmpd_session_position(s), 0);

    assert_int_equal(pmpd_session_prefill(s, prompt, 6, &logits), PMPD_OK);
    assert_non_null(logits);
    assert_int_equal(pmpd_session_prefill(s, prompt, 3, &logits), PMPD_ERR_CONTEXT_FULL);
    assert_int_equal(pmpd_session_position(s), 6);
    assert_int_equal(pmpd_session_decode(s, 7, &logits), PMPD_OK);
    assert_int_equal(pmpd_session_decode(s, 8, &logits), PMPD_OK);
    /* Context overflow. */
    assert_int_equal(pmpd_session_decode(s, 9, &logits), PMPD_ERR_CONTEXT_FULL);
    assert_int_equal(pmpd_session_position(s), 8);
    assert_int_equal(pmpd_session_logits(s, &logits), PMPD_OK);

    /* After a reset there are no logits until a token runs. */
    assert_int_equal(pmpd_session_reset(s), PMPD_OK);
    assert_int_equal(pmpd_session_position(s), 0);
    assert_int_equal(pmpd_session_logits(s, &logits), PMPD_ERR_STATE);
    assert_int_equal(pmpd_session_prefill(s, prompt, 8, &logits), PMPD_OK);

    /* A destroyed session refuses everything. */
    pmpd_session_destroy(s);
    pmpd_session_destroy(s);
    assert_int_equal(pmpd_session_decode(s, 1, &logits), PMPD_ERR_STATE);
    assert_int_equal(pmpd_session_reset(s), PMPD_ERR_STATE);
    assert_int_equal(pmpd_session_logits(s, &logits), PMPD_ERR_STATE);
    free(block);
}

static void test_bad_configs(void **state)
{
    pmpd_session_config config;
    size_t bytes;
    pmpd_arena arena;
    pmpd_session *s;
    unsigned char small[64];
    (void)state;
    pmpd_session_config_init(&config);
    config.context_length = model->model.info.seq_len + 1;
    assert_int_equal(pmpd_session_plan(&model->model, &config, &bytes), PMPD_ERR_INVALID_ARGUMENT);
    pmpd_session_config_init(&config);
    config.kv_type = 99;
    assert_int_equal(pmpd_session_plan(&model->model, &config, &bytes), PMPD_ERR_INVALID_ARGUMENT);
    pmpd_session_config_init(&config);
    config.n_threads = PMPD_MAX_THREADS + 1;
    assert_int_equal(pmpd_session_plan(&model->model, &config, &bytes), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_plan(NULL, NULL, &bytes), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_plan(&model->model, NULL, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_arena_init(&arena, small, sizeof small), PMPD_OK);
    assert_int_equal(pmpd_session_create(&model->model, &config, &arena, &s), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_create(&model->model, NULL, &arena, &s), PMPD_ERR_OUT_OF_MEMORY);
    assert_int_equal(arena.used, 0);
}

/* A worker stack the system refuses fails the creation with
 * PMPD_ERR_THREAD and leaves the arena as it was; the same session with
 * PMPD_WORKER_STACK_BYTES is made. */
static void test_refused_worker_stack(void **state)
{
    pmpd_session_config config;
    pmpd_arena arena;
    pmpd_session *s = NULL;
    size_t bytes;
    void *block;
    (void)state;
    pmpd_session_config_init(&config);
    config.context_length = 64;
    config.n_threads = 3;
    config.worker_stack_bytes = 1000; /* below every system's PTHREAD_STACK_MIN */
    assert_int_equal(pmpd_session_plan(&model->model, &config, &bytes), PMPD_OK);
    block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(block);
    pmpd_arena_init(&arena, test_aligned(block), bytes);
    assert_int_equal(pmpd_session_create(&model->model, &config, &arena, &s), PMPD_ERR_THREAD);
    assert_null(s);
    assert_int_equal(arena.used, 0);
    config.worker_stack_bytes = PMPD_WORKER_STACK_BYTES;
    assert_int_equal(pmpd_session_create(&model->model, &config, &arena, &s), PMPD_OK);
    assert_int_equal(arena.used, bytes);
    pmpd_session_destroy(s);
    free(block);
}

/* Greedy tokens after BOS, written to out. */
typedef struct greedy_run {
    int n_threads;
    int32_t tokens[120];
    pmpd_status status;
} greedy_run;

static void *greedy_thread(void *arg)
{
    greedy_run *run = (greedy_run *)arg;
    pmpd_session_config config;
    pmpd_arena arena;
    pmpd_session *s = NULL;
    const float *logits = NULL;
    size_t bytes, i;
    int32_t token = 1;
    void *block;
    pmpd_session_config_init(&config);
    config.context_length = 128;
    config.n_threads = (uint32_t)run->n_threads;
    run->status = pmpd_session_plan(&model->model, &config, &bytes);
    if (run->status != PMPD_OK)
        return NULL;
    block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    pmpd_arena_init(&arena, test_aligned(block), bytes);
    run->status = pmpd_session_create(&model->model, &config, &arena, &s);
    for (i = 0; run->status == PMPD_OK && i < 120; i++) {
        int32_t t, best = 0;
        run->status = pmpd_session_decode(s, token, &logits);
        if (run->status != PMPD_OK)
            break;
        for (t = 1; t < 512; t++)
            if (logits[t] > logits[best])
                best = t;
        run->tokens[i] = token = best;
    }
    pmpd_session_destroy(s);
    free(block);
    return NULL;
}

static void test_two_sessions_in_two_threads_equal_one(void **state)
{
    greedy_run alone, a, b;
    pthread_t ta, tb;
    (void)state;
    memset(&alone, 0, sizeof alone);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    alone.n_threads = 1;
    a.n_threads = 1;
    b.n_threads = PMPD_MAX_THREADS >= 2 ? 2 : 1;
    greedy_thread(&alone);
    assert_int_equal(alone.status, PMPD_OK);
    assert_int_equal(pthread_create(&ta, NULL, greedy_thread, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, greedy_thread, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.status, PMPD_OK);
    assert_int_equal(b.status, PMPD_OK);
    assert_memory_equal(alone.tokens, a.tokens, sizeof a.tokens);
    assert_memory_equal(alone.tokens, b.tokens, sizeof b.tokens);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_is_exact),
        cmocka_unit_test(test_plans_add_up),
        cmocka_unit_test(test_bad_requests_get_statuses),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_refused_worker_stack),
        cmocka_unit_test(test_two_sessions_in_two_threads_equal_one),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
