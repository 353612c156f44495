/* Malformed architecture fields: the container's rope_style and feature
 * bits and the tensors they call for (Q/K/V biases, rope_freqs.weight),
 * and GGUF files of other architectures or with biases pmpd cannot apply.
 * Each is refused with its own status, the field's offset where it has one,
 * a message naming it, and (containers) the arena untouched.  Files of
 * either architecture that are well formed import with the right style and
 * features. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmpd_impl/format/container.h"
#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/format/le.h"
#include "pmpd_impl/offline/import/import.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define ANY_OFFSET (PMPD_NO_OFFSET - 1)

static unsigned char arena_memory[256 * 1024];

/* ---- Containers ---- */

/* stories260K with the given features, and their tensors unless
 * leave_out names one (NULL: all of them); bias_width 0 is the right one. */
static void stories_with(pmpd_build_model *b, uint32_t features, const char *leave_out, uint64_t bias_width,
                         float factor0)
{
    char name[64];
    uint32_t l, k;
    float values[512];
    assert_int_equal(test_import_shared("models/stories260K.bin", "models/tok512.bin", b), PMPD_OK);
    b->info.features = features;
    for (k = 0; k < 512; k++)
        values[k] = 0.01f * (float)(k % 7) + 1.0f;
    for (l = 0; (features & PMPD_MODEL_QKV_BIAS) && l < b->info.n_layers; l++) {
        static const char *const parts[] = {"attn_q", "attn_k", "attn_v"};
        for (k = 0; k < 3; k++) {
            uint64_t width = k == 0 ? (uint64_t)b->info.n_heads * b->info.head_dim
                                    : (uint64_t)b->info.n_kv_heads * b->info.head_dim;
            snprintf(name, sizeof name, "blk.%u.%s.bias", (unsigned)l, parts[k]);
            if (leave_out && strcmp(leave_out, name) == 0)
                continue;
            if (bias_width && l == 1 && k == 2)
                width = bias_width;
            assert_int_equal(pmpd_build_add_f32(b, name, 1, &width, values), PMPD_OK);
        }
    }
    if ((features & PMPD_MODEL_ROPE_FREQS) && !(leave_out && strcmp(leave_out, "rope_freqs.weight") == 0)) {
        uint64_t half = b->info.head_dim / 2;
        values[0] = factor0;
        assert_int_equal(pmpd_build_add_f32(b, "rope_freqs.weight", 1, &half, values), PMPD_OK);
    }
}

static void open_expect(const pmpd_build_model *b, pmpd_status status, const char *word)
{
    test_container c;
    pmpd_arena arena;
    pmpd_model *model = NULL;
    pmpd_error err;
    assert_int_equal(test_serialize(b, &c), PMPD_OK);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    if (pmpd_model_open_memory(c.data, c.size, &arena, &model, &err) != status)
        fail_msg("status %d: %s (wanted %d, \"%s\")", (int)err.code, err.message, (int)status, word ? word : "");
    if (status != PMPD_OK) {
        assert_null(model);
        assert_int_equal(arena.used, 0);
        if (word && !strstr(err.message, word))
            fail_msg("message \"%s\" lacks \"%s\"", err.message, word);
    }
    test_container_free(&c);
}

/* Header fields patched in a serialized stories260K (the CRC fixed), so
 * the offset can be checked. */
static void test_header_enums(void **state)
{
    static const struct {
        uint32_t offset, value;
        const char *word;
    } cases[] = {
        {PMPD_HDR_ROPE_STYLE, 2, "rope_style"},
        {PMPD_HDR_ROPE_STYLE, 0xFFFFFFFFu, "rope_style"},
        {PMPD_HDR_FEATURES, 4, "features"},
        {PMPD_HDR_FEATURES, 0x80000003u, "features"},
        {PMPD_HDR_RESERVED, 1, "reserved"},
    };
    test_container c;
    size_t i;
    (void)state;
    assert_int_equal(test_stories_container(&c), PMPD_OK);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *p = c.data;
        uint32_t saved = pmpd_le_u32(p + cases[i].offset), n_tensors = pmpd_le_u32(p + PMPD_HDR_N_TENSORS),
                 n_sections = pmpd_le_u32(p + PMPD_HDR_N_SECTIONS), crc;
        size_t directory = PMPD_HEADER_SIZE + (size_t)n_tensors * PMPD_TENSOR_ENTRY_SIZE +
                           (size_t)n_sections * PMPD_SECTION_ENTRY_SIZE;
        pmpd_arena arena;
        pmpd_model *model;
        pmpd_error err;
        pmpd_le_put_u32(p + cases[i].offset, cases[i].value);
        crc = pmpd_crc32_update(pmpd_crc32_update(0, p, PMPD_HDR_CRC), p + PMPD_HEADER_SIZE, directory - PMPD_HEADER_SIZE);
        pmpd_le_put_u32(p + PMPD_HDR_CRC, crc);
        pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
        assert_int_equal(pmpd_model_open_memory(p, c.size, &arena, &model, &err), PMPD_ERR_FORMAT_VALUE);
        assert_int_equal(err.offset, cases[i].offset);
        if (!strstr(err.message, cases[i].word))
            fail_msg("message \"%s\" lacks \"%s\"", err.message, cases[i].word);
        assert_int_equal(arena.used, 0);
        pmpd_le_put_u32(p + cases[i].offset, saved);
    }
    test_container_free(&c);
}

