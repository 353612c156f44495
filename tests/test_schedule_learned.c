/* The learned PMPD scheduler: the trainer's analytic gradient against
 * finite differences of the classifier's own loss; section parsing and its
 * refusals; the run-time decision turned into a monotone schedule; and an
 * end-to-end training run on stories260K prompts sampled from the float
 * model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/precision/learned_train.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define LST_D 4
#define LST_M 2
#define LST_H 5
#define LST_N 3
#define LST_T 6

typedef struct lst_trace_storage {
    float attention[LST_M * LST_T], pooled[LST_M * LST_D], normed[LST_M * LST_D], ln_out[LST_M * LST_D];
    float hidden[LST_H], logits[LST_N];
} lst_trace_storage;

static void lst_trace(lst_trace_storage *s, pmpd_learned_trace *t)
{
    t->attention = s->attention;
    t->pooled = s->pooled;
    t->normed = s->normed;
    t->ln_out = s->ln_out;
    t->hidden = s->hidden;
    t->logits = s->logits;
}

static double lst_loss(const pmpd_learned_view *v, const float *block, const float *x, uint32_t label)
{
    pmpd_learned_params p;
    lst_trace_storage s;
    pmpd_learned_trace t;
    double max = -1e30, sum = 0.0;
    int i;
    lst_trace(&s, &t);
    pmpd_learned_params_of(v, block, &p);
    pmpd_learned_classify(v, &p, x, LST_T, &t);
    for (i = 0; i < LST_N; i++)
        max = t.logits[i] > max ? t.logits[i] : max;
    for (i = 0; i < LST_N; i++)
        sum += exp(t.logits[i] - max);
    return -(t.logits[label] - max - log(sum));
}

static void test_backward_matches_finite_differences(void **state)
{
    pmpd_learned_view v;
    pmpd_learned_params p;
    lst_trace_storage storage;
    pmpd_learned_trace trace;
    size_t floats = pmpd_learned_block_floats(LST_D, LST_M, LST_H, LST_N), i, checked = 0;
    float *block = (float *)malloc(floats * sizeof(float)), *grad = (float *)calloc(floats, sizeof(float));
    float x[LST_T * LST_D], work[LST_N + LST_H + 2 * LST_M * LST_D + LST_T];
    test_rng rng;
    (void)state;
    memset(&v, 0, sizeof v);
    v.feature_dim = LST_D;
    v.n_queries = LST_M;
    v.hidden = LST_H;
    v.n_candidates = LST_N;
    test_rng_seed(&rng, 99);
    for (i = 0; i < floats; i++)
        block[i] = test_rng_normal(&rng) * 0.7f;
    for (i = 0; i < LST_T * LST_D; i++)
        x[i] = test_rng_normal(&rng);
    lst_trace(&storage, &trace);
    pmpd_learned_params_of(&v, block, &p);
    pmpd_learned_classify(&v, &p, x, LST_T, &trace);
    pmpd_learned_backward(&v, &p, x, LST_T, &trace, 1, grad, work);
    for (i = 0; i < floats; i++) {
        const float h = 1e-2f, saved = block[i];
        double numeric, plus, minus;
        block[i] = saved + h;
        plus = lst_loss(&v, block, x, 1);
        block[i] = saved - h;
        minus = lst_loss(&v, block, x, 1);
        block[i] = saved;
        numeric = (plus - minus) / (2.0 * h);
        /* Skip the few parameters whose step crosses a ReLU kink. */
        if (fabs(plus + minus - 2.0 * lst_loss(&v, block, x, 1)) > 1e-2)
            continue;
        checked++;
        if (fabs(numeric - grad[i]) > 2e-3 + 2e-2 * fabs(numeric))
            fail_msg("parameter %zu: analytic %g, finite difference %g", i, (double)grad[i], numeric);
    }
    assert_true(checked > floats * 3 / 4);
    free(block);
    free(grad);
}

/* A section whose classifiers ignore the features: pair i always picks
 * candidate choice[i] (through its output bias). */
