#include "pmpd_impl/offline/palette/sensitivity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/core/error.h"
#include "pmpd_impl/offline/eval/next_token.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/palette/suffix.h"
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
 * sequences and their clean logits; the clean residual stream entering
 * every layer and a suffix session from the noisy group's layer on
 * (suffix.h), unless options->full_forward; the noise buffers, sized for
 * the largest group and reused (fresh pages cost a fault each). */
typedef struct palette_probe {
    pmpd_build_opened opened;
    pmpd_calibration_session cs;
    int32_t *tokens;  /* [n_sequences][length] */
    float *clean;     /* [n_sequences][length][vocab] */
    float *noisy;     /* [length][vocab] */
    float *hidden;    /* [n_layers][n_sequences][length][dim], or NULL: every run from the embedding */
    pmpd_palette_suffix suffix; /* open when suffix.length != 0 */
    float *saved[PMPD_PALETTE_GROUP_MAX_TENSORS], *noise;
    uint32_t n_sequences, length, vocab;
    unsigned threads;
} palette_probe;

/* The sequence s's stream entering layer. */
static const float *palette_hidden(const palette_probe *p, uint32_t layer, uint32_t s)
{
    const size_t dim = p->opened.model->info.dim;
    return p->hidden + ((size_t)layer * p->n_sequences + s) * p->length * dim;
}

/* Runs every sequence; with clean NULL stores the logits as the clean
 * ones, else returns the mean KL(clean || these) over every position.
 * Noisy runs start at layer when the streams are kept. */
static pmpd_status palette_run(palette_probe *p, int clean, uint32_t layer, double *kl)
{
    uint32_t s, t;
    double sum = 0.0;
    pmpd_status st = PMPD_OK;
    const int restart = !clean && p->hidden;
    if (restart && (p->suffix.length == 0 || p->suffix.first != layer)) {
        pmpd_palette_suffix_close(&p->suffix);
        st = pmpd_palette_suffix_open(p->opened.model, layer, p->opened.model->info.n_layers - layer, p->length,
                                      p->threads, &p->suffix);
    }
    for (s = 0; s < p->n_sequences && st == PMPD_OK; s++) {
        float *ref = p->clean + (size_t)s * p->length * p->vocab;
        if (restart) {
            st = pmpd_palette_suffix_run(&p->suffix, palette_hidden(p, layer, s), p->noisy, NULL);
        } else {
            st = pmpd_session_reset(p->cs.session);
            if (st == PMPD_OK)
                st = pmpd_session_prefill_all(p->cs.session, p->tokens + (size_t)s * p->length, p->length,
                                              clean ? ref : p->noisy);
        }
        for (t = 0; !clean && st == PMPD_OK && t < p->length; t++)
            sum += pmpd_next_token_kl(ref + (size_t)t * p->vocab, p->noisy + (size_t)t * p->vocab, p->vocab);
    }
    if (kl)
        *kl = sum / ((double)p->n_sequences * p->length);
    return st;
}

/* The clean stream entering every layer: the embedding rows, then each
 * layer run alone on the previous stream (one-layer suffixes).  Where a
 * suffix cannot run (suffix.h), hidden stays NULL and every evaluation
 * runs the whole model; the last layer's suffix is opened too, though its
 * output is not needed, so that a one-layer model is asked as well. */
static pmpd_status palette_probe_hidden(palette_probe *p)
{
    const pmpd_model *m = p->opened.model;
    const size_t dim = m->info.dim, per_layer = (size_t)p->n_sequences * p->length * dim;
    pmpd_palette_suffix one;
    uint32_t layer, s, t;
    pmpd_status st = PMPD_OK;
    p->hidden = (float *)malloc(m->info.n_layers * per_layer * sizeof *p->hidden);
    if (!p->hidden)
        return PMPD_ERR_OUT_OF_MEMORY;
    for (s = 0; s < p->n_sequences; s++)
        for (t = 0; t < p->length; t++)
            pmpd_linear_row(m->tok_embedding, (size_t)p->tokens[(size_t)s * p->length + t],
                            p->hidden + ((size_t)s * p->length + t) * dim);
    for (layer = 0; layer < m->info.n_layers && st == PMPD_OK; layer++) {
        st = pmpd_palette_suffix_open(m, layer, 1, p->length, p->threads, &one);
        for (s = 0; layer + 1 < m->info.n_layers && s < p->n_sequences && st == PMPD_OK; s++)
            st = pmpd_palette_suffix_run(&one, palette_hidden(p, layer, s), NULL,
                                         (float *)(uintptr_t)palette_hidden(p, layer + 1, s));
        pmpd_palette_suffix_close(&one);
    }
    if (st == PMPD_ERR_UNSUPPORTED) {
        free(p->hidden);
        p->hidden = NULL;
        st = PMPD_OK;
    }
    return st;
}

