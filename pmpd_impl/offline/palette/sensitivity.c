#include "pmpd_impl/offline/palette/sensitivity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/eval/next_token.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/precision/calibration_session.h"
#include "pmpd_impl/offline/synth/synth.h"

PMPD_INTERNAL void pmpd_palette_sensitivity_defaults(pmpd_palette_sensitivity_options *options)
{
    memset(options, 0, sizeof *options);
    options->n_sequences = 4;
    options->length = 32;
    options->n_energies = 3;
    /* From q4's relative error (about 0.007) to q2cb's (about 0.085): the
     * fit is made where the candidates' errors lie.  On stories260K the
     * slope over 0.01..0.1 picked the better of the two allocations at 4
     * bits (KL 0.48 against 0.54 with 0.003..0.03; the same choices on
     * pycode21M, where KL/e is flat over the whole range). */
    options->energies[0] = 0.01;
    options->energies[1] = 0.03;
    options->energies[2] = 0.1;
    options->seed = 2002;
}

PMPD_INTERNAL void pmpd_palette_fit_line(const double *e, uint32_t n, pmpd_palette_fit *fit)
{
    double ek = 0.0, ee = 0.0, kk = 0.0, residual = 0.0;
    uint32_t i, lo = 0, hi = 0;
    for (i = 0; i < n; i++) {
        ek += e[i] * fit->kl[i];
        ee += e[i] * e[i];
        kk += fit->kl[i] * fit->kl[i];
        lo = e[i] < e[lo] ? i : lo;
        hi = e[i] > e[hi] ? i : hi;
    }
    fit->slope = ee > 0.0 ? ek / ee : 0.0;
    for (i = 0; i < n; i++)
        residual += (fit->kl[i] - fit->slope * e[i]) * (fit->kl[i] - fit->slope * e[i]);
    fit->r2 = kk > 0.0 ? 1.0 - residual / kk : 1.0;
    fit->ratio = fit->kl[lo] > 0.0 ? (fit->kl[hi] / e[hi]) / (fit->kl[lo] / e[lo]) : 0.0;
}

/* What every evaluation shares: the opened copy, its session, the
 * sequences and their clean logits. */
typedef struct palette_probe {
    pmpd_build_opened opened;
    pmpd_calibration_session cs;
    int32_t *tokens;  /* [n_sequences][length] */
    float *clean;     /* [n_sequences][length][vocab] */
    float *noisy;     /* [length][vocab] */
    uint32_t n_sequences, length, vocab;
} palette_probe;

/* Runs every sequence; with clean NULL stores the logits as the clean
 * ones, else returns the mean KL(clean || these) over every position. */
static pmpd_status palette_run(palette_probe *p, int clean, double *kl)
{
    uint32_t s, t;
    double sum = 0.0;
    pmpd_status st = PMPD_OK;
    for (s = 0; s < p->n_sequences && st == PMPD_OK; s++) {
        float *ref = p->clean + (size_t)s * p->length * p->vocab;
        st = pmpd_session_reset(p->cs.session);
        if (st == PMPD_OK)
            st = pmpd_session_prefill_all(p->cs.session, p->tokens + (size_t)s * p->length, p->length,
                                          clean ? ref : p->noisy);
        for (t = 0; !clean && st == PMPD_OK && t < p->length; t++)
            sum += pmpd_next_token_kl(ref + (size_t)t * p->vocab, p->noisy + (size_t)t * p->vocab, p->vocab);
    }
    if (kl)
        *kl = sum / ((double)p->n_sequences * p->length);
    return st;
}

/* The data-free sequences (pmpd_calibration_set_sample: BOS, sampled
 * tokens, greedy continuation) and their clean logits. */
static pmpd_status palette_probe_open(const pmpd_build_model *b, const pmpd_palette_sensitivity_options *options,
                                      palette_probe *p, pmpd_error *err)
{
    pmpd_calibration_config config;
    pmpd_calibration_set set;
    uint32_t s, prompt;
    pmpd_status st;
    memset(p, 0, sizeof *p);
    st = pmpd_build_open(b, &p->opened, err);
    if (st != PMPD_OK)
        return st;
    p->n_sequences = options->n_sequences;
    p->length = options->length;
    p->vocab = pmpd_model_get_info(p->opened.model)->vocab_size;
    /* A quarter of each sequence sampled (at most 7 tokens), the rest greedy. */
    prompt = p->length / 4 < 7 ? p->length / 4 : 7;
    prompt = prompt ? prompt : 1;
    pmpd_calibration_config_init(&config);
    config.n_prompts = p->n_sequences;
    config.prompt_length = prompt;
    config.output_length = p->length - 1 - prompt;
    config.seed = options->seed;
    st = pmpd_calibration_set_sample(p->opened.model, &config, PMPD_CALIBRATION_TRAIN, &set);
    if (st != PMPD_OK)
        return pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot sample the data-free sequences");
    p->tokens = (int32_t *)malloc((size_t)p->n_sequences * p->length * sizeof *p->tokens);
    p->clean = (float *)malloc((size_t)p->n_sequences * p->length * p->vocab * sizeof *p->clean);
    p->noisy = (float *)malloc((size_t)p->length * p->vocab * sizeof *p->noisy);
    if (!p->tokens || !p->clean || !p->noisy) {
        pmpd_calibration_set_free(&set);
        return pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    }
    for (s = 0; s < p->n_sequences; s++) {
        memcpy(p->tokens + (size_t)s * p->length, set.prompts + (size_t)s * set.prompt_length,
               set.prompt_length * sizeof(int32_t));
        memcpy(p->tokens + (size_t)s * p->length + set.prompt_length, set.reference + (size_t)s * set.output_length,
               set.output_length * sizeof(int32_t));
    }
    pmpd_calibration_set_free(&set);
    st = pmpd_calibration_session_open_threads(p->opened.model, p->length, options->threads, &p->cs);
    if (st == PMPD_OK)
        st = palette_run(p, 1, NULL);
    return st != PMPD_OK ? pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot run the float model") : PMPD_OK;
}

