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

/* One token through a session: the one-token call that yields its logits. */
static pmpd_status pmpd_eval_step(pmpd_session *s, int decode, int32_t token, const float **logits)
{
    return decode ? pmpd_session_decode(s, token, logits) : pmpd_session_prefill(s, &token, 1, logits);
}

/* Resets a session and feeds it tokens[0..count) unscored (count may be 0). */
static pmpd_status pmpd_eval_context(pmpd_session *s, const int32_t *tokens, size_t count)
{
    pmpd_status st = pmpd_session_reset(s);
    if (st == PMPD_OK && count > 0)
        st = pmpd_session_prefill(s, tokens, count, NULL);
    return st;
}

/* One window [start, end): context tokens[start..first-1) batched, then
 * one-token steps from tokens[first-1], scoring positions first..end-1. */
static pmpd_status pmpd_eval_window(pmpd_session *model, pmpd_session *ref, const int32_t *tokens, size_t start,
                                    size_t first, size_t end, int decode, pmpd_eval_sums *sums)
{
    uint32_t vocab = model->model->info.vocab_size;
    size_t p;
    pmpd_status st = pmpd_eval_context(model, tokens + start, first - 1 - start);
    if (st == PMPD_OK && ref)
        st = pmpd_eval_context(ref, tokens + start, first - 1 - start);
    for (p = first; p < end && st == PMPD_OK; p++) {
        const float *m = NULL, *r = NULL;
        st = pmpd_eval_step(model, decode, tokens[p - 1], &m);
        if (st == PMPD_OK && ref)
            st = pmpd_eval_step(ref, decode, tokens[p - 1], &r);
        if (st != PMPD_OK)
            break;
        sums->scored++;
        sums->nll += pmpd_next_token_nll(m, vocab, tokens[p]);
        if (ref) {
            sums->ref_nll += pmpd_next_token_nll(r, vocab, tokens[p]);
            sums->kl += pmpd_next_token_kl(r, m, vocab);
            sums->top1 += pmpd_next_token_argmax(m, vocab, PMPD_NEXT_TOKEN_NONE) ==
                          pmpd_next_token_argmax(r, vocab, PMPD_NEXT_TOKEN_NONE);
        }
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
        (ref && (!pmpd_eval_fits(ref, ctx) || ref->model->info.vocab_size != model->model->info.vocab_size)))
        return PMPD_ERR_INVALID_ARGUMENT;
    /* scored_until: positions below it are scored (position 0 never is). */
    for (start = 0; st == PMPD_OK; start += stride) {
        size_t end = n - start < ctx ? n : start + ctx;
        size_t first = scored_until > start + 1 ? scored_until : start + 1;
        if (first < end) {
            st = pmpd_eval_window(model, ref, tokens, start, first, end, options->decode, &sums);
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
