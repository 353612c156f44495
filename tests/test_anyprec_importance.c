/* Activation importance for the nested quantizer (stories260K): the
 * collected weights of layer 0's Q/K/V equal a brute-force mean square of
 * RMSNorm(embedding) x attn_norm computed here from the checkpoint's own
 * floats; layers fed the same input get the same weights; every linear
 * layer is covered; and the conversion consumes them (a weighted model
 * differs from an unweighted one, an absent tensor falls back to equal
 * weights). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/precision/importance.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define IMP_PROMPTS 3
#define IMP_PROMPT_LENGTH 4
#define IMP_OUTPUT_LENGTH 37 /* with the prompt, more than one prefill batch */

typedef struct imp_fixture {
    pmpd_build_model b;
    test_container container;
    void *arena_block;
    pmpd_arena arena;
    pmpd_model *model;
    int32_t prompts[IMP_PROMPTS * IMP_PROMPT_LENGTH];
    int32_t reference[IMP_PROMPTS * IMP_OUTPUT_LENGTH];
    pmpd_calibration_set set;
    pmpd_anyprec_importance importance;
} imp_fixture;

static int imp_setup(void **state)
{
    imp_fixture *f = (imp_fixture *)calloc(1, sizeof *f);
    size_t arena_bytes = (size_t)8 << 20, i;
    pmpd_error err;
    test_rng rng;
    assert_non_null(f);
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &f->b), PMPD_OK);
    assert_int_equal(test_serialize(&f->b, &f->container), PMPD_OK);
    f->arena_block = malloc(arena_bytes);
    assert_non_null(f->arena_block);
    assert_int_equal(pmpd_arena_init(&f->arena, f->arena_block, arena_bytes), PMPD_OK);
    assert_int_equal(pmpd_model_open_memory(f->container.data, f->container.size, &f->arena, &f->model, &err),
                     PMPD_OK);
    /* Any valid tokens do: the collection only runs them through the model. */
    test_rng_seed(&rng, 42);
    for (i = 0; i < IMP_PROMPTS * IMP_PROMPT_LENGTH; i++)
        f->prompts[i] = (int32_t)(i % IMP_PROMPT_LENGTH == 0 ? 1 : 3 + test_rng_u32(&rng) % 500);
    for (i = 0; i < IMP_PROMPTS * IMP_OUTPUT_LENGTH; i++)
        f->reference[i] = (int32_t)(3 + test_rng_u32(&rng) % 500);
    f->set.n_prompts = IMP_PROMPTS;
    f->set.prompt_length = IMP_PROMPT_LENGTH;
    f->set.output_length = IMP_OUTPUT_LENGTH;
    f->set.vocab_size = 512;
    f->set.prompts = f->prompts;
    f->set.reference = f->reference;
    assert_int_equal(pmpd_anyprec_importance_collect(f->model, &f->set, &f->importance), PMPD_OK);
    *state = f;
    return 0;
}

static int imp_teardown(void **state)
{
    imp_fixture *f = (imp_fixture *)*state;
    pmpd_anyprec_importance_free(&f->importance);
    pmpd_model_close(f->model);
    test_container_free(&f->container);
    free(f->arena_block);
    pmpd_build_free(&f->b);
    free(f);
    return 0;
}

static const float *imp_builder_floats(const imp_fixture *f, const char *name)
{
    pmpd_build_tensor *t = pmpd_build_find(&f->b, name);
    assert_non_null(t);
    return (const float *)(const void *)t->data;
}

static void test_layer0_matches_brute_force(void **state)
{
    const imp_fixture *f = (const imp_fixture *)*state;
    const float *embedding = imp_builder_floats(f, "token_embd.weight");
    const float *gain = imp_builder_floats(f, "blk.0.attn_norm.weight");
    const pmpd_model_info *info = pmpd_model_get_info(f->model);
    double expected[512];
    size_t p, t, c, count = 0;
    const float *got;
    assert_true(info->dim <= 512);
    memset(expected, 0, sizeof expected);
    for (p = 0; p < IMP_PROMPTS; p++) {
        for (t = 0; t < IMP_PROMPT_LENGTH + IMP_OUTPUT_LENGTH; t++) {
            int32_t token = t < IMP_PROMPT_LENGTH ? f->prompts[p * IMP_PROMPT_LENGTH + t]
                                                  : f->reference[p * IMP_OUTPUT_LENGTH + t - IMP_PROMPT_LENGTH];
            const float *x = embedding + (size_t)token * info->dim;
            double ss = 0.0, inv;
            for (c = 0; c < info->dim; c++)
                ss += (double)x[c] * x[c];
            inv = 1.0 / sqrt(ss / info->dim + info->norm_eps);
            for (c = 0; c < info->dim; c++) {
                double y = x[c] * inv * gain[c];
                expected[c] += y * y;
            }
            count++;
        }
    }
    got = pmpd_anyprec_importance_find(&f->importance, "blk.0.attn_q.weight", info->dim);
    assert_non_null(got);
    for (c = 0; c < info->dim; c++) {
        double want = expected[c] / (double)count;
        assert_true(fabs(got[c] - want) <= 1e-4 * want + 1e-9);
    }
}