static void test_features_need_their_tensors(void **state)
{
    pmpd_build_model b;
    (void)state;
    /* The well-formed versions open. */
    stories_with(&b, PMPD_MODEL_QKV_BIAS | PMPD_MODEL_ROPE_FREQS, NULL, 0, 1.0f);
    open_expect(&b, PMPD_OK, NULL);
    pmpd_build_free(&b);
    /* A feature bit without its tensors. */
    stories_with(&b, PMPD_MODEL_QKV_BIAS, "blk.3.attn_k.bias", 0, 1.0f);
    open_expect(&b, PMPD_ERR_FORMAT_MISSING, "blk.3.attn_k.bias");
    pmpd_build_free(&b);
    stories_with(&b, PMPD_MODEL_ROPE_FREQS, "rope_freqs.weight", 0, 1.0f);
    open_expect(&b, PMPD_ERR_FORMAT_MISSING, "rope_freqs.weight");
    pmpd_build_free(&b);
    /* Tensors without the bit are other tensors, ignored (docs/models.md). */
    stories_with(&b, PMPD_MODEL_QKV_BIAS, NULL, 0, 1.0f);
    b.info.features = 0;
    open_expect(&b, PMPD_OK, NULL);
    pmpd_build_free(&b);
}

static void test_bias_shapes_and_values(void **state)
{
    pmpd_build_model b;
    pmpd_build_tensor *t;
    uint64_t matrix[2] = {8, 8};
    (void)state;
    /* blk.1.attn_v.bias (32 wide: 4 KV heads of 8) one too long, one too short. */
    stories_with(&b, PMPD_MODEL_QKV_BIAS, NULL, 33, 1.0f);
    open_expect(&b, PMPD_ERR_FORMAT_SHAPE, "blk.1.attn_v.bias");
    pmpd_build_free(&b);
    stories_with(&b, PMPD_MODEL_QKV_BIAS, NULL, 31, 1.0f);
    open_expect(&b, PMPD_ERR_FORMAT_SHAPE, "blk.1.attn_v.bias");
    pmpd_build_free(&b);
    /* A matrix of the right element count is not a vector. */
    stories_with(&b, PMPD_MODEL_QKV_BIAS, "blk.0.attn_q.bias", 0, 1.0f);
    {
        float values[64] = {0};
        assert_int_equal(pmpd_build_add_f32(&b, "blk.0.attn_q.bias", 2, matrix, values), PMPD_OK);
    }
    open_expect(&b, PMPD_ERR_FORMAT_SHAPE, "blk.0.attn_q.bias");
    pmpd_build_free(&b);
    /* NaN and infinity. */
    stories_with(&b, PMPD_MODEL_QKV_BIAS, NULL, 0, 1.0f);
    t = pmpd_build_find(&b, "blk.2.attn_k.bias");
    pmpd_le_put_f32(t->data + 4 * 5, NAN);
    open_expect(&b, PMPD_ERR_FORMAT_NONFINITE, "blk.2.attn_k.bias");
    pmpd_le_put_f32(t->data + 4 * 5, -INFINITY);
    open_expect(&b, PMPD_ERR_FORMAT_NONFINITE, "blk.2.attn_k.bias");
    pmpd_build_free(&b);
}

