/* The schedule trace: the pool records one event per range of a job a
 * thread runs, with its thread, timing and label; and pmpd_session_trace on
 * stories260K in q4, two threads (a model this small runs every job on
 * the calling thread): every event names a real step (a matrix of the model, attention
 * or an element-wise step) of a real layer and thread; one thread's events
 * never overlap in time; each layer's attention appears; a small trace
 * keeps its first events and counts the rest as dropped, adding up to what
 * a large one records; clearing empties it; without a trace nothing is
 * recorded; the trace's arena room is planned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"

#define PROMPT 20
#define DECODE 3

static test_opened_model q4;

static int setup(void **state)
{
    (void)state;
    if (test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_Q4, &q4) != PMPD_OK) {
        fprintf(stderr, "test_trace: ../shared/models missing\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_opened_close(&q4);
    return 0;
}

static pmpd_session_config traced(uint32_t events)
{
    pmpd_session_config config;
    pmpd_session_config_init(&config);
    config.n_threads = 2;
    config.prefill_batch = 8; /* several chunks */
    config.trace_events = events;
    return config;
}

/* A prompt of PROMPT tokens, then DECODE greedy-free steps on fixed ids. */
static void run_workload(pmpd_session *s)
{
    int32_t tokens[PROMPT];
    const float *logits;
    size_t i;
    for (i = 0; i < PROMPT; i++)
        tokens[i] = (int32_t)(1 + (i * 37) % 500);
    assert_int_equal(pmpd_session_prefill(s, tokens, PROMPT, &logits), PMPD_OK);
    for (i = 0; i < DECODE; i++)
        assert_int_equal(pmpd_session_decode(s, (int32_t)(3 + i), &logits), PMPD_OK);
}

/* Whether name is one of the model's matrices (a product's or its input's
 * quantization's name). */
static int is_matrix_name(const pmpd_model *m, const char *name, uint32_t length)
{
    uint32_t l, i;
    if (m->classifier->name_length == length && memcmp(m->classifier->name, name, length) == 0)
        return 1;
    for (l = 0; l < m->info.n_layers; l++) {
        const pmpd_tensor *w[7];
        w[0] = m->layers[l].wq, w[1] = m->layers[l].wk, w[2] = m->layers[l].wv, w[3] = m->layers[l].wo;
        w[4] = m->layers[l].w_gate, w[5] = m->layers[l].w_up, w[6] = m->layers[l].w_down;
        for (i = 0; i < 7; i++)
            if (w[i]->name_length == length && memcmp(w[i]->name, name, length) == 0)
                return 1;
    }
    return 0;
}

static int name_is(const pmpd_trace_event *e, const char *text)
{
    return e->name_length == strlen(text) && memcmp(e->name, text, e->name_length) == 0;
}

static void spin_items(void *ctx, size_t begin, size_t end, unsigned worker)
{
    volatile unsigned long *sink = (volatile unsigned long *)ctx;
    size_t i;
    (void)worker;
    for (i = begin; i < end; i++)
        *sink += i;
}

