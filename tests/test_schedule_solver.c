/* Data-free calibration and the precision solvers on stories260K: the float
 * model measured against itself is perfect; sets are deterministic and
 * disjoint; lower widths cost quality; the phase-aware pair and the static
 * schedule obey their tolerance and pick the cheapest admissible choice
 * among everything they evaluated. */
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
#include "tests/support/test_models.h"

typedef struct sol_model {
    test_container container;
    void *arena_block;
    pmpd_model *model;
} sol_model;

static sol_model float_model, nested_model;
static pmpd_calibration_set validation;

static int sol_open(sol_model *m, int nested)
{
    pmpd_build_model b;
    pmpd_arena arena;
    size_t bytes = (size_t)4 << 20;
    if (test_import_shared("models/stories260K.bin", "models/tok512.bin", &b) != PMPD_OK ||
        (nested && pmpd_anyprec_build_convert(&b, 2, 4, NULL, 0, NULL, NULL) != PMPD_OK) ||
        test_serialize(&b, &m->container) != PMPD_OK)
        return -1;
    pmpd_build_free(&b);
    m->arena_block = malloc(bytes);
    pmpd_arena_init(&arena, m->arena_block, bytes);
    return pmpd_model_open_memory(m->container.data, m->container.size, &arena, &m->model, NULL) == PMPD_OK ? 0 : -1;
}

static void sol_close(sol_model *m)
{
    pmpd_model_close(m->model);
    test_container_free(&m->container);
    free(m->arena_block);
}

static void sol_config(pmpd_calibration_config *config)
{
    pmpd_calibration_config_init(config);
    config->n_prompts = 4;
    config->prompt_length = 4;
    config->output_length = 12;
}

static int setup(void **state)
{
    pmpd_calibration_config config;
    (void)state;
    sol_config(&config);
    if (sol_open(&float_model, 0) != 0 || sol_open(&nested_model, 1) != 0)
        return -1;
    return pmpd_calibration_set_sample(float_model.model, &config, PMPD_CALIBRATION_VALIDATION, &validation) ==
                   PMPD_OK
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    pmpd_calibration_set_free(&validation);
    sol_close(&float_model);
    sol_close(&nested_model);
    return 0;
}

static void test_sets_are_deterministic_and_disjoint(void **state)
{
    pmpd_calibration_config config;
    pmpd_calibration_set again, train;
    size_t prompt_tokens = (size_t)validation.n_prompts * validation.prompt_length;
    (void)state;
    sol_config(&config);
    assert_int_equal(pmpd_calibration_set_sample(float_model.model, &config, PMPD_CALIBRATION_VALIDATION, &again),
                     PMPD_OK);
    assert_memory_equal(again.prompts, validation.prompts, prompt_tokens * sizeof(int32_t));
    assert_memory_equal(again.reference, validation.reference,
                        (size_t)validation.n_prompts * validation.output_length * sizeof(int32_t));
    assert_int_equal(pmpd_calibration_set_sample(float_model.model, &config, PMPD_CALIBRATION_TRAIN, &train),
                     PMPD_OK);
    assert_memory_not_equal(train.prompts, validation.prompts, prompt_tokens * sizeof(int32_t));
    assert_int_equal(validation.prompts[0], (int32_t)pmpd_model_get_info(float_model.model)->bos_id);
    pmpd_calibration_set_free(&again);
    /* A user's prompts get the same references as sampled ones. */
    assert_int_equal(pmpd_calibration_set_from_prompts(float_model.model, validation.prompts, validation.n_prompts,
                                                       validation.prompt_length, validation.output_length, &again),
                     PMPD_OK);
    assert_memory_equal(again.reference, validation.reference,
                        (size_t)validation.n_prompts * validation.output_length * sizeof(int32_t));
    pmpd_calibration_set_free(&again);
    pmpd_calibration_set_free(&train);
}

/* The float model reproduces its own reference exactly. */
static void test_float_model_is_its_own_reference(void **state)
{
    pmpd_calibration_quality q;
    (void)state;
    assert_int_equal(pmpd_calibration_evaluate(float_model.model, &validation, NULL, &q), PMPD_OK);
    assert_true(q.rouge_l == 1.0);
    assert_true(q.top1 == 1.0);
    assert_true(fabs(q.kl) < 1e-9);
    assert_true(q.average_decode_bits == 32.0);
}