/* The data-free sequences (pmpd_calibration_set_sample: BOS, sampled
 * tokens, greedy continuation), their clean logits and (unless
 * full_forward) the clean stream entering every layer. */
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
    p->threads = options->threads;
    st = pmpd_calibration_session_open_threads(p->opened.model, p->length, options->threads, &p->cs);
    if (st == PMPD_OK)
        st = palette_run(p, 1, 0, NULL);
    if (st == PMPD_OK && !options->full_forward)
        st = palette_probe_hidden(p);
    return st != PMPD_OK ? pmpd_error_set(err, st, PMPD_NO_OFFSET, "cannot run the float model") : PMPD_OK;
}

static void palette_probe_close(palette_probe *p)
{
    uint32_t m;
    pmpd_palette_suffix_close(&p->suffix);
    pmpd_calibration_session_close(&p->cs);
    for (m = 0; m < PMPD_PALETTE_GROUP_MAX_TENSORS; m++)
        free(p->saved[m]);
    free(p->noise);
    free(p->hidden);
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
    float *weights[PMPD_PALETTE_GROUP_MAX_TENSORS], **saved = p->saved, *noise = p->noise;
    double rms[PMPD_PALETTE_GROUP_MAX_TENSORS];
    size_t count[PMPD_PALETTE_GROUP_MAX_TENSORS], k;
    uint32_t m, e;
    pmpd_status st = PMPD_OK;
    memset(fit, 0, sizeof *fit);
    for (m = 0; m < g->n_tensors && st == PMPD_OK; m++) {
        const pmpd_build_tensor *t = &b->tensors[g->tensors[m]];
        double sum = 0.0;
        count[m] = (size_t)(t->dims[0] * t->dims[1]);
        weights[m] = palette_weights(p, t);
        if (!weights[m])
            st = PMPD_ERR_FORMAT_MISSING;
        else
            memcpy(saved[m], weights[m], count[m] * sizeof(float));
        for (k = 0; st == PMPD_OK && k < count[m]; k++)
            sum += (double)saved[m][k] * saved[m][k];
        rms[m] = count[m] ? sqrt(sum / (double)count[m]) : 0.0;
    }
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
        st = palette_run(p, 0, g->layer, &fit->kl[e]);
        for (m = 0; m < g->n_tensors; m++)
            memcpy(weights[m], saved[m], count[m] * sizeof(float));
        ++*done;
        if (options->progress)
            options->progress(options->progress_context, *done, total);
    }
    if (st == PMPD_OK)
        pmpd_palette_fit_line(options->energies, options->n_energies, fit);
    return st;
}

/* The noise buffers, each the size of the largest matrix of any group. */
static pmpd_status palette_probe_buffers(palette_probe *p, const pmpd_build_model *b, const pmpd_palette_group *groups,
                                         uint32_t n_groups)
{
    size_t largest = 0;
    uint32_t g, m;
    for (g = 0; g < n_groups; g++)
        for (m = 0; m < groups[g].n_tensors; m++) {
            const pmpd_build_tensor *t = &b->tensors[groups[g].tensors[m]];
            size_t count = (size_t)(t->dims[0] * t->dims[1]);
            largest = count > largest ? count : largest;
        }
    for (m = 0; m < PMPD_PALETTE_GROUP_MAX_TENSORS; m++)
        if (!(p->saved[m] = (float *)malloc(largest * sizeof(float))))
            return PMPD_ERR_OUT_OF_MEMORY;
    p->noise = (float *)malloc(largest * sizeof(float));
    return p->noise ? PMPD_OK : PMPD_ERR_OUT_OF_MEMORY;
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
    if (st == PMPD_OK && palette_probe_buffers(&p, b, groups, n_groups) != PMPD_OK)
        st = pmpd_error_set(err, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "out of memory");
    for (g = 0; g < n_groups && st == PMPD_OK; g++) {
        st = palette_group_fit(&p, b, &groups[g], options, &fits[g], &done, total);
        if (st != PMPD_OK)
            pmpd_error_set(err, st, PMPD_NO_OFFSET, "sensitivity of layer %u %s", (unsigned)groups[g].layer,
                           pmpd_palette_group_name(groups[g].kind));
    }
    palette_probe_close(&p);
    return st;
}