static unsigned char *lst_constant_section(uint32_t d, const uint32_t *choice, size_t *size)
{
    const uint32_t m = 1, h = 2, n = 4, pairs = 2, ol = 30;
    const uint32_t header[6] = {pairs, n, d, m, h, ol}, widths[4] = {4, 3, 3, 2};
    size_t block = pmpd_learned_block_floats(d, m, h, n), i;
    unsigned char *bytes;
    float *w;
    *size = 24 + 16 + pairs * block * sizeof(float);
    bytes = (unsigned char *)calloc(*size, 1);
    memcpy(bytes, header, sizeof header);
    memcpy(bytes + 24, widths, sizeof widths);
    w = (float *)(void *)(bytes + 40);
    for (i = 0; i < pairs; i++) {
        pmpd_learned_view v;
        pmpd_learned_params p;
        memset(&v, 0, sizeof v);
        v.feature_dim = d;
        v.n_queries = m;
        v.hidden = h;
        v.n_candidates = n;
        pmpd_learned_params_of(&v, w + i * block, &p);
        ((float *)p.b2)[choice[i]] = 5.0f;
    }
    return bytes;
}

typedef struct lst_model {
    test_container container;
    void *arena_block;
    pmpd_model *model;
} lst_model;

static void lst_open(lst_model *m)
{
    pmpd_build_model b;
    pmpd_arena arena;
    size_t bytes = (size_t)4 << 20;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    assert_int_equal(pmpd_anyprec_build_convert(&b, 2, 4, NULL, 0, NULL, NULL), PMPD_OK);
    assert_int_equal(test_serialize(&b, &m->container), PMPD_OK);
    pmpd_build_free(&b);
    m->arena_block = malloc(bytes);
    pmpd_arena_init(&arena, m->arena_block, bytes);
    assert_int_equal(pmpd_model_open_memory(m->container.data, m->container.size, &arena, &m->model, NULL), PMPD_OK);
}

static void lst_close(lst_model *m)
{
    pmpd_model_close(m->model);
    test_container_free(&m->container);
    free(m->arena_block);
}

static void test_parse_refuses_bad_sections(void **state)
{
    static const uint32_t choice[2] = {0, 0};
    pmpd_learned_view v;
    pmpd_error err;
    size_t size;
    unsigned char *bytes = lst_constant_section(16, choice, &size);
    float nan_value = NAN;
    (void)state;
    assert_int_equal(pmpd_learned_parse(bytes, size, &v, &err), PMPD_OK);
    assert_int_equal(v.n_pairs, 2);
    assert_int_equal(pmpd_learned_parse(bytes, size - 4, &v, &err), PMPD_ERR_FORMAT_SHAPE);
    bytes[32] = 4; /* second pair 4 -> 2 no longer continues from 3 */
    assert_int_equal(pmpd_learned_parse(bytes, size, &v, &err), PMPD_ERR_FORMAT_VALUE);
    bytes[32] = 3;
    memcpy(bytes + 40 + 8, &nan_value, 4);
    assert_int_equal(pmpd_learned_parse(bytes, size, &v, &err), PMPD_ERR_FORMAT_NONFINITE);
    assert_true(err.offset == 48);
    free(bytes);
}

/* Applies section to a prefilled session and follows the decode: 4 bits
 * before switch_step, 2 from there (the 3-bit stretch is empty). */
static void lst_apply_and_follow(pmpd_session *s, const unsigned char *section, size_t size, pmpd_arena *scratch,
                                 uint32_t switch_step)
{
    assert_int_equal(pmpd_session_apply_learned_scheduler(s, section, size, scratch), PMPD_OK);
    assert_int_equal(scratch->used, 0);
    while (pmpd_session_decode_step(s) < switch_step + 5) {
        uint32_t step = pmpd_session_decode_step(s);
        assert_int_equal(pmpd_session_decode_bits(s), step < switch_step ? 4 : 2);
        assert_int_equal(pmpd_session_decode(s, 300, NULL), PMPD_OK);
    }
}

static const int32_t lst_prompt[4] = {1, 403, 407, 261};

static void test_decision_becomes_monotone_schedule(void **state)
{
    static const uint32_t choice[2] = {2, 1}; /* 4->3 at 2*OL/3 = 20, 3->2 at OL/3 = 10 */
    pmpd_session *s;
    pmpd_arena scratch;
    size_t size;
    unsigned char *section;
    void *block, *scratch_block = malloc(65536);
    pmpd_precision_schedule start;
    lst_model m;
    (void)state;
    lst_open(&m);
    section = lst_constant_section(2 * pmpd_model_get_info(m.model)->head_dim, choice, &size);
    s = test_session_open(m.model, NULL, &block);
    pmpd_arena_init(&scratch, scratch_block, 65536);
    assert_int_equal(pmpd_session_apply_learned_scheduler(s, section, size, &scratch), PMPD_ERR_STATE);
    pmpd_precision_schedule_uniform(&start, 3, 0);
    assert_int_equal(pmpd_session_set_precision(s, &start), PMPD_OK);
    assert_int_equal(pmpd_session_prefill(s, lst_prompt, 4, NULL), PMPD_OK);
    assert_int_equal(pmpd_session_apply_learned_scheduler(s, NULL, 0, &scratch), PMPD_ERR_NOT_FOUND);
    lst_apply_and_follow(s, section, size, &scratch, 20);
    test_session_close(s, block);
    free(section);
    free(scratch_block);
    lst_close(&m);
}

