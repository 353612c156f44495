/* Session lifetime and the public inference calls.  One layout function
 * places every buffer; planning runs it on a measuring arena, creation on
 * the caller's, so the planned figure is exact by construction. */
#include "pmpd_impl/model/session.h"

#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/model/prefill_graph.h"

#define PMPD_SESSION_DEFAULT_BATCH 128u
#define PMPD_PREFILL_MAX_IN_FLIGHT 8u

void pmpd_session_config_init(pmpd_session_config *config)
{
    if (!config)
        return;
    config->context_length = 0;
    config->kv_type = PMPD_KV_F32;
    config->prefill_batch = 0;
    config->n_threads = 0;
    config->kv_window = 0;
    config->trace_events = 0;
    config->prefill_in_flight = 0;
    config->float_threads = 0;
    config->worker_stack_bytes = 0;
}

unsigned pmpd_max_threads(void)
{
    return PMPD_MAX_THREADS;
}

/* Replaces the "default" zeros and checks every field (the KV type is
 * checked by the KV cache, which knows its modes). */
static pmpd_status pmpd_session_resolve(const pmpd_model *model, const pmpd_session_config *in,
                                        pmpd_session_config *out)
{
    pmpd_session_config_init(out);
    if (in)
        *out = *in;
    if (out->context_length == 0)
        out->context_length = model->info.seq_len;
    if (out->context_length > model->info.seq_len)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (out->prefill_batch == 0)
        out->prefill_batch = PMPD_SESSION_DEFAULT_BATCH;
    if (out->prefill_batch > out->context_length)
        out->prefill_batch = out->context_length;
    if (out->n_threads == 0)
        out->n_threads = 1;
    if (out->n_threads > PMPD_MAX_THREADS)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (out->prefill_in_flight == 0)
        out->prefill_in_flight = out->n_threads > 1 ? PMPD_SESSION_DEFAULT_IN_FLIGHT : 1;
    if (out->prefill_in_flight > PMPD_PREFILL_MAX_IN_FLIGHT ||
        (out->float_threads != 0 && out->float_threads >= out->n_threads))
        return PMPD_ERR_INVALID_ARGUMENT;
    return PMPD_OK;
}

/* Largest scratch any linear layer needs (this also refuses weight types
 * the build has no kernel for). */
static pmpd_status pmpd_session_linear_scratch(const pmpd_model *model, size_t batch,
                                               unsigned n_threads, size_t *bytes)
{
    pmpd_status st;
    size_t need;
    uint32_t layer;
    *bytes = 0;
    /* The classifier sees a whole batch in pmpd_session_prefill_all. */
    st = pmpd_linear_scratch_bytes(model->classifier, batch, n_threads, bytes);
    /* The embedding is only read row by row (no scratch); asking checks
     * that its type has a kernel. */
    if (st == PMPD_OK)
        st = pmpd_linear_scratch_bytes(model->tok_embedding, 1, n_threads, &need);
    for (layer = 0; st == PMPD_OK && layer < model->info.n_layers; layer++) {
        const pmpd_layer_weights *w = &model->layers[layer];
        const pmpd_tensor *matrices[7];
        size_t i;
        matrices[0] = w->wq;
        matrices[1] = w->wk;
        matrices[2] = w->wv;
        matrices[3] = w->wo;
        matrices[4] = w->w_gate;
        matrices[5] = w->w_up;
        matrices[6] = w->w_down;
        for (i = 0; st == PMPD_OK && i < 7; i++) {
            st = pmpd_linear_scratch_bytes(matrices[i], batch, n_threads, &need);
            if (st == PMPD_OK && need > *bytes)
                *bytes = need;
        }
    }
    return st;
}

static pmpd_status pmpd_session_floats(pmpd_arena *arena, size_t rows, size_t cols, float **out)
{
    size_t count;
    void *p;
    pmpd_status st;
    if (!pmpd_checked_mul(rows, cols, &count))
        return PMPD_ERR_OVERFLOW;
    st = pmpd_arena_alloc_array(arena, count, sizeof(float), PMPD_ARENA_ALIGNMENT, &p);
    *out = (float *)p;
    return st;
}

