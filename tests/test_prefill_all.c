/* pmpd_session_prefill_all: the logits after every token of a prefill, on
 * stories260K with f32, q8 and q4 weights (the quantized classifier is q8,
 * whose batched product needs scratch the session must plan for).  Row i
 * must equal the last logits of a fresh session prefilled with tokens
 * 0..i (its last batch shorter, the classifier on one row instead of all):
 * to float rounding with f32 weights; with int8 activations, whose rounding
 * an ulp can tip, to the KL bound test_quant_model puts on prefill against
 * decode.  The session's own logits must be the last row, and the position and the
 * following decode must continue as after pmpd_session_prefill. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define PA_TOKENS 30
#define PA_VOCAB 512
#define PA_BATCH 8

static int32_t ids[PA_TOKENS];

static void pa_open(uint32_t type, test_opened_model *m)
{
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", type, m), PMPD_OK);
}

static pmpd_session *pa_session(const test_opened_model *m, void **block)
{
    pmpd_session_config config;
    pmpd_session_config_init(&config);
    config.context_length = 64;
    config.prefill_batch = PA_BATCH;
    config.n_threads = 2;
    return test_session_open(m->model, &config, block);
}

static void check_type(uint32_t type)
{
    static float rows[PA_TOKENS * PA_VOCAB];
    test_opened_model m;
    void *block, *oracle_block;
    pmpd_session *s, *oracle;
    const float *logits = NULL, *expected = NULL;
    size_t i, v;
    pa_open(type, &m);
    s = pa_session(&m, &block);
    oracle = pa_session(&m, &oracle_block);
    assert_int_equal(pmpd_session_prefill_all(s, ids, PA_TOKENS, rows), PMPD_OK);
    assert_int_equal(pmpd_session_position(s), PA_TOKENS);
    for (i = 0; i < PA_TOKENS; i++) {
        double worst = 0.0, kl;
        assert_int_equal(pmpd_session_reset(oracle), PMPD_OK);
        assert_int_equal(pmpd_session_prefill(oracle, ids, i + 1, &expected), PMPD_OK);
        for (v = 0; v < PA_VOCAB; v++) {
            double d = fabs((double)rows[i * PA_VOCAB + v] - expected[v]);
            worst = d > worst ? d : worst;
        }
        kl = test_softmax_kl(expected, rows + i * PA_VOCAB, PA_VOCAB);
        if (type == PMPD_TENSOR_F32 ? worst > 1e-4 : kl > 1e-3)
            fail_msg("type %u, row %zu: logits differ by %g, KL %g", (unsigned)type, i, worst, kl);
    }
    assert_int_equal(pmpd_session_logits(s, &logits), PMPD_OK);
    assert_memory_equal(logits, rows + (PA_TOKENS - 1) * PA_VOCAB, PA_VOCAB * sizeof(float));
    /* The sessions stand at the same place: one more token agrees. */
    assert_int_equal(pmpd_session_decode(s, ids[0], &logits), PMPD_OK);
    assert_int_equal(pmpd_session_decode(oracle, ids[0], &expected), PMPD_OK);
    assert_memory_equal(logits, expected, PA_VOCAB * sizeof(float));
    test_session_close(s, block);
    test_session_close(oracle, oracle_block);
    test_opened_close(&m);
}

static void test_f32(void **state)
{
    (void)state;
    check_type(PMPD_TENSOR_F32);
}

static void test_q8(void **state)
{
    (void)state;
    check_type(PMPD_TENSOR_Q8);
}

static void test_q4(void **state)
{
    (void)state;
    check_type(PMPD_TENSOR_Q4);
}

static void test_errors(void **state)
{
    static float rows[PMPD_ARENA_ALIGNMENT];
    test_opened_model m;
    void *block;
    pmpd_session *s;
    int32_t bad = PA_VOCAB;
    (void)state;
    pa_open(PMPD_TENSOR_F32, &m);
    s = pa_session(&m, &block);
    assert_int_equal(pmpd_session_prefill_all(s, ids, 2, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_prefill_all(NULL, ids, 2, rows), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_session_prefill_all(s, &bad, 1, rows), PMPD_ERR_TOKEN_RANGE);
    assert_int_equal(pmpd_session_position(s), 0);
    test_session_close(s, block);
    test_opened_close(&m);
}

static int setup(void **state)
{
    (void)state;
    return test_read_vector_ids("stories260K_bos_greedy.ids", ids, PA_TOKENS) == PA_TOKENS ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32),
        cmocka_unit_test(test_q8),
        cmocka_unit_test(test_q4),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
