/* GGUF tokenizer.chat_template kept in the container (chat-template section,
 * kind 7, version 1: u32 length, UTF-8 without NUL): a synthetic GGUF's
 * template comes back byte for byte through pmpd_model_chat_template and
 * names the chat family even when the vocabulary's special tokens do not;
 * files without one (older containers) still open and say
 * PMPD_ERR_FORMAT_MISSING; bad templates are refused by the importer and
 * bad sections by the loader, each with its status and a message naming
 * the problem; an optional section of another version is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "examples/common/chat.c"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/format/builder.h"
#include "pmpd_impl/offline/format/from_model.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

static const char chatml[] = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                             "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %} \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";

/* A GGUF with stories260K's shape-free tokenizer (tok512.bin) and, unless
 * NULL, the chat template. */
static unsigned char *make_gguf(const char *chat_template, size_t *size)
{
    char path[256], tok[512];
    pmpd_synth_options o;
    pmpd_error err;
    unsigned char *g;
    snprintf(path, sizeof path, "/tmp/pmpd_test_chat_template_%ld.gguf", (long)getpid());
    pmpd_synth_options_default(&o);
    o.dim = 32;
    o.hidden_dim = 32;
    o.n_layers = 1;
    o.n_heads = 1;
    o.n_kv_heads = 1;
    o.seq_len = 16;
    o.type = PMPD_GGML_F32;
    o.tokenizer_path = test_shared_path(tok, sizeof tok, "models/tok512.bin");
    o.chat_template = chat_template;
    assert_int_equal(pmpd_synth_gguf(path, &o, NULL, &err), PMPD_OK);
    g = test_read_file(path, size);
    remove(path);
    assert_non_null(g);
    return g;
}

static pmpd_status import_open(const unsigned char *g, size_t size, pmpd_build_opened *o, pmpd_error *err)
{
    pmpd_build_model b;
    pmpd_status st;
    memset(o, 0, sizeof *o); /* closable whatever fails */
    pmpd_build_init(&b);
    st = pmpd_import_gguf(g, size, &b, err);
    if (st == PMPD_OK)
        st = pmpd_build_open(&b, o, err);
    pmpd_build_free(&b);
    return st;
}

static void test_round_trip(void **state)
{
    size_t size, length;
    unsigned char *g = make_gguf(chatml, &size);
    pmpd_build_opened o;
    pmpd_error err;
    const char *text, *source;
    static unsigned char scratch_block[1 << 16];
    pmpd_arena scratch;
    (void)state;
    assert_int_equal(import_open(g, size, &o, &err), PMPD_OK);
    assert_int_equal(pmpd_model_chat_template(o.model, &text, &length), PMPD_OK);
    assert_int_equal(length, strlen(chatml));
    assert_memory_equal(text, chatml, length);
    /* tok512's vocabulary has no ChatML tokens: the template names it. */
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    assert_int_equal(example_chat_detect_model(o.model, &scratch, &source), EXAMPLE_CHAT_CHATML);
    assert_string_equal(source, "chat template");
    assert_int_equal(pmpd_model_chat_template(o.model, NULL, &length), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_chat_template(o.model, &text, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_model_chat_template(NULL, &text, &length), PMPD_ERR_INVALID_ARGUMENT);
    pmpd_build_close(&o);
    free(g);
}

static void test_absent(void **state)
{
    size_t size, length;
    unsigned char *g = make_gguf(NULL, &size);
    pmpd_build_opened o;
    pmpd_error err;
    const char *text, *source = "x";
    static unsigned char scratch_block[1 << 16];
    pmpd_arena scratch;
    test_opened_model m;
    (void)state;
    assert_int_equal(import_open(g, size, &o, &err), PMPD_OK);
    assert_int_equal(pmpd_model_chat_template(o.model, &text, &length), PMPD_ERR_FORMAT_MISSING);
    pmpd_arena_init(&scratch, scratch_block, sizeof scratch_block);
    assert_int_equal(example_chat_detect_model(o.model, &scratch, &source), EXAMPLE_CHAT_NONE);
    assert_null(source);
    pmpd_build_close(&o);
    free(g);
    /* A container written before the section existed. */
    assert_int_equal(test_open_shared("models/stories260K.bin", "models/tok512.bin", PMPD_TENSOR_F32, &m), PMPD_OK);
    assert_int_equal(pmpd_model_chat_template(m.model, &text, &length), PMPD_ERR_FORMAT_MISSING);
    test_opened_close(&m);
}

static void expect_import(const unsigned char *g, size_t size, pmpd_status status, const char *words)
{
    pmpd_build_opened o;
    pmpd_error err;
    pmpd_status got = import_open(g, size, &o, &err);
    pmpd_build_close(&o);
    if (got != status)
        fail_msg("import: %s (%s), expected %s", pmpd_strerror(got), got ? err.message : "", pmpd_strerror(status));
    if (!strstr(err.message, words))
        fail_msg("message \"%s\" does not say \"%s\"", err.message, words);
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

static void test_import_refuses(void **state)
{
    static const char *const bad_utf8[] = {
        "x\xC0\x80",         /* overlong NUL */
        "x\xED\xA0\x80",     /* a UTF-16 surrogate */
        "x\xF4\x90\x80\x80", /* past U+10FFFF */
        "x\x80",             /* a lone continuation byte */
        "x\xE2\x82",         /* cut short */
    };
    size_t size, i;
    unsigned char *g, *at;
    (void)state;
    for (i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
        g = make_gguf(bad_utf8[i], &size);
        expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "tokenizer.chat_template byte 1");
        expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "is not UTF-8");
        free(g);
    }
    /* A NUL inside the text. */
    g = make_gguf("ab{{ marker }}cd", &size);
    at = find(g, size, "{{ marker }}", 12);
    at[3] = 0;
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "tokenizer.chat_template byte 5 is NUL");
    free(g);
    /* Not a string: an empty string's 8 length bytes read as a UINT64. */
    g = make_gguf("", &size);
    at = find(g, size, "tokenizer.chat_template", 23) + 23;
    assert_int_equal(pmpd_le_u32(at), 8); /* GGUF_TYPE_STRING */
    pmpd_le_put_u32(at, 10);             /* GGUF_TYPE_UINT64 */
    expect_import(g, size, PMPD_ERR_FORMAT_VALUE, "tokenizer.chat_template is not a string");
    free(g);
    /* The empty string itself is a valid (if useless) template. */
    g = make_gguf("", &size);
    expect_import(g, size, PMPD_OK, "");
    free(g);
}

