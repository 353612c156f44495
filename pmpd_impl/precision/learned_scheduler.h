/*
 * The learned PMPD scheduler (task-agnostic): after prefill, the last
 * layer's keys and values, averaged over the KV heads, form T feature rows
 * x_t = [k_t | v_t] of D = 2*head_dim numbers.  Per switch pair (one width
 * to the next lower), M learned queries pool them by scaled softmax
 * attention, the M pooled rows are concatenated (F = M*D), LayerNorm'd, fed
 * through one hidden ReLU layer of H units and a linear layer to N logits,
 * one per candidate switch step {0, OL/(N-1), ..., never}.
 *
 * Section PMPD_SECTION_LEARNED_SCHEDULER, version 1, little-endian:
 *   u32 n_pairs, n_candidates (N), feature_dim (D), n_queries (M),
 *       hidden (H), output_length (OL)
 *   n_pairs x (u32 high_bits, u32 low_bits), widest pair first, each pair's
 *       low width the next pair's high width
 *   per pair, f32: queries[M][D], ln_gamma[F], ln_beta[F], w1[H][F], b1[H],
 *       w2[N][H], b2[N]
 */
#ifndef PMPD_PRECISION_LEARNED_SCHEDULER_H
#define PMPD_PRECISION_LEARNED_SCHEDULER_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#define PMPD_LEARNED_HEADER_WORDS 6u
#define PMPD_LEARNED_MAX_PAIRS 7u

typedef struct pmpd_learned_view {
    uint32_t n_pairs, n_candidates, feature_dim, n_queries, hidden, output_length;
    uint32_t high_bits[PMPD_LEARNED_MAX_PAIRS], low_bits[PMPD_LEARNED_MAX_PAIRS];
    const float *weights[PMPD_LEARNED_MAX_PAIRS]; /* each pair's block */
} pmpd_learned_view;

/* One pair's parameters inside its block (also the trainer's layout). */
typedef struct pmpd_learned_params {
    const float *queries, *gamma, *beta, *w1, *b1, *w2, *b2;
} pmpd_learned_params;

/* Intermediate values of one classification, kept for the trainer's
 * backward pass.  Sizes: attention M*T, pooled/normed/ln_out F, hidden H,
 * logits N. */
typedef struct pmpd_learned_trace {
    float *attention, *pooled, *normed, *ln_out, *hidden, *logits;
    float mean, inv_std;
} pmpd_learned_trace;

/* Floats in one pair's block. */
PMPD_INTERNAL size_t pmpd_learned_block_floats(uint32_t d, uint32_t m, uint32_t h, uint32_t n);

PMPD_INTERNAL void pmpd_learned_params_of(const pmpd_learned_view *v, const float *block, pmpd_learned_params *p);

/* Checks the section bytes (counts, sizes, widths, finite weights). */
PMPD_INTERNAL pmpd_status pmpd_learned_parse(const void *data, size_t size, pmpd_learned_view *v, pmpd_error *err);

/* Runs one classifier on features x[T][D]; fills trace (caller-sized). */
PMPD_INTERNAL void pmpd_learned_classify(const pmpd_learned_view *v, const pmpd_learned_params *p, const float *x,
                                         size_t t_count, pmpd_learned_trace *trace);

/* The feature rows of a session after its prefill: positions x 2*head_dim
 * floats, read from any KV-cache mode (compressed modes give the K and V
 * their attention sees).  work: 2*head_dim floats. */
PMPD_INTERNAL void pmpd_learned_session_features(const pmpd_session *session, float *x, float *work);

/* Candidate j's first decode step (PMPD_SCHEDULE_NEVER for the last). */
PMPD_INTERNAL uint32_t pmpd_learned_candidate_step(uint32_t j, uint32_t n_candidates, uint32_t output_length);

#endif
