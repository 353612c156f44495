/* What tools read to describe a model (pmpd-run --info): the tensor table
 * through pmpd_model_tensor_count / pmpd_model_tensor_at, the container's
 * bytes, and example_print_model_info's text, on stories260K (f32 and q8)
 * whose shape llama2.c's checkpoint header states: dim 64, hidden 172,
 * 5 layers, 8 heads, 4 KV heads, vocabulary 512, context 512.  Bad
 * arguments get PMPD_ERR_INVALID_ARGUMENT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "examples/common/chat.c"
#include "examples/common/model_info.c"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static void test_tensor_table(void **state)
{
    test_opened_model m;
    pmpd_tensor_desc d;
    uint32_t i, n, layer_norms = 0;
    uint64_t total = 0;
    (void)state;
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_F32, &m), PMPD_OK);
    n = pmpd_model_tensor_count(m.model);
    /* 9 per layer, embedding, final norm (tied classifier). */
    assert_int_equal(n, 5 * 9 + 2);
    for (i = 0; i < n; i++) {
        assert_int_equal(pmpd_model_tensor_at(m.model, i, &d), PMPD_OK);
        assert_int_equal(d.type, PMPD_TENSOR_F32);
        assert_non_null(d.name);
        assert_true(d.name_length > 0);
        assert_true(d.n_dims >= 1 && d.n_dims <= 4);
        if (d.n_dims == 2)
            assert_int_equal(d.bytes, d.dims[0] * d.dims[1] * 4);
        else
            assert_int_equal(d.bytes, d.dims[0] * 4);
        if (d.n_dims == 1 && d.dims[0] == 64)
            layer_norms++;
        total += d.bytes;
    }
    assert_int_equal(layer_norms, 2 * 5 + 1);
    assert_true(total < pmpd_model_container_bytes(m.model));
    assert_int_equal(pmpd_model_container_bytes(m.model), m.container.size);
    /* Bad arguments. */
    assert_int_equal(pmpd_model_tensor_at(m.model, n, &d), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_tensor_at(m.model, 0, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_tensor_at(NULL, 0, &d), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_tensor_count(NULL), 0);
    assert_int_equal(pmpd_model_container_bytes(NULL), 0);
    test_opened_close(&m);
}

static char *describe(uint32_t type, size_t context, pmpd_status *status)
{
    test_opened_model m;
    FILE *f = tmpfile();
    char *text = (char *)calloc(1, 4096);
    assert_non_null(f);
    assert_non_null(text);
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", type, &m), PMPD_OK);
    *status = example_print_model_info(f, m.model, context, 1234);
    rewind(f);
    assert_true(fread(text, 1, 4095, f) > 0);
    fclose(f);
    test_opened_close(&m);
    return text;
}

static void expect_says(const char *text, const char *words)
{
    if (!strstr(text, words))
        fail_msg("--info text does not say \"%s\":\n%s", words, text);
}

static void test_info_text(void **state)
{
    pmpd_status st;
    char *text = describe(PMPD_TENSOR_F32, 0, &st);
    (void)state;
    assert_int_equal(st, PMPD_OK);
    expect_says(text, "dim 64, hidden 172, layers 5, heads 8, kv heads 4, head_dim 8, vocab 512, seq_len 512");
    expect_says(text, "sentencepiece");
    expect_says(text, "bos 1, eos 2, eot none");
    expect_says(text, "tensors: 47,");
    expect_says(text, "f32 47 (");
    expect_says(text, "model tables 1234 arena bytes");
    expect_says(text, "for 512 positions");
    expect_says(text, "chat template: none stored, format none\n");
    free(text);
    /* q8 matrices: two types listed; --ctx 64 planned. */
    text = describe(PMPD_TENSOR_Q8, 64, &st);
    assert_int_equal(st, PMPD_OK);
    expect_says(text, " q8 ");
    expect_says(text, " f32 ");
    expect_says(text, "for 64 positions");
    free(text);
    /* A context longer than the model's: the plan's refusal is returned. */
    text = describe(PMPD_TENSOR_F32, 513, &st);
    assert_int_equal(st, PMPD_ERR_INVALID_ARGUMENT);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_table),
        cmocka_unit_test(test_info_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