static void imp_assert_same(const imp_fixture *f, const char *a, const char *b, uint64_t cols)
{
    const float *x = pmpd_anyprec_importance_find(&f->importance, a, cols);
    const float *y = pmpd_anyprec_importance_find(&f->importance, b, cols);
    assert_non_null(x);
    assert_non_null(y);
    assert_memory_equal(x, y, (size_t)cols * sizeof(float));
}

static void test_every_linear_layer_covered(void **state)
{
    const imp_fixture *f = (const imp_fixture *)*state;
    static const char *const kinds[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                        "ffn_down"};
    const pmpd_model_info *info = pmpd_model_get_info(f->model);
    uint32_t layer, k;
    char name[64], other[64];
    /* Every layer matrix, plus the (shared) classifier. */
    assert_int_equal(f->importance.n_tensors, 7 * info->n_layers + 1);
    for (layer = 0; layer < info->n_layers; layer++) {
        for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const pmpd_build_tensor *t;
            const float *w;
            uint64_t c;
            snprintf(name, sizeof name, "blk.%u.%s.weight", (unsigned)layer, kinds[k]);
            t = pmpd_build_find(&f->b, name);
            assert_non_null(t);
            w = pmpd_anyprec_importance_find(&f->importance, name, t->dims[1]);
            assert_non_null(w);
            for (c = 0; c < t->dims[1]; c++)
                assert_true(isfinite(w[c]) && w[c] > 0.0f);
            assert_null(pmpd_anyprec_importance_find(&f->importance, name, t->dims[1] + 1));
        }
        snprintf(name, sizeof name, "blk.%u.attn_q.weight", (unsigned)layer);
        snprintf(other, sizeof other, "blk.%u.attn_k.weight", (unsigned)layer);
        imp_assert_same(f, name, other, info->dim);
        snprintf(other, sizeof other, "blk.%u.attn_v.weight", (unsigned)layer);
        imp_assert_same(f, name, other, info->dim);
        snprintf(name, sizeof name, "blk.%u.ffn_gate.weight", (unsigned)layer);
        snprintf(other, sizeof other, "blk.%u.ffn_up.weight", (unsigned)layer);
        imp_assert_same(f, name, other, info->dim);
    }
}

static void test_conversion_uses_the_weights(void **state)
{
    const imp_fixture *f = (const imp_fixture *)*state;
    pmpd_build_model weighted, plain;
    pmpd_anyprec_importance only_q;
    const pmpd_build_tensor *w, *p;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &weighted), PMPD_OK);
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &plain), PMPD_OK);
    /* Only layer 0's Q keeps its weights: every other tensor must come out
     * exactly as with no importance at all. */
    only_q = f->importance;
    only_q.n_tensors = 0;
    while (only_q.n_tensors < f->importance.n_tensors &&
           strcmp(f->importance.tensors[only_q.n_tensors].head.name, "blk.0.attn_q.weight") != 0)
        only_q.n_tensors++;
    assert_true(only_q.n_tensors < f->importance.n_tensors);
    only_q.tensors = &f->importance.tensors[only_q.n_tensors];
    only_q.n_tensors = 1;
    assert_int_equal(pmpd_anyprec_build_convert(&weighted, 2, 4, &only_q, 0, NULL, NULL), PMPD_OK);
    assert_int_equal(pmpd_anyprec_build_convert(&plain, 2, 4, NULL, 0, NULL, NULL), PMPD_OK);
    w = pmpd_build_find(&weighted, "blk.0.attn_q.weight");
    p = pmpd_build_find(&plain, "blk.0.attn_q.weight");
    assert_int_equal(w->size, p->size);
    assert_true(memcmp(w->data, p->data, (size_t)w->size) != 0);
    w = pmpd_build_find(&weighted, "blk.0.attn_k.weight");
    p = pmpd_build_find(&plain, "blk.0.attn_k.weight");
    assert_int_equal(w->size, p->size);
    assert_memory_equal(w->data, p->data, (size_t)w->size);
    pmpd_build_free(&weighted);
    pmpd_build_free(&plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer0_matches_brute_force),
        cmocka_unit_test(test_every_linear_layer_covered),
        cmocka_unit_test(test_conversion_uses_the_weights),
    };
    return cmocka_run_group_tests(tests, imp_setup, imp_teardown);
}
