/*
 * pmpd_schedule_calibrate_file: the whole of pmpd-calibrate as one call, so
 * pmpd-convert can run it as a step of its pipeline.  Load the input (a
 * checkpoint or a container), take the reference model (the float one, or
 * a nested input at its widest width), sample the calibration sets from it,
 * quantize float layers to nested weights, solve the static schedule,
 * train the learned scheduler, measure everything on the test set, add
 * both sections and write the result atomically.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/precision/calibrate_input.h"
#include "pmpd_impl/offline/precision/calibrate_prompts.h"
#include "pmpd_impl/offline/quant/build.h"

void pmpd_schedule_calibration_options_init(pmpd_schedule_calibration_options *o)
{
    memset(o, 0, sizeof *o);
    o->candidates = 4;
    o->epsilon = 0.05;
    pmpd_calibration_config_init(&o->sets);
    pmpd_learned_train_config_init(&o->learned);
}

typedef struct schedule_run {
    const pmpd_schedule_calibration_options *o;
    pmpd_schedule_calibration_report *r;
    pmpd_error *err;
    pmpd_calibration_set sets[3]; /* training, validation, test */
} schedule_run;

static void schedule_step(const schedule_run *run, const char *what)
{
    if (run->o->step)
        run->o->step(run->o->context, what);
}

/* Names a failed step in err unless a deeper call already explained it. */
static pmpd_status schedule_fail(const schedule_run *run, pmpd_status st, const char *what)
{
    if (st != PMPD_OK && run->err && run->err->code == PMPD_OK)
        pmpd_error_set(run->err, st, PMPD_NO_OFFSET, "%s failed: %s", what, pmpd_strerror(st));
    return st;
}

static pmpd_status schedule_sample_sets(schedule_run *run, const pmpd_model *reference)
{
    pmpd_status st;
    uint32_t s;
    if (run->o->prompt_file) {
        schedule_step(run, "calibration prompts from the prompt file");
        return pmpd_calibration_sets_from_file(reference, run->o->prompt_file, &run->o->sets, run->sets, run->err);
    }
    schedule_step(run, "sampling training, validation and test prompts from the reference model");
    for (s = 0, st = PMPD_OK; s < 3 && st == PMPD_OK; s++)
        st = pmpd_calibration_set_sample(reference, &run->o->sets, s, &run->sets[s]);
    return schedule_fail(run, st, "sampling the calibration sets");
}

/* Float layers to nested weights (columns weighed by the training set's
 * activations when asked), the embedding and classifier to q8. */
static pmpd_status schedule_quantize(schedule_run *run, const pmpd_model *reference, pmpd_build_model *b)
{
    const pmpd_schedule_calibration_options *o = run->o;
    pmpd_anyprec_importance importance;
    pmpd_status st = PMPD_OK;
    memset(&importance, 0, sizeof importance);
    if (o->weighted) {
        schedule_step(run, "weighing weight columns by the training set's activations");
        st = schedule_fail(run, pmpd_anyprec_importance_collect(reference, &run->sets[0], &importance),
                           "collecting activation statistics");
    }
    if (st == PMPD_OK)
        st = pmpd_build_convert_matrices(b, PMPD_TENSOR_F32); /* f16 layers are quantized from their floats */
    if (st == PMPD_OK)
        st = pmpd_anyprec_build_convert(b, run->r->seed_bits, run->r->parent_bits, o->weighted ? &importance : NULL,
                                        0, o->progress, o->context);
    if (st == PMPD_OK)
        st = pmpd_quant_build_convert(b, PMPD_TENSOR_Q8, 1, NULL, NULL);
    pmpd_anyprec_importance_free(&importance);
    return schedule_fail(run, st, "quantizing to nested weights");
}

static void schedule_row(pmpd_schedule_calibration_report *r, const char *name, const pmpd_precision_schedule *s)
{
    size_t n = strlen(name) < sizeof r->name[0] - 1 ? strlen(name) : sizeof r->name[0] - 1;
    memcpy(r->name[r->n_rows], name, n);
    r->name[r->n_rows][n] = '\0';
    r->schedule[r->n_rows++] = *s;
}

/* The solvers on the validation set, the learned scheduler on the training
 * set, every configuration on the test set; both sections go into b. */
