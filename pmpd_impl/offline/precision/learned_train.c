/* Offline trainer of the learned PMPD scheduler.  Labels: for each training
 * prompt and pair of adjacent widths (high -> low), the earliest candidate
 * switch step whose greedy output scores a Rouge-L against the float
 * reference at least as high as staying at the high width.  Each pair's
 * classifier is trained separately with cross-entropy and Adam on epochs
 * in which every class is oversampled to the size of the largest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pmpd.h"
#include "pmpd_impl/core/splitmix.h"
#include "pmpd_impl/model/session.h"
#include "pmpd_impl/offline/precision/calibration_session.h"
#include "pmpd_impl/offline/precision/learned_train.h"

#define LEARNED_TRAIN_BATCH 8

void pmpd_learned_train_config_init(pmpd_learned_train_config *config)
{
    if (!config)
        return;
    config->n_candidates = 4;
    config->n_queries = 4;
    config->hidden = 32;
    config->epochs = 150;
    config->learning_rate = 0.01f;
    config->seed = 7;
}

static float learned_train_uniform(uint64_t *state, float limit)
{
    return (float)(2.0 * pmpd_splitmix64_unit(state) - 1.0) * limit;
}

/* One classification's gradient, added to grad (same layout as a block). */
PMPD_INTERNAL void pmpd_learned_backward(const pmpd_learned_view *v, const pmpd_learned_params *p, const float *x,
                                         size_t t_count, const pmpd_learned_trace *trace, uint32_t label,
                                         float *grad, float *work)
{
    const uint32_t d = v->feature_dim, m = v->n_queries, h = v->hidden, n = v->n_candidates;
    const size_t f = (size_t)m * d;
    const float scale = 1.0f / sqrtf((float)d);
    pmpd_learned_params g;
    float *dz = work, *dh = dz + n, *dln = dh + h, *dpool = dln + f, *da = dpool + f, max = -INFINITY, sum = 0.0f;
    float mean_dn = 0.0f, mean_dn_n = 0.0f;
    size_t i, j, q, t;
    pmpd_learned_params_of(v, grad, &g);
    for (i = 0; i < n; i++)
        max = trace->logits[i] > max ? trace->logits[i] : max;
    for (i = 0; i < n; i++)
        sum += expf(trace->logits[i] - max);
    for (i = 0; i < n; i++)
        dz[i] = expf(trace->logits[i] - max) / sum - (i == label ? 1.0f : 0.0f);
    for (j = 0; j < h; j++)
        dh[j] = 0.0f;
    for (i = 0; i < n; i++) {
        ((float *)g.b2)[i] += dz[i];
        for (j = 0; j < h; j++) {
            ((float *)g.w2)[i * h + j] += dz[i] * trace->hidden[j];
            dh[j] += p->w2[i * h + j] * dz[i];
        }
    }
    for (i = 0; i < f; i++)
        dln[i] = 0.0f;
    for (j = 0; j < h; j++) {
        if (trace->hidden[j] <= 0.0f)
            continue;
        ((float *)g.b1)[j] += dh[j];
        for (i = 0; i < f; i++) {
            ((float *)g.w1)[j * f + i] += dh[j] * trace->ln_out[i];
            dln[i] += p->w1[j * f + i] * dh[j];
        }
    }
    /* LayerNorm: dpool = inv_std * (dn - mean(dn) - normed * mean(dn * normed)). */
    for (i = 0; i < f; i++) {
        float dn = dln[i] * p->gamma[i];
        ((float *)g.gamma)[i] += dln[i] * trace->normed[i];
        ((float *)g.beta)[i] += dln[i];
        mean_dn += dn;
        mean_dn_n += dn * trace->normed[i];
    }
    mean_dn /= (float)f;
    mean_dn_n /= (float)f;
    for (i = 0; i < f; i++)
        dpool[i] = trace->inv_std * (dln[i] * p->gamma[i] - mean_dn - trace->normed[i] * mean_dn_n);
    /* Attention pooling: pooled_q = sum_t a_qt x_t, a_q = softmax(scale * q . x_t). */
    for (q = 0; q < m; q++) {
        const float *a = trace->attention + q * t_count, *dp = dpool + q * d;
        float weighted = 0.0f;
        for (t = 0; t < t_count; t++) {
            float s = 0.0f;
            for (i = 0; i < d; i++)
                s += dp[i] * x[t * d + i];
            da[t] = s;
            weighted += a[t] * s;
        }
        for (t = 0; t < t_count; t++) {
            float ds = a[t] * (da[t] - weighted) * scale;
            for (i = 0; i < d; i++)
                ((float *)g.queries)[q * d + i] += ds * x[t * d + i];
        }
    }
}

