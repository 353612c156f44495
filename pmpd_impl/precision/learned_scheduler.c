/* The learned PMPD scheduler at run time: section parsing, the small
 * attention-pooling classifier, and the per-prompt decision applied to a
 * session right after its prefill.  Working memory comes from an arena. */
#include <math.h>
#include <string.h>

#include "pmpd_impl/core/checked.h"
#include "pmpd_impl/core/error.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/format/loader.h"
#include "pmpd_impl/model/session.h"
#include "pmpd_impl/precision/learned_scheduler.h"

#define LEARNED_MAX_DIM 4096u

PMPD_INTERNAL size_t pmpd_learned_block_floats(uint32_t d, uint32_t m, uint32_t h, uint32_t n)
{
    size_t f = (size_t)m * d;
    return f + 2 * f + (size_t)h * f + h + (size_t)n * h + n;
}

PMPD_INTERNAL void pmpd_learned_params_of(const pmpd_learned_view *v, const float *block, pmpd_learned_params *p)
{
    size_t f = (size_t)v->n_queries * v->feature_dim;
    p->queries = block;
    p->gamma = p->queries + f;
    p->beta = p->gamma + f;
    p->w1 = p->beta + f;
    p->b1 = p->w1 + (size_t)v->hidden * f;
    p->w2 = p->b1 + v->hidden;
    p->b2 = p->w2 + (size_t)v->n_candidates * v->hidden;
}