static void test_rope_freqs_length_and_values(void **state)
{
    static const float bad[] = {0.0f, -1.0f, -0.0f};
    pmpd_build_model b;
    pmpd_build_tensor *t;
    uint64_t wrong = 8; /* head_dim is 8: 4 pairs */
    size_t i;
    (void)state;
    stories_with(&b, PMPD_MODEL_ROPE_FREQS, "rope_freqs.weight", 0, 1.0f);
    {
        float values[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        assert_int_equal(pmpd_build_add_f32(&b, "rope_freqs.weight", 1, &wrong, values), PMPD_OK);
    }
    open_expect(&b, PMPD_ERR_FORMAT_SHAPE, "rope_freqs.weight");
    pmpd_build_free(&b);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stories_with(&b, PMPD_MODEL_ROPE_FREQS, NULL, 0, bad[i]);
        open_expect(&b, PMPD_ERR_FORMAT_VALUE, "positive");
        pmpd_build_free(&b);
    }
    stories_with(&b, PMPD_MODEL_ROPE_FREQS, NULL, 0, 1.0f);
    t = pmpd_build_find(&b, "rope_freqs.weight");
    pmpd_le_put_f32(t->data + 4 * 3, NAN);
    open_expect(&b, PMPD_ERR_FORMAT_NONFINITE, "rope_freqs.weight");
    pmpd_build_free(&b);
}

/* ---- GGUF ---- */

/* A tiny GGUF from pmpd-mkgguf's generator (tok512 vocabulary), read back. */
static unsigned char *synth(const char *arch, uint32_t head_dim, int rope_freqs, size_t *size)
{
    char path[256], tok[512];
    pmpd_synth_options o;
    pmpd_error err;
    unsigned char *data;
    pmpd_synth_options_default(&o);
    o.dim = 64;
    o.hidden_dim = 96;
    o.n_layers = 2;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.seq_len = 64;
    o.type = PMPD_GGML_F32;
    o.arch = arch;
    o.head_dim = head_dim;
    o.rope_freqs = rope_freqs;
    o.tokenizer_path = test_shared_path(tok, sizeof tok, "models/tok512.bin");
    snprintf(path, sizeof path, "/tmp/pmpd-test-bad-arch-%ld.gguf", (long)getpid());
    if (pmpd_synth_gguf(path, &o, NULL, &err) != PMPD_OK)
        fail_msg("mkgguf: %s", err.message);
    data = test_read_file(path, size);
    remove(path);
    assert_non_null(data);
    return data;
}

static size_t find(const unsigned char *g, size_t size, const char *s)
{
    size_t length = strlen(s), i;
    for (i = 8; i + length <= size; i++)
        if (memcmp(g + i, s, length) == 0 && g[i - 8] == length && g[i - 7] == 0)
            return i;
    fail_msg("no string %s", s);
    return 0;
}

static void import_expect(const unsigned char *g, size_t size, pmpd_status status, uint64_t offset, const char *word,
                          pmpd_model_info *info)
{
    pmpd_build_model b;
    pmpd_error err;
    unsigned char *copy = (unsigned char *)malloc(size);
    memcpy(copy, g, size);
    pmpd_build_init(&b);
    if (pmpd_import_gguf(copy, size, &b, &err) != status)
        fail_msg("status %d: %s (wanted %d)", (int)err.code, err.message, (int)status);
    if (status != PMPD_OK) {
        if (offset != ANY_OFFSET)
            assert_int_equal(err.offset, offset);
        if (word && !strstr(err.message, word))
            fail_msg("message \"%s\" lacks \"%s\"", err.message, word);
    } else if (info) {
        *info = b.info;
    }
    pmpd_build_free(&b);
    free(copy);
}

static void test_gguf_architectures(void **state)
{
    size_t size, at;
    pmpd_model_info info;
    unsigned char *g = synth("qwen2", 0, 0, &size);
    (void)state;
    import_expect(g, size, PMPD_OK, 0, NULL, &info);
    assert_int_equal(info.rope_style, PMPD_ROPE_NEOX);
    assert_int_equal(info.features, PMPD_MODEL_QKV_BIAS);
    assert_int_equal(info.head_dim, 16);
    /* Another architecture of the same name length: refused by name, at
     * the value. */
    at = find(g, size, "qwen2");
    memcpy(g + at, "gemma", 5);
    import_expect(g, size, PMPD_ERR_UNSUPPORTED, at - 8, "gemma", NULL);
    memcpy(g + at, "qwen2", 5);
    /* A layer without one of its biases. */
    at = find(g, size, "blk.1.attn_k.bias");
    g[at + 16] = 'z';
    import_expect(g, size, PMPD_ERR_FORMAT_MISSING, ANY_OFFSET, "blk.1.attn_k.bias", NULL);
    g[at + 16] = 's';
    /* A bias pmpd has no place for. */
    at = find(g, size, "blk.0.attn_q.bias");
    g[at + 11] = 'o';
    import_expect(g, size, PMPD_ERR_UNSUPPORTED, ANY_OFFSET, "blk.0.attn_o.bias", NULL);
    free(g);

    g = synth("llama", 32, 1, &size);
    import_expect(g, size, PMPD_OK, 0, NULL, &info);
    assert_int_equal(info.rope_style, PMPD_ROPE_ADJACENT);
    assert_int_equal(info.features, PMPD_MODEL_ROPE_FREQS);
    assert_int_equal(info.head_dim, 32);
    /* key_length odd, value_length different. */
    at = find(g, size, "llama.attention.key_length") + strlen("llama.attention.key_length") + 4;
    pmpd_le_put_u32(g + at, 31);
    import_expect(g, size, PMPD_ERR_FORMAT_HPARAMS, at, "key_length", NULL);
    pmpd_le_put_u32(g + at, 32);
    at = find(g, size, "llama.attention.value_length") + strlen("llama.attention.value_length") + 4;
    pmpd_le_put_u32(g + at, 16);
    import_expect(g, size, PMPD_ERR_UNSUPPORTED, at, "value head size", NULL);
    pmpd_le_put_u32(g + at, 32);
    free(g);
}