/* The features come from whatever the KV cache stores: a compressed cache
 * serves the scheduler as well (here the int8 baseline, which needs no
 * codebooks). */
static void test_decision_with_compressed_kv(void **state)
{
    static const uint32_t choice[2] = {1, 0}; /* 4->3 at OL/3 = 10, 3->2 at once, so also from 10 */
    pmpd_session_config config;
    pmpd_session *s;
    pmpd_arena scratch;
    size_t size;
    unsigned char *section;
    void *block, *scratch_block = malloc(65536);
    lst_model m;
    (void)state;
    lst_open(&m);
    section = lst_constant_section(2 * pmpd_model_get_info(m.model)->head_dim, choice, &size);
    pmpd_session_config_init(&config);
    config.kv_type = PMPD_KV_INT8;
    s = test_session_open(m.model, &config, &block);
    pmpd_arena_init(&scratch, scratch_block, 65536);
    assert_int_equal(pmpd_session_prefill(s, lst_prompt, 4, NULL), PMPD_OK);
    lst_apply_and_follow(s, section, size, &scratch, 10);
    test_session_close(s, block);
    free(section);
    free(scratch_block);
    lst_close(&m);
}

static void test_training_end_to_end(void **state)
{
    pmpd_calibration_config config;
    pmpd_calibration_set train;
    pmpd_learned_train_config tc;
    pmpd_learned_train_report report;
    pmpd_calibration_quality q;
    pmpd_learned_view v;
    test_container float_container;
    pmpd_model *float_model = NULL;
    pmpd_arena arena;
    void *arena_block = malloc((size_t)4 << 20), *weights = NULL;
    size_t size = 0;
    uint32_t pair, c, total;
    lst_model m;
    (void)state;
    assert_int_equal(test_stories_container(&float_container), PMPD_OK);
    pmpd_arena_init(&arena, arena_block, (size_t)4 << 20);
    assert_int_equal(pmpd_model_open_memory(float_container.data, float_container.size, &arena, &float_model, NULL),
                     PMPD_OK);
    lst_open(&m);
    pmpd_calibration_config_init(&config);
    config.n_prompts = 6;
    config.prompt_length = 4;
    config.output_length = 9;
    assert_int_equal(pmpd_calibration_set_sample(float_model, &config, PMPD_CALIBRATION_TRAIN, &train), PMPD_OK);
    pmpd_learned_train_config_init(&tc);
    tc.epochs = 20;
    tc.hidden = 8;
    assert_int_equal(pmpd_learned_scheduler_train(m.model, &train, 4, &tc, &weights, &size, &report), PMPD_OK);
    assert_int_equal(pmpd_learned_parse(weights, size, &v, NULL), PMPD_OK);
    assert_int_equal(report.n_pairs, 2);
    assert_int_equal(v.high_bits[0], 4);
    assert_int_equal(v.low_bits[1], 2);
    for (pair = 0; pair < 2; pair++) {
        for (total = 0, c = 0; c < 4; c++)
            total += report.label_counts[pair][c];
        assert_int_equal(total, 6);
        assert_true(report.train_accuracy[pair] >= 0.0 && report.train_accuracy[pair] <= 1.0);
    }
    assert_int_equal(pmpd_calibration_evaluate_learned(m.model, &train, 4, weights, size, &q), PMPD_OK);
    assert_true(q.average_decode_bits >= 2.0 && q.average_decode_bits <= 4.0);
    free(weights);
    pmpd_calibration_set_free(&train);
    lst_close(&m);
    pmpd_model_close(float_model);
    test_container_free(&float_container);
    free(arena_block);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_matches_finite_differences),
        cmocka_unit_test(test_parse_refuses_bad_sections),
        cmocka_unit_test(test_decision_becomes_monotone_schedule),
        cmocka_unit_test(test_decision_with_compressed_kv),
        cmocka_unit_test(test_training_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