typedef struct learned_train_sample {
    float *x;          /* [t_count][D] */
    size_t t_count;
    uint32_t label[PMPD_LEARNED_MAX_PAIRS];
} learned_train_sample;

/* Rouge-L of prompt p's greedy output under schedule (a one-prompt view of the set). */
static pmpd_status learned_train_rouge(const pmpd_model *nested, const pmpd_calibration_set *set, uint32_t p,
                                       const pmpd_precision_schedule *schedule, double *rouge)
{
    pmpd_calibration_set one = *set;
    pmpd_calibration_quality q;
    pmpd_status st;
    one.n_prompts = 1;
    one.prompts = set->prompts + (size_t)p * set->prompt_length;
    one.reference = set->reference + (size_t)p * set->output_length;
    one.reference_logits = set->reference_logits + (size_t)p * set->output_length * set->vocab_size;
    st = pmpd_calibration_evaluate(nested, &one, schedule, &q);
    *rouge = q.rouge_l;
    return st;
}

static pmpd_status learned_train_label(const pmpd_model *nested, const pmpd_calibration_set *set, uint32_t p,
                                       unsigned prefill_bits, const pmpd_learned_view *v, uint32_t pair,
                                       uint32_t *label)
{
    pmpd_precision_schedule s;
    double high = 0.0, rouge = 0.0;
    uint32_t j;
    pmpd_status st;
    pmpd_precision_schedule_uniform(&s, prefill_bits, v->high_bits[pair]);
    st = learned_train_rouge(nested, set, p, &s, &high);
    *label = v->n_candidates - 1;
    for (j = 0; j + 1 < v->n_candidates && st == PMPD_OK; j++) {
        s.n_widths = 2;
        s.decode_bits[1] = v->low_bits[pair];
        s.from_step[1] = pmpd_learned_candidate_step(j, v->n_candidates, v->output_length);
        st = learned_train_rouge(nested, set, p, &s, &rouge);
        if (st == PMPD_OK && rouge >= high) {
            *label = j;
            break;
        }
    }
    return st;
}