static void test_pool_records_each_share(void **state)
{
    size_t bytes, pool_bytes;
    unsigned char *block;
    pmpd_arena arena;
    pmpd_pool *pool;
    pmpd_trace *trace;
    volatile unsigned long sink = 0;
    int seen[2] = {0, 0};
    size_t i, first_job;
    (void)state;
    assert_int_equal(pmpd_trace_plan(16, &bytes), PMPD_OK);
    assert_int_equal(pmpd_pool_plan(2, &pool_bytes), PMPD_OK);
    block = (unsigned char *)malloc(bytes + pool_bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(block);
    assert_int_equal(pmpd_arena_init(&arena, test_aligned(block), bytes + pool_bytes), PMPD_OK);
    assert_int_equal(pmpd_pool_create(&arena, 2, 0, &pool), PMPD_OK);
    assert_int_equal(pmpd_trace_create(&arena, 16, &trace), PMPD_OK);
    pmpd_pool_set_trace(pool, trace);
    pmpd_trace_layer(pmpd_pool_get_trace(pool), 3);
    pmpd_trace_label(pmpd_pool_get_trace(pool), "job-a", 5, "product");
    pmpd_pool_run(pool, spin_items, (void *)&sink, 100000, 1);
    /* A range per thread, and the shared tail's chunks (pool.h). */
    first_job = pmpd_trace_count(trace);
    assert_true(first_job >= 2 && first_job <= 6);
    assert_int_equal(pmpd_trace_dropped(trace), 0);
    for (i = 0; i < first_job; i++) {
        const pmpd_trace_event *e = &trace->events[i];
        assert_true(e->thread < 2);
        seen[e->thread] = 1;
        assert_int_equal(e->name_length, 5);
        assert_memory_equal(e->name, "job-a", 5);
        assert_string_equal(e->category, "product");
        assert_int_equal(e->layer, 3);
        assert_true(e->begin_ns <= e->end_ns);
    }
    assert_true(seen[0] && seen[1]);
    /* A job too small to share runs (and is recorded) on the caller. */
    pmpd_trace_label(pmpd_pool_get_trace(pool), "job-b", 5, "elementwise");
    pmpd_pool_run_weighed(pool, spin_items, (void *)&sink, 3, 1, 1);
    assert_int_equal(pmpd_trace_count(trace), first_job + 1);
    assert_int_equal(trace->events[first_job].thread, 0);
    assert_memory_equal(trace->events[first_job].name, "job-b", 5);
    pmpd_pool_destroy(pool);
    free(block);
}

static void test_events_name_real_steps(void **state)
{
    pmpd_session_config config = traced(1u << 14);
    const pmpd_model *m = q4.model;
    const pmpd_trace_event *events;
    size_t count, dropped, i, j;
    void *memory;
    pmpd_session *s = test_session_open(m, &config, &memory);
    unsigned char attention_seen[64] = {0}, chunks_seen[4] = {0};
    size_t products = 0;
    (void)state;
    assert_true(m->info.n_layers <= sizeof attention_seen);
    run_workload(s);
    assert_int_equal(pmpd_session_trace(s, &events, &count, &dropped), PMPD_OK);
    assert_int_equal(dropped, 0);
    assert_true(count > 0);
    for (i = 0; i < count; i++) {
        const pmpd_trace_event *e = &events[i];
        assert_true(e->begin_ns <= e->end_ns);
        assert_true(e->thread < config.n_threads);
        assert_true(e->layer < m->info.n_layers || e->layer == PMPD_TRACE_NO_LAYER);
        if (strcmp(e->category, "product") == 0 || strcmp(e->category, "quantize") == 0) {
            assert_true(is_matrix_name(m, e->name, e->name_length));
            products += strcmp(e->category, "product") == 0;
        } else if (strcmp(e->category, "attention") == 0) {
            assert_true(name_is(e, "attention"));
            assert_true(e->layer < m->info.n_layers);
            attention_seen[e->layer] = 1;
        } else {
            assert_string_equal(e->category, "elementwise");
            /* The in-order steps, and the out-of-order prefill's
             * (prefill_graph.c). */
            assert_true(name_is(e, "rmsnorm") || name_is(e, "swiglu") || name_is(e, "add") ||
                        name_is(e, "embedding") || name_is(e, "rope") || name_is(e, "kv-write") ||
                        name_is(e, "add+rmsnorm"));
        }
        /* The prompt's chunks are numbered; decode steps have none. */
        assert_true(e->chunk == PMPD_TRACE_NO_CHUNK || e->chunk < (PROMPT + config.prefill_batch - 1) / config.prefill_batch);
        chunks_seen[e->chunk == PMPD_TRACE_NO_CHUNK ? 3 : e->chunk] = 1;
    }
    assert_true(products > 0);
    for (i = 0; i < m->info.n_layers; i++)
        assert_true(attention_seen[i]);
    for (i = 0; i < 4; i++)
        assert_true(chunks_seen[i]);
    /* A thread runs one share at a time: its events, in order of start,
     * never overlap (quadratic, but the trace is small). */
    for (i = 0; i < count; i++)
        for (j = 0; j < count; j++)
            if (i != j && events[i].thread == events[j].thread && events[i].begin_ns < events[j].begin_ns)
                assert_true(events[i].end_ns <= events[j].begin_ns);
    test_session_close(s, memory);
}

static void test_small_trace_drops_the_rest(void **state)
{
    pmpd_session_config big = traced(1u << 14), small = traced(5);
    const pmpd_trace_event *events;
    size_t count_big, count_small, dropped_big, dropped_small;
    void *memory;
    pmpd_session *s;
    (void)state;
    s = test_session_open(q4.model, &big, &memory);
    run_workload(s);
    assert_int_equal(pmpd_session_trace(s, &events, &count_big, &dropped_big), PMPD_OK);
    test_session_close(s, memory);

    s = test_session_open(q4.model, &small, &memory);
    run_workload(s);
    assert_int_equal(pmpd_session_trace(s, &events, &count_small, &dropped_small), PMPD_OK);
    assert_int_equal(count_small, 5);
    assert_int_equal(dropped_big, 0);
    /* The same workload splits into the same shares. */
    assert_int_equal(count_small + dropped_small, count_big);

    assert_int_equal(pmpd_session_trace_clear(s), PMPD_OK);
    assert_int_equal(pmpd_session_trace(s, &events, &count_small, &dropped_small), PMPD_OK);
    assert_int_equal(count_small, 0);
    assert_int_equal(dropped_small, 0);
    assert_int_equal(pmpd_session_decode(s, 7, NULL), PMPD_OK);
    assert_int_equal(pmpd_session_trace(s, &events, &count_small, &dropped_small), PMPD_OK);
    assert_true(count_small > 0);
    test_session_close(s, memory);
}

static void test_no_trace_and_errors(void **state)
{
    pmpd_session_config off = traced(0), on = traced(1000);
    const pmpd_trace_event *events = NULL;
    size_t count = 1, dropped = 1, plan_off, plan_on;
    void *memory;
    pmpd_session *s;
    (void)state;
    s = test_session_open(q4.model, &off, &memory);
    run_workload(s);
    assert_int_equal(pmpd_session_trace(s, &events, &count, &dropped), PMPD_OK);
    assert_int_equal(count, 0);
    assert_int_equal(dropped, 0);
    assert_int_equal(pmpd_session_trace(NULL, &events, &count, &dropped), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_trace(s, NULL, &count, &dropped), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_trace_clear(NULL), PMPD_ERR_INVALID_ARGUMENT);
    pmpd_session_destroy(s);
    assert_int_equal(pmpd_session_trace(s, &events, &count, &dropped), PMPD_ERR_STATE);
    assert_int_equal(pmpd_session_trace_clear(s), PMPD_ERR_STATE);
    free(memory);

    /* The room for 1000 events is in the plan (test_session_open creates
     * sessions in exactly the planned bytes). */
    assert_int_equal(pmpd_session_plan(q4.model, &off, &plan_off), PMPD_OK);
    assert_int_equal(pmpd_session_plan(q4.model, &on, &plan_on), PMPD_OK);
    assert_true(plan_on - plan_off >= 1000 * sizeof(pmpd_trace_event));
    assert_true(plan_on - plan_off <= 1000 * sizeof(pmpd_trace_event) + 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_records_each_share),
        cmocka_unit_test(test_events_name_real_steps),
        cmocka_unit_test(test_small_trace_drops_the_rest),
        cmocka_unit_test(test_no_trace_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