/* Brings the fill level up to a multiple of PMPD_ARENA_ALIGNMENT (a
 * zero-byte aligned block), so planned figures of several objects add up. */
static pmpd_status pmpd_session_pad(pmpd_arena *arena)
{
    void *p;
    return pmpd_arena_alloc(arena, 0, PMPD_ARENA_ALIGNMENT, &p);
}

/* Allocates the session object and every buffer except the pool (created
 * last, so planning can add its size; its blocks are whole multiples of
 * PMPD_ARENA_ALIGNMENT, as the layout's end is).  s is filled even when measuring;
 * *where receives the arena block for it. */
static pmpd_status pmpd_session_layout(const pmpd_model *model, const pmpd_session_config *config,
                                       pmpd_arena *arena, pmpd_session *s, pmpd_session **where)
{
    const pmpd_model_info *info = &model->info;
    size_t batch = config->prefill_batch, scratch_bytes = 0, attend_bytes, attend_total;
    pmpd_chunk_buffers slots[PMPD_PREFILL_MAX_IN_FLIGHT];
    unsigned slot;
    void *p = NULL;
    pmpd_status st;

    st = pmpd_arena_alloc(arena, sizeof(pmpd_session), PMPD_ARENA_ALIGNMENT, &p);
    if (st != PMPD_OK)
        return st;
    *where = (pmpd_session *)p;
    s->live = PMPD_SESSION_LIVE;
    s->model = model;
    s->config = *config;
    s->position = 0;
    s->has_logits = 0;
    s->pool = NULL;
    s->trace = NULL;
    pmpd_precision_schedule_uniform(&s->precision, 0, 0);
    s->weight_bits = 0;
    s->decode_step = 0;
    s->linear_observer = NULL;
    s->linear_observer_context = NULL;

    s->chunks = NULL;
    s->schedule = NULL;

    st = pmpd_kv_cache_init(&s->kv, arena, config->kv_type, info->n_layers, info->n_kv_heads,
                            info->head_dim, config->context_length, model, config->kv_window);
    if (st == PMPD_OK)
        st = pmpd_session_linear_scratch(model, batch, config->n_threads, &scratch_bytes);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc_array(arena, config->prefill_in_flight, sizeof(pmpd_chunk_buffers),
                                    PMPD_ARENA_ALIGNMENT, &p);
    for (slot = 0; st == PMPD_OK && slot < config->prefill_in_flight; slot++)
        st = pmpd_chunk_buffers_alloc(arena, info, batch, scratch_bytes, &slots[slot]);
    if (st == PMPD_OK && p) { /* p is NULL when measuring */
        s->chunks = (pmpd_chunk_buffers *)p;
        memcpy(s->chunks, slots, config->prefill_in_flight * sizeof(pmpd_chunk_buffers));
    }
    if (st == PMPD_OK && config->prefill_in_flight > 1)
        st = pmpd_chunk_schedule_create(arena, config->prefill_in_flight, &s->schedule);
    if (st == PMPD_OK) st = pmpd_session_floats(arena, 1, info->vocab_size, &s->logits);
    if (st != PMPD_OK)
        return st;
    s->x = slots[0].x;
    s->xb = slots[0].xb;
    s->q = slots[0].q;
    s->k = slots[0].k;
    s->v = slots[0].v;
    s->att = slots[0].att;
    s->hb = slots[0].hb;
    s->hb2 = slots[0].hb2;
    s->rope_cos = slots[0].rope_cos;
    s->rope_sin = slots[0].rope_sin;
    s->linear_scratch = slots[0].linear_scratch;

    st = pmpd_kv_cache_attend_scratch_bytes(&s->kv, &attend_bytes);
    if (st != PMPD_OK)
        return st;
    if (!pmpd_checked_align_up(attend_bytes, PMPD_ARENA_ALIGNMENT, &s->attend_stride) ||
        !pmpd_checked_mul(s->attend_stride, config->n_threads, &attend_total))
        return PMPD_ERR_OVERFLOW;
    st = pmpd_arena_alloc(arena, attend_total, PMPD_ARENA_ALIGNMENT, &p);
    if (st != PMPD_OK)
        return st;
    s->attend_scratch = (unsigned char *)p;
    return pmpd_session_pad(arena);
}

