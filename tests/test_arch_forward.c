/* The forward pass of each architecture variant against a Llama forward
 * pass written out here in double precision, from the definitions: tiny
 * random models built in memory (Q/K/V biases, NeoX rotation, rope
 * frequency divisors, a head width other than dim / n_heads, grouped-query
 * attention, tied classifier), written as containers and opened by the
 * loader, then run through a session both as one prefill of every position
 * and token by token. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "tests/support/test_models.h"

#define DIM 32
#define HIDDEN 48
#define LAYERS 2
#define VOCAB 40
#define SEQ 16
#define TOKENS 12
#define MAX_Q 96

typedef struct variant {
    const char *name;
    uint32_t heads, kv_heads, head_dim, rope_style, features, tied;
} variant;

/* A model's float weights by name, as the builder holds them. */
static const float *weight(const pmpd_build_model *b, const char *name)
{
    pmpd_build_tensor *t = pmpd_build_find(b, name);
    if (!t)
        fail_msg("no tensor %s", name);
    return (const float *)(const void *)t->data;
}

static uint32_t lcg_state;

static float lcg_normalish(float scale)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return scale * (float)((double)(lcg_state >> 8) / 8388608.0 - 1.0);
}

static void add(pmpd_build_model *b, const char *name, uint64_t rows, uint64_t cols, float scale, float offset)
{
    uint64_t dims[2] = {rows, cols}, n = rows * (cols ? cols : 1), i;
    float *x = (float *)malloc((size_t)n * sizeof *x);
    for (i = 0; i < n; i++)
        x[i] = offset + lcg_normalish(scale);
    assert_int_equal(pmpd_build_add_f32(b, name, cols ? 2 : 1, dims, x), PMPD_OK);
    free(x);
}

static void build(const variant *v, pmpd_build_model *b)
{
    uint32_t l, i, q = v->heads * v->head_dim, kv = v->kv_heads * v->head_dim;
    char name[64];
    pmpd_build_init(b);
    lcg_state = 12345u + v->heads * 7u + v->head_dim;
    b->info.dim = DIM;
    b->info.hidden_dim = HIDDEN;
    b->info.n_layers = LAYERS;
    b->info.n_heads = v->heads;
    b->info.n_kv_heads = v->kv_heads;
    b->info.head_dim = v->head_dim;
    b->info.vocab_size = VOCAB;
    b->info.seq_len = SEQ;
    b->info.rope_theta = 500000.0f;
    b->info.norm_eps = 1e-6f;
    b->info.shared_classifier = v->tied;
    b->info.bos_id = 1;
    b->info.eos_id = 2;
    b->info.rope_style = v->rope_style;
    b->info.features = v->features;
    add(b, "token_embd.weight", VOCAB, DIM, 1.0f, 0.0f);
    add(b, "output_norm.weight", DIM, 0, 0.2f, 1.0f);
    if (!v->tied)
        add(b, "output.weight", VOCAB, DIM, 0.3f, 0.0f);
    for (l = 0; l < LAYERS; l++) {
        static const char *const parts[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                            "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};
        const uint64_t shape[9][2] = {{DIM, 0}, {q, DIM}, {kv, DIM}, {kv, DIM}, {DIM, q},
                                      {DIM, 0}, {HIDDEN, DIM}, {HIDDEN, DIM}, {DIM, HIDDEN}};
        for (i = 0; i < 9; i++) {
            snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)l, parts[i]);
            add(b, name, shape[i][0], shape[i][1], shape[i][1] ? 0.4f : 0.2f, shape[i][1] ? 0.0f : 1.0f);
        }
        for (i = 1; (v->features & PMPD_MODEL_QKV_BIAS) && i <= 3; i++) {
            snprintf(name, sizeof name, "blk.%u.%s.bias", (unsigned)l, parts[i]);
            add(b, name, shape[i][0], 0, 0.5f, 0.0f);
        }
    }
    if (v->features & PMPD_MODEL_ROPE_FREQS)
        add(b, "rope_freqs.weight", v->head_dim / 2, 0, 3.5f, 4.5f); /* divisors in [1, 8) */
}

/* ---- The reference: one token at a time, double precision ---- */

static void ref_matvec(const float *w, const double *x, size_t rows, size_t cols, double *y)
{
    size_t r, c;
    for (r = 0; r < rows; r++) {
        double sum = 0.0;
        for (c = 0; c < cols; c++)
            sum += (double)w[r * cols + c] * x[c];
        y[r] = sum;
    }
}

static void ref_rmsnorm(const double *x, const float *w, double eps, double *out)
{
    double ss = 0.0;
    size_t i;
    for (i = 0; i < DIM; i++)
        ss += x[i] * x[i];
    ss = 1.0 / sqrt(ss / DIM + eps);
    for (i = 0; i < DIM; i++)
        out[i] = w[i] * x[i] * ss;
}

