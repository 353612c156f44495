/* The out-of-order prefill (model/prefill_graph.c, exec/chunk_schedule.c)
 * against the in-order prefill (prefill_in_flight = 1), whose logits
 * tests/test_llama2c_vectors.c holds to llama2.c's: for q4, q8, q2cb and
 * W8A8 weights, f32, f16 and int8 KV caches, 1-4 threads, 2-8 chunks in
 * flight, with and without a dedicated float lane, and prompts that end in
 * a full chunk, a one-token chunk or a ragged one, the logits after the
 * prompt and after each of a few decode steps that follow (which read the
 * cache the prefill wrote) are bit for bit the same.  Also: the steps really
 * ran out of order (a trace shows a later chunk's step starting before an
 * earlier chunk's product), nested weights run out of order with the same
 * logits, float weights (one-call products) fall back to the in-order
 * path, and the new fields are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define DECODE 3

static const uint32_t types[] = {PMPD_TENSOR_Q4, PMPD_TENSOR_Q8, PMPD_TENSOR_Q2CB, PMPD_TENSOR_W8A8};
#define N_TYPES (sizeof types / sizeof types[0])
static test_opened_model models[N_TYPES];

/* Under emulation (PMPD_TEST_REDUCED) q4 and W8A8 weights (the others'
 * kernels are emulated in their own tests), one KV type, two prompt shapes
 * and 1 and 3 threads. */
static int setup(void **state)
{
    size_t i;
    (void)state;
    for (i = 0; i < N_TYPES; i++)
        if ((!test_reduced() || types[i] == PMPD_TENSOR_Q4 || types[i] == PMPD_TENSOR_W8A8) &&
            test_open_shared("models/stories260K.bin", "models/tok512.bin", types[i], &models[i]) != PMPD_OK) {
            fprintf(stderr, "test_prefill_graph: ../shared/models missing\n");
            return -1;
        }
    return 0;
}

static int teardown(void **state)
{
    size_t i;
    (void)state;
    for (i = 0; i < N_TYPES; i++)
        test_opened_close(&models[i]);
    return 0;
}

/* Logits after a prompt of n tokens, then after each of DECODE decode
 * steps: (1 + DECODE) rows of vocab floats (malloc'ed). */
static float *run(const pmpd_model *m, const pmpd_session_config *config, size_t n)
{
    size_t vocab = m->info.vocab_size, i;
    float *out = (float *)malloc((1 + DECODE) * vocab * sizeof(float));
    int32_t *tokens = (int32_t *)malloc(n * sizeof(int32_t));
    const float *logits;
    void *memory;
    pmpd_session *s = test_session_open(m, config, &memory);
    assert_non_null(out);
    assert_non_null(tokens);
    for (i = 0; i < n; i++)
        tokens[i] = (int32_t)(1 + (i * 37 + 11) % (vocab - 1));
    assert_int_equal(pmpd_session_prefill(s, tokens, n, &logits), PMPD_OK);
    memcpy(out, logits, vocab * sizeof(float));
    for (i = 0; i < DECODE; i++) {
        assert_int_equal(pmpd_session_decode(s, (int32_t)(5 + i * 3), &logits), PMPD_OK);
        memcpy(out + (1 + i) * vocab, logits, vocab * sizeof(float));
    }
    test_session_close(s, memory);
    free(tokens);
    return out;
}

static pmpd_session_config config_of(uint32_t batch, uint32_t threads, uint32_t in_flight, uint32_t float_threads,
                                     uint32_t kv_type)
{
    pmpd_session_config c;
    pmpd_session_config_init(&c);
    c.context_length = 256;
    c.prefill_batch = batch;
    c.n_threads = threads;
    c.prefill_in_flight = in_flight;
    c.float_threads = float_threads;
    c.kv_type = kv_type;
    return c;
}

static void test_bit_exact_with_in_order(void **state)
{
    static const uint32_t kv_types[] = {PMPD_KV_F32, PMPD_KV_F16, PMPD_KV_INT8};
    static const struct {
        uint32_t batch;
        size_t prompt;
    } shapes[] = {{8, 33}, {5, 23}, {8, 32}, {16, 100}};
    size_t n_kv = test_reduced() ? 1 : 3, n_shapes = test_reduced() ? 2 : 4, t, k, sh, th, fl;
    (void)state;
    for (t = 0; t < N_TYPES; t++) {
        if (test_reduced() && types[t] != PMPD_TENSOR_Q4 && types[t] != PMPD_TENSOR_W8A8)
            continue;
        for (k = 0; k < n_kv; k++)
            for (sh = 0; sh < n_shapes; sh++) {
                const pmpd_model *m = models[t].model;
                size_t vocab = m->info.vocab_size, n = shapes[sh].prompt;
                pmpd_session_config in_order = config_of(shapes[sh].batch, 1, 1, 0, kv_types[k]);
                float *ref = run(m, &in_order, n);
                for (th = 1; th <= 4; th += test_reduced() ? 2 : 1)
                    for (fl = 0; fl < th && fl < 2; fl++) {
                        uint32_t in_flight = (uint32_t)(th == 3 ? 8 : 2 + (sh % 2));
                        pmpd_session_config ooo =
                            config_of(shapes[sh].batch, (uint32_t)th, in_flight, (uint32_t)fl, kv_types[k]);
                        float *got = run(m, &ooo, n);
                        if (memcmp(ref, got, (1 + DECODE) * vocab * sizeof(float)) != 0) {
                            fprintf(stderr, "type %u kv %u batch %u prompt %zu threads %zu float %zu in flight %u\n",
                                    (unsigned)types[t], (unsigned)kv_types[k], (unsigned)shapes[sh].batch, n, th,
                                    fl, (unsigned)in_flight);
                            fail();
                        }
                        free(got);
                    }
                free(ref);
            }
    }
}