/* llama.cpp applies rope_freqs.weight to llama only: with NeoX rotation
 * (qwen2) it is refused rather than applied or dropped. */
static void test_gguf_rope_freqs_only_for_llama(void **state)
{
    size_t size;
    unsigned char *g = synth("llama", 0, 1, &size);
    pmpd_build_model b;
    pmpd_error err;
    (void)state;
    pmpd_build_init(&b);
    assert_int_equal(pmpd_import_gguf(g, size, &b, &err), PMPD_OK);
    b.info.features = 0;
    assert_int_equal(pmpd_import_gguf_features(&b, PMPD_ROPE_NEOX, &err), PMPD_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "rope_freqs.weight"));
    assert_int_equal(pmpd_import_gguf_features(&b, PMPD_ROPE_ADJACENT, &err), PMPD_OK);
    assert_int_equal(b.info.features, PMPD_MODEL_ROPE_FREQS);
    pmpd_build_free(&b);
    free(g);
}

/* The generator refuses variants it cannot write as asked, saying why. */
static void test_mkgguf_refuses_impossible_variants(void **state)
{
    static const struct {
        const char *arch;
        uint32_t head_dim;
        int rope_freqs;
        float theta, eps, std;
        const char *word;
    } cases[] = {
        {"gemma", 0, 0, 0, 0, 0, "gemma"},
        {"qwen2", 0, 1, 0, 0, 0, "llama"},         /* rope_freqs: llama only */
        {"qwen2", 32, 0, 0, 0, 0, "dim"},          /* qwen2's wo is dim x dim */
        {"llama", 15, 0, 0, 0, 0, "even"},
        {"llama", 0, 0, 0.5f, 0, 0, "theta"},
        {"llama", 0, 0, 0, 2.0f, 0, "eps"},
        {"llama", 0, 0, 0, 0, 1e7f, "std"},
    };
    char path[256], tok[512];
    size_t i;
    (void)state;
    snprintf(path, sizeof path, "/tmp/pmpd-test-bad-arch-%ld.gguf", (long)getpid());
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pmpd_synth_options o;
        pmpd_error err;
        pmpd_synth_options_default(&o);
        o.dim = 64;
        o.hidden_dim = 96;
        o.n_layers = 1;
        o.n_heads = 4;
        o.n_kv_heads = 2;
        o.seq_len = 64;
        o.type = PMPD_GGML_F32;
        o.tokenizer_path = test_shared_path(tok, sizeof tok, "models/tok512.bin");
        o.arch = cases[i].arch;
        o.head_dim = cases[i].head_dim;
        o.rope_freqs = cases[i].rope_freqs;
        o.rope_theta = cases[i].theta;
        o.norm_eps = cases[i].eps;
        o.weight_std = cases[i].std;
        assert_int_equal(pmpd_synth_gguf(path, &o, NULL, &err), PMPD_ERR_INVALID_ARGUMENT);
        if (!strstr(err.message, cases[i].word))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, err.message, cases[i].word);
        assert_int_equal(access(path, F_OK), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_enums),
        cmocka_unit_test(test_features_need_their_tensors),
        cmocka_unit_test(test_bias_shapes_and_values),
        cmocka_unit_test(test_rope_freqs_length_and_values),
        cmocka_unit_test(test_gguf_architectures),
        cmocka_unit_test(test_gguf_rope_freqs_only_for_llama),
        cmocka_unit_test(test_mkgguf_refuses_impossible_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
