/* The Llama forward pass over a batch of consecutive tokens: every matrix
 * product sees the whole batch (matrix x matrix in prefill, matrix x vector
 * in decode); attention runs per (token, KV head) with the causal limit given
 * by each token's position. */
#include <string.h>

#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/model/ops.h"
#include "pmpd_impl/model/ops_batch.h"
#include "pmpd_impl/model/session.h"

typedef struct pmpd_forward_attention {
    pmpd_session *session;
    uint32_t layer;
    size_t first_position;
    const float *q;
    float *att;
} pmpd_forward_attention;

PMPD_INTERNAL void pmpd_forward_attend(pmpd_session *s, uint32_t layer, size_t first_position, const float *q,
                                       float *att, size_t begin, size_t end, unsigned worker)
{
    const pmpd_model_info *info = &s->model->info;
    size_t head_dim = info->head_dim, q_dim = (size_t)info->n_heads * head_dim;
    uint32_t heads_per_kv = info->n_heads / info->n_kv_heads;
    void *scratch = s->attend_scratch + (size_t)worker * s->attend_stride;
    size_t item;
    for (item = begin; item < end; item++) {
        size_t t = item / info->n_kv_heads;
        uint32_t kv_head = (uint32_t)(item % info->n_kv_heads);
        size_t offset = t * q_dim + (size_t)kv_head * heads_per_kv * head_dim;
        pmpd_kv_cache_attend_group(&s->kv, layer, kv_head, q + offset, heads_per_kv, first_position + t + 1,
                                   scratch, att + offset);
    }
}

static void pmpd_forward_attention_items(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_forward_attention *job = (const pmpd_forward_attention *)ctx;
    pmpd_forward_attend(job->session, job->layer, job->first_position, job->q, job->att, begin, end, worker);
}

PMPD_INTERNAL void pmpd_forward_rope(const pmpd_session *s, uint32_t layer, float *q, float *k, float *v,
                                     const float *rope_cos, const float *rope_sin, size_t begin, size_t end)
{
    const pmpd_model_info *info = &s->model->info;
    const pmpd_layer_weights *w = &s->model->layers[layer];
    pmpd_ops_rope_fn rope = pmpd_ops_rope_for(info->rope_style);
    size_t head_dim = info->head_dim, half = head_dim / 2, t;
    size_t q_dim = (size_t)info->n_heads * head_dim, kv_dim = (size_t)info->n_kv_heads * head_dim;
    for (t = begin; t < end; t++) {
        if (w->bq) { /* the loader binds all three or none */
            pmpd_ops_add(q + t * q_dim, (const float *)w->bq->data, q_dim);
            pmpd_ops_add(k + t * kv_dim, (const float *)w->bk->data, kv_dim);
            pmpd_ops_add(v + t * kv_dim, (const float *)w->bv->data, kv_dim);
        }
        rope(q + t * q_dim, info->n_heads, head_dim, rope_cos + t * half, rope_sin + t * half);
        rope(k + t * kv_dim, info->n_kv_heads, head_dim, rope_cos + t * half, rope_sin + t * half);
    }
}

typedef struct pmpd_forward_rope_job {
    const pmpd_session *session;
    uint32_t layer;
} pmpd_forward_rope_job;

static void pmpd_forward_rope_tokens(void *ctx, size_t begin, size_t end, unsigned worker)
{
    const pmpd_forward_rope_job *job = (const pmpd_forward_rope_job *)ctx;
    const pmpd_session *s = job->session;
    (void)worker;
    pmpd_forward_rope(s, job->layer, s->q, s->k, s->v, s->rope_cos, s->rope_sin, begin, end);
}

static void pmpd_forward_linear(pmpd_session *s, const pmpd_tensor *w, const float *x, size_t n, float *y)
{
    if (s->linear_observer)
        s->linear_observer(s->linear_observer_context, w, x, n);
    pmpd_linear(w, x, n, y, s->linear_scratch, s->pool, s->weight_bits);
}

/* Matrices reading the same input (q, k, v; gate, up) as one product. */
static void pmpd_forward_linear_group(pmpd_session *s, const pmpd_tensor *const *w, size_t count, const float *x,
                                      size_t n, float *const *y)
{
    size_t i;
    if (s->linear_observer)
        for (i = 0; i < count; i++)
            s->linear_observer(s->linear_observer_context, w[i], x, n);
    pmpd_linear_group(w, count, x, n, y, s->linear_scratch, s->pool, s->weight_bits);
}