static pmpd_status schedule_solve(schedule_run *run, const pmpd_model *nested, pmpd_build_model *b)
{
    const pmpd_schedule_calibration_options *o = run->o;
    pmpd_schedule_calibration_report *r = run->r;
    pmpd_learned_train_config learned = o->learned;
    pmpd_precision_schedule phase, fixed, uniform;
    unsigned char section[128];
    size_t section_size = 0, learned_size = 0;
    void *weights = NULL;
    char line[96];
    unsigned k;
    pmpd_status st;
    snprintf(line, sizeof line, "phase-aware allocation (epsilon %.3f)", o->epsilon);
    schedule_step(run, line);
    st = pmpd_precision_phase_aware(nested, &run->sets[1], o->epsilon, &phase, &r->validation_reference, NULL);
    if (st == PMPD_OK) {
        snprintf(line, sizeof line, "static schedule solver (%u switch candidates)", o->candidates);
        schedule_step(run, line);
        st = pmpd_precision_static_solve(nested, &run->sets[1], o->epsilon, r->parent_bits, o->candidates, &fixed,
                                         NULL);
    }
    if (st == PMPD_OK) {
        snprintf(line, sizeof line, "labelling and training the learned scheduler (%u epochs)", learned.epochs);
        schedule_step(run, line);
        learned.n_candidates = o->candidates;
        st = pmpd_learned_scheduler_train(nested, &run->sets[0], r->parent_bits, &learned, &weights, &learned_size,
                                          &r->learned);
    }
    if (st != PMPD_OK)
        return schedule_fail(run, st, "calibrating the schedules");
    for (k = r->parent_bits; k >= r->seed_bits && k > 0; k--) {
        snprintf(line, sizeof line, "uniform %u-bit", k);
        pmpd_precision_schedule_uniform(&uniform, k, k);
        schedule_row(r, line, &uniform);
    }
    schedule_row(r, "phase-aware", &phase);
    schedule_row(r, "static PMPD", &fixed);
    schedule_step(run, "measuring every configuration on the test set");
    for (k = 0; k < r->n_rows && st == PMPD_OK; k++)
        st = pmpd_calibration_evaluate(nested, &run->sets[2], &r->schedule[k], &r->quality[k]);
    if (st == PMPD_OK) {
        pmpd_precision_schedule_uniform(&uniform, r->parent_bits, 0);
        schedule_row(r, "learned PMPD", &uniform);
        st = pmpd_calibration_evaluate_learned(nested, &run->sets[2], r->parent_bits, weights, learned_size,
                                               &r->quality[r->n_rows - 1]);
    }
    if (st == PMPD_OK)
        st = pmpd_precision_schedule_encode(&fixed, section, sizeof section, &section_size);
    if (st == PMPD_OK)
        st = pmpd_build_add_section(b, PMPD_SECTION_PRECISION_SCHEDULE, 1, 0, section, section_size);
    if (st == PMPD_OK)
        st = pmpd_build_add_section(b, PMPD_SECTION_LEARNED_SCHEDULER, 1, 0, weights, learned_size);
    free(weights);
    return schedule_fail(run, st, "measuring on the test set");
}

/* Checks the options against the input and fixes the widths. */
static pmpd_status schedule_widths(schedule_run *run, const pmpd_model *input)
{
    const pmpd_schedule_calibration_options *o = run->o;
    pmpd_schedule_calibration_report *r = run->r;
    if (o->candidates < 2 || o->candidates > 8)
        return pmpd_error_set(run->err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "candidates is %u: 2 to 8 switch candidates", o->candidates);
    if (r->input_type != PMPD_TENSOR_ANYPREC) {
        r->seed_bits = o->seed_bits ? o->seed_bits : 2;
        r->parent_bits = o->parent_bits ? o->parent_bits : 4;
        if (r->seed_bits > r->parent_bits || r->parent_bits > PMPD_ANYPREC_MAX_BITS)
            return pmpd_error_set(run->err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                                  "bits %u:%u: need 1 <= seed <= parent <= %u", r->seed_bits, r->parent_bits,
                                  PMPD_ANYPREC_MAX_BITS);
        return PMPD_OK;
    }
    pmpd_model_anyprec_widths(input, &r->seed_bits, &r->parent_bits);
    if ((o->seed_bits && o->seed_bits != r->seed_bits) || (o->parent_bits && o->parent_bits != r->parent_bits))
        return pmpd_error_set(run->err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "the input's nested weights hold widths %u:%u, not the %u:%u asked for; they are kept "
                              "as they are",
                              r->seed_bits, r->parent_bits, o->seed_bits, o->parent_bits);
    if (o->weighted)
        return pmpd_error_set(run->err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET,
                              "--weighted needs float weights to quantize; the input's are already nested");
    return PMPD_OK;
}

pmpd_status pmpd_schedule_calibrate_file(const char *in_path, const char *out_path,
                                         const pmpd_schedule_calibration_options *options,
                                         pmpd_schedule_calibration_report *report, pmpd_error *err)
{
    pmpd_schedule_calibration_report local;
    pmpd_build_model b;
    pmpd_build_opened input, nested;
    schedule_run run;
    pmpd_status st;
    uint32_t s;
    pmpd_error_clear(err);
    if (!in_path || !out_path || !options)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "input, output and options are required");
    memset(&run, 0, sizeof run);
    memset(&input, 0, sizeof input);
    memset(&nested, 0, sizeof nested);
    run.o = options;
    run.r = report ? report : &local;
    run.err = err;
    memset(run.r, 0, sizeof *run.r);
    st = pmpd_calibrate_input_load(in_path, options->tokenizer_path, &b, &run.r->input_type, err);
    if (st != PMPD_OK)
        return st;
    run.r->calibrated_on = run.r->input_type == PMPD_TENSOR_ANYPREC ? PMPD_CALIBRATED_ON_WIDEST : PMPD_CALIBRATED_ON_FLOAT;
    /* The input as it is: the reference, and for a nested input also the
     * model calibrated. */
    st = pmpd_build_open(&b, &input, err);
    if (st == PMPD_OK)
        st = schedule_widths(&run, input.model);
    if (st == PMPD_OK)
        st = schedule_sample_sets(&run, input.model);
    if (st == PMPD_OK) {
        run.r->test_prompts = run.sets[2].n_prompts;
        run.r->prompt_length = run.sets[2].prompt_length;
        run.r->output_length = run.sets[2].output_length;
    }
    if (st == PMPD_OK && run.r->calibrated_on == PMPD_CALIBRATED_ON_FLOAT) {
        st = schedule_quantize(&run, input.model, &b);
        if (st == PMPD_OK)
            st = pmpd_build_open(&b, &nested, err);
    }
    if (st == PMPD_OK)
        st = schedule_solve(&run, nested.model ? nested.model : input.model, &b);
    pmpd_build_close(&nested);
    if (st == PMPD_OK)
        st = pmpd_build_open(&b, &nested, err); /* the loader checks what is written */
    if (st == PMPD_OK)
        st = pmpd_build_opened_write(&nested, out_path, err);
    for (s = 0; s < 3; s++)
        pmpd_calibration_set_free(&run.sets[s]);
    pmpd_build_close(&nested);
    pmpd_build_close(&input);
    pmpd_build_free(&b);
    return st;
}
