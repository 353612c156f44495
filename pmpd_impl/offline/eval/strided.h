/* Strided perplexity evaluation (the tool pmpd-eval, tests/test_eval.c).
 *
 * A token sequence t[0..n) (t[0] is normally BOS) is cut into windows of
 * ctx tokens, window k covering [k*stride, min(k*stride + ctx, n)); each
 * window runs in a freshly reset session and scores only the positions p
 * (p >= 1) that no earlier window scored, i.e. position p is scored by the
 * first window whose end lies beyond p, with the window's tokens before p
 * as its only context.  Position 0 is never scored (nothing predicts it).
 * Every position from 1 to n-1 is scored exactly once as stride < ctx
 * (with stride == ctx each window's first token would have no context in
 * its window and go unscored).
 *
 * Logits: the window's context up to the first position it scores goes
 * in unscored (one pmpd_session_prefill), then the tokens whose logits
 * score positions go in `chunk` at a time through pmpd_session_prefill_all,
 * which returns the logits after every token (batched prefill at the
 * schedule's prefill width), or with `decode` one pmpd_session_decode step
 * each (at the decode width, the matrix x vector kernels of generation).
 *
 * With a reference session, the two sessions step in lockstep over the same
 * tokens and positions, and each position also adds KL(ref || model) and
 * whether the two argmaxes agree.  The sessions' widths and KV modes are
 * whatever the caller set; nothing is allocated. */
#ifndef PMPD_OFFLINE_EVAL_STRIDED_H
#define PMPD_OFFLINE_EVAL_STRIDED_H

#include <stddef.h>
#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE
typedef struct pmpd_eval_options {
    size_t ctx;    /* tokens per window, >= 2, at most each session's context */
    size_t stride; /* 1 <= stride < ctx */
    int decode;    /* 1: score with pmpd_session_decode (decode width) */
    /* Unless decode: tokens per pmpd_session_prefill_all call, and buffers
     * of chunk * vocab_size floats for the model's logits and (with a
     * reference) the reference's. */
    size_t chunk;
    float *logits, *ref_logits;
    /* Called after each window with positions scored so far and in all;
     * may be NULL. */
    void (*progress)(void *context, size_t scored, size_t total);
    void *progress_context;
} pmpd_eval_options;

typedef struct pmpd_eval_result {
    size_t scored;     /* positions scored: n - 1 */
    size_t windows;    /* windows run */
    size_t forwarded;  /* tokens run through the model, all windows */
    double nll;        /* mean -log p_model(t[p] | context), nats */
    double ppl;        /* exp(nll) */
    /* With a reference only (else 0): */
    double ref_nll, ref_ppl;
    double kl;         /* mean KL(ref || model), nats */
    double top1;       /* fraction of positions whose argmaxes agree */
} pmpd_eval_result;

/* Evaluates model (and ref, which may be NULL) over tokens[0..n), n >= 2.
 * Errors: PMPD_ERR_INVALID_ARGUMENT (NULL, n < 2, bad ctx or stride, no
 * chunk or buffers without decode, the
 * two models' vocabularies differ in size, ctx longer than a session's
 * context), and the sessions' errors (PMPD_ERR_TOKEN_RANGE, ...). */
PMPD_INTERNAL pmpd_status pmpd_eval_strided(pmpd_session *model, pmpd_session *ref, const int32_t *tokens,
                                            size_t n, const pmpd_eval_options *options,
                                            pmpd_eval_result *result);
#endif

#endif
