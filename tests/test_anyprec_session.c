/* Nested any-precision weights in a whole model (stories260K): a session
 * reading the 4-bit parent at k bits computes exactly what a model quantized
 * directly at k bits computes; decode widths follow the schedule token by
 * token; the schedule section round-trips and bad ones are refused; the
 * loader refuses damaged ANYPREC tensors. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/weights/grouped/qformat.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/quant/quant.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define APS_PROMPT_TOKENS 5
#define APS_DECODE_TOKENS 8

typedef struct aps_model {
    test_container container;
    void *arena_block;
    pmpd_arena arena;
    pmpd_model *model;
} aps_model;

/* stories260K with its layer matrices as ANYPREC (seed 2 .. parent), plus
 * an optional schedule section. */
static void aps_build(aps_model *m, unsigned parent, const pmpd_precision_schedule *schedule)
{
    pmpd_build_model b;
    pmpd_error err;
    size_t arena_bytes = (size_t)8 << 20;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    assert_int_equal(pmpd_anyprec_build_convert(&b, 2, parent, NULL, 0, NULL, NULL), PMPD_OK);
    if (schedule) {
        unsigned char bytes[128];
        size_t size = 0;
        assert_int_equal(pmpd_precision_schedule_encode(schedule, bytes, sizeof bytes, &size), PMPD_OK);
        assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_PRECISION_SCHEDULE, 1, 0, bytes, size), PMPD_OK);
    }
    assert_int_equal(test_serialize(&b, &m->container), PMPD_OK);
    pmpd_build_free(&b);
    m->arena_block = malloc(arena_bytes);
    assert_non_null(m->arena_block);
    assert_int_equal(pmpd_arena_init(&m->arena, m->arena_block, arena_bytes), PMPD_OK);
    assert_int_equal(pmpd_model_open_memory(m->container.data, m->container.size, &m->arena, &m->model, &err),
                     PMPD_OK);
}

static void aps_free(aps_model *m)
{
    pmpd_model_close(m->model);
    test_container_free(&m->container);
    free(m->arena_block);
}

static const int32_t aps_prompt[APS_PROMPT_TOKENS] = {1, 403, 407, 261, 378};

/* Prefill at 4 bits, decode at 4, then 3 from step to_3, then 2 from step
 * to_2 (PMPD_SCHEDULE_NEVER: not at all). */
static void aps_schedule_4_3_2(pmpd_precision_schedule *schedule, uint32_t to_3, uint32_t to_2)
{
    memset(schedule, 0, sizeof *schedule);
    schedule->prefill_bits = 4;
    schedule->n_widths = 3;
    schedule->decode_bits[0] = 4;
    schedule->decode_bits[1] = 3;
    schedule->decode_bits[2] = 2;
    schedule->from_step[1] = to_3;
    schedule->from_step[2] = to_2;
}

/* Logits after the prompt and after each greedy decode step, in order. */
static void aps_run(aps_model *m, const pmpd_precision_schedule *schedule, float *out, unsigned *widths)
{
    const uint32_t vocab = pmpd_model_get_info(m->model)->vocab_size;
    pmpd_arena_mark mark = pmpd_arena_save(&m->arena);
    pmpd_session *s = NULL;
    const float *logits;
    size_t step;
    assert_int_equal(pmpd_session_create(m->model, NULL, &m->arena, &s), PMPD_OK);
    assert_int_equal(pmpd_session_set_precision(s, schedule), PMPD_OK);
    assert_int_equal(pmpd_session_prefill(s, aps_prompt, APS_PROMPT_TOKENS, &logits), PMPD_OK);
    memcpy(out, logits, vocab * sizeof(float));
    for (step = 0; step < APS_DECODE_TOKENS; step++) {
        int32_t next = test_argmax(logits, vocab);
        assert_int_equal(pmpd_session_decode_step(s), step);
        if (widths)
            widths[step] = pmpd_session_decode_bits(s);
        assert_int_equal(pmpd_session_decode(s, next, &logits), PMPD_OK);
        memcpy(out + (step + 1) * vocab, logits, vocab * sizeof(float));
    }
    pmpd_session_destroy(s);
    pmpd_arena_restore(&m->arena, mark);
}

static size_t aps_floats(const aps_model *m)
{
    return (size_t)(APS_DECODE_TOKENS + 1) * pmpd_model_get_info(m->model)->vocab_size;
}

