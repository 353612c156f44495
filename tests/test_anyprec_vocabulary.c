/* The token embedding and classifier of a nested model (pmpd-convert
 * --type anyprec --vocabulary q8|q4|nested): nested on pycode21M (384
 * columns, 32,000 rows, tied), the classifier's bytes per decoded token
 * fall with the width by exactly the plane bytes and table entries a
 * narrower product skips, and its embedding rows are the parent width's
 * weights; without the option, or where nesting would read more than q8,
 * it stays q8; asked for q4 it is q4 in both
 * converters; any other type is refused. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

/* The type the classifier of an opened model has. */
static uint32_t tvoc_tensor_type(const pmpd_model *model, const char *name)
{
    uint32_t i;
    for (i = 0; i < pmpd_model_tensor_count(model); i++) {
        pmpd_tensor_desc desc;
        assert_int_equal(pmpd_model_tensor_at(model, i, &desc), PMPD_OK);
        if (strcmp(desc.name, name) == 0)
            return (uint32_t)desc.type;
    }
    fail_msg("no tensor %s", name);
    return 0;
}

static void test_pycode_vocabulary_nested(void **state)
{
    const uint32_t rows = 32000, cols = 384;
    pmpd_build_model b;
    pmpd_convert_options options;
    test_opened_model m;
    pmpd_build_tensor *t;
    uint64_t bytes[5];
    unsigned k;
    (void)state;
    assert_int_equal(test_import_shared("models/pycode21M.bin", "models/llama2_tokenizer.bin", &b), PMPD_OK);
    t = pmpd_build_find(&b, "token_embd.weight");
    assert_non_null(t);
    assert_true(t->dims[0] == rows && t->dims[1] == cols);
    assert_null(pmpd_build_find(&b, "output.weight"));
    /* The streamed converter's choice for it: q8 unless asked. */
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_ANYPREC;
    assert_int_equal(pmpd_weight_stream_type(&options, t), PMPD_TENSOR_Q8);
    options.anyprec_vocabulary = PMPD_TENSOR_Q4;
    assert_int_equal(pmpd_weight_stream_type(&options, t), PMPD_TENSOR_Q4);
    options.anyprec_vocabulary = PMPD_TENSOR_ANYPREC;
    assert_int_equal(pmpd_weight_stream_type(&options, t), PMPD_TENSOR_ANYPREC);
    /* The layers stay f32 here (nothing below depends on them). */
    assert_int_equal(pmpd_anyprec_build_convert_vocabulary(&b, 2, 4, 0), PMPD_OK);
    assert_int_equal(t->type, PMPD_TENSOR_ANYPREC);
    assert_int_equal(test_open_built(&b, NULL, &m), PMPD_OK);
    assert_int_equal(tvoc_tensor_type(m.model, "token_embd.weight"), PMPD_TENSOR_ANYPREC);
    for (k = 2; k <= 4; k++)
        assert_int_equal(pmpd_model_weight_bytes_per_token(m.model, k, &bytes[k]), PMPD_OK);
    /* Each width down skips one plane of each row's stored columns and half
     * the table entries: 384 columns are a whole superblock (32 bytes a
     * plane) and 128 columns of one that two row blocks share (16). */
    for (k = 3; k <= 4; k++)
        assert_true(bytes[k] - bytes[k - 1] == (uint64_t)rows * (32 + 16 + (1u << k) - (1u << (k - 1))));
    test_opened_close(&m);
}

/* stories260K through the in-memory converter (a llama2.c input nests
 * every layer at once): its 64 columns lie in a superblock four row blocks
 * share, so nested at 4 bits its vocabulary reads 32 + 8 + 16 bytes a row
 * against q8's 68 and is nested when nesting is asked; q4 when q4 is asked;
 * the layers nested either way.  Where nesting would read more than q8 it
 * stays q8: 160 columns (more than half a superblock past the last whole
 * one, stored as a whole one) at 5 bits read 160 + 8 + 32 bytes a row
 * against q8's 170. */
static void test_stories_vocabulary(void **state)
{
    static const pmpd_tensor_type asked[2] = {PMPD_TENSOR_ANYPREC, PMPD_TENSOR_Q4};
    static const pmpd_tensor_type got[2] = {PMPD_TENSOR_ANYPREC, PMPD_TENSOR_Q4};
    pmpd_build_model b;
    pmpd_convert_options options;
    test_opened_model m;
    unsigned i;
    (void)state;
    assert_true(pmpd_anyprec_build_nests_vocabulary(512, 64, 4));
    assert_false(pmpd_anyprec_build_nests_vocabulary(512, 160, 5));
    assert_true(pmpd_anyprec_build_nests_vocabulary(512, 160, 4));
    assert_true(pmpd_anyprec_build_nests_vocabulary(32000, 384, 4));
    for (i = 0; i < 2; i++) {
        assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
        memset(&options, 0, sizeof options);
        options.type = PMPD_TENSOR_ANYPREC;
        options.anyprec_vocabulary = asked[i];
        assert_int_equal(test_open_built(&b, &options, &m), PMPD_OK);
        assert_int_equal(tvoc_tensor_type(m.model, "token_embd.weight"), got[i]);
        assert_int_equal(tvoc_tensor_type(m.model, "blk.0.attn_q.weight"), PMPD_TENSOR_ANYPREC);
        test_opened_close(&m);
    }
}

static void test_vocabulary_other_types_refused(void **state)
{
    char in[512];
    pmpd_convert_options options;
    pmpd_error err;
    (void)state;
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_ANYPREC;
    options.anyprec_vocabulary = PMPD_TENSOR_Q2CB;
    assert_int_equal(pmpd_convert_file(test_shared_path(in, sizeof in, "models/stories260K.bin"),
                                       "/nonexistent/never-written.pmpd", &options, NULL, &err),
                     PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "anyprec_vocabulary"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pycode_vocabulary_nested),
        cmocka_unit_test(test_stories_vocabulary),
        cmocka_unit_test(test_vocabulary_other_types_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
