/* pmpd-kvcalibrate's path (pmpd_pq_calibrate_file) on models of every weight
 * type: the copy it writes keeps every tensor byte for byte and every other
 * section, gains one codebook section, and a PQ session runs on it.  A
 * nested model used to be refused with a bare "invalid argument". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static void open_model(const char *path, test_opened_file *o)
{
    assert_int_equal(test_open_file(path, o), PMPD_OK);
}

static void convert(uint32_t type, const char *out)
{
    assert_int_equal(test_convert_stories(type, out), PMPD_OK);
}

/* A few greedy steps with a PQ cache: the codebooks load and work. */
static void run_pq_session(const pmpd_model *model)
{
    pmpd_session_config config;
    pmpd_session *session = NULL;
    pmpd_arena arena;
    size_t bytes;
    const float *logits;
    int32_t bos = 1;
    int step;
    void *block;
    pmpd_session_config_init(&config);
    config.kv_type = PMPD_KV_PQ;
    config.context_length = 64;
    assert_int_equal(pmpd_session_plan(model, &config, &bytes), PMPD_OK);
    block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(block);
    pmpd_arena_init(&arena, (unsigned char *)block + (PMPD_ARENA_ALIGNMENT - (uintptr_t)block % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT,
                    bytes);
    assert_int_equal(pmpd_session_create(model, &config, &arena, &session), PMPD_OK);
    assert_int_equal(pmpd_session_prefill(session, &bos, 1, &logits), PMPD_OK);
    for (step = 0; step < 40; step++)
        assert_int_equal(pmpd_session_decode(session, test_argmax(logits, model->info.vocab_size), &logits), PMPD_OK);
    pmpd_session_destroy(session);
    free(block);
}

static void check_type(uint32_t type)
{
    char in[96], out[96];
    pmpd_pq_calibration_options options;
    pmpd_error err;
    test_opened_file before, after;
    uint32_t i, codebooks = 0;
    snprintf(in, sizeof in, "/tmp/pmpd-test-pqcal-in-%ld-%u.pmpd", (long)getpid(), (unsigned)type);
    snprintf(out, sizeof out, "/tmp/pmpd-test-pqcal-out-%ld-%u.pmpd", (long)getpid(), (unsigned)type);
    convert(type, in);
    pmpd_pq_calibration_options_init(&options);
    options.n_sequences = 2;
    options.sequence_length = 64;
    options.iterations = 4;
    pmpd_error_clear(&err);
    assert_int_equal(pmpd_pq_calibrate_file(in, out, &options, &err), PMPD_OK);
    open_model(in, &before);
    open_model(out, &after);
    assert_int_equal(after.model->n_tensors, before.model->n_tensors);
    for (i = 0; i < before.model->n_tensors; i++) {
        const pmpd_tensor *a = &before.model->tensors[i], *b = &after.model->tensors[i];
        assert_int_equal(b->type, a->type);
        assert_true(b->size == a->size);
        assert_memory_equal(b->data, a->data, (size_t)a->size);
    }
    assert_int_equal(after.model->n_sections, before.model->n_sections + 1);
    for (i = 0; i < after.model->n_sections; i++)
        codebooks += after.model->sections[i].kind == PMPD_SECTION_KV_CODEBOOKS;
    assert_int_equal(codebooks, 1);
    run_pq_session(after.model);
    test_file_close(&before);
    test_file_close(&after);
    remove(in);
    remove(out);
}

static void test_every_weight_type(void **state)
{
    static const uint32_t types[] = {PMPD_TENSOR_F32, PMPD_TENSOR_Q4, PMPD_TENSOR_ANYPREC};
    size_t t;
    (void)state;
    for (t = 0; t < sizeof types / sizeof types[0]; t++)
        check_type(types[t]);
}

static void test_errors_name_the_reason(void **state)
{
    char out[96];
    pmpd_pq_calibration_options options;
    pmpd_error err;
    (void)state;
    snprintf(out, sizeof out, "/tmp/pmpd-test-pqcal-bad-%ld.pmpd", (long)getpid());
    pmpd_pq_calibration_options_init(&options);
    pmpd_error_clear(&err);
    assert_int_equal(pmpd_pq_calibrate_file("/nonexistent/model.pmpd", out, &options, &err), PMPD_ERR_NOT_FOUND);
    convert(PMPD_TENSOR_F32, out);
    options.bits = 9;
    pmpd_error_clear(&err);
    assert_int_equal(pmpd_pq_calibrate_file(out, "/tmp/never-written.pmpd", &options, &err),
                     PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "bits 1-8"));
    assert_int_equal(access("/tmp/never-written.pmpd", F_OK), -1);
    options.bits = 8;
    options.n_sequences = 1;
    options.sequence_length = 8;
    options.iterations = 1;
    pmpd_error_clear(&err);
    assert_int_equal(pmpd_pq_calibrate_file(out, "/nonexistent-dir/out.pmpd", &options, &err), PMPD_ERR_IO);
    assert_non_null(strstr(err.message, "cannot create /nonexistent-dir/out.pmpd.tmp"));
    remove(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_weight_type),
        cmocka_unit_test(test_errors_name_the_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