static void test_parent_at_k_equals_direct_k(void **state)
{
    aps_model parent, direct;
    pmpd_precision_schedule schedule;
    unsigned k, seed = 0, top = 0;
    float *a, *b, *top_logits;
    size_t i, n;
    (void)state;
    aps_build(&parent, 4, NULL);
    assert_int_equal(pmpd_model_anyprec_widths(parent.model, &seed, &top), PMPD_OK);
    assert_int_equal(seed, 2);
    assert_int_equal(top, 4);
    n = aps_floats(&parent);
    a = (float *)malloc(n * sizeof(float));
    b = (float *)malloc(n * sizeof(float));
    top_logits = (float *)malloc(n * sizeof(float));
    aps_run(&parent, NULL, top_logits, NULL);
    for (k = 2; k <= 4; k++) {
        int differs = 0;
        aps_build(&direct, k, NULL);
        pmpd_precision_schedule_uniform(&schedule, k, k);
        aps_run(&parent, &schedule, a, NULL);
        aps_run(&direct, NULL, b, NULL);
        assert_memory_equal(a, b, n * sizeof(float));
        for (i = 0; i < n; i++)
            differs |= a[i] != top_logits[i];
        assert_true(k == 4 ? !differs : differs);
        aps_free(&direct);
    }
    free(a);
    free(b);
    free(top_logits);
    aps_free(&parent);
}

/* Prefill at 4 bits, decode at 4 then 3 from step 2 then 2 from step 5:
 * every step equals a session told the same widths one token at a time. */
static void test_schedule_switches_between_tokens(void **state)
{
    pmpd_precision_schedule schedule, manual;
    aps_model m;
    unsigned widths[APS_DECODE_TOKENS];
    float *scheduled, *by_hand;
    pmpd_session *s = NULL;
    const float *logits;
    uint32_t vocab;
    size_t step;
    (void)state;
    aps_schedule_4_3_2(&schedule, 2, 5);
    aps_build(&m, 4, NULL);
    vocab = pmpd_model_get_info(m.model)->vocab_size;
    scheduled = (float *)malloc(aps_floats(&m) * sizeof(float));
    by_hand = (float *)malloc(aps_floats(&m) * sizeof(float));
    aps_run(&m, &schedule, scheduled, widths);
    for (step = 0; step < APS_DECODE_TOKENS; step++)
        assert_int_equal(widths[step], step < 2 ? 4 : step < 5 ? 3 : 2);

    assert_int_equal(pmpd_session_create(m.model, NULL, &m.arena, &s), PMPD_OK);
    pmpd_precision_schedule_uniform(&manual, 4, 4);
    assert_int_equal(pmpd_session_set_precision(s, &manual), PMPD_OK);
    assert_int_equal(pmpd_session_prefill(s, aps_prompt, APS_PROMPT_TOKENS, &logits), PMPD_OK);
    memcpy(by_hand, logits, vocab * sizeof(float));
    for (step = 0; step < APS_DECODE_TOKENS; step++) {
        int32_t next = test_argmax(logits, vocab);
        pmpd_precision_schedule_uniform(&manual, 4, step < 2 ? 4 : step < 5 ? 3 : 2);
        assert_int_equal(pmpd_session_set_precision(s, &manual), PMPD_OK);
        assert_int_equal(pmpd_session_decode(s, next, &logits), PMPD_OK);
        memcpy(by_hand + (step + 1) * vocab, logits, vocab * sizeof(float));
    }
    assert_memory_equal(scheduled, by_hand, aps_floats(&m) * sizeof(float));
    pmpd_session_destroy(s);
    free(scheduled);
    free(by_hand);
    aps_free(&m);
}

