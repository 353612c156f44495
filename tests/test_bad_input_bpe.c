/* GGUF "gpt2" (byte-level BPE) vocabularies through the importer: a small
 * one written by pmpd_synth_gguf from a vocabulary file made here imports,
 * loads and tokenizes as worked out by hand; then each kind of bad input
 * is refused with its own status and a message naming the problem:
 * unknown pre-tokenizer or tokenizer model, missing pre-tokenizer or
 * merges, merges naming missing tokens or making none, malformed merges,
 * tokens that are not UTF-8 or not in the byte-level alphabet, token types
 * out of range, an end-of-turn id outside the vocabulary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

/* ids: 0..255 the bytes, 256 "ab", 257 "abc", 258 "<|end|>" (control). */
static unsigned char *make_gguf_pre(size_t *size, char *path, size_t path_size, const char *pre)
{
    char vocab_path[256], piece[2];
    FILE *f;
    unsigned b;
    pmpd_synth_options o;
    pmpd_error err;
    unsigned char *g;
    snprintf(vocab_path, sizeof vocab_path, "/tmp/pmpd_test_bpe_%ld.vocab", (long)getpid());
    snprintf(path, path_size, "/tmp/pmpd_test_bpe_%ld.gguf", (long)getpid());
    f = fopen(vocab_path, "wb");
    assert_non_null(f);
    fprintf(f, "pmpd-gpt2-vocab 1\npre %s\nbos 258\neos 258\neot 258\ntokens 259\n", pre);
    for (b = 0; b < 256; b++) {
        fputs("1 ", f);
        fwrite(piece, 1, test_byte_level_piece(b, piece), f);
        fputc('\n', f);
    }
    fprintf(f, "1 ab\n1 abc\n3 <|end|>\nmerges 2\na b\nab c\n");
    fclose(f);
    pmpd_synth_options_default(&o);
    o.dim = 32;
    o.hidden_dim = 32;
    o.n_layers = 1;
    o.n_heads = 1;
    o.n_kv_heads = 1;
    o.seq_len = 16;
    o.type = PMPD_GGML_F32;
    o.tokenizer_path = NULL;
    o.gpt2_vocab_path = vocab_path;
    assert_int_equal(pmpd_synth_gguf(path, &o, NULL, &err), PMPD_OK);
    remove(vocab_path);
    g = test_read_file(path, size);
    remove(path);
    assert_non_null(g);
    return g;
}

static unsigned char *make_gguf(size_t *size, char *path, size_t path_size)
{
    return make_gguf_pre(size, path, path_size, "gpt-2");
}

static unsigned char *find(unsigned char *g, size_t size, const char *s, size_t length)
{
    size_t i;
    for (i = 0; i + length <= size; i++)
        if (memcmp(g + i, s, length) == 0)
            return g + i;
    fail_msg("\"%s\" not in the GGUF", s);
    return NULL;
}

static void expect_import(const unsigned char *g, size_t size, pmpd_status status, const char *words)
{
    pmpd_build_model b;
    pmpd_error err;
    pmpd_status got;
    pmpd_build_init(&b);
    got = pmpd_import_gguf(g, size, &b, &err);
    pmpd_build_free(&b);
    if (got != status)
        fail_msg("import: %s (%s), expected %s", pmpd_strerror(got), got ? err.message : "", pmpd_strerror(status));
    if (words && !strstr(err.message, words))
        fail_msg("message \"%s\" does not say \"%s\"", err.message, words);
}

static void test_imports_and_tokenizes(void **state)
{
    char path[256];
    size_t size, n = 0;
    unsigned char *g = make_gguf(&size, path, sizeof path);
    pmpd_build_model b;
    pmpd_build_opened o;
    pmpd_error err;
    pmpd_tokenizer_info info;
    static unsigned char scratch_block[4096];
    pmpd_arena scratch;
    int32_t ids[16];
    (void)state;
    pmpd_build_init(&b);
    assert_int_equal(pmpd_import_gguf(g, size, &b, &err), PMPD_OK);
    assert_int_equal(pmpd_build_open(&b, &o, &err), PMPD_OK);
    assert_int_equal(pmpd_model_get_tokenizer_info(o.model, &info), PMPD_OK);
    assert_int_equal(info.kind, 2);
    assert_string_equal(info.pre, "gpt-2");
    assert_int_equal(info.eot_id, 258);
    assert_int_equal(info.add_bos, 0); /* gpt-2 does not add BOS unless the metadata says so */
    assert_int_equal(info.n_merges, 2);
    assert_int_equal(info.n_special, 1);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    /* "abc": a+b, then ab+c; " ab": the space has no merge; "\n" is byte 10. */
    assert_int_equal(pmpd_tokenize_text(o.model, "abc ab\n<|end|>", 14, PMPD_TOKENIZE_SPECIAL | PMPD_TOKENIZE_MODEL_BOS,
                                        ids, 16, &n, &scratch),
                     PMPD_OK);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 257);
    assert_int_equal(ids[1], ' ');
    assert_int_equal(ids[2], 256);
    assert_int_equal(ids[3], '\n');
    assert_int_equal(ids[4], 258);
    assert_int_equal(pmpd_token_is_control(o.model, 258), 1);
    assert_int_equal(pmpd_token_is_control(o.model, 257), 0);
    assert_int_equal(pmpd_token_is_control(o.model, 259), 0);
    assert_int_equal(pmpd_token_is_control(NULL, 258), 0);
    pmpd_build_close(&o);
    pmpd_build_free(&b);
    free(g);
}

