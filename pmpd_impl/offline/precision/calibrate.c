/* Data-free calibration: prompts sampled from the float model itself, its
 * greedy continuations and next-token distributions as the reference, and
 * the quality of a nested model under a precision schedule measured against
 * them (token-level Rouge-L of the greedy output, next-token KL and top-1
 * agreement under teacher forcing). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/offline/eval/next_token.h"
#include "pmpd_impl/offline/precision/calibration_session.h"

/* Greedy choices here exclude BOS: it would end a story mid-measure. */
static int32_t precision_calibrate_sample(const float *logits, uint32_t vocab, uint32_t bos, float temperature,
                                uint64_t *rng)
{
    double max = -INFINITY, total = 0.0, pick;
    uint32_t i;
    if (temperature <= 0.0f)
        return pmpd_next_token_argmax(logits, vocab, bos);
    for (i = 0; i < vocab; i++)
        if (i != bos && logits[i] > max)
            max = logits[i];
    for (i = 0; i < vocab; i++)
        if (i != bos)
            total += exp((logits[i] - max) / temperature);
    pick = pmpd_splitmix64_unit(rng) * total;
    for (i = 0; i < vocab; i++) {
        if (i == bos)
            continue;
        pick -= exp((logits[i] - max) / temperature);
        if (pick <= 0.0)
            return (int32_t)i;
    }
    return pmpd_next_token_argmax(logits, vocab, bos);
}

PMPD_INTERNAL pmpd_status pmpd_calibration_session_open(const pmpd_model *model, uint32_t context,
                                                        pmpd_calibration_session *cs)
{
    return pmpd_calibration_session_open_threads(model, context, 1, cs);
}

PMPD_INTERNAL pmpd_status pmpd_calibration_session_open_threads(const pmpd_model *model, uint32_t context,
                                                                unsigned n_threads, pmpd_calibration_session *cs)
{
    pmpd_session_config config;
    pmpd_arena arena;
    size_t bytes = 0;
    pmpd_status st;
    pmpd_session_config_init(&config);
    config.context_length = context;
    config.n_threads = n_threads;
    cs->block = NULL;
    cs->session = NULL;
    st = pmpd_session_plan(model, &config, &bytes);
    if (st != PMPD_OK)
        return st;
    cs->block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    if (!cs->block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, cs->block, bytes + PMPD_ARENA_ALIGNMENT);
    return pmpd_session_create(model, &config, &arena, &cs->session);
}

PMPD_INTERNAL void pmpd_calibration_session_close(pmpd_calibration_session *cs)
{
    pmpd_session_destroy(cs->session);
    free(cs->block);
}

PMPD_INTERNAL pmpd_status pmpd_calibration_observe(const pmpd_model *model, const pmpd_calibration_set *set,
                                                   unsigned n_threads, pmpd_linear_observer observer, void *context,
                                                   const pmpd_status *observer_status)
{
    const size_t length = (size_t)set->prompt_length + set->output_length;
    pmpd_calibration_session cs;
    int32_t *tokens = (int32_t *)malloc(length * sizeof *tokens);
    uint32_t p;
    pmpd_status st = tokens ? pmpd_calibration_session_open_threads(model, (uint32_t)length, n_threads, &cs)
                            : PMPD_ERR_OUT_OF_MEMORY;
    if (st == PMPD_OK) {
        cs.session->linear_observer = observer;
        cs.session->linear_observer_context = context;
        for (p = 0; p < set->n_prompts && st == PMPD_OK && (!observer_status || *observer_status == PMPD_OK); p++) {
            const float *logits;
            memcpy(tokens, set->prompts + (size_t)p * set->prompt_length, set->prompt_length * sizeof *tokens);
            memcpy(tokens + set->prompt_length, set->reference + (size_t)p * set->output_length,
                   set->output_length * sizeof *tokens);
            st = pmpd_session_reset(cs.session);
            if (st == PMPD_OK)
                st = pmpd_session_prefill(cs.session, tokens, length, &logits);
        }
    }
    if (tokens)
        pmpd_calibration_session_close(&cs);
    free(tokens);
    return st == PMPD_OK && observer_status ? *observer_status : st;
}

void pmpd_calibration_config_init(pmpd_calibration_config *config)
{
    if (!config)
        return;
    config->n_prompts = 32;
    config->prompt_length = 8;
    config->output_length = 48;
    config->seed = 20240601;
    config->temperature = 1.0f;
}

void pmpd_calibration_set_free(pmpd_calibration_set *set)
{
    if (!set)
        return;
    free(set->prompts);
    free(set->reference);
    free(set->reference_logits);
    memset(set, 0, sizeof *set);
}

/* Prompts given (n_prompts x (prompt_length + 1) tokens, BOS first) or, when
 * given is NULL, sampled; then the float model's greedy references. */
