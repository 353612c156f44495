#include "pmpd_impl/model/prefill_graph.h"

#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/model/linear.h"
#include "pmpd_impl/model/ops.h"

/* The steps of a layer.  Token-wise steps that feed a product also
 * prepare its input for their tokens (NORM for q/k/v, ADD_NORM for gate/up,
 * SWIGLU for down): per token, so the same numbers, one boundary fewer.
 * Attention's output is prepared in a step of its own, since attention
 * tiles are (token, KV head) ranges and quantization needs whole tokens. */
enum {
    PMPD_STEP_NORM,
    PMPD_STEP_QKV,
    PMPD_STEP_ROPE,
    PMPD_STEP_KV,
    PMPD_STEP_ATTENTION,
    PMPD_STEP_QUANTIZE_O,
    PMPD_STEP_O,
    PMPD_STEP_ADD_NORM,
    PMPD_STEP_GATE_UP,
    PMPD_STEP_SWIGLU,
    PMPD_STEP_DOWN,
    PMPD_STEP_ADD,
    PMPD_STEPS_PER_LAYER
};

/* Flat step 0 is the embedding; step 1 + layer * PMPD_STEPS_PER_LAYER + kind
 * the rest. */
#define PMPD_STEP_EMBED ((unsigned)PMPD_STEPS_PER_LAYER)

typedef struct pmpd_prefill_graph {
    pmpd_session *s;
    const int32_t *tokens;
    size_t n_tokens, chunk_tokens, first_position;
    size_t n_threads;
} pmpd_prefill_graph;

/* The matrices of a product step, their outputs and their input. */
typedef struct pmpd_prefill_product {
    const pmpd_tensor *w[3];
    float *y[3];
    size_t count;
    const float *x;
} pmpd_prefill_product;

static void pmpd_prefill_decode(size_t step, uint32_t *layer, unsigned *kind)
{
    if (step == 0) {
        *layer = 0;
        *kind = PMPD_STEP_EMBED;
        return;
    }
    *layer = (uint32_t)((step - 1) / PMPD_STEPS_PER_LAYER);
    *kind = (unsigned)((step - 1) % PMPD_STEPS_PER_LAYER);
}

static size_t pmpd_prefill_chunk_tokens(const pmpd_prefill_graph *g, size_t chunk)
{
    size_t first = chunk * g->chunk_tokens, rest = g->n_tokens - first;
    return rest < g->chunk_tokens ? rest : g->chunk_tokens;
}

static pmpd_chunk_buffers *pmpd_prefill_buffers(const pmpd_prefill_graph *g, size_t chunk)
{
    return &g->s->chunks[chunk % g->s->config.prefill_in_flight];
}

/* The product a step runs or prepares the input of (kind a product step,
 * QUANTIZE_O, or one of the token-wise steps that prepare: NORM, ADD_NORM,
 * SWIGLU). */
static void pmpd_prefill_product_of(const pmpd_prefill_graph *g, size_t chunk, uint32_t layer, unsigned kind,
                                    pmpd_prefill_product *p)
{
    const pmpd_layer_weights *w = &g->s->model->layers[layer];
    pmpd_chunk_buffers *b = pmpd_prefill_buffers(g, chunk);
    switch (kind) {
    case PMPD_STEP_NORM:
    case PMPD_STEP_QKV:
        p->w[0] = w->wq, p->w[1] = w->wk, p->w[2] = w->wv;
        p->y[0] = b->q, p->y[1] = b->k, p->y[2] = b->v;
        p->count = 3;
        p->x = b->xb;
        break;
    case PMPD_STEP_QUANTIZE_O:
    case PMPD_STEP_O:
        p->w[0] = w->wo;
        p->y[0] = b->xb;
        p->count = 1;
        p->x = b->att;
        break;
    case PMPD_STEP_ADD_NORM:
    case PMPD_STEP_GATE_UP:
        p->w[0] = w->w_gate, p->w[1] = w->w_up;
        p->y[0] = b->hb, p->y[1] = b->hb2;
        p->count = 2;
        p->x = b->xb;
        break;
    default:
        p->w[0] = w->w_down;
        p->y[0] = b->xb;
        p->count = 1;
        p->x = b->hb;
        break;
    }
}

/* Work items of a step and items per tile.  Products get about four
 * tiles per thread (whole blocks of 4 rows, at least 16), so a thread that
 * finishes early finds more; token steps (quantization included) one even
 * range per thread (pairs of tokens share bytes in some prepared inputs);
 * attention two ranges per thread. */