static void pmpd_forward_layer(pmpd_session *s, uint32_t layer, size_t n)
{
    const pmpd_model_info *info = &s->model->info;
    const pmpd_layer_weights *w = &s->model->layers[layer];
    size_t dim = info->dim, hidden = info->hidden_dim, head_dim = info->head_dim;
    size_t q_dim = (size_t)info->n_heads * head_dim, kv_dim = (size_t)info->n_kv_heads * head_dim;
    pmpd_forward_attention attention;
    pmpd_forward_rope_job rope_job;

    pmpd_trace_layer(pmpd_pool_get_trace(s->pool), layer);
    pmpd_ops_rmsnorm_batch(s->pool, s->xb, s->x, (const float *)w->attn_norm->data, n, dim, info->norm_eps);
    {
        const pmpd_tensor *qkv[3];
        float *out[3];
        qkv[0] = w->wq, qkv[1] = w->wk, qkv[2] = w->wv;
        out[0] = s->q, out[1] = s->k, out[2] = s->v;
        pmpd_forward_linear_group(s, qkv, 3, s->xb, n, out);
    }
    /* Bias and rope over the pool by tokens (the caller alone would be a
     * serial step between two products at many threads). */
    rope_job.session = s;
    rope_job.layer = layer;
    pmpd_trace_label(pmpd_pool_get_trace(s->pool), "rope", 4, "elementwise");
    pmpd_pool_run_weighed(s->pool, pmpd_forward_rope_tokens, &rope_job, n, 1, q_dim + kv_dim);
    pmpd_kv_cache_write(&s->kv, layer, s->position, n, s->k, s->v);

    attention.session = s;
    attention.layer = layer;
    attention.first_position = s->position;
    attention.q = s->q;
    attention.att = s->att;
    /* An item (a token's query group) scores and sums over up to
     * position + n cached rows. */
    pmpd_trace_label(pmpd_pool_get_trace(s->pool), "attention", 9, "attention");
    pmpd_pool_run_weighed(s->pool, pmpd_forward_attention_items, &attention, n * info->n_kv_heads, 1,
                          (s->position + n) * head_dim * 2 * (info->n_heads / info->n_kv_heads));

    pmpd_forward_linear(s, w->wo, s->att, n, s->xb);
    pmpd_ops_add_batch(s->pool, s->x, s->xb, n, dim);

    pmpd_ops_rmsnorm_batch(s->pool, s->xb, s->x, (const float *)w->ffn_norm->data, n, dim, info->norm_eps);
    {
        const pmpd_tensor *gate_up[2];
        float *out[2];
        gate_up[0] = w->w_gate, gate_up[1] = w->w_up;
        out[0] = s->hb, out[1] = s->hb2;
        pmpd_forward_linear_group(s, gate_up, 2, s->xb, n, out);
    }
    pmpd_ops_swiglu_batch(s->pool, s->hb, s->hb2, n, hidden);
    pmpd_forward_linear(s, w->w_down, s->hb, n, s->xb);
    pmpd_ops_add_batch(s->pool, s->x, s->xb, n, dim);
}

PMPD_INTERNAL void pmpd_forward(pmpd_session *s, const int32_t *tokens, size_t n, int want_logits,
                               float *all_logits)
{
    const pmpd_model_info *info = &s->model->info;
    size_t dim = info->dim, half = info->head_dim / 2, t;
    const float *divisors = s->model->rope_freqs ? (const float *)s->model->rope_freqs->data : NULL;
    uint32_t layer;

    for (t = 0; t < n; t++) {
        pmpd_linear_row(s->model->tok_embedding, (size_t)tokens[t], s->x + t * dim);
        pmpd_ops_rope_angles(s->rope_cos + t * half, s->rope_sin + t * half, s->position + t,
                             info->head_dim, info->rope_theta, divisors);
    }
    for (layer = 0; layer < info->n_layers; layer++)
        pmpd_forward_layer(s, layer, n);
    pmpd_trace_layer(pmpd_pool_get_trace(s->pool), PMPD_TRACE_NO_LAYER);
    s->position += n;

    if (all_logits) {
        /* Every row through the classifier as one matrix product. */
        for (t = 0; t < n; t++)
            pmpd_ops_rmsnorm(s->xb + t * dim, s->x + t * dim, (const float *)s->model->final_norm->data, dim,
                             info->norm_eps);
        pmpd_forward_linear(s, s->model->classifier, s->xb, n, all_logits);
        if (want_logits)
            memcpy(s->logits, all_logits + (n - 1) * info->vocab_size, info->vocab_size * sizeof(float));
    } else if (want_logits) {
        pmpd_forward_logits(s, s->x + (n - 1) * dim);
    }
}

PMPD_INTERNAL void pmpd_forward_logits(pmpd_session *s, const float *x)
{
    const pmpd_model_info *info = &s->model->info;
    pmpd_ops_rmsnorm(s->xb, x, (const float *)s->model->final_norm->data, info->dim, info->norm_eps);
    pmpd_forward_linear(s, s->model->classifier, s->xb, 1, s->logits);
}
