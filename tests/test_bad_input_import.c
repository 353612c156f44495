/* Malformed importer inputs: llama2.c checkpoints (legacy and version 1),
 * tokenizer.bin files and GGUF files, each refused with a specific status,
 * the offset of the offending field, and nothing leaked (run under ASan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_gguf.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define ANY_OFFSET (PMPD_NO_OFFSET - 1)

typedef enum importer { LLAMA2C, TOKENIZER, GGUF } importer;

static void wr32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static pmpd_status run_importer(importer which, const unsigned char *data, size_t size, pmpd_error *err)
{
    pmpd_build_model b;
    pmpd_vocab v;
    pmpd_status status;
    pmpd_build_init(&b);
    if (which == TOKENIZER) {
        status = pmpd_import_llama2c_tokenizer(data, size, 512, &v, err);
        pmpd_vocab_free(&v);
    } else {
        status = which == GGUF ? pmpd_import_gguf(data, size, &b, err) : pmpd_import_llama2c(data, size, &b, err);
    }
    pmpd_build_free(&b);
    return status;
}

static void expect_refusal(importer which, const unsigned char *data, size_t size, pmpd_status status, uint64_t offset,
                           const char *word)
{
    pmpd_error err;
    /* A copy of exactly size bytes, so ASan sees any read past the end. */
    unsigned char *copy = (unsigned char *)malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (run_importer(which, copy, size, &err) != status)
        fail_msg("size %zu: status %d, offset %llu: %s", size, (int)err.code, (unsigned long long)err.offset, err.message);
    free(copy);
    assert_int_equal(err.code, status);
    if (offset != ANY_OFFSET)
        assert_int_equal(err.offset, offset);
    if (word && !strstr(err.message, word))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, word);
}

static unsigned char *read_shared(const char *name, size_t *size)
{
    char path[512];
    unsigned char *data = test_read_file(test_shared_path(path, sizeof path, name), size);
    assert_non_null(data);
    return data;
}

static void test_llama2c_legacy(void **state)
{
    size_t size, i;
    unsigned char *good = read_shared("models/stories260K.bin", &size);
    unsigned char *p = (unsigned char *)malloc(size + 1);
    (void)state;
    expect_refusal(LLAMA2C, good, 0, PMPD_ERR_FORMAT_TRUNCATED, 0, "header");
    for (i = 1; i < 28; i++)
        expect_refusal(LLAMA2C, good, i, PMPD_ERR_FORMAT_TRUNCATED, i, "header");
    /* No magic: the size must be exactly what the header implies. */
    expect_refusal(LLAMA2C, good, size - 1, PMPD_ERR_FORMAT_TRUNCATED, 0, "implies");
    expect_refusal(LLAMA2C, good, 5000, PMPD_ERR_FORMAT_TRUNCATED, 0, "implies");
    memcpy(p, good, size);
    p[size] = 0;
    expect_refusal(LLAMA2C, p, size + 1, PMPD_ERR_FORMAT_BOUNDS, 0, "implies");
    /* Header fields: zero, negative, inconsistent, huge. */
    {
        static const struct {
            size_t field;
            int32_t value;
            pmpd_status status;
        } cases[] = {
            {0, 0, PMPD_ERR_FORMAT_HPARAMS},         {12, 0, PMPD_ERR_FORMAT_HPARAMS},
            {12, -8, PMPD_ERR_FORMAT_HPARAMS},       {16, 3, PMPD_ERR_FORMAT_HPARAMS},
            {16, 16, PMPD_ERR_FORMAT_HPARAMS},       {0, 60, PMPD_ERR_FORMAT_HPARAMS},
            {0, 72, PMPD_ERR_FORMAT_HPARAMS},        {20, 0, PMPD_ERR_FORMAT_HPARAMS},
            {20, INT32_MIN, PMPD_ERR_FORMAT_HPARAMS}, {20, 2, PMPD_ERR_FORMAT_HPARAMS},
            {24, -1, PMPD_ERR_FORMAT_HPARAMS},       {8, 0x7FFFFFFF, PMPD_ERR_FORMAT_HPARAMS},
            {0, 1 << 24, PMPD_ERR_FORMAT_TRUNCATED}, {24, 1 << 24, PMPD_ERR_FORMAT_TRUNCATED},
            {20, -512, PMPD_ERR_FORMAT_TRUNCATED},
        };
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            memcpy(p, good, size);
            wr32(p + cases[i].field, (uint32_t)cases[i].value);
            expect_refusal(LLAMA2C, p, size, cases[i].status, ANY_OFFSET, NULL);
        }
    }
    free(p);
    free(good);
}

