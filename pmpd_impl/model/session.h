/* The session object behind the public pmpd_session API: every buffer of
 * the forward pass, sized once for the largest prefill batch. */
#ifndef PMPD_MODEL_SESSION_H
#define PMPD_MODEL_SESSION_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/exec/chunk_schedule.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/model/kv_cache.h"
#include "pmpd_impl/model/model.h"

/* Sees the input of every linear layer (x: n_tokens rows of the weights'
 * column count) just before it runs.  Offline calibration uses it to weigh
 * weight columns by their activations; sessions start without one. */
typedef void (*pmpd_linear_observer)(void *context, const pmpd_tensor *weights, const float *x, size_t n_tokens);

struct pmpd_session {
    uint32_t live;                /* PMPD_SESSION_LIVE until destroyed */
    const pmpd_model *model;
    pmpd_session_config config;   /* resolved: no zero "default" fields */
    size_t position;              /* positions filled in the KV cache */
    int has_logits;
    pmpd_pool *pool;
    pmpd_trace *trace;            /* NULL unless config.trace_events */
    pmpd_kv_cache kv;
    /* Activations, one row per token of a batch (config.prefill_batch rows). */
    float *x;                     /* residual stream [batch][dim] */
    float *xb;                    /* normed input / block output [batch][dim] */
    float *q;                     /* [batch][n_heads * head_dim] */
    float *k;                     /* [batch][n_kv_heads * head_dim] */
    float *v;                     /* [batch][n_kv_heads * head_dim] */
    float *att;                   /* attention output [batch][n_heads * head_dim] */
    float *hb;                    /* gate, then SwiGLU output [batch][hidden] */
    float *hb2;                   /* up [batch][hidden] */
    float *rope_cos;              /* [batch][head_dim / 2] */
    float *rope_sin;
    float *logits;                /* [vocab] */
    unsigned char *attend_scratch; /* n_threads blocks of attend_stride bytes */
    size_t attend_stride;
    void *linear_scratch;         /* see pmpd_impl/model/linear.h */
    /* Nested any-precision weights (pmpd_impl/precision/): the schedule in
     * force, the width of the forward pass being run, and the decode calls
     * since the last prefill. */
    pmpd_precision_schedule precision;
    unsigned weight_bits;
    uint32_t decode_step;
    pmpd_linear_observer linear_observer; /* NULL outside calibration */
    void *linear_observer_context;
    /* The out-of-order prefill (prefill_graph.h): config.prefill_in_flight
     * chunk slots, the first being the buffers above, and their schedule
     * (NULL with one slot). */
    struct pmpd_chunk_buffers *chunks;
    pmpd_chunk_schedule *schedule;
};

#define PMPD_SESSION_LIVE 0x706d7064u

/* Runs tokens[0..n) (n <= prefill_batch, all valid, room in the context)
 * through the model at the session's position, stores their K/V, advances
 * the position, and computes the logits after the last token if asked.
 * With all_logits, also the logits after every token: n rows of vocab_size
 * floats there (the last row then also in session->logits if asked). */
PMPD_INTERNAL void pmpd_forward(pmpd_session *session, const int32_t *tokens, size_t n, int want_logits,
                                float *all_logits);

/* The parts of pmpd_forward the out-of-order prefill (prefill_graph.c)
 * runs as its own steps.  attend: attention items [begin, end) of a batch
 * at layer (item = token * n_kv_heads + KV head: the token's query heads
 * of that group), queries q and outputs att in the batch's rows, the
 * batch's first token at first_position, on pool thread worker.  logits:
 * session->logits from the residual row x of the last token. */
PMPD_INTERNAL void pmpd_forward_attend(pmpd_session *session, uint32_t layer, size_t first_position,
                                       const float *q, float *att, size_t begin, size_t end, unsigned worker);
PMPD_INTERNAL void pmpd_forward_logits(pmpd_session *session, const float *x);
/* Bias (where the layer has one) and rotary embedding of q and k rows
 * [begin, end) of a batch at layer, with the batch's rope angles. */
PMPD_INTERNAL void pmpd_forward_rope(const pmpd_session *session, uint32_t layer, float *q, float *k, float *v,
                                     const float *rope_cos, const float *rope_sin, size_t begin, size_t end);

#endif