PMPD_INTERNAL pmpd_status pmpd_learned_parse(const void *data, size_t size, pmpd_learned_view *v, pmpd_error *err)
{
    const unsigned char *p = (const unsigned char *)data;
    size_t header, block, total = 0, i, j;
    if (!data || !v)
        return pmpd_error_set(err, PMPD_ERR_INVALID_ARGUMENT, PMPD_NO_OFFSET, "learned scheduler: NULL argument");
    if ((uintptr_t)data % sizeof(float) != 0)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_ALIGNMENT, 0, "learned scheduler: data not 4-byte aligned");
    if (size < PMPD_LEARNED_HEADER_WORDS * 4)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_TRUNCATED, 0, "learned scheduler: %lu bytes, no header",
                              (unsigned long)size);
    memset(v, 0, sizeof *v);
    v->n_pairs = pmpd_le_u32(p);
    v->n_candidates = pmpd_le_u32(p + 4);
    v->feature_dim = pmpd_le_u32(p + 8);
    v->n_queries = pmpd_le_u32(p + 12);
    v->hidden = pmpd_le_u32(p + 16);
    v->output_length = pmpd_le_u32(p + 20);
    if (v->n_pairs < 1 || v->n_pairs > PMPD_LEARNED_MAX_PAIRS || v->n_candidates < 2 || v->n_candidates > 64 ||
        v->feature_dim < 1 || v->feature_dim > LEARNED_MAX_DIM || v->n_queries < 1 || v->n_queries > 64 ||
        v->hidden < 1 || v->hidden > LEARNED_MAX_DIM || v->output_length < 1)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, 0, "learned scheduler: header counts out of range");
    header = PMPD_LEARNED_HEADER_WORDS * 4 + (size_t)v->n_pairs * 8;
    block = pmpd_learned_block_floats(v->feature_dim, v->n_queries, v->hidden, v->n_candidates);
    if (!pmpd_checked_mul(block, (size_t)v->n_pairs * sizeof(float), &total) ||
        !pmpd_checked_add(total, header, &total) || size != total)
        return pmpd_error_set(err, PMPD_ERR_FORMAT_SHAPE, 0, "learned scheduler: %lu bytes, the header needs %lu",
                              (unsigned long)size, (unsigned long)total);
    for (i = 0; i < v->n_pairs; i++) {
        v->high_bits[i] = pmpd_le_u32(p + PMPD_LEARNED_HEADER_WORDS * 4 + 8 * i);
        v->low_bits[i] = pmpd_le_u32(p + PMPD_LEARNED_HEADER_WORDS * 4 + 8 * i + 4);
        if (v->high_bits[i] > PMPD_ANYPREC_MAX_BITS || v->low_bits[i] < 1 || v->low_bits[i] >= v->high_bits[i] ||
            (i > 0 && v->high_bits[i] != v->low_bits[i - 1]))
            return pmpd_error_set(err, PMPD_ERR_FORMAT_VALUE, PMPD_LEARNED_HEADER_WORDS * 4 + 8 * i,
                                  "learned scheduler: pair %lu widths %lu -> %lu do not step down",
                                  (unsigned long)i, (unsigned long)v->high_bits[i], (unsigned long)v->low_bits[i]);
        v->weights[i] = (const float *)(const void *)(p + header) + i * block;
        for (j = 0; j < block; j++)
            if (!isfinite(v->weights[i][j]))
                return pmpd_error_set(err, PMPD_ERR_FORMAT_NONFINITE, header + (i * block + j) * 4,
                                      "learned scheduler: weight %lu of pair %lu is not finite", (unsigned long)j,
                                      (unsigned long)i);
    }
    pmpd_error_clear(err);
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_learned_classify(const pmpd_learned_view *v, const pmpd_learned_params *p, const float *x,
                                         size_t t_count, pmpd_learned_trace *trace)
{
    const uint32_t d = v->feature_dim, m = v->n_queries, h = v->hidden, n = v->n_candidates;
    const size_t f = (size_t)m * d;
    const float scale = 1.0f / sqrtf((float)d);
    double mean = 0.0, var = 0.0;
    size_t q, t, i, j;
    for (q = 0; q < m; q++) {
        float *a = trace->attention + q * t_count, *pooled = trace->pooled + q * d, max = -INFINITY, sum = 0.0f;
        for (t = 0; t < t_count; t++) {
            float s = 0.0f;
            for (i = 0; i < d; i++)
                s += p->queries[q * d + i] * x[t * d + i];
            a[t] = s * scale;
            max = a[t] > max ? a[t] : max;
        }
        for (t = 0; t < t_count; t++) {
            a[t] = expf(a[t] - max);
            sum += a[t];
        }
        for (i = 0; i < d; i++)
            pooled[i] = 0.0f;
        for (t = 0; t < t_count; t++) {
            a[t] /= sum;
            for (i = 0; i < d; i++)
                pooled[i] += a[t] * x[t * d + i];
        }
    }
    for (i = 0; i < f; i++)
        mean += trace->pooled[i];
    mean /= (double)f;
    for (i = 0; i < f; i++)
        var += (trace->pooled[i] - mean) * (trace->pooled[i] - mean);
    trace->mean = (float)mean;
    trace->inv_std = (float)(1.0 / sqrt(var / (double)f + 1e-5));
    for (i = 0; i < f; i++) {
        trace->normed[i] = (trace->pooled[i] - trace->mean) * trace->inv_std;
        trace->ln_out[i] = p->gamma[i] * trace->normed[i] + p->beta[i];
    }
    for (j = 0; j < h; j++) {
        float s = p->b1[j];
        for (i = 0; i < f; i++)
            s += p->w1[j * f + i] * trace->ln_out[i];
        trace->hidden[j] = s > 0.0f ? s : 0.0f;
    }
    for (i = 0; i < n; i++) {
        float s = p->b2[i];
        for (j = 0; j < h; j++)
            s += p->w2[i * h + j] * trace->hidden[j];
        trace->logits[i] = s;
    }
}

PMPD_INTERNAL uint32_t pmpd_learned_candidate_step(uint32_t j, uint32_t n_candidates, uint32_t output_length)
{
    if (j + 1 >= n_candidates)
        return PMPD_SCHEDULE_NEVER;
    return (uint32_t)((uint64_t)j * output_length / (n_candidates - 1));
}

/* x[t] = [mean over KV heads of K_t | the same of V_t], last layer. */
PMPD_INTERNAL void pmpd_learned_session_features(const pmpd_session *s, float *x, float *work)
{
    const pmpd_kv_cache *kv = &s->kv;
    const size_t hd = kv->head_dim;
    size_t t, i;
    uint32_t head;
    for (t = 0; t < s->position; t++) {
        float *row = x + t * 2 * hd;
        for (i = 0; i < 2 * hd; i++)
            row[i] = 0.0f;
        for (head = 0; head < kv->n_kv_heads; head++) {
            pmpd_kv_cache_read(kv, kv->n_layers - 1, t, head, work, work + hd);
            for (i = 0; i < 2 * hd; i++)
                row[i] += work[i];
        }
        for (i = 0; i < 2 * hd; i++)
            row[i] /= (float)kv->n_kv_heads;
    }
}