pmpd_status pmpd_session_plan(const pmpd_model *model, const pmpd_session_config *config,
                              size_t *arena_bytes)
{
    pmpd_session_config resolved;
    pmpd_session shape, *where;
    pmpd_arena measure;
    size_t pool_bytes, trace_bytes;
    void *p;
    pmpd_status st;
    if (!model || !arena_bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    *arena_bytes = 0;
    st = pmpd_session_resolve(model, config, &resolved);
    if (st != PMPD_OK)
        return st;
    pmpd_arena_init(&measure, NULL, SIZE_MAX);
    st = pmpd_session_layout(model, &resolved, &measure, &shape, &where);
    if (st == PMPD_OK)
        st = pmpd_pool_plan(resolved.n_threads, &pool_bytes);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(&measure, pool_bytes, PMPD_ARENA_ALIGNMENT, &p);
    if (st == PMPD_OK)
        st = pmpd_trace_plan(resolved.trace_events, &trace_bytes);
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(&measure, trace_bytes, PMPD_ARENA_ALIGNMENT, &p);
    if (st == PMPD_ERR_OUT_OF_MEMORY) /* beyond SIZE_MAX */
        st = PMPD_ERR_OVERFLOW;
    if (st == PMPD_OK)
        *arena_bytes = measure.high_water;
    return st;
}

pmpd_status pmpd_session_create(const pmpd_model *model, const pmpd_session_config *config,
                                pmpd_arena *arena, pmpd_session **out)
{
    pmpd_session_config resolved;
    pmpd_session shape, *where;
    pmpd_arena_mark mark;
    pmpd_status st;
    if (out)
        *out = NULL;
    if (!model || !arena || !out)
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_session_resolve(model, config, &resolved);
    if (st != PMPD_OK)
        return st;
    mark = pmpd_arena_save(arena);
    st = pmpd_session_layout(model, &resolved, arena, &shape, &where);
    if (st == PMPD_OK)
        st = pmpd_pool_create(arena, resolved.n_threads, resolved.worker_stack_bytes, &shape.pool);
    if (st == PMPD_OK) {
        st = pmpd_trace_create(arena, resolved.trace_events, &shape.trace);
        if (st != PMPD_OK)
            pmpd_pool_destroy(shape.pool);
    }
    if (st != PMPD_OK) {
        pmpd_arena_restore(arena, mark);
        return st;
    }
    pmpd_pool_set_trace(shape.pool, shape.trace);
    *where = shape;
    *out = where;
    return PMPD_OK;
}

/* Checks a call's tokens against the vocabulary and the room left. */
static pmpd_status pmpd_session_admit(const pmpd_session *s, const int32_t *tokens, size_t n)
{
    size_t i;
    if (n > s->config.context_length - s->position)
        return PMPD_ERR_CONTEXT_FULL;
    for (i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= s->model->info.vocab_size)
            return PMPD_ERR_TOKEN_RANGE;
    return PMPD_OK;
}

/* Runs tokens at weight width bits (prefill_batch at a time); with
 * all_logits, the logits after every token go there too. */
static pmpd_status pmpd_session_run(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                    const float **logits, unsigned bits, float *all_logits)
{
    size_t done = 0;
    pmpd_status st;
    if (logits)
        *logits = NULL;
    if (!session || !tokens || n_tokens == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    st = pmpd_session_admit(session, tokens, n_tokens);
    if (st != PMPD_OK)
        return st;
    session->weight_bits = bits;
    if (!all_logits && n_tokens > session->config.prefill_batch && pmpd_prefill_graph_applies(session)) {
        pmpd_prefill_graph_run(session, tokens, n_tokens);
        done = n_tokens;
    }
    while (done < n_tokens) {
        size_t n = n_tokens - done;
        if (n > session->config.prefill_batch)
            n = session->config.prefill_batch;
        if (n_tokens > 1)
            pmpd_trace_chunk(session->trace, (uint32_t)(done / session->config.prefill_batch));
        pmpd_forward(session, tokens + done, n, done + n == n_tokens,
                     all_logits ? all_logits + done * session->model->info.vocab_size : NULL);
        done += n;
    }
    pmpd_trace_chunk(session->trace, PMPD_TRACE_NO_CHUNK);
    session->has_logits = 1;
    if (logits)
        *logits = session->logits;
    return PMPD_OK;
}

/* A prefill runs at the prefill width and restarts the decode schedule. */
static pmpd_status pmpd_session_prefill_run(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                            const float **logits, float *all_logits)
{
    pmpd_status st = pmpd_session_run(session, tokens, n_tokens, logits,
                                      session ? session->precision.prefill_bits : 0, all_logits);
    if (st == PMPD_OK)
        session->decode_step = 0;
    return st;
}

pmpd_status pmpd_session_prefill(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                 const float **logits)
{
    return pmpd_session_prefill_run(session, tokens, n_tokens, logits, NULL);
}

pmpd_status pmpd_session_prefill_all(pmpd_session *session, const int32_t *tokens, size_t n_tokens,
                                     float *logits)
{
    if (!logits)
        return PMPD_ERR_INVALID_ARGUMENT;
    return pmpd_session_prefill_run(session, tokens, n_tokens, NULL, logits);
}

pmpd_status pmpd_session_decode(pmpd_session *session, int32_t token, const float **logits)
{
    pmpd_status st = pmpd_session_run(session, &token, 1, logits, pmpd_session_decode_bits(session), NULL);
    if (st == PMPD_OK && session->decode_step < UINT32_MAX)
        session->decode_step++;
    return st;
}

pmpd_status pmpd_session_set_precision(pmpd_session *session, const pmpd_precision_schedule *schedule)
{
    if (!session)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    if (!schedule) {
        pmpd_precision_schedule_uniform(&session->precision, 0, 0);
        return PMPD_OK;
    }
    if (pmpd_precision_schedule_check(schedule) != PMPD_OK)
        return PMPD_ERR_INVALID_ARGUMENT;
    session->precision = *schedule;
    return PMPD_OK;
}

unsigned pmpd_session_decode_bits(const pmpd_session *session)
{
    if (!session || session->live != PMPD_SESSION_LIVE)
        return 0;
    return pmpd_precision_schedule_bits_at(&session->precision, session->decode_step);
}

uint32_t pmpd_session_decode_step(const pmpd_session *session)
{
    return session && session->live == PMPD_SESSION_LIVE ? session->decode_step : 0;
}

pmpd_status pmpd_session_logits(const pmpd_session *session, const float **logits)
{
    if (!logits)
        return PMPD_ERR_INVALID_ARGUMENT;
    *logits = NULL;
    if (!session)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE || !session->has_logits)
        return PMPD_ERR_STATE;
    *logits = session->logits;
    return PMPD_OK;
}

size_t pmpd_session_position(const pmpd_session *session)
{
    return session && session->live == PMPD_SESSION_LIVE ? session->position : 0;
}

pmpd_status pmpd_session_reset(pmpd_session *session)
{
    if (!session)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    pmpd_kv_cache_clear(&session->kv);
    session->position = 0;
    session->has_logits = 0;
    session->decode_step = 0;
    return PMPD_OK;
}

pmpd_status pmpd_session_trace(const pmpd_session *session, const pmpd_trace_event **events, size_t *count,
                               size_t *dropped)
{
    if (!session || !events || !count || !dropped)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    *events = session->trace ? session->trace->events : NULL;
    *count = pmpd_trace_count(session->trace);
    *dropped = pmpd_trace_dropped(session->trace);
    return PMPD_OK;
}

pmpd_status pmpd_session_trace_clear(pmpd_session *session)
{
    if (!session)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE)
        return PMPD_ERR_STATE;
    pmpd_trace_clear(session->trace);
    return PMPD_OK;
}

void pmpd_session_destroy(pmpd_session *session)
{
    if (!session || session->live != PMPD_SESSION_LIVE)
        return;
    pmpd_pool_destroy(session->pool);
    session->live = 0;
}

#undef PMPD_SESSION_DEFAULT_BATCH