/* stories260K with a chat-template section of the given bytes. */
static void expect_open(uint32_t version, uint32_t flags, const void *payload, size_t payload_size,
                        pmpd_status status, const char *words)
{
    pmpd_build_model b;
    pmpd_build_opened o;
    pmpd_error err;
    pmpd_status got;
    pmpd_build_init(&b);
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", &b), PMPD_OK);
    assert_int_equal(pmpd_build_add_section(&b, PMPD_SECTION_CHAT_TEMPLATE, version, flags, payload, payload_size),
                     PMPD_OK);
    got = pmpd_build_open(&b, &o, &err);
    if (got == PMPD_OK) {
        const char *text;
        size_t length;
        /* Only a version this build reads is exposed. */
        assert_int_equal(pmpd_model_chat_template(o.model, &text, &length),
                         version == 1 ? PMPD_OK : PMPD_ERR_FORMAT_MISSING);
    }
    pmpd_build_close(&o);
    pmpd_build_free(&b);
    if (got != status)
        fail_msg("open: %s (%s), expected %s", pmpd_strerror(got), got ? err.message : "", pmpd_strerror(status));
    if (words && !strstr(err.message, words))
        fail_msg("message \"%s\" does not say \"%s\"", err.message, words);
}

static void test_loader_refuses(void **state)
{
    unsigned char s[16];
    (void)state;
    pmpd_le_put_u32(s, 3);
    memcpy(s + 4, "abc", 3);
    expect_open(1, 0, s, 7, PMPD_OK, NULL);
    expect_open(1, 0, s, 2, PMPD_ERR_FORMAT_TRUNCATED, "less than its 4-byte length");
    expect_open(1, 0, s, 6, PMPD_ERR_FORMAT_VALUE, "chat template length 3 disagrees with its 6-byte section");
    expect_open(1, 0, s, 8, PMPD_ERR_FORMAT_VALUE, "chat template length 3 disagrees with its 8-byte section");
    s[5] = (char)0xFF;
    expect_open(1, 0, s, 7, PMPD_ERR_FORMAT_VALUE, "chat template byte 1 (0xff) is not UTF-8");
    s[5] = 0;
    expect_open(1, 0, s, 7, PMPD_ERR_FORMAT_VALUE, "chat template byte 1 is NUL");
    /* Another version: optional, skipped; required, refused. */
    expect_open(2, 0, s, 1, PMPD_OK, NULL);
    expect_open(2, PMPD_SECTION_FLAG_REQUIRED, s, 7, PMPD_ERR_FORMAT_VERSION,
                "required chat template section is version 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_absent),
        cmocka_unit_test(test_import_refuses),
        cmocka_unit_test(test_loader_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