static pmpd_status learned_floats(pmpd_arena *arena, size_t count, float **out)
{
    void *p = NULL;
    pmpd_status st = pmpd_arena_alloc_array(arena, count, sizeof(float), PMPD_ARENA_ALIGNMENT, &p);
    *out = (float *)p;
    return st;
}

pmpd_status pmpd_session_apply_learned_scheduler(pmpd_session *session, const void *weights, size_t size,
                                                 pmpd_arena *scratch)
{
    pmpd_learned_view v;
    pmpd_learned_trace trace;
    pmpd_precision_schedule schedule;
    pmpd_arena_mark mark;
    float *x = NULL;
    size_t t_count, f;
    uint32_t i, j, best;
    pmpd_status st;
    if (!session || !scratch)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (session->live != PMPD_SESSION_LIVE || session->position == 0)
        return PMPD_ERR_STATE;
    if (!weights) {
        const pmpd_section *section = pmpd_model_find_section(session->model, PMPD_SECTION_LEARNED_SCHEDULER);
        if (!section)
            return PMPD_ERR_NOT_FOUND;
        if (section->version != 1 || section->size > SIZE_MAX)
            return PMPD_ERR_FORMAT_VERSION;
        weights = section->data;
        size = (size_t)section->size;
    }
    st = pmpd_learned_parse(weights, size, &v, NULL);
    if (st != PMPD_OK)
        return st;
    if (v.feature_dim != 2 * session->kv.head_dim)
        return PMPD_ERR_FORMAT_SHAPE;
    t_count = session->position;
    f = (size_t)v.n_queries * v.feature_dim;
    mark = pmpd_arena_save(scratch);
    st = learned_floats(scratch, (t_count + 1) * v.feature_dim, &x);
    if (st == PMPD_OK) st = learned_floats(scratch, t_count * v.n_queries, &trace.attention);
    if (st == PMPD_OK) st = learned_floats(scratch, f, &trace.pooled);
    if (st == PMPD_OK) st = learned_floats(scratch, f, &trace.normed);
    if (st == PMPD_OK) st = learned_floats(scratch, f, &trace.ln_out);
    if (st == PMPD_OK) st = learned_floats(scratch, v.hidden, &trace.hidden);
    if (st == PMPD_OK) st = learned_floats(scratch, v.n_candidates, &trace.logits);
    if (st != PMPD_OK || !x) {
        pmpd_arena_restore(scratch, mark);
        return st != PMPD_OK ? st : PMPD_ERR_INVALID_ARGUMENT; /* a measuring arena cannot run it */
    }
    pmpd_learned_session_features(session, x, x + t_count * v.feature_dim);
    schedule = session->precision;
    schedule.n_widths = v.n_pairs + 1;
    schedule.decode_bits[0] = v.high_bits[0];
    schedule.from_step[0] = 0;
    for (i = 0; i < v.n_pairs; i++) {
        pmpd_learned_params params;
        uint32_t step;
        pmpd_learned_params_of(&v, v.weights[i], &params);
        pmpd_learned_classify(&v, &params, x, t_count, &trace);
        for (best = 0, j = 1; j < v.n_candidates; j++)
            if (trace.logits[j] > trace.logits[best])
                best = j;
        step = pmpd_learned_candidate_step(best, v.n_candidates, v.output_length);
        /* Widths only go down: a lower width never starts before a higher one. */
        schedule.decode_bits[i + 1] = v.low_bits[i];
        schedule.from_step[i + 1] = step > schedule.from_step[i] ? step : schedule.from_step[i];
    }
    pmpd_arena_restore(scratch, mark);
    if (pmpd_precision_schedule_check(&schedule) != PMPD_OK)
        return PMPD_ERR_FORMAT_VALUE;
    session->precision = schedule;
    return PMPD_OK;
}

#undef LEARNED_MAX_DIM