static void pmpd_prefill_tiling(const pmpd_prefill_graph *g, size_t chunk, uint32_t layer, unsigned kind,
                                size_t *items, size_t *per_tile)
{
    size_t n = pmpd_prefill_chunk_tokens(g, chunk), t = g->n_threads, tile;
    pmpd_prefill_product p;
    switch (kind) {
    case PMPD_STEP_QKV:
    case PMPD_STEP_O:
    case PMPD_STEP_GATE_UP:
    case PMPD_STEP_DOWN:
        pmpd_prefill_product_of(g, chunk, layer, kind, &p);
        *items = pmpd_linear_group_items(p.w, p.count);
        tile = (*items + 4 * t - 1) / (4 * t);
        tile = (tile + 3) / 4 * 4;
        *per_tile = tile < 16 ? 16 : tile;
        return;
    case PMPD_STEP_ATTENTION:
        *items = n * g->s->model->info.n_kv_heads;
        *per_tile = (*items + 2 * t - 1) / (2 * t);
        return;
    case PMPD_STEP_KV:
        *items = *per_tile = 1;
        return;
    default:
        *items = n;
        tile = (n + t - 1) / t;
        *per_tile = tile + (tile & 1);
        return;
    }
}

/* Multiply-adds of the product a float step leads to (0 after the last
 * layer): the float lane's priority. */
static uint64_t pmpd_prefill_unlocks(const pmpd_prefill_graph *g, size_t chunk, uint32_t layer, unsigned kind)
{
    unsigned next;
    pmpd_prefill_product p;
    size_t i;
    uint64_t work = 0;
    if (kind == PMPD_STEP_ADD || kind == PMPD_STEP_EMBED) {
        if (kind == PMPD_STEP_ADD && ++layer == g->s->model->info.n_layers)
            return 0;
        next = PMPD_STEP_QKV;
    } else if (kind == PMPD_STEP_NORM) {
        next = PMPD_STEP_QKV;
    } else if (kind <= PMPD_STEP_QUANTIZE_O) {
        next = PMPD_STEP_O;
    } else if (kind == PMPD_STEP_ADD_NORM) {
        next = PMPD_STEP_GATE_UP;
    } else {
        next = PMPD_STEP_DOWN;
    }
    pmpd_prefill_product_of(g, chunk, layer, next, &p);
    for (i = 0; i < p.count; i++)
        work += p.w[i]->dims[0] * p.w[i]->dims[1];
    return work * pmpd_prefill_chunk_tokens(g, chunk);
}

static void pmpd_prefill_describe(void *ctx, size_t chunk, size_t step, pmpd_chunk_step *out)
{
    const pmpd_prefill_graph *g = (const pmpd_prefill_graph *)ctx;
    uint32_t layer;
    unsigned kind;
    size_t items, per_tile;
    pmpd_prefill_decode(step, &layer, &kind);
    pmpd_prefill_tiling(g, chunk, layer, kind, &items, &per_tile);
    out->tiles = (items + per_tile - 1) / per_tile;
    out->lane = kind == PMPD_STEP_QKV || kind == PMPD_STEP_O || kind == PMPD_STEP_GATE_UP || kind == PMPD_STEP_DOWN
                    ? PMPD_LANE_INT8
                    : PMPD_LANE_FLOAT;
    out->unlocks = out->lane == PMPD_LANE_FLOAT ? pmpd_prefill_unlocks(g, chunk, layer, kind) : 0;
    out->after_previous = kind == PMPD_STEP_KV ? 1 + (size_t)layer * PMPD_STEPS_PER_LAYER + PMPD_STEP_ATTENTION
                                               : PMPD_CHUNK_NO_WAIT;
}

/* Token-wise steps over tokens [begin, end) of a chunk (begin even), on
 * pool thread `thread`. */