/* Counts each below 2^24 whose implied tensor bytes sum to 2^64 + the file's
 * real size: a wrapping sum would pass the exact-size check and read past the
 * end (found in review; also kept in fuzz/regressions/llama2c). */
static void test_llama2c_size_sum_cannot_wrap(void **state)
{
    static const int32_t header[7] = {8192, 11179346, 16777216, 4096, 2, 3, 1};
    const size_t size = 131108;
    unsigned char *p = (unsigned char *)calloc(1, size);
    size_t i;
    (void)state;
    assert_non_null(p);
    for (i = 0; i < 7; i++)
        wr32(p + 4 * i, (uint32_t)header[i]);
    expect_refusal(LLAMA2C, p, size, PMPD_ERR_FORMAT_HPARAMS, 0, "2^64");
    free(p);
}

static void test_llama2c_version1(void **state)
{
    size_t size, i;
    unsigned char *good = read_shared("models/stories260K_v1.bin", &size);
    unsigned char *p = (unsigned char *)malloc(size);
    (void)state;
    for (i = 4; i < 256; i += 7)
        expect_refusal(LLAMA2C, good, i, PMPD_ERR_FORMAT_TRUNCATED, i, "256-byte header");
    expect_refusal(LLAMA2C, good, size - 4, PMPD_ERR_FORMAT_TRUNCATED, 8, "implies");
    memcpy(p, good, size);
    wr32(p + 4, 2);
    expect_refusal(LLAMA2C, p, size, PMPD_ERR_FORMAT_VERSION, 4, "version");
    memcpy(p, good, size);
    p[36] = 2;
    expect_refusal(LLAMA2C, p, size, PMPD_ERR_FORMAT_VALUE, 36, "shared_classifier");
    memcpy(p, good, size);
    wr32(p + 8 + 12, 0);
    expect_refusal(LLAMA2C, p, size, PMPD_ERR_FORMAT_HPARAMS, 20, NULL);
    /* Without the shared flag the file would need a classifier it lacks. */
    memcpy(p, good, size);
    p[36] = 0;
    expect_refusal(LLAMA2C, p, size, PMPD_ERR_FORMAT_TRUNCATED, 8, "implies");
    free(p);
    free(good);
}

