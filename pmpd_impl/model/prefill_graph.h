/*
 * The out-of-order prefill (seed 004; docs/prefill.md): the prompt in
 * chunks of prefill_batch tokens, each chunk running the layers as a chain
 * of fixed steps (below), up to config.prefill_in_flight chunks at once in
 * their own slots of buffers, scheduled over the pool's threads by
 * exec/chunk_schedule.c.  The steps compute exactly what pmpd_forward
 * computes for the same chunk, with the same kernels per row and per
 * token, so the logits are bit for bit those of the in-order prefill.
 *
 * Steps of one layer, with their lane (exec/chunk_schedule.h):
 *   norm (float) -> quantize q/k/v input (float) -> q/k/v rows (int8)
 *   -> bias + rope (float) -> KV write (float, one tile; after the previous
 *      chunk's attention at this layer, so chunks write the cache in order
 *      and never under a reader) -> attention (float) -> quantize (float) -> output rows
 *   (int8) -> residual + norm (float) -> quantize (float) -> gate/up rows
 *   (int8) -> SwiGLU (float) -> quantize (float) -> down rows (int8)
 *   -> residual (float).
 * A chunk starts with the embedding lookup and rope angles.
 */
#ifndef PMPD_MODEL_PREFILL_GRAPH_H
#define PMPD_MODEL_PREFILL_GRAPH_H

#include "pmpd_impl/exec/chunk_schedule.h"
#include "pmpd_impl/model/session.h"

/* The buffers of one chunk in flight (session.h describes each). */
typedef struct pmpd_chunk_buffers {
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *rope_cos, *rope_sin;
    void *linear_scratch;
} pmpd_chunk_buffers;

/* Places one chunk's buffers (batch tokens, linear scratch of
 * scratch_bytes) in the arena. */
PMPD_INTERNAL pmpd_status pmpd_chunk_buffers_alloc(pmpd_arena *arena, const pmpd_model_info *info, size_t batch,
                                                   size_t scratch_bytes, pmpd_chunk_buffers *out);

/* Whether the out-of-order prefill can run the session's model: every
 * product of the layers in two parts (formats with prepare and rows; q/k/v
 * and gate/up sharing their prepared input), no linear observer, and more
 * than one chunk slot. */
PMPD_INTERNAL int pmpd_prefill_graph_applies(const pmpd_session *session);

/* Runs tokens[0..n) (admitted: valid, room in the context) through every
 * layer out of order, stores their K/V, advances the position, and leaves
 * session->logits after the last token. */
PMPD_INTERNAL void pmpd_prefill_graph_run(pmpd_session *session, const int32_t *tokens, size_t n);

#endif
