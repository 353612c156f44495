/* The W8A8 delegate slot (weights/w8a8/w8a8.h): this test is linked with
 * a W8A8 format object built with -DPMPD_W8A8_DELEGATE=test_w8a8_delegate
 * (Makefile), standing in for a board's NPU driver.  Every integer product
 * of a W8A8 model must reach it, with the rows the pool gives each worker,
 * and the model's output must be what the CPU kernel gives (the delegate
 * here computes with the scalar oracle, exact like every kernel). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/exec/pool.h"
#include "pmpd_impl/weights/w8a8/w8a8.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static unsigned long delegate_calls, delegate_rows;

/* The activations arrive in the compiled CPU kernel's representation:
 * turn them back into int8 q values for the oracle. */
void test_w8a8_delegate(const pmpd_w8a8_matrix *m, const void *act, size_t n_tokens, size_t row_begin, size_t row_end,
                        float *y, size_t ldy)
{
    int8_t *q = (int8_t *)malloc(n_tokens * m->padded_cols + 1);
    size_t t, c;
    assert_non_null(q);
    for (t = 0; t < n_tokens; t++)
        for (c = 0; c < m->padded_cols; c++)
            q[t * m->padded_cols + c] = (int8_t)pmpd_w8a8_act_value(m, act, t, c);
    pmpd_w8a8_matmul_scalar(m, q, n_tokens, row_begin, row_end, y, ldy);
    free(q);
    __atomic_fetch_add(&delegate_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&delegate_rows, (unsigned long)(row_end - row_begin), __ATOMIC_RELAXED);
}

static void test_every_product_reaches_the_delegate(void **state)
{
    test_opened_model m;
    pmpd_session_config config;
    const float *logits;
    int32_t ids[9];
    void *block;
    pmpd_session *s;
    size_t n;
    (void)state;
    n = test_read_vector_ids("stories260K_once_greedy.ids", ids, 9) - 1;
    assert_true(n == 8);
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_W8A8, &m), PMPD_OK);
    pmpd_session_config_init(&config);
    config.n_threads = 2;
    s = test_session_open(m.model, &config, &block);
    assert_non_null(s);
    delegate_calls = delegate_rows = 0;
    assert_int_equal(pmpd_session_prefill(s, ids, n, &logits), PMPD_OK);
    /* At least one call per layer and product (q+k+v, o, gate+up, down),
     * and every row of every W8A8 matrix exactly once. */
    assert_true(delegate_calls >= 4 * pmpd_model_get_info(m.model)->n_layers);
    {
        const pmpd_model_info *info = pmpd_model_get_info(m.model);
        unsigned long per_layer = (unsigned long)(info->n_heads + 2 * info->n_kv_heads) * info->head_dim +
                                  info->dim + 2 * info->hidden_dim + info->dim;
        assert_int_equal(delegate_rows, per_layer * info->n_layers);
    }
    /* What the delegate computed is what the model predicts: llama2.c's
     * next greedy token after these 8. */
    assert_int_equal(test_argmax(logits, pmpd_model_get_info(m.model)->vocab_size), ids[8]);
    pmpd_session_destroy(s);
    free(block);
    test_opened_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_product_reaches_the_delegate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