static void pmpd_prefill_tokens(const pmpd_prefill_graph *g, size_t chunk, uint32_t layer, unsigned kind,
                                size_t begin, size_t end, unsigned thread)
{
    const pmpd_model *model = g->s->model;
    const pmpd_model_info *info = &model->info;
    const pmpd_layer_weights *w = &model->layers[layer];
    pmpd_chunk_buffers *b = pmpd_prefill_buffers(g, chunk);
    size_t dim = info->dim, hidden = info->hidden_dim, half = info->head_dim / 2, t;
    const float *divisors = model->rope_freqs ? (const float *)model->rope_freqs->data : NULL;
    for (t = begin; t < end; t++) {
        float *x = b->x + t * dim, *xb = b->xb + t * dim;
        switch (kind) {
        case PMPD_STEP_EMBED:
            pmpd_linear_row(model->tok_embedding, (size_t)g->tokens[chunk * g->chunk_tokens + t], x);
            pmpd_ops_rope_angles(b->rope_cos + t * half, b->rope_sin + t * half,
                                 g->first_position + chunk * g->chunk_tokens + t, info->head_dim,
                                 info->rope_theta, divisors);
            break;
        case PMPD_STEP_NORM:
            pmpd_ops_rmsnorm(xb, x, (const float *)w->attn_norm->data, dim, info->norm_eps);
            break;
        case PMPD_STEP_ADD_NORM:
            pmpd_ops_add(x, xb, dim);
            pmpd_ops_rmsnorm(xb, x, (const float *)w->ffn_norm->data, dim, info->norm_eps);
            break;
        case PMPD_STEP_SWIGLU:
            pmpd_ops_swiglu(b->hb + t * hidden, b->hb2 + t * hidden, hidden);
            break;
        default: /* PMPD_STEP_ADD */
            pmpd_ops_add(x, xb, dim);
            break;
        }
    }
    if (kind == PMPD_STEP_NORM || kind == PMPD_STEP_ADD_NORM || kind == PMPD_STEP_SWIGLU) {
        pmpd_prefill_product p;
        pmpd_prefill_product_of(g, chunk, layer, kind, &p);
        pmpd_linear_group_prepare_tokens(p.w[0], p.x, pmpd_prefill_chunk_tokens(g, chunk), b->linear_scratch, begin,
                                         end, thread);
    }
}

static void pmpd_prefill_run(void *ctx, size_t chunk, size_t step, size_t tile, unsigned thread)
{
    const pmpd_prefill_graph *g = (const pmpd_prefill_graph *)ctx;
    pmpd_session *s = g->s;
    pmpd_chunk_buffers *b = pmpd_prefill_buffers(g, chunk);
    size_t n = pmpd_prefill_chunk_tokens(g, chunk), items, per_tile, begin, end;
    uint32_t layer;
    unsigned kind;
    pmpd_prefill_product p;
    pmpd_prefill_decode(step, &layer, &kind);
    pmpd_prefill_tiling(g, chunk, layer, kind, &items, &per_tile);
    begin = tile * per_tile;
    end = begin + per_tile < items ? begin + per_tile : items;
    switch (kind) {
    case PMPD_STEP_QUANTIZE_O:
        pmpd_prefill_product_of(g, chunk, layer, kind, &p);
        pmpd_linear_group_prepare_tokens(p.w[0], p.x, n, b->linear_scratch, begin, end, thread);
        break;
    case PMPD_STEP_QKV:
    case PMPD_STEP_O:
    case PMPD_STEP_GATE_UP:
    case PMPD_STEP_DOWN:
        pmpd_prefill_product_of(g, chunk, layer, kind, &p);
        pmpd_linear_group_rows(p.w, p.count, b->linear_scratch, p.x, n, p.y, begin, end, s->weight_bits);
        break;
    case PMPD_STEP_ROPE:
        pmpd_forward_rope(s, layer, b->q, b->k, b->v, b->rope_cos, b->rope_sin, begin, end);
        break;
    case PMPD_STEP_KV: /* the cache takes positions in order: one tile */
        pmpd_kv_cache_write(&s->kv, layer, g->first_position + chunk * g->chunk_tokens, n, b->k, b->v);
        break;
    case PMPD_STEP_ATTENTION:
        pmpd_forward_attend(s, layer, g->first_position + chunk * g->chunk_tokens, b->q, b->att, begin, end,
                            thread);
        break;
    default:
        pmpd_prefill_tokens(g, chunk, layer, kind, begin, end, thread);
        break;
    }
}