static void test_schedule_rules_and_section(void **state)
{
    pmpd_precision_schedule good, bad, read;
    unsigned char bytes[128];
    size_t size = 0;
    aps_model m;
    pmpd_error err;
    (void)state;
    aps_schedule_4_3_2(&good, 10, PMPD_SCHEDULE_NEVER);
    assert_int_equal(pmpd_precision_schedule_check(&good), PMPD_OK);
    assert_int_equal(pmpd_precision_schedule_bits_at(&good, 0), 4);
    assert_int_equal(pmpd_precision_schedule_bits_at(&good, 9), 4);
    assert_int_equal(pmpd_precision_schedule_bits_at(&good, 10), 3);
    assert_int_equal(pmpd_precision_schedule_bits_at(&good, UINT32_MAX - 1), 3);
    bad = good;
    bad.decode_bits[2] = 3; /* widths must go down */
    assert_int_equal(pmpd_precision_schedule_check(&bad), PMPD_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.from_step[2] = 5; /* and never come back */
    assert_int_equal(pmpd_precision_schedule_check(&bad), PMPD_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.from_step[0] = 1;
    assert_int_equal(pmpd_precision_schedule_check(&bad), PMPD_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.n_widths = 0;
    assert_int_equal(pmpd_precision_schedule_check(&bad), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_precision_schedule_encode(&good, bytes, 10, &size), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(size, 8 + 3 * 8);

    aps_build(&m, 3, &good);
    assert_int_equal(pmpd_precision_schedule_from_model(m.model, &read, &err), PMPD_OK);
    assert_memory_equal(&read, &good, sizeof good);
    aps_free(&m);
    aps_build(&m, 3, NULL);
    assert_int_equal(pmpd_precision_schedule_from_model(m.model, &read, &err), PMPD_ERR_NOT_FOUND);
    aps_free(&m);
}

/* A damaged ANYPREC header is caught by the loader with its offset. */
static void test_loader_checks_anyprec_tensors(void **state)
{
    aps_model m;
    pmpd_model *again = NULL;
    pmpd_error err;
    const unsigned char *first = NULL;
    uint32_t i;
    size_t offset;
    (void)state;
    aps_build(&m, 4, NULL);
    for (i = 0; i < m.model->n_tensors && !first; i++)
        if (m.model->tensors[i].type == PMPD_TENSOR_ANYPREC)
            first = (const unsigned char *)m.model->tensors[i].data;
    assert_non_null(first);
    offset = (size_t)(first - m.container.data);
    m.container.data[offset + 5] = 3; /* parent 3 no longer matches the size */
    assert_int_equal(pmpd_model_open_memory(m.container.data, m.container.size, &m.arena, &again, &err),
                     PMPD_ERR_FORMAT_SHAPE);
    assert_true(err.offset == offset);
    m.container.data[offset + 5] = 4;
    m.container.data[offset] = 'X';
    assert_int_equal(pmpd_model_open_memory(m.container.data, m.container.size, &m.arena, &again, &err),
                     PMPD_ERR_FORMAT_MAGIC);
    m.container.data[offset] = 'A';
    aps_free(&m);
}

/* pmpd-convert's path (--type anyprec --bits 2:4) writes the same layer
 * tensors, and the embedding/classifier in q8. */
static void test_converter_writes_the_same_tensors(void **state)
{
    char in[512], tok[512], out[96];
    pmpd_convert_options options;
    aps_model built;
    pmpd_model *converted = NULL;
    pmpd_arena arena;
    void *block = malloc((size_t)8 << 20);
    uint32_t i;
    (void)state;
    /* Per process, so parallel test runs do not share the file. */
    snprintf(out, sizeof out, "/tmp/pmpd-test-anyprec-%ld.pmpd", (long)getpid());
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_ANYPREC;
    options.anyprec_seed_bits = 2;
    options.anyprec_parent_bits = 4;
    options.tokenizer_path = test_shared_path(tok, sizeof tok, "models/tok512.bin");
    assert_int_equal(pmpd_convert_file(test_shared_path(in, sizeof in, "models/stories260K.bin"), out, &options,
                                       NULL, NULL),
                     PMPD_OK);
    pmpd_arena_init(&arena, block, (size_t)8 << 20);
    assert_int_equal(pmpd_model_open_file(out, &arena, &converted, NULL), PMPD_OK);
    aps_build(&built, 4, NULL);
    assert_int_equal(converted->n_tensors, built.model->n_tensors);
    for (i = 0; i < converted->n_tensors; i++) {
        const pmpd_tensor *c = &converted->tensors[i], *f = &built.model->tensors[i];
        if (f->type == PMPD_TENSOR_F32 && f->n_dims == 2) {
            /* The vocabulary matrices: q8 of the same floats. */
            uint64_t bytes;
            unsigned char *expected;
            assert_int_equal(c->type, PMPD_TENSOR_Q8);
            assert_int_equal(pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q8, f->dims[0], f->dims[1], &bytes), PMPD_OK);
            assert_true(c->size == bytes);
            expected = (unsigned char *)malloc((size_t)bytes);
            assert_non_null(expected);
            assert_int_equal(pmpd_quant_matrix(PMPD_TENSOR_Q8, (const float *)f->data, (size_t)f->dims[0],
                                               (size_t)f->dims[1], 0, expected, (size_t)bytes),
                             PMPD_OK);
            assert_memory_equal(c->data, expected, (size_t)bytes);
            free(expected);
            continue;
        }
        assert_int_equal(c->type, f->type);
        assert_true(c->size == f->size);
        assert_memory_equal(c->data, f->data, (size_t)c->size);
    }
    pmpd_model_close(converted);
    aps_free(&built);
    free(block);
    remove(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parent_at_k_equals_direct_k),
        cmocka_unit_test(test_schedule_switches_between_tokens),
        cmocka_unit_test(test_schedule_rules_and_section),
        cmocka_unit_test(test_loader_checks_anyprec_tensors),
        cmocka_unit_test(test_converter_writes_the_same_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