static void test_refusals(void **state)
{
    char path[256];
    size_t size;
    unsigned char *good = make_gguf(&size, path, sizeof path), *g = (unsigned char *)malloc(size), *at;
    (void)state;
#define RESET() memcpy(g, good, size)
    RESET();
    memcpy(find(g, size, "gpt-2", 5), "gpt-3", 5);
    expect_import(g, size, PMPD_ERR_UNSUPPORTED, "\"gpt-3\" is not a pre-tokenizer");
    RESET();
    at = find(g, size, "tokenizer.ggml.pre", 18);
    at[17] = 'x';
    expect_import(g, size, PMPD_ERR_FORMAT_MISSING, "tokenizer.ggml.pre is missing");
    RESET();
    at = find(g, size, "tokenizer.ggml.merges", 21);
    at[20] = 'z';
    expect_import(g, size, PMPD_ERR_FORMAT_MISSING, "merges is missing");
    RESET();
    memcpy(find(g, size, "gpt2", 4), "gpt3", 4);
    expect_import(g, size, PMPD_ERR_UNSUPPORTED, "\"gpt3\"");
    RESET();
    memcpy(find(g, size, "ab c", 4), "ax c", 4);
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "left piece that is not in the vocabulary");
    RESET();
    memcpy(find(g, size, "ab c", 4), "ab_c", 4);
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "not two pieces");
    RESET();
    memcpy(find(g, size, "ab c", 4), "ab b", 4);
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "makes no token");
    RESET();
    memcpy(find(g, size, "abc", 3), "ab\xff", 3);
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "not valid UTF-8");
    RESET();
    /* byte 0 is U+0100 (C4 80); U+0200 is outside the byte-level alphabet */
    at = find(g, size, "\xc4\x80", 2);
    at[0] = (char)0xC8;
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "outside the byte-level alphabet");
    RESET();
    at = find(g, size, "tokenizer.ggml.token_type", 25) + 25 + 4 + 4 + 8;
    at[0] = 9;
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "type 9");
    RESET();
    at = find(g, size, "tokenizer.ggml.eot_token_id", 27) + 27 + 4;
    at[0] = 0xFF;
    at[1] = 0x7F;
    expect_import(g, size, PMPD_ERR_FORMAT_HPARAMS, "eot_token_id");
    RESET();
    expect_import(g, size, PMPD_OK, NULL);
#undef RESET
    free(g);
    free(good);
}

/* BOS as the model says: llama-bpe adds it when add_bos_token is absent
 * (llama.cpp's default), llama2.c vocabularies always; special-token
 * parsing is refused for the latter. */
static void test_bos_as_model_says(void **state)
{
    char path[256];
    size_t size, n = 0;
    unsigned char *g = make_gguf_pre(&size, path, sizeof path, "llama-bpe");
    pmpd_build_model b;
    pmpd_build_opened o;
    pmpd_error err;
    pmpd_tokenizer_info info;
    test_opened_model spm;
    static unsigned char scratch_block[4096];
    pmpd_arena scratch;
    int32_t ids[16];
    (void)state;
    pmpd_build_init(&b);
    assert_int_equal(pmpd_import_gguf(g, size, &b, &err), PMPD_OK);
    assert_int_equal(pmpd_build_open(&b, &o, &err), PMPD_OK);
    assert_int_equal(pmpd_model_get_tokenizer_info(o.model, &info), PMPD_OK);
    assert_string_equal(info.pre, "llama-bpe");
    assert_int_equal(info.add_bos, 1);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    assert_int_equal(pmpd_tokenize_text(o.model, "abc", 3, PMPD_TOKENIZE_MODEL_BOS, ids, 16, &n, &scratch), PMPD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 258);
    assert_int_equal(ids[1], 257);
    assert_int_equal(pmpd_tokenize_text(o.model, "abc", 3, 0, ids, 16, &n, &scratch), PMPD_OK);
    assert_int_equal(n, 1);
    pmpd_build_close(&o);
    pmpd_build_free(&b);
    free(g);
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_F32, &spm), PMPD_OK);
    assert_int_equal(pmpd_model_get_tokenizer_info(spm.model, &info), PMPD_OK);
    assert_int_equal(info.kind, 1);
    assert_null(info.pre);
    assert_int_equal(pmpd_tokenize_text(spm.model, "a", 1, PMPD_TOKENIZE_MODEL_BOS, ids, 16, &n, &scratch), PMPD_OK);
    assert_true(n >= 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(pmpd_token_is_control(spm.model, 1), 1);
    assert_int_equal(pmpd_token_is_control(spm.model, ids[1]), 0);
    assert_int_equal(pmpd_tokenize_text(spm.model, "a", 1, PMPD_TOKENIZE_SPECIAL, ids, 16, &n, &scratch),
                     PMPD_ERR_UNSUPPORTED);
    test_opened_close(&spm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_imports_and_tokenizes),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bos_as_model_says),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