/* One thread, two chunks in flight: the float lane's work of chunk 1 (its
 * embedding) comes before chunk 0's first product, and the run still ends
 * with every step of every chunk traced once per tile. */
static void test_runs_out_of_order(void **state)
{
    pmpd_session_config c = config_of(8, 1, 2, 0, PMPD_KV_F32);
    const pmpd_model *m = models[0].model;
    const pmpd_trace_event *events;
    size_t count, dropped, i, first_product = (size_t)-1, first_chunk1 = (size_t)-1, kv_writes[3] = {0};
    int32_t tokens[20];
    const float *logits;
    void *memory;
    pmpd_session *s;
    (void)state;
    c.trace_events = 1u << 14;
    s = test_session_open(m, &c, &memory);
    for (i = 0; i < 20; i++)
        tokens[i] = (int32_t)(1 + i);
    assert_int_equal(pmpd_session_prefill(s, tokens, 20, &logits), PMPD_OK);
    assert_int_equal(pmpd_session_trace(s, &events, &count, &dropped), PMPD_OK);
    assert_int_equal(dropped, 0);
    for (i = 0; i < count; i++) {
        const pmpd_trace_event *e = &events[i];
        if (e->chunk == 0 && strcmp(e->category, "product") == 0 && first_product == (size_t)-1)
            first_product = i;
        if (e->chunk == 1 && first_chunk1 == (size_t)-1)
            first_chunk1 = i;
        if (e->name_length == 8 && memcmp(e->name, "kv-write", 8) == 0) {
            assert_true(e->chunk < 3);
            kv_writes[e->chunk]++;
        }
    }
    assert_true(first_chunk1 < first_product);
    for (i = 0; i < 3; i++)
        assert_int_equal(kv_writes[i], m->info.n_layers);
    test_session_close(s, memory);
}

/* Nested weights (at their widest: no schedule set) run out of order too;
 * float weights, whose product is one call, run in order whatever
 * prefill_in_flight says.  Both give the in-order logits. */
static void test_nested_and_float(void **state)
{
    static const uint32_t kinds[] = {PMPD_TENSOR_ANYPREC, PMPD_TENSOR_F32};
    test_opened_model m;
    pmpd_session_config one = config_of(8, 2, 1, 0, PMPD_KV_F32), two = config_of(8, 2, 2, 0, PMPD_KV_F32);
    float *a, *b;
    size_t k;
    (void)state;
    for (k = 0; k < 2; k++) {
        assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", kinds[k], &m), PMPD_OK);
        a = run(m.model, &one, 30);
        b = run(m.model, &two, 30);
        assert_memory_equal(a, b, (1 + DECODE) * m.model->info.vocab_size * sizeof(float));
        free(a);
        free(b);
        test_opened_close(&m);
    }
}

static void test_config_checks(void **state)
{
    const pmpd_model *m = models[0].model;
    pmpd_session_config c = config_of(8, 2, 9, 0, PMPD_KV_F32);
    size_t one, two;
    (void)state;
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_ERR_INVALID_ARGUMENT);
    c = config_of(8, 2, 2, 2, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_ERR_INVALID_ARGUMENT);
    c = config_of(8, 1, 0, 1, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_ERR_INVALID_ARGUMENT);
    /* Each chunk in flight beyond the first costs a batch of activations. */
    c = config_of(8, 2, 1, 0, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_OK);
    c = config_of(8, 2, 2, 0, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &two), PMPD_OK);
    assert_true(two > one + 8 * (2 * m->info.dim + m->info.hidden_dim) * sizeof(float));
    /* The default: out of order with several threads, in order with one. */
    c = config_of(8, 2, 0, 0, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_OK);
    assert_int_equal(one, two);
    c = config_of(8, 1, 1, 0, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &two), PMPD_OK);
    c = config_of(8, 1, 0, 0, PMPD_KV_F32);
    assert_int_equal(pmpd_session_plan(m, &c, &one), PMPD_OK);
    assert_int_equal(one, two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bit_exact_with_in_order),
        cmocka_unit_test(test_runs_out_of_order),
        cmocka_unit_test(test_nested_and_float),
        cmocka_unit_test(test_config_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
