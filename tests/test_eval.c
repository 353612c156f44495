/* The strided perplexity evaluation (pmpd_impl/offline/eval/strided.c,
 * what pmpd-eval reports) against a brute-force oracle: for every position
 * p >= 1, the window that must score it is found from its closed form (the
 * first k with k*stride + ctx > p), a fresh session prefills that window's
 * tokens before p in one batched call, and the test computes -log softmax,
 * KL(ref || model) and the argmaxes from those logits in double precision.
 * Models: stories260K, with llama2xs_d64_h192 (same 512-token vocabulary,
 * independently trained) as the reference; pseudo-random token ids so the
 * perplexity and KL are far from trivial.  Cases: overlapping windows
 * (stride < ctx), stride 1, stride ctx - 1 (the largest), a text shorter than one window,
 * a model against itself (KL 0, top-1 1), scoring by decode steps instead
 * of pmpd_session_prefill_all, and the argument checks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/eval/strided.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define EVAL_TEST_CONTEXT 32
#define EVAL_TEST_TOKENS 40
#define EVAL_TEST_VOCAB 512
/* Tokens per pmpd_session_prefill_all call: odd, so calls straddle the
 * session's prefill batches and the windows' ends. */
#define EVAL_TEST_CHUNK 7

static test_opened_model stories, xs;
static int32_t tokens[EVAL_TEST_TOKENS];
static float model_rows[EVAL_TEST_CHUNK * EVAL_TEST_VOCAB], ref_rows[EVAL_TEST_CHUNK * EVAL_TEST_VOCAB];

static int setup(void **state)
{
    test_rng rng;
    size_t i;
    (void)state;
    if (test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_F32, &stories) != PMPD_OK ||
        test_open_shared("models/llama2xs_d64_h192_model.bin", "models/tok512.bin", PMPD_TENSOR_F32, &xs) != PMPD_OK)
        return -1;
    test_rng_seed(&rng, 7);
    tokens[0] = 1; /* BOS */
    for (i = 1; i < EVAL_TEST_TOKENS; i++)
        tokens[i] = (int32_t)(3 + test_rng_u32(&rng) % 509);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_opened_close(&stories);
    test_opened_close(&xs);
    return 0;
}

/* -log softmax(logits)[target], in double. */
static double oracle_nll(const float *logits, size_t n, int32_t target)
{
    double max = logits[0], z = 0.0;
    size_t i;
    for (i = 1; i < n; i++)
        max = logits[i] > max ? logits[i] : max;
    for (i = 0; i < n; i++)
        z += exp((double)logits[i] - max);
    return max + log(z) - logits[target];
}

/* The logits after tokens[start..p) from a fresh session, copied to out. */
static void oracle_logits(pmpd_session *s, size_t start, size_t p, float *out, size_t vocab)
{
    const float *logits = NULL;
    assert_int_equal(pmpd_session_reset(s), PMPD_OK);
    assert_int_equal(pmpd_session_prefill(s, tokens + start, p - start, &logits), PMPD_OK);
    memcpy(out, logits, vocab * sizeof *out);
}

/* Brute force over positions 1..n-1; ref may be NULL. */
static void oracle(pmpd_session *model, pmpd_session *ref, size_t n, size_t ctx, size_t stride,
                   pmpd_eval_result *r)
{
    enum { VOCAB = EVAL_TEST_VOCAB };
    float m[VOCAB], q[VOCAB];
    size_t p, last_window = SIZE_MAX;
    memset(r, 0, sizeof *r);
    for (p = 1; p < n; p++) {
        size_t k = p < ctx ? 0 : (p - ctx) / stride + 1, start = k * stride;
        assert_true(start < p && p < start + ctx);
        if (k != last_window)
            r->windows++;
        last_window = k;
        oracle_logits(model, start, p, m, VOCAB);
        r->nll += oracle_nll(m, VOCAB, tokens[p]);
        if (ref) {
            oracle_logits(ref, start, p, q, VOCAB);
            r->ref_nll += oracle_nll(q, VOCAB, tokens[p]);
            r->kl += test_softmax_kl(q, m, VOCAB);
            r->top1 += test_argmax(m, VOCAB) == test_argmax(q, VOCAB);
        }
    }
    r->scored = n - 1;
    r->nll /= (double)r->scored;
    r->ppl = exp(r->nll);
    if (ref) {
        r->ref_nll /= (double)r->scored;
        r->ref_ppl = exp(r->ref_nll);
        r->kl /= (double)r->scored;
        r->top1 /= (double)r->scored;
    }
}

static pmpd_session *eval_session(const pmpd_model *model, void **block)
{
    pmpd_session_config config;
    pmpd_session_config_init(&config);
    config.context_length = EVAL_TEST_CONTEXT;
    return test_session_open(model, &config, block);
}

