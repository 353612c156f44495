#include "pmpd_impl/offline/eval/strided.h"

#include <math.h>
#include <string.h>

#include "pmpd_impl/model/session.h"
#include "pmpd_impl/offline/eval/next_token.h"

/* Sums over the scored positions. */
typedef struct pmpd_eval_sums {
    double nll, ref_nll, kl, top1;
    size_t scored;
} pmpd_eval_sums;

/* Feeds tokens[0..count) to a session and points *rows at the logits after
 * each: pmpd_session_prefill_all into buffer, or (decode, count 1) one
 * decode step. */
static pmpd_status pmpd_eval_feed(pmpd_session *s, int decode, const int32_t *tokens, size_t count,
                                  float *buffer, const float **rows)
{
    if (decode)
        return pmpd_session_decode(s, tokens[0], rows);
    *rows = buffer;
    return pmpd_session_prefill_all(s, tokens, count, buffer);
}

/* Resets a session and feeds it tokens[0..count) unscored (count may be 0). */
static pmpd_status pmpd_eval_context(pmpd_session *s, const int32_t *tokens, size_t count)
{
    pmpd_status st = pmpd_session_reset(s);
    if (st == PMPD_OK && count > 0)
        st = pmpd_session_prefill(s, tokens, count, NULL);
    return st;
}

/* Adds position p's measures: m (and r) are the logits that predict it. */
static void pmpd_eval_score(const float *m, const float *r, uint32_t vocab, int32_t target, pmpd_eval_sums *sums)
{
    sums->scored++;
    sums->nll += pmpd_next_token_nll(m, vocab, target);
    if (r) {
        sums->ref_nll += pmpd_next_token_nll(r, vocab, target);
        sums->kl += pmpd_next_token_kl(r, m, vocab);
        sums->top1 += pmpd_next_token_argmax(m, vocab, PMPD_NEXT_TOKEN_NONE) ==
                      pmpd_next_token_argmax(r, vocab, PMPD_NEXT_TOKEN_NONE);
    }
}

/* One window [start, end): context tokens[start..first-1) unscored, then
 * tokens[first-1..end-1) chunk by chunk, their logits scoring positions
 * first..end-1. */
static pmpd_status pmpd_eval_window(pmpd_session *model, pmpd_session *ref, const int32_t *tokens, size_t start,
                                    size_t first, size_t end, const pmpd_eval_options *o, pmpd_eval_sums *sums)
{
    uint32_t vocab = model->model->info.vocab_size;
    size_t chunk = o->decode ? 1 : o->chunk, p, i;
    pmpd_status st = pmpd_eval_context(model, tokens + start, first - 1 - start);
    if (st == PMPD_OK && ref)
        st = pmpd_eval_context(ref, tokens + start, first - 1 - start);
    for (p = first; p < end && st == PMPD_OK; p += chunk) {
        size_t count = end - p < chunk ? end - p : chunk;
        const float *m = NULL, *r = NULL;
        st = pmpd_eval_feed(model, o->decode, tokens + p - 1, count, o->logits, &m);
        if (st == PMPD_OK && ref)
            st = pmpd_eval_feed(ref, o->decode, tokens + p - 1, count, o->ref_logits, &r);
        for (i = 0; i < count && st == PMPD_OK; i++)
            pmpd_eval_score(m + i * vocab, r ? r + i * vocab : NULL, vocab, tokens[p + i], sums);
    }
    return st;
}

static int pmpd_eval_fits(const pmpd_session *s, size_t ctx)
{
    return s && s->live == PMPD_SESSION_LIVE && ctx <= s->config.context_length;
}

PMPD_INTERNAL pmpd_status pmpd_eval_strided(pmpd_session *model, pmpd_session *ref, const int32_t *tokens,
                                            size_t n, const pmpd_eval_options *options,
                                            pmpd_eval_result *result)
{
    pmpd_eval_sums sums;
    size_t start, scored_until = 1, ctx, stride;
    pmpd_status st = PMPD_OK;
    if (!tokens || !options || !result)
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(result, 0, sizeof *result);
    memset(&sums, 0, sizeof sums);
    ctx = options->ctx;
    stride = options->stride;
    if (n < 2 || ctx < 2 || stride < 1 || stride >= ctx || !pmpd_eval_fits(model, ctx) ||
        (!options->decode && (options->chunk == 0 || !options->logits || (ref && !options->ref_logits))) ||
        (ref && (!pmpd_eval_fits(ref, ctx) || ref->model->info.vocab_size != model->model->info.vocab_size)))
        return PMPD_ERR_INVALID_ARGUMENT;
    /* scored_until: positions below it are scored (position 0 never is). */
    for (start = 0; st == PMPD_OK; start += stride) {
        size_t end = n - start < ctx ? n : start + ctx;
        size_t first = scored_until > start + 1 ? scored_until : start + 1;
        if (first < end) {
            st = pmpd_eval_window(model, ref, tokens, start, first, end, options, &sums);
            result->windows++;
            result->forwarded += end - 1 - start;
            scored_until = end;
            if (options->progress)
                options->progress(options->progress_context, scored_until - 1, n - 1);
        }
        if (end == n)
            break;
    }
    if (st != PMPD_OK)
        return st;
    result->scored = sums.scored;
    result->nll = sums.nll / (double)result->scored;
    result->ppl = exp(result->nll);
    if (ref) {
        result->ref_nll = sums.ref_nll / (double)result->scored;
        result->ref_ppl = exp(result->ref_nll);
        result->kl = sums.kl / (double)result->scored;
        result->top1 = sums.top1 / (double)result->scored;
    }
    return PMPD_OK;
}