/* Rotates each head of x by position pos: pair i is (2i, 2i+1) or, NeoX,
 * (i, i + d/2); its angle pos * theta^(-2i/d), divided by divisor i. */
static void ref_rope(const variant *v, const pmpd_build_model *b, double *x, size_t heads, size_t pos)
{
    const float *divisors = (v->features & PMPD_MODEL_ROPE_FREQS) ? weight(b, "rope_freqs.weight") : NULL;
    size_t d = v->head_dim, h, i;
    for (h = 0; h < heads; h++) {
        for (i = 0; i < d / 2; i++) {
            size_t a = h * d + (v->rope_style == PMPD_ROPE_NEOX ? i : 2 * i);
            size_t c = h * d + (v->rope_style == PMPD_ROPE_NEOX ? i + d / 2 : 2 * i + 1);
            double t = (double)pos * pow(500000.0, -(double)(2 * i) / (double)d), xa = x[a], xc = x[c];
            if (divisors)
                t /= divisors[i];
            x[a] = xa * cos(t) - xc * sin(t);
            x[c] = xa * sin(t) + xc * cos(t);
        }
    }
}

/* Logits after each of tokens[0..n) into logits[n][VOCAB]. */
static void reference(const variant *v, const pmpd_build_model *b, const int32_t *tokens, size_t n, double *logits)
{
    static double keys[LAYERS][SEQ][MAX_Q], values[LAYERS][SEQ][MAX_Q];
    size_t q_dim = (size_t)v->heads * v->head_dim, kv_dim = (size_t)v->kv_heads * v->head_dim, t, l, h, p, i;
    const float *emb = weight(b, "token_embd.weight");
    char name[64];
    for (t = 0; t < n; t++) {
        double x[DIM], xb[DIM], q[MAX_Q], att[MAX_Q], hb[HIDDEN], hb2[HIDDEN], out[DIM];
        for (i = 0; i < DIM; i++)
            x[i] = emb[(size_t)tokens[t] * DIM + i];
        for (l = 0; l < LAYERS; l++) {
#define W(part) (snprintf(name, sizeof name, "blk.%u.%s", (unsigned)l, part), weight(b, name))
            ref_rmsnorm(x, W("attn_norm.weight"), 1e-6, xb);
            ref_matvec(W("attn_q.weight"), xb, q_dim, DIM, q);
            ref_matvec(W("attn_k.weight"), xb, kv_dim, DIM, keys[l][t]);
            ref_matvec(W("attn_v.weight"), xb, kv_dim, DIM, values[l][t]);
            if (v->features & PMPD_MODEL_QKV_BIAS) {
                const float *bq = W("attn_q.bias"), *bk = W("attn_k.bias"), *bv = W("attn_v.bias");
                for (i = 0; i < q_dim; i++)
                    q[i] += bq[i];
                for (i = 0; i < kv_dim; i++) {
                    keys[l][t][i] += bk[i];
                    values[l][t][i] += bv[i];
                }
            }
            ref_rope(v, b, q, v->heads, t);
            ref_rope(v, b, keys[l][t], v->kv_heads, t);
            for (h = 0; h < v->heads; h++) {
                /* Query head h reads KV head h / (heads / kv_heads). */
                size_t g = h / (v->heads / v->kv_heads);
                double scores[SEQ], max = -1e300, sum = 0.0;
                for (p = 0; p <= t; p++) {
                    double dot = 0.0;
                    for (i = 0; i < v->head_dim; i++)
                        dot += q[h * v->head_dim + i] * keys[l][p][g * v->head_dim + i];
                    scores[p] = dot / sqrt((double)v->head_dim);
                    if (scores[p] > max)
                        max = scores[p];
                }
                for (p = 0; p <= t; p++)
                    sum += scores[p] = exp(scores[p] - max);
                for (i = 0; i < v->head_dim; i++) {
                    double acc = 0.0;
                    for (p = 0; p <= t; p++)
                        acc += scores[p] / sum * values[l][p][g * v->head_dim + i];
                    att[h * v->head_dim + i] = acc;
                }
            }
            ref_matvec(W("attn_output.weight"), att, DIM, q_dim, out);
            for (i = 0; i < DIM; i++)
                x[i] += out[i];
            ref_rmsnorm(x, W("ffn_norm.weight"), 1e-6, xb);
            ref_matvec(W("ffn_gate.weight"), xb, HIDDEN, DIM, hb);
            ref_matvec(W("ffn_up.weight"), xb, HIDDEN, DIM, hb2);
            for (i = 0; i < HIDDEN; i++)
                hb[i] = hb[i] / (1.0 + exp(-hb[i])) * hb2[i];
            ref_matvec(W("ffn_down.weight"), hb, DIM, HIDDEN, out);
            for (i = 0; i < DIM; i++)
                x[i] += out[i];
#undef W
        }
        ref_rmsnorm(x, weight(b, "output_norm.weight"), 1e-6, xb);
        ref_matvec(weight(b, v->tied ? "token_embd.weight" : "output.weight"), xb, VOCAB, DIM, logits + t * VOCAB);
    }
}