static void test_tokenizer_bin(void **state)
{
    size_t size, i;
    unsigned char *good = read_shared("models/tok512.bin", &size);
    unsigned char *p = (unsigned char *)malloc(size + 8);
    pmpd_vocab v;
    pmpd_error err;
    (void)state;
    for (i = 0; i < size; i += (i < 300 ? 1 : 61))
        expect_refusal(TOKENIZER, good, i, PMPD_ERR_FORMAT_TRUNCATED, ANY_OFFSET, NULL);
    memcpy(p, good, size);
    wr32(p + size, 0);
    wr32(p + size + 4, 0);
    expect_refusal(TOKENIZER, p, size + 8, PMPD_ERR_FORMAT_BOUNDS, size, "follow");
    memcpy(p, good, size);
    wr32(p, 0);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_VALUE, 0, "max_token_length");
    wr32(p, 0xFFFFFFFFu);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_VALUE, 0, "max_token_length");
    /* Token 0: score at 4, length at 8. */
    memcpy(p, good, size);
    wr32(p + 4, 0x7F800000u);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_NONFINITE, 4, "score");
    memcpy(p, good, size);
    wr32(p + 8, 0xFFFFFFFFu);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_VALUE, 8, "negative");
    memcpy(p, good, size);
    wr32(p, 3);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_VALUE, 8, "max_token_length");
    memcpy(p, good, size);
    wr32(p + 8, 6500);
    wr32(p, 7000);
    expect_refusal(TOKENIZER, p, size, PMPD_ERR_FORMAT_TRUNCATED, 12, "remain");
    /* Fewer entries than the vocabulary, or more. */
    assert_int_equal(pmpd_import_llama2c_tokenizer(good, size, 513, &v, &err), PMPD_ERR_FORMAT_TRUNCATED);
    pmpd_vocab_free(&v);
    assert_int_equal(pmpd_import_llama2c_tokenizer(good, size, 511, &v, &err), PMPD_ERR_FORMAT_BOUNDS);
    pmpd_vocab_free(&v);
    assert_int_equal(pmpd_import_llama2c_tokenizer(good, size, 0, &v, &err), PMPD_OK);
    assert_int_equal(v.n_tokens, 512);
    pmpd_vocab_free(&v);
    free(p);
    free(good);
}

/* Offset of the value of a metadata key in a GGUF file (after its type). */
static size_t gguf_value_at(const unsigned char *g, size_t size, const char *key)
{
    size_t length = strlen(key), i;
    for (i = 8; i + length + 12 <= size; i++)
        if (memcmp(g + i, key, length) == 0 && g[i - 8] == length && g[i - 7] == 0)
            return i + length + 4;
    fail_msg("no key %s", key);
    return 0;
}

/* Offset of a tensor info's n_dims field. */
static size_t gguf_tensor_at(const unsigned char *g, size_t size, const char *name)
{
    size_t length = strlen(name), i;
    for (i = size; i-- > 8 + length;)
        if (memcmp(g + i - length, name, length) == 0 && g[i - length - 8] == length && g[i - length - 7] == 0)
            return i;
    fail_msg("no tensor %s", name);
    return 0;
}

static unsigned char *make_gguf(size_t *size)
{
    pmpd_build_model b;
    unsigned char *g;
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    g = test_gguf_write(&b, NULL, size);
    pmpd_build_free(&b);
    return g;
}

static void test_gguf_header_and_truncation(void **state)
{
    size_t size, i, data_start;
    unsigned char *g = make_gguf(&size);
    unsigned char *p = (unsigned char *)malloc(size);
    pmpd_error err;
    pmpd_build_model b;
    (void)state;
    pmpd_build_init(&b);
    assert_int_equal(pmpd_import_gguf(g, size, &b, &err), PMPD_OK);
    pmpd_build_free(&b);
    /* The tensor data starts after the last tensor info, aligned to 32. */
    data_start = gguf_tensor_at(g, size, "output_norm.weight") + 4 + 8 + 4 + 8;
    data_start = (data_start + 31) / 32 * 32;
    /* Cut inside the header, metadata or tensor infos: either the cut itself
     * (truncated) or a length or count that now points past the end (bounds). */
    for (i = 0; i < data_start; i += (i < 600 ? 1 : 13)) {
        unsigned char *copy = (unsigned char *)malloc(i ? i : 1);
        pmpd_status status;
        memcpy(copy, g, i);
        status = run_importer(GGUF, copy, i, &err);
        free(copy);
        assert_true(status == PMPD_ERR_FORMAT_TRUNCATED || status == PMPD_ERR_FORMAT_BOUNDS);
        assert_true(err.offset <= i);
    }
    for (i = data_start + 1; i < size; i += 20011)
        expect_refusal(GGUF, g, i, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "past the end");
    memcpy(p, g, size);
    p[0] = 'G';
    p[3] = 'G';
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_MAGIC, 0, "magic");
    memcpy(p, g, size);
    wr32(p + 4, 1);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VERSION, 4, "version");
    wr32(p + 4, 4);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VERSION, 4, "version");
    memcpy(p, g, size);
    wr64(p + 8, 0);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, 8, "tensor count");
    wr64(p + 8, UINT64_MAX);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, 8, "tensor count");
    memcpy(p, g, size);
    wr64(p + 16, (uint64_t)1 << 60);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, 16, "metadata count");
    memcpy(p, g, size);
    wr64(p + 16, 0); /* no metadata: no architecture */
    expect_refusal(GGUF, p, size, PMPD_ERR_UNSUPPORTED, PMPD_NO_OFFSET, "architecture");
    free(p);
    free(g);
}