static void pmpd_prefill_label(void *ctx, size_t chunk, size_t step, const char **name, uint32_t *name_length,
                               uint32_t *layer, const char **category)
{
    static const char *const names[] = {"rmsnorm", "", "rope", "kv-write", "attention", "", "", "add+rmsnorm", "",
                                        "swiglu", "", "add"};
    const pmpd_prefill_graph *g = (const pmpd_prefill_graph *)ctx;
    unsigned kind;
    pmpd_prefill_product p;
    pmpd_prefill_decode(step, layer, &kind);
    if (kind == PMPD_STEP_EMBED) {
        *name = "embedding";
        *layer = PMPD_TRACE_NO_LAYER;
        *category = "elementwise";
    } else if (names[kind][0]) {
        *name = names[kind];
        *category = kind == PMPD_STEP_ATTENTION ? "attention" : "elementwise";
    } else {
        pmpd_prefill_product_of(g, chunk, *layer, kind, &p);
        *name = p.w[0]->name;
        *name_length = p.w[0]->name_length;
        *category = kind == PMPD_STEP_QKV || kind == PMPD_STEP_O || kind == PMPD_STEP_GATE_UP ||
                            kind == PMPD_STEP_DOWN
                        ? "product"
                        : "quantize";
        return;
    }
    *name_length = (uint32_t)strlen(*name);
}

PMPD_INTERNAL pmpd_status pmpd_chunk_buffers_alloc(pmpd_arena *arena, const pmpd_model_info *info, size_t batch,
                                                   size_t scratch_bytes, pmpd_chunk_buffers *out)
{
    size_t widths[10], q_dim = (size_t)info->n_heads * info->head_dim;
    size_t kv_dim = (size_t)info->n_kv_heads * info->head_dim, count, i;
    float **fields[10];
    pmpd_status st = PMPD_OK;
    void *p;
    fields[0] = &out->x, widths[0] = info->dim;
    fields[1] = &out->xb, widths[1] = info->dim;
    fields[2] = &out->q, widths[2] = q_dim;
    fields[3] = &out->k, widths[3] = kv_dim;
    fields[4] = &out->v, widths[4] = kv_dim;
    fields[5] = &out->att, widths[5] = q_dim;
    fields[6] = &out->hb, widths[6] = info->hidden_dim;
    fields[7] = &out->hb2, widths[7] = info->hidden_dim;
    fields[8] = &out->rope_cos, widths[8] = info->head_dim / 2;
    fields[9] = &out->rope_sin, widths[9] = info->head_dim / 2;
    for (i = 0; i < 10 && st == PMPD_OK; i++) {
        if (!pmpd_checked_mul(batch, widths[i], &count))
            return PMPD_ERR_OVERFLOW;
        st = pmpd_arena_alloc_array(arena, count, sizeof(float), PMPD_ARENA_ALIGNMENT, &p);
        *fields[i] = (float *)p;
    }
    if (st == PMPD_OK)
        st = pmpd_arena_alloc(arena, scratch_bytes, PMPD_ARENA_ALIGNMENT, &out->linear_scratch);
    return st;
}

PMPD_INTERNAL int pmpd_prefill_graph_applies(const pmpd_session *s)
{
    uint32_t layer;
    if (s->config.prefill_in_flight < 2 || s->linear_observer)
        return 0;
    for (layer = 0; layer < s->model->info.n_layers; layer++) {
        const pmpd_layer_weights *w = &s->model->layers[layer];
        const pmpd_tensor *qkv[3], *gate_up[2];
        qkv[0] = w->wq, qkv[1] = w->wk, qkv[2] = w->wv;
        gate_up[0] = w->w_gate, gate_up[1] = w->w_up;
        if (!pmpd_linear_group_shared(qkv, 3) || !pmpd_linear_group_shared(gate_up, 2) ||
            !pmpd_linear_group_shared(&w->wo, 1) || !pmpd_linear_group_shared(&w->w_down, 1))
            return 0;
    }
    return 1;
}

PMPD_INTERNAL void pmpd_prefill_graph_run(pmpd_session *s, const int32_t *tokens, size_t n)
{
    pmpd_prefill_graph g;
    pmpd_chunk_program program;
    size_t last;
    g.s = s;
    g.tokens = tokens;
    g.n_tokens = n;
    g.chunk_tokens = s->config.prefill_batch;
    g.first_position = s->position;
    g.n_threads = pmpd_pool_threads(s->pool);
    program.ctx = &g;
    program.n_chunks = (n + g.chunk_tokens - 1) / g.chunk_tokens;
    program.n_steps = 1 + (size_t)s->model->info.n_layers * PMPD_STEPS_PER_LAYER;
    program.describe = pmpd_prefill_describe;
    program.run = pmpd_prefill_run;
    pmpd_chunk_schedule_run(s->schedule, &program, s->pool, s->config.float_threads, pmpd_prefill_label);
    s->position += n;
    last = program.n_chunks - 1;
    pmpd_forward_logits(s, pmpd_prefill_buffers(&g, last)->x +
                               (pmpd_prefill_chunk_tokens(&g, last) - 1) * s->model->info.dim);
}