static void test_fewer_bits_cost_quality(void **state)
{
    pmpd_precision_schedule s4, s2;
    pmpd_calibration_quality q4, q2;
    (void)state;
    pmpd_precision_schedule_uniform(&s4, 4, 4);
    pmpd_precision_schedule_uniform(&s2, 4, 2);
    assert_int_equal(pmpd_calibration_evaluate(nested_model.model, &validation, &s4, &q4), PMPD_OK);
    assert_int_equal(pmpd_calibration_evaluate(nested_model.model, &validation, &s2, &q2), PMPD_OK);
    assert_true(q4.average_decode_bits == 4.0 && q2.average_decode_bits == 2.0);
    assert_true(q4.kl > 0.0 && q2.kl > q4.kl);
    assert_true(q2.top1 < q4.top1);
    assert_true(q4.rouge_l <= 1.0 && q2.rouge_l >= 0.0);
}

static double sol_decode_cost(const pmpd_precision_schedule *s)
{
    return s->decode_bits[0] * 100.0 + s->prefill_bits;
}

static void test_phase_aware_picks_cheapest_admissible(void **state)
{
    static const double epsilons[] = {0.05, 2.0};
    pmpd_calibration_report report;
    pmpd_precision_schedule best;
    pmpd_calibration_quality reference;
    size_t e;
    (void)state;
    for (e = 0; e < 2; e++) {
        double cheapest = 1e9;
        uint32_t i;
        assert_int_equal(pmpd_precision_phase_aware(nested_model.model, &validation, epsilons[e], &best, &reference,
                                                    &report),
                         PMPD_OK);
        assert_int_equal(report.n, 6); /* (2,2) (3,2) (4,2) (3,3) (4,3) (4,4) */
        for (i = 0; i < report.n; i++)
            if (report.quality[i].rouge_l >= reference.rouge_l - epsilons[e] &&
                sol_decode_cost(&report.schedule[i]) < cheapest)
                cheapest = sol_decode_cost(&report.schedule[i]);
        assert_true(sol_decode_cost(&best) == cheapest);
    }
    assert_int_equal(best.prefill_bits, 2); /* any pair passes at epsilon 2 */
    assert_int_equal(best.decode_bits[0], 2);
}

static void test_static_schedule_meets_tolerance(void **state)
{
    pmpd_calibration_report report;
    pmpd_precision_schedule best;
    pmpd_calibration_quality q;
    double reference_rouge;
    uint32_t i;
    (void)state;
    assert_int_equal(pmpd_precision_static_solve(nested_model.model, &validation, 0.05, 4, 4, &best, &report),
                     PMPD_OK);
    /* The widest reference, then the 10 non-decreasing pairs of 4 points. */
    assert_int_equal(report.n, 11);
    reference_rouge = report.quality[0].rouge_l;
    assert_int_equal(pmpd_precision_schedule_check(&best), PMPD_OK);
    assert_int_equal(pmpd_calibration_evaluate(nested_model.model, &validation, &best, &q), PMPD_OK);
    assert_true(q.rouge_l >= reference_rouge - 0.05);
    for (i = 1; i < report.n; i++)
        if (report.quality[i].rouge_l >= reference_rouge - 0.05)
            assert_true(report.quality[i].average_decode_bits >= q.average_decode_bits);
    /* With no quality bar the cheapest schedule drops to 2 bits at once. */
    assert_int_equal(pmpd_precision_static_solve(nested_model.model, &validation, 2.0, 4, 4, &best, NULL), PMPD_OK);
    assert_int_equal(pmpd_precision_schedule_bits_at(&best, 0), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets_are_deterministic_and_disjoint),
        cmocka_unit_test(test_float_model_is_its_own_reference),
        cmocka_unit_test(test_fewer_bits_cost_quality),
        cmocka_unit_test(test_phase_aware_picks_cheapest_admissible),
        cmocka_unit_test(test_static_schedule_meets_tolerance),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
