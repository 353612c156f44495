/* Worker threads on the stack size pmpd.h promises (worker_stack_bytes =
 * PMPD_WORKER_STACK_BYTES; 16x in sanitizer builds): for weight formats
 * with the deepest worker frames (the rotated ones: NUQ, VQ and, outside
 * the reduced run, TCQ, whose Hadamard mix
 * keeps a 44-point sign table on the stack for stories260K's 172 columns)
 * and the others, a prefill in batches and decode steps on three threads
 * give the same logits, bit for bit, as on the system's default stacks;
 * and so do 32 KiB workers where the system takes that size (x86-64 glibc;
 * not arm64 glibc, whose minimum is 128 KiB) and no sanitizer inflates the
 * frames: a kernel whose frames grow past the margin crashes here instead
 * of on a board (16 KiB workers fail the rotated formats). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define WS_TIGHT (32u * 1024u)
#define WS_PROMPT 24
#define WS_STEPS 8

/* Logits after the prompt (prefilled 8 at a time) and after each of
 * WS_STEPS greedy decode steps, [WS_STEPS + 1][vocab], malloc'ed. */
static float *ws_run(const pmpd_model *model, uint32_t stack_bytes)
{
    const size_t vocab = pmpd_model_get_info(model)->vocab_size;
    float *out = (float *)malloc((WS_STEPS + 1) * vocab * sizeof(float));
    int32_t prompt[WS_PROMPT];
    pmpd_session_config config;
    const float *logits;
    pmpd_session *s;
    void *block;
    size_t i;
    assert_non_null(out);
    for (i = 0; i < WS_PROMPT; i++)
        prompt[i] = i == 0 ? 1 : (int32_t)(3 + (i * 37) % (vocab - 3));
    pmpd_session_config_init(&config);
    config.context_length = 64;
    config.n_threads = 3;
    config.prefill_batch = 8;
    config.worker_stack_bytes = stack_bytes;
    s = test_session_open(model, &config, &block);
    assert_non_null(s);
    assert_int_equal(pmpd_session_prefill(s, prompt, WS_PROMPT, &logits), PMPD_OK);
    memcpy(out, logits, vocab * sizeof(float));
    for (i = 1; i <= WS_STEPS; i++) {
        assert_int_equal(pmpd_session_decode(s, test_argmax(logits, vocab), &logits), PMPD_OK);
        memcpy(out + i * vocab, logits, vocab * sizeof(float));
    }
    test_session_close(s, block);
    return out;
}

static void ws_check(uint32_t type)
{
    test_opened_model m;
    float *system, *small;
    size_t vocab;
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", type, &m), PMPD_OK);
    vocab = pmpd_model_get_info(m.model)->vocab_size;
    system = ws_run(m.model, 0);
    small = ws_run(m.model, TEST_WORKER_STACK_BYTES);
    assert_memory_equal(system, small, (WS_STEPS + 1) * vocab * sizeof(float));
    free(small);
#ifndef TEST_SANITIZED
    {
        long least = sysconf(_SC_THREAD_STACK_MIN);
        if (least > 0 && (unsigned long)least <= WS_TIGHT) {
            small = ws_run(m.model, WS_TIGHT);
            assert_memory_equal(system, small, (WS_STEPS + 1) * vocab * sizeof(float));
            free(small);
        }
    }
#endif
    free(system);
    test_opened_close(&m);
}

static void test_rotated_formats(void **state)
{
    (void)state;
    ws_check(PMPD_TENSOR_NUQ);
    ws_check(PMPD_TENSOR_VQ2);
    /* TCQ's Viterbi encoder takes seconds natively, minutes under qemu. */
    if (!test_reduced())
        ws_check(PMPD_TENSOR_TCQ);
}

static void test_other_formats(void **state)
{
    (void)state;
    ws_check(PMPD_TENSOR_F32);
    ws_check(PMPD_TENSOR_Q4);
    ws_check(PMPD_TENSOR_ANYPREC);
    ws_check(PMPD_TENSOR_W8A8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rotated_formats),
        cmocka_unit_test(test_other_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