static void test_gguf_metadata(void **state)
{
    size_t size, at;
    unsigned char *g = make_gguf(&size);
    unsigned char *p = (unsigned char *)malloc(size);
    (void)state;
    /* The first key string: length past the end. */
    memcpy(p, g, size);
    wr64(p + 24, (uint64_t)size);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, 24, "past the end");
    memcpy(p, g, size);
    wr64(p + 24, UINT64_MAX);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, 24, "past the end");
    /* An unknown value type. */
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "general.name");
    wr32(p + at - 4, 13);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, at - 4, "type 13");
    /* A duplicate key: llama.block_count renamed to general.alignment (same length). */
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "llama.block_count");
    memcpy(p + at - 4 - strlen("llama.block_count"), "general.alignment", strlen("general.alignment"));
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_DUPLICATE, at - 4 - strlen("llama.block_count") - 8, "twice");
    /* Hyperparameters. */
    memcpy(p, g, size);
    wr32(p + gguf_value_at(p, size, "llama.attention.head_count"), 0);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_HPARAMS, ANY_OFFSET, "head_count");
    memcpy(p, g, size);
    wr32(p + gguf_value_at(p, size, "llama.attention.head_count_kv"), 3);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_HPARAMS, ANY_OFFSET, "divide");
    memcpy(p, g, size);
    wr32(p + gguf_value_at(p, size, "llama.rope.dimension_count"), 4);
    expect_refusal(GGUF, p, size, PMPD_ERR_UNSUPPORTED, ANY_OFFSET, "partial rotary");
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "llama.embedding_length");
    wr32(p + at - 4, 6); /* a float where an integer belongs */
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, ANY_OFFSET, "integer");
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "general.architecture");
    memcpy(p + at + 8, "gpt2\0", 5);
    expect_refusal(GGUF, p, size, PMPD_ERR_UNSUPPORTED, at, "llama");
    memcpy(p, g, size);
    wr32(p + gguf_value_at(p, size, "general.alignment"), 48);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, ANY_OFFSET, "alignment");
    /* Vocabulary: array count past the end, and scores of the wrong length. */
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "tokenizer.ggml.tokens");
    wr64(p + at + 4, (uint64_t)1 << 40);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "array count");
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "tokenizer.ggml.tokens");
    wr64(p + at + 12, (uint64_t)1 << 40); /* first token's length */
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, at + 12, "past the end");
    memcpy(p, g, size);
    at = gguf_value_at(p, size, "tokenizer.ggml.scores");
    wr32(p + at + 12 + 4 * 7, 0x7FC00000u);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_NONFINITE, at + 12 + 4 * 7, "score");
    free(p);
    free(g);
}