/* ---- pmpd against it ---- */

static void check_logits(const variant *v, const char *how, size_t t, const float *got, const double *want)
{
    double scale = 0.0;
    size_t i;
    for (i = 0; i < VOCAB; i++)
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    for (i = 0; i < VOCAB; i++)
        if (fabs(got[i] - want[i]) > 1e-4 * (1.0 + scale))
            fail_msg("%s, %s: position %zu logit %zu is %.6f, the reference %.6f", v->name, how, t, i, (double)got[i],
                     want[i]);
}

static void run_variant(const variant *v)
{
    static const int32_t tokens[TOKENS] = {1, 17, 5, 33, 8, 8, 21, 39, 0, 12, 3, 26};
    static double want[TOKENS * VOCAB];
    static float all[TOKENS * VOCAB];
    pmpd_build_model b;
    test_container c;
    void *arena_block, *session_block;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_session *s;
    pmpd_session_config config;
    pmpd_error err;
    const float *logits;
    size_t t;
    build(v, &b);
    reference(v, &b, tokens, TOKENS, want);
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    arena_block = malloc(1 << 16);
    pmpd_arena_init(&arena, test_aligned(arena_block), (1 << 16) - PMPD_ARENA_ALIGNMENT);
    if (pmpd_model_open_memory(c.data, c.size, &arena, &model, &err) != PMPD_OK)
        fail_msg("%s: %s", v->name, err.message);
    assert_int_equal(pmpd_model_get_info(model)->rope_style, v->rope_style);
    assert_int_equal(pmpd_model_get_info(model)->features, v->features);
    /* All positions in one batch of 5 and one of 7 (matrix x matrix)... */
    pmpd_session_config_init(&config);
    config.prefill_batch = 5;
    s = test_session_open(model, &config, &session_block);
    assert_int_equal(pmpd_session_prefill_all(s, tokens, TOKENS, all), PMPD_OK);
    for (t = 0; t < TOKENS; t++)
        check_logits(v, "prefill", t, all + t * VOCAB, want + t * VOCAB);
    test_session_close(s, session_block);
    /* ...and one token at a time (matrix x vector). */
    s = test_session_open(model, NULL, &session_block);
    for (t = 0; t < TOKENS; t++) {
        assert_int_equal(pmpd_session_decode(s, tokens[t], &logits), PMPD_OK);
        check_logits(v, "decode", t, logits, want + t * VOCAB);
    }
    test_session_close(s, session_block);
    pmpd_model_close(model);
    free(arena_block);
    test_container_free(&c);
    pmpd_build_free(&b);
}

static void test_llama_plain(void **state)
{
    static const variant v = {"llama", 4, 4, 8, PMPD_ROPE_ADJACENT, 0, 0};
    (void)state;
    run_variant(&v);
}

static void test_llama3_rope_freqs_tied_gqa(void **state)
{
    static const variant v = {"llama3", 4, 2, 8, PMPD_ROPE_ADJACENT, PMPD_MODEL_ROPE_FREQS, 1};
    (void)state;
    run_variant(&v);
}

static void test_qwen2_bias_neox_gqa4(void **state)
{
    static const variant v = {"qwen2", 4, 1, 8, PMPD_ROPE_NEOX, PMPD_MODEL_QKV_BIAS, 1};
    (void)state;
    run_variant(&v);
}

/* Heads of 24 with dim 32: queries 96 wide, the output projection 32 x 96. */
static void test_head_dim_not_dim_over_heads(void **state)
{
    static const variant v = {"head_dim 24", 4, 2, 24, PMPD_ROPE_ADJACENT, 0, 0};
    static const variant all = {"everything", 4, 2, 24, PMPD_ROPE_NEOX, PMPD_MODEL_QKV_BIAS | PMPD_MODEL_ROPE_FREQS, 0};
    (void)state;
    run_variant(&v);
    run_variant(&all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_plain),
        cmocka_unit_test(test_llama3_rope_freqs_tied_gqa),
        cmocka_unit_test(test_qwen2_bias_neox_gqa4),
        cmocka_unit_test(test_head_dim_not_dim_over_heads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