static void eval_options(pmpd_eval_options *o, size_t ctx, size_t stride)
{
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->stride = stride;
    o->chunk = EVAL_TEST_CHUNK;
    o->logits = model_rows;
    o->ref_logits = ref_rows;
}

/* The oracle's prefill batches and its one-row classifier product differ
 * from the evaluation's, and the vector kernels may round differently, so
 * means agree to a tolerance. */
static void assert_close(double got, double want, double tolerance)
{
    if (fabs(got - want) > tolerance * (1.0 + fabs(want)))
        fail_msg("got %.9g, want %.9g", got, want);
}

static void check_against_oracle(size_t n, size_t ctx, size_t stride, int decode)
{
    void *mb, *rb;
    pmpd_session *model = eval_session(stories.model, &mb), *ref = eval_session(xs.model, &rb);
    pmpd_eval_options o;
    pmpd_eval_result got, want;
    eval_options(&o, ctx, stride);
    o.decode = decode;
    assert_int_equal(pmpd_eval_strided(model, ref, tokens, n, &o, &got), PMPD_OK);
    oracle(model, ref, n, ctx, stride, &want);
    assert_int_equal(got.scored, n - 1);
    assert_int_equal(got.windows, want.windows);
    assert_close(got.nll, want.nll, 1e-5);
    assert_close(got.ppl, want.ppl, 1e-5);
    assert_close(got.ref_ppl, want.ref_ppl, 1e-5);
    assert_close(got.kl, want.kl, 1e-4);
    assert_close(got.top1, want.top1, 1e-12);
    /* The random text is hard to predict and the two models disagree. */
    assert_true(want.ppl > 20.0 && want.kl > 0.1 && want.top1 < 0.9);
    test_session_close(model, mb);
    test_session_close(ref, rb);
}

static void test_overlapping_windows(void **state)
{
    (void)state;
    check_against_oracle(EVAL_TEST_TOKENS, 16, 5, 0);
}

static void test_stride_one(void **state)
{
    (void)state;
    check_against_oracle(EVAL_TEST_TOKENS, 8, 1, 0);
}

static void test_largest_stride(void **state)
{
    (void)state;
    check_against_oracle(EVAL_TEST_TOKENS, 16, 15, 0);
}

static void test_text_shorter_than_window(void **state)
{
    (void)state;
    check_against_oracle(10, EVAL_TEST_CONTEXT, 16, 0);
}

static void test_against_itself(void **state)
{
    void *mb, *rb;
    pmpd_session *model = eval_session(stories.model, &mb), *ref = eval_session(stories.model, &rb);
    pmpd_eval_options o;
    pmpd_eval_result r;
    (void)state;
    eval_options(&o, 16, 8);
    assert_int_equal(pmpd_eval_strided(model, ref, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_OK);
    assert_true(r.kl == 0.0);
    assert_true(r.top1 == 1.0);
    assert_true(r.ref_ppl == r.ppl);
    test_session_close(model, mb);
    test_session_close(ref, rb);
}

/* Decode steps (one token each) in place of pmpd_session_prefill_all. */
static void test_decode_steps(void **state)
{
    (void)state;
    check_against_oracle(EVAL_TEST_TOKENS, 16, 5, 1);
}

static void test_bad_arguments(void **state)
{
    void *mb;
    pmpd_session *model = eval_session(stories.model, &mb);
    pmpd_eval_options o;
    pmpd_eval_result r;
    (void)state;
    eval_options(&o, 16, 16); /* stride == ctx would skip each window's first token */
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_ERR_INVALID_ARGUMENT);
    eval_options(&o, EVAL_TEST_CONTEXT + 1, 4); /* longer than the session */
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_ERR_INVALID_ARGUMENT);
    eval_options(&o, 16, 0);
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_ERR_INVALID_ARGUMENT);
    eval_options(&o, 16, 8);
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, 1, &o, &r), PMPD_ERR_INVALID_ARGUMENT);
    o.logits = NULL; /* prefill_all needs somewhere to put its rows */
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_ERR_INVALID_ARGUMENT);
    o.decode = 1; /* decode steps do not */
    assert_int_equal(pmpd_eval_strided(model, NULL, tokens, EVAL_TEST_TOKENS, &o, &r), PMPD_OK);
    test_session_close(model, mb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlapping_windows), cmocka_unit_test(test_stride_one),
        cmocka_unit_test(test_largest_stride),    cmocka_unit_test(test_text_shorter_than_window),
        cmocka_unit_test(test_against_itself),      cmocka_unit_test(test_decode_steps),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