static void test_gguf_tensor_infos(void **state)
{
    size_t size, at;
    unsigned char *g = make_gguf(&size);
    unsigned char *p = (unsigned char *)malloc(size);
    (void)state;
    memcpy(p, g, size);
    at = gguf_tensor_at(p, size, "blk.1.attn_k.weight"); /* n_dims, ne[0], ne[1], type, offset */
    wr32(p + at, 0);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, at, "dimensions");
    wr32(p + at, 9);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, at, "dimensions");
    memcpy(p, g, size);
    wr64(p + at + 4, 0);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, at + 4, "dimension");
    memcpy(p, g, size);
    wr64(p + at + 12, (uint64_t)1 << 39);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "past the end");
    memcpy(p, g, size);
    wr32(p + at + 20, 16); /* IQ2_XXS: ggml has it, pmpd does not read it */
    expect_refusal(GGUF, p, size, PMPD_ERR_UNSUPPORTED, at - 8 - strlen("blk.1.attn_k.weight"), "ggml type 16 (IQ2_XXS)");
    wr32(p + at + 20, 4); /* Q4_2, removed from ggml long ago */
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, ANY_OFFSET, "blk.1.attn_k.weight has unknown ggml type 4");
    wr32(p + at + 20, 0xFFFFFFFFu);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, ANY_OFFSET, "unknown ggml type 4294967295");
    /* Rows of 64 are no whole number of 256-weight super-blocks. */
    wr32(p + at + 20, 12);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, ANY_OFFSET, "rows of 64 are not whole Q4_K blocks of 256");
    wr32(p + at + 20, 23);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, ANY_OFFSET, "IQ4_XS blocks of 256");
    wr32(p + at + 20, 2); /* Q4_0 with rows of 64 is fine: the data just shrinks */
    memcpy(p, g, size);
    wr32(p + at + 20, 8);
    wr64(p + at + 4, 48); /* Q8_0 rows of 48 are not whole blocks */
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_SHAPE, ANY_OFFSET, "blocks");
    memcpy(p, g, size);
    wr64(p + at + 24, 8);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_ALIGNMENT, ANY_OFFSET, "alignment");
    wr64(p + at + 24, UINT64_MAX - 31);
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "past the end");
    /* Overlapping data: attn_k moved onto attn_q's region, at its start
     * and inside it (both offsets aligned, both regions inside the file). */
    {
        size_t q_at = gguf_tensor_at(g, size, "blk.1.attn_q.weight");
        uint64_t q_offset = (uint64_t)g[q_at + 24] | (uint64_t)g[q_at + 25] << 8 | (uint64_t)g[q_at + 26] << 16;
        memcpy(p, g, size);
        wr64(p + at + 24, q_offset);
        expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "overlaps tensor blk.1.attn_");
        wr64(p + at + 24, q_offset + 64);
        expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_BOUNDS, ANY_OFFSET, "blk.1.attn_k.weight data (offset");
        assert_true(q_at < at);
    }
    /* Duplicate tensor names. */
    memcpy(p, g, size);
    memcpy(p + at - strlen("blk.1.attn_k.weight"), "blk.1.attn_v.weight", strlen("blk.1.attn_v.weight"));
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_DUPLICATE, ANY_OFFSET, "twice");
    /* Missing embedding. */
    memcpy(p, g, size);
    at = gguf_tensor_at(p, size, "token_embd.weight");
    p[at - 5] = 'X';
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_MISSING, ANY_OFFSET, "token_embd");
    /* A name byte outside printable ASCII (a NUL would make "x\0y" collide with "x"). */
    memcpy(p, g, size);
    at = gguf_tensor_at(p, size, "blk.1.attn_k.weight");
    p[at - 3] = '\0';
    expect_refusal(GGUF, p, size, PMPD_ERR_FORMAT_VALUE, at - 3, "printable");
    free(p);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_legacy),
        cmocka_unit_test(test_llama2c_size_sum_cannot_wrap),
        cmocka_unit_test(test_llama2c_version1),
        cmocka_unit_test(test_tokenizer_bin),
        cmocka_unit_test(test_gguf_header_and_truncation),
        cmocka_unit_test(test_gguf_metadata),
        cmocka_unit_test(test_gguf_tensor_infos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