static pmpd_status learned_train_features(const pmpd_model *nested, const pmpd_calibration_set *set, uint32_t p,
                                          unsigned prefill_bits, learned_train_sample *sample)
{
    pmpd_precision_schedule s;
    pmpd_calibration_session cs;
    pmpd_session *session;
    pmpd_status st = pmpd_calibration_session_open(nested, set->prompt_length, &cs);
    session = cs.session;
    pmpd_precision_schedule_uniform(&s, prefill_bits, prefill_bits);
    if (st == PMPD_OK)
        st = pmpd_session_set_precision(session, &s);
    if (st == PMPD_OK)
        st = pmpd_session_prefill(session, set->prompts + (size_t)p * set->prompt_length, set->prompt_length, NULL);
    if (st == PMPD_OK) {
        sample->t_count = set->prompt_length;
        /* One row more than the features: the reader's work area. */
        sample->x = (float *)malloc((sample->t_count + 1) * 2 * session->kv.head_dim * sizeof(float));
        if (sample->x)
            pmpd_learned_session_features(session, sample->x, sample->x + sample->t_count * 2 * session->kv.head_dim);
        else
            st = PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_calibration_session_close(&cs);
    return st;
}

/* Trace buffers sized for t_count positions. */
static float *learned_train_trace(const pmpd_learned_view *v, size_t t_count, pmpd_learned_trace *trace)
{
    size_t f = (size_t)v->n_queries * v->feature_dim;
    float *all = (float *)malloc((t_count * v->n_queries + 3 * f + v->hidden + v->n_candidates) * sizeof(float));
    if (!all)
        return NULL;
    trace->attention = all;
    trace->pooled = trace->attention + t_count * v->n_queries;
    trace->normed = trace->pooled + f;
    trace->ln_out = trace->normed + f;
    trace->hidden = trace->ln_out + f;
    trace->logits = trace->hidden + v->hidden;
    return all;
}

static uint32_t learned_train_predict(const pmpd_learned_view *v, const pmpd_learned_params *p,
                                      const learned_train_sample *s, pmpd_learned_trace *trace)
{
    uint32_t j, best = 0;
    pmpd_learned_classify(v, p, s->x, s->t_count, trace);
    for (j = 1; j < v->n_candidates; j++)
        if (trace->logits[j] > trace->logits[best])
            best = j;
    return best;
}

/* Adam over one pair's block with class-balanced epochs. */
static pmpd_status learned_train_pair(const pmpd_learned_view *v, uint32_t pair, float *block,
                                      const learned_train_sample *samples, uint32_t n_samples,
                                      const pmpd_learned_train_config *config, double *accuracy)
{
    const size_t floats = pmpd_learned_block_floats(v->feature_dim, v->n_queries, v->hidden, v->n_candidates);
    const size_t f = (size_t)v->n_queries * v->feature_dim;
    size_t max_t = 0, counts[64] = {0}, largest = 0, order_n = 0, i, c, e;
    float *grad = (float *)calloc(floats, sizeof(float)), *m1 = (float *)calloc(floats, sizeof(float));
    float *m2 = (float *)calloc(floats, sizeof(float)), *trace_block, *work;
    uint32_t *order, correct = 0;
    uint64_t rng = config->seed + pair;
    double beta1_t = 1.0, beta2_t = 1.0;
    pmpd_learned_params params;
    pmpd_learned_trace trace;
    for (i = 0; i < n_samples; i++) {
        max_t = samples[i].t_count > max_t ? samples[i].t_count : max_t;
        counts[samples[i].label[pair]]++;
    }
    for (c = 0; c < v->n_candidates; c++)
        largest = counts[c] > largest ? counts[c] : largest;
    order = (uint32_t *)malloc(largest * v->n_candidates * sizeof(uint32_t));
    trace_block = learned_train_trace(v, max_t, &trace);
    work = (float *)malloc((v->n_candidates + v->hidden + 2 * f + max_t) * sizeof(float));
    if (!grad || !m1 || !m2 || !order || !trace_block || !work) {
        free(grad), free(m1), free(m2), free(order), free(trace_block), free(work);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_learned_params_of(v, block, &params);
    for (e = 0; e < config->epochs; e++) {
        /* Oversampling: every present class contributes `largest` draws. */
        order_n = 0;
        for (c = 0; c < v->n_candidates; c++) {
            size_t drawn;
            if (!counts[c])
                continue;
            for (drawn = 0; drawn < largest; drawn++) {
                size_t pick = pmpd_splitmix64_next(&rng) % counts[c], k;
                for (k = 0; k < n_samples; k++)
                    if (samples[k].label[pair] == c && pick-- == 0)
                        break;
                order[order_n++] = (uint32_t)k;
            }
        }
        for (i = order_n; i > 1; i--) {
            size_t k = pmpd_splitmix64_next(&rng) % i;
            uint32_t tmp = order[i - 1];
            order[i - 1] = order[k];
            order[k] = tmp;
        }
        for (i = 0; i < order_n; i += LEARNED_TRAIN_BATCH) {
            size_t end = i + LEARNED_TRAIN_BATCH < order_n ? i + LEARNED_TRAIN_BATCH : order_n, k;
            memset(grad, 0, floats * sizeof(float));
            for (k = i; k < end; k++) {
                const learned_train_sample *s = &samples[order[k]];
                pmpd_learned_classify(v, &params, s->x, s->t_count, &trace);
                pmpd_learned_backward(v, &params, s->x, s->t_count, &trace, s->label[pair], grad, work);
            }
            beta1_t *= 0.9;
            beta2_t *= 0.999;
            for (k = 0; k < floats; k++) {
                float gk = grad[k] / (float)(end - i);
                m1[k] = 0.9f * m1[k] + 0.1f * gk;
                m2[k] = 0.999f * m2[k] + 0.001f * gk * gk;
                block[k] -= config->learning_rate * (float)(m1[k] / (1.0 - beta1_t)) /
                            ((float)sqrt(m2[k] / (1.0 - beta2_t)) + 1e-8f);
            }
        }
    }
    for (i = 0; i < n_samples; i++)
        correct += learned_train_predict(v, &params, &samples[i], &trace) == samples[i].label[pair];
    *accuracy = n_samples ? (double)correct / n_samples : 0.0;
    free(grad), free(m1), free(m2), free(order), free(trace_block), free(work);
    return PMPD_OK;
}

static void learned_train_put_u32(unsigned char *p, uint32_t value)
{
    p[0] = (unsigned char)value;
    p[1] = (unsigned char)(value >> 8);
    p[2] = (unsigned char)(value >> 16);
    p[3] = (unsigned char)(value >> 24);
}

pmpd_status pmpd_learned_scheduler_train(const pmpd_model *nested, const pmpd_calibration_set *train,
                                         unsigned prefill_bits, const pmpd_learned_train_config *config,
                                         void **weights, size_t *size, pmpd_learned_train_report *report)
{
    pmpd_learned_train_config defaults;
    pmpd_learned_view v;
    learned_train_sample *samples;
    unsigned seed, parent;
    unsigned char *blob;
    size_t header, block, i, k;
    uint32_t p, pair;
    uint64_t rng;
    pmpd_status st;
    if (!nested || !train || !weights || !size || train->n_prompts == 0)
        return PMPD_ERR_INVALID_ARGUMENT;
    if (!config) {
        pmpd_learned_train_config_init(&defaults);
        config = &defaults;
    }
    if (config->n_candidates < 2 || config->n_candidates > 64 || config->n_queries < 1 || config->hidden < 1)
        return PMPD_ERR_INVALID_ARGUMENT;
    st = pmpd_model_anyprec_widths(nested, &seed, &parent);
    if (st != PMPD_OK)
        return st;
    if (parent == seed)
        return PMPD_ERR_INVALID_ARGUMENT;
    memset(&v, 0, sizeof v);
    v.n_pairs = parent - seed;
    v.n_candidates = config->n_candidates;
    v.feature_dim = 2 * pmpd_model_get_info(nested)->head_dim;
    v.n_queries = config->n_queries;
    v.hidden = config->hidden;
    v.output_length = train->output_length;
    for (pair = 0; pair < v.n_pairs; pair++) {
        v.high_bits[pair] = parent - pair;
        v.low_bits[pair] = parent - pair - 1;
    }
    header = PMPD_LEARNED_HEADER_WORDS * 4 + (size_t)v.n_pairs * 8;
    block = pmpd_learned_block_floats(v.feature_dim, v.n_queries, v.hidden, v.n_candidates);
    *size = header + v.n_pairs * block * sizeof(float);
    blob = (unsigned char *)calloc(*size, 1);
    samples = (learned_train_sample *)calloc(train->n_prompts, sizeof *samples);
    if (!blob || !samples) {
        free(blob);
        free(samples);
        return PMPD_ERR_OUT_OF_MEMORY;
    }
    for (p = 0; p < train->n_prompts && st == PMPD_OK; p++) {
        st = learned_train_features(nested, train, p, prefill_bits, &samples[p]);
        for (pair = 0; pair < v.n_pairs && st == PMPD_OK; pair++)
            st = learned_train_label(nested, train, p, prefill_bits, &v, pair, &samples[p].label[pair]);
    }
    learned_train_put_u32(blob, v.n_pairs);
    learned_train_put_u32(blob + 4, v.n_candidates);
    learned_train_put_u32(blob + 8, v.feature_dim);
    learned_train_put_u32(blob + 12, v.n_queries);
    learned_train_put_u32(blob + 16, v.hidden);
    learned_train_put_u32(blob + 20, v.output_length);
    rng = config->seed;
    for (pair = 0; pair < v.n_pairs && st == PMPD_OK; pair++) {
        float *w = (float *)(void *)(blob + header) + pair * block;
        const size_t f = (size_t)v.n_queries * v.feature_dim;
        pmpd_learned_params params;
        double accuracy = 0.0;
        learned_train_put_u32(blob + PMPD_LEARNED_HEADER_WORDS * 4 + 8 * pair, v.high_bits[pair]);
        learned_train_put_u32(blob + PMPD_LEARNED_HEADER_WORDS * 4 + 8 * pair + 4, v.low_bits[pair]);
        pmpd_learned_params_of(&v, w, &params);
        for (i = 0; i < f; i++) {
            ((float *)params.queries)[i] = learned_train_uniform(&rng, 1.0f / sqrtf((float)v.feature_dim));
            ((float *)params.gamma)[i] = 1.0f;
        }
        for (i = 0; i < (size_t)v.hidden * f; i++)
            ((float *)params.w1)[i] = learned_train_uniform(&rng, sqrtf(6.0f / (float)(f + v.hidden)));
        for (i = 0; i < (size_t)v.n_candidates * v.hidden; i++)
            ((float *)params.w2)[i] = learned_train_uniform(&rng, sqrtf(6.0f / (float)(v.hidden + v.n_candidates)));
        st = learned_train_pair(&v, pair, w, samples, train->n_prompts, config, &accuracy);
        if (report && st == PMPD_OK) {
            report->train_accuracy[pair] = accuracy;
            for (k = 0; k < 8; k++)
                report->label_counts[pair][k] = 0;
            for (p = 0; p < train->n_prompts; p++)
                if (samples[p].label[pair] < 8)
                    report->label_counts[pair][samples[p].label[pair]]++;
        }
    }
    if (report)
        report->n_pairs = v.n_pairs;
    for (p = 0; p < train->n_prompts; p++)
        free(samples[p].x);
    free(samples);
    if (st != PMPD_OK) {
        free(blob);
        return st;
    }
    *weights = blob;
    return PMPD_OK;
}

#undef LEARNED_TRAIN_BATCH
