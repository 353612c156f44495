/* Per-position next-token quality measures over a logit vector, in double
 * precision: shared by the calibration (calibrate.c) and the strided
 * perplexity evaluation (strided.c), so both report the same KL and top-1. */
#ifndef PMPD_OFFLINE_EVAL_NEXT_TOKEN_H
#define PMPD_OFFLINE_EVAL_NEXT_TOKEN_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE
/* Passed as `excluded` when every id may win. */
#define PMPD_NEXT_TOKEN_NONE UINT32_MAX

/* The id of the largest logit other than `excluded` (the lowest id on
 * ties); calibration excludes BOS, which would end a story mid-measure. */
PMPD_INTERNAL int32_t pmpd_next_token_argmax(const float *logits, uint32_t vocab, uint32_t excluded);

/* KL(softmax(ref) || softmax(logits)) in nats. */
PMPD_INTERNAL double pmpd_next_token_kl(const float *ref, const float *logits, uint32_t vocab);

/* -log softmax(logits)[target] in nats (the cross-entropy of one position). */
PMPD_INTERNAL double pmpd_next_token_nll(const float *logits, uint32_t vocab, int32_t target);
#endif

#endif