static pmpd_status precision_calibrate_fill(const pmpd_model *float_model, const pmpd_calibration_config *config,
                                            uint32_t which, const int32_t *given, pmpd_calibration_set *set)
{
    const pmpd_model_info *info;
    pmpd_calibration_session cs;
    uint32_t p, t, plen, olen, vocab;
    pmpd_status st;
    if (!float_model || !config || !set || config->n_prompts == 0 || config->output_length == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(set, 0, sizeof *set);
    info = pmpd_model_get_info(float_model);
    vocab = info->vocab_size;
    plen = config->prompt_length + 1;
    olen = config->output_length;
    if ((uint64_t)plen + olen > info->seq_len)
        return PMPD_ERR_INVALID_ARGUMENT;
    set->n_prompts = config->n_prompts;
    set->prompt_length = plen;
    set->output_length = olen;
    set->vocab_size = vocab;
    set->prompts = (int32_t *)malloc((size_t)set->n_prompts * plen * sizeof(int32_t));
    set->reference = (int32_t *)malloc((size_t)set->n_prompts * olen * sizeof(int32_t));
    set->reference_logits = (float *)malloc((size_t)set->n_prompts * olen * vocab * sizeof(float));
    if (!set->prompts || !set->reference || !set->reference_logits) {
        pmpd_calibration_set_free(set);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    st = pmpd_calibration_session_open(float_model, plen + olen, &cs);
    for (p = 0; p < set->n_prompts && st == PMPD_OK; p++) {
        /* Each prompt has its own seed; `which` (train, validation, test)
         * picks a disjoint range of seeds. */
        uint64_t rng = config->seed + ((uint64_t)which << 32) + p;
        int32_t *prompt = set->prompts + (size_t)p * plen, *ref = set->reference + (size_t)p * olen;
        float *ref_logits = set->reference_logits + (size_t)p * olen * vocab;
        const float *logits = NULL;
        st = pmpd_session_reset(cs.session);
        if (given)
            memcpy(prompt, given + (size_t)p * plen, plen * sizeof(int32_t));
        else
            prompt[0] = (int32_t)info->bos_id;
        for (t = 0; st == PMPD_OK && t + 1 < plen; t++) {
            st = pmpd_session_decode(cs.session, prompt[t], &logits);
            if (st == PMPD_OK && !given)
                prompt[t + 1] = precision_calibrate_sample(logits, vocab, info->bos_id, config->temperature, &rng);
        }
        if (st == PMPD_OK)
            st = pmpd_session_decode(cs.session, prompt[plen - 1], &logits);
        for (t = 0; t < olen && st == PMPD_OK; t++) {
            memcpy(ref_logits + (size_t)t * vocab, logits, vocab * sizeof(float));
            ref[t] = pmpd_next_token_argmax(logits, vocab, info->bos_id);
            if (t + 1 < olen)
                st = pmpd_session_decode(cs.session, ref[t], &logits);
        }
    }
    pmpd_calibration_session_close(&cs);
    if (st != PMPD_OK)
        pmpd_calibration_set_free(set);
    return st;
}

pmpd_status pmpd_calibration_set_sample(const pmpd_model *float_model, const pmpd_calibration_config *config,
                                        uint32_t which, pmpd_calibration_set *set)
{
    return precision_calibrate_fill(float_model, config, which, NULL, set);
}

pmpd_status pmpd_calibration_set_from_prompts(const pmpd_model *float_model, const int32_t *prompts,
                                              uint32_t n_prompts, uint32_t prompt_length, uint32_t output_length,
                                              pmpd_calibration_set *set)
{
    pmpd_calibration_config config;
    uint32_t p, t;
    if (!float_model || !prompts || prompt_length == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    for (p = 0; p < n_prompts; p++)
        for (t = 0; t < prompt_length; t++)
            if (prompts[(size_t)p * prompt_length + t] < 0 ||
                (uint32_t)prompts[(size_t)p * prompt_length + t] >= pmpd_model_get_info(float_model)->vocab_size)
                return PMPD_ERR_TOKEN_RANGE;
    pmpd_calibration_config_init(&config);
    config.n_prompts = n_prompts;
    config.prompt_length = prompt_length - 1;
    config.output_length = output_length;
    return precision_calibrate_fill(float_model, &config, 0, prompts, set);
}

/* Longest common subsequence of two token strings (O(n*m), one row). */
static size_t precision_calibrate_lcs(const int32_t *a, const int32_t *b, size_t n, size_t *row)
{
    size_t i, j;
    memset(row, 0, (n + 1) * sizeof *row);
    for (i = 0; i < n; i++) {
        size_t diagonal = 0;
        for (j = 0; j < n; j++) {
            size_t above = row[j + 1];
            row[j + 1] = a[i] == b[j] ? diagonal + 1 : (row[j] > above ? row[j] : above);
            diagonal = above;
        }
    }
    return row[n];
}

/* The learned scheduler's working memory for these prompt lengths (generous). */
#define PRECISION_CALIBRATE_LEARNED_SCRATCH ((size_t)4 << 20)

/* Starts a prompt afresh: reset, prefill at the session's widths, then the
 * learned scheduler's decision for this prompt when learned is given. */
static pmpd_status precision_calibrate_start(pmpd_session *session, const int32_t *prompt, uint32_t length,
                                             const void *learned, size_t learned_size, pmpd_arena *scratch,
                                             const float **logits)
{
    pmpd_status st = pmpd_session_reset(session);
    if (st == PMPD_OK)
        st = pmpd_session_prefill(session, prompt, length, logits);
    if (st == PMPD_OK && learned)
        st = pmpd_session_apply_learned_scheduler(session, learned, learned_size, scratch);
    return st;
}

/* Evaluation under a fixed schedule, or (learned != NULL) under the learned
 * scheduler's per-prompt decision taken after each prefill. */
static pmpd_status precision_calibrate_run(const pmpd_model *nested, const pmpd_calibration_set *set,
                                           const pmpd_precision_schedule *schedule, const void *learned,
                                           size_t learned_size, pmpd_calibration_quality *quality)
{
    const pmpd_model_info *info;
    pmpd_calibration_session cs;
    uint32_t p, t, olen, vocab;
    int32_t *output;
    size_t *row;
    void *scratch_block = NULL;
    pmpd_arena scratch;
    double rouge = 0.0, kl = 0.0, top1 = 0.0, bits = 0.0;
    unsigned seed_bits = 0, parent_bits = 0;
    pmpd_status st;
    if (!nested || !set || !quality || set->n_prompts == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    info = pmpd_model_get_info(nested);
    olen = set->output_length;
    vocab = set->vocab_size;
    if (vocab != info->vocab_size)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (pmpd_model_anyprec_widths(nested, &seed_bits, &parent_bits) != PMPD_OK)
        parent_bits = 32; /* a float model: report its weights as 32-bit */
    output = (int32_t *)malloc(olen * sizeof(int32_t));
    row = (size_t *)malloc((olen + 1) * sizeof(size_t));
    if (learned)
        scratch_block = malloc(PRECISION_CALIBRATE_LEARNED_SCRATCH);
    if (!output || !row || (learned && !scratch_block)) {
        free(output);
        free(row);
        free(scratch_block);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_arena_init(&scratch, scratch_block, PRECISION_CALIBRATE_LEARNED_SCRATCH);
    st = pmpd_calibration_session_open(nested, set->prompt_length + olen, &cs);
    if (st == PMPD_OK)
        st = pmpd_session_set_precision(cs.session, schedule);
    for (p = 0; p < set->n_prompts && st == PMPD_OK; p++) {
        const int32_t *prompt = set->prompts + (size_t)p * set->prompt_length;
        const int32_t *ref = set->reference + (size_t)p * olen;
        const float *ref_logits = set->reference_logits + (size_t)p * olen * vocab, *logits = NULL;
        /* Greedy output at the schedule's widths. */
        st = precision_calibrate_start(cs.session, prompt, set->prompt_length, learned, learned_size, &scratch,
                                       &logits);
        for (t = 0; t < olen && st == PMPD_OK; t++) {
            output[t] = pmpd_next_token_argmax(logits, vocab, info->bos_id);
            if (t + 1 < olen) {
                unsigned w = pmpd_session_decode_bits(cs.session);
                bits += w && w < parent_bits ? w : parent_bits;
                st = pmpd_session_decode(cs.session, output[t], &logits);
            }
        }
        if (st != PMPD_OK)
            break;
        rouge += (double)precision_calibrate_lcs(output, ref, olen, row) / (double)olen;
        /* Teacher forcing along the reference: same widths, step by step
         * (the learned decision depends on the prompt only, so it repeats). */
        st = precision_calibrate_start(cs.session, prompt, set->prompt_length, learned, learned_size, &scratch,
                                       &logits);
        for (t = 0; t < olen && st == PMPD_OK; t++) {
            kl += pmpd_next_token_kl(ref_logits + (size_t)t * vocab, logits, vocab);
            top1 += pmpd_next_token_argmax(logits, vocab, info->bos_id) == ref[t];
            if (t + 1 < olen)
                st = pmpd_session_decode(cs.session, ref[t], &logits);
        }
    }
    pmpd_calibration_session_close(&cs);
    free(output);
    free(row);
    free(scratch_block);
    if (st != PMPD_OK)
        return st;
    quality->rouge_l = rouge / set->n_prompts;
    quality->kl = kl / ((double)set->n_prompts * olen);
    quality->top1 = top1 / ((double)set->n_prompts * olen);
    quality->average_decode_bits = olen > 1 ? bits / ((double)set->n_prompts * (olen - 1)) : parent_bits;
    return PMPD_OK;
}

pmpd_status pmpd_calibration_evaluate(const pmpd_model *model, const pmpd_calibration_set *set,
                                      const pmpd_precision_schedule *schedule, pmpd_calibration_quality *quality)
{
    return precision_calibrate_run(model, set, schedule, NULL, 0, quality);
}

pmpd_status pmpd_calibration_evaluate_learned(const pmpd_model *nested, const pmpd_calibration_set *set,
                                              unsigned prefill_bits, const void *weights, size_t size,
                                              pmpd_calibration_quality *quality)
{
    pmpd_precision_schedule schedule;
    if (!weights)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_precision_schedule_uniform(&schedule, prefill_bits, 0);
    return precision_calibrate_run(nested, set, &schedule, weights, size, quality);
}

#undef PRECISION_CALIBRATE_LEARNED_SCRATCH