static void palette_probe_close(palette_probe *p)
{
    pmpd_calibration_session_close(&p->cs);
    pmpd_build_close(&p->opened);
    free(p->tokens);
    free(p->clean);
    free(p->noisy);
}

/* The opened copy's floats of build tensor t (same name).  The copy lives
 * in memory this code allocated (pmpd_build_open), so writing it is fine;
 * the runtime reads f32 weights where they lie. */
static float *palette_weights(const palette_probe *p, const pmpd_build_tensor *t)
{
    const pmpd_model *m = p->opened.model;
    size_t length = strlen(t->name);
    uint32_t i;
    for (i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].name_length == length && memcmp(m->tensors[i].name, t->name, length) == 0 &&
            m->tensors[i].type == PMPD_TENSOR_F32)
            return (float *)(uintptr_t)m->tensors[i].data;
    return NULL;
}

/* Group g's fit: for each energy, noise into its matrices, the KL, the
 * original weights back. */
static pmpd_status palette_group_fit(palette_probe *p, const pmpd_build_model *b, const pmpd_palette_group *g,
                                     const pmpd_palette_sensitivity_options *options,
                                     pmpd_palette_fit *fit, uint64_t *done, uint64_t total)
{
    float *weights[PMPD_PALETTE_GROUP_MAX_TENSORS], *saved[PMPD_PALETTE_GROUP_MAX_TENSORS] = {NULL, NULL, NULL};
    float *noise = NULL;
    double rms[PMPD_PALETTE_GROUP_MAX_TENSORS];
    size_t count[PMPD_PALETTE_GROUP_MAX_TENSORS], largest = 0, k;
    uint32_t m, e;
    pmpd_status st = PMPD_OK;
    memset(fit, 0, sizeof *fit);
    for (m = 0; m < g->n_tensors && st == PMPD_OK; m++) {
        const pmpd_build_tensor *t = &b->tensors[g->tensors[m]];
        double sum = 0.0;
        count[m] = (size_t)(t->dims[0] * t->dims[1]);
        largest = count[m] > largest ? count[m] : largest;
        weights[m] = palette_weights(p, t);
        saved[m] = (float *)malloc(count[m] * sizeof(float));
        if (!weights[m])
            st = PMPD_ERR_FORMAT_MISSING;
        else if (!saved[m])
            st = PMPD_ERR_OUT_OF_MEMORY;
        else
            memcpy(saved[m], weights[m], count[m] * sizeof(float));
        for (k = 0; st == PMPD_OK && k < count[m]; k++)
            sum += (double)saved[m][k] * saved[m][k];
        rms[m] = count[m] ? sqrt(sum / (double)count[m]) : 0.0;
    }
    if (st == PMPD_OK && !(noise = (float *)malloc(largest * sizeof(float))))
        st = PMPD_ERR_OUT_OF_MEMORY;
    for (e = 0; e < options->n_energies && st == PMPD_OK; e++) {
        for (m = 0; m < g->n_tensors; m++) {
            /* Each matrix's own stream, named by its layer, group and
             * place in the group (so a group gets the same noise however
             * many others are measured): the same direction at every e. */
            uint32_t stream = (g->layer * PMPD_PALETTE_GROUP_KINDS + g->kind) * PMPD_PALETTE_GROUP_MAX_TENSORS + m;
            uint64_t state = pmpd_synth_stream(options->seed, stream);
            pmpd_synth_normal(&state, (float)(sqrt(options->energies[e]) * rms[m]), noise, count[m]);
            for (k = 0; k < count[m]; k++)
                weights[m][k] = saved[m][k] + noise[k];
        }
        st = palette_run(p, 0, &fit->kl[e]);
        for (m = 0; m < g->n_tensors; m++)
            memcpy(weights[m], saved[m], count[m] * sizeof(float));
        ++*done;
        if (options->progress)
            options->progress(options->progress_context, *done, total);
    }
    free(noise);
    for (m = 0; m < g->n_tensors; m++)
        free(saved[m]);
    if (st == PMPD_OK)
        pmpd_palette_fit_line(options->energies, options->n_energies, fit);
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_palette_sensitivity(const pmpd_build_model *b, const pmpd_palette_group *groups,
                                                   uint32_t n_groups, const pmpd_palette_sensitivity_options *options,
                                                   pmpd_palette_fit *fits, pmpd_error *err)
{
    palette_probe p;
    uint64_t done = 0, total;
    uint32_t g, e;
    pmpd_status st;
    if (!b || !groups || !options || !fits || options->n_sequences == 0 || options->length < 3 ||
        options->n_energies == 0 || options->n_energies > PMPD_PALETTE_MAX_ENERGIES ||
        options->length > b->info.seq_len)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "bad sensitivity options");
    for (e = 0; e < options->n_energies; e++)
        if (!(options->energies[e] > 0.0))
            return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "noise energies must be > 0");
    total = (uint64_t)n_groups * options->n_energies;
    st = palette_probe_open(b, options, &p, err);
    for (g = 0; g < n_groups && st == PMPD_OK; g++) {
        st = palette_group_fit(&p, b, &groups[g], options, &fits[g], &done, total);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "sensitivity of layer %u %s", (unsigned)groups[g].layer,
                           pmpd_palette_group_name(groups[g].kind));
    }
    palette_probe_close(&p);
    return st;
}
