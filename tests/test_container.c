/* The .pmpd container: writer -> loader round trips on the real
 * stories260K checkpoint, checked against the llama2.c file read directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/format/crc32.h"
#include "pmpd_impl/format/loader.h"
#include "pmpd_impl/model/model.h"
#include "pmpd_impl/offline/format/builder.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define ARENA_BYTES (256u * 1024u)
static unsigned char arena_memory[ARENA_BYTES];

/* Float number i of the llama2.c legacy file (after the 28-byte header),
 * read independently of the importer. */
static float legacy_float(const unsigned char *file, size_t i)
{
    const unsigned char *p = file + 28 + 4 * i;
    uint32_t bits = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void assert_tensor_matches(const pmpd_tensor *t, const unsigned char *file, size_t first, size_t count)
{
    size_t i;
    assert_int_equal(t->type, PMPD_TENSOR_F32);
    assert_int_equal(t->size, count * 4);
    assert_int_equal((uintptr_t)t->data % 64, 0);
    for (i = 0; i < count; i++)
        assert_true(((const float *)t->data)[i] == legacy_float(file, first + i));
}

static void test_crc32_check_value(void **state)
{
    (void)state;
    assert_int_equal(pmpd_crc32_update(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(pmpd_crc32_update(pmpd_crc32_update(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

/* CRC-32 one bit at a time, straight from the definition. */
static uint32_t bitwise_crc32(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    size_t i;
    int k;
    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void test_crc32_matches_definition(void **state)
{
    unsigned char data[3000];
    test_rng rng;
    size_t i;
    (void)state;
    test_rng_seed(&rng, 7);
    for (i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)test_rng_u32(&rng);
    for (i = 0; i < 300; i++) {
        size_t start = test_rng_u32(&rng) % 64, length = test_rng_u32(&rng) % (sizeof data - 64);
        size_t split = length ? test_rng_u32(&rng) % length : 0;
        uint32_t crc = pmpd_crc32_update(pmpd_crc32_update(0, data + start, split), data + start + split, length - split);
        assert_int_equal(crc, bitwise_crc32(data + start, length));
    }
}

static void test_stories_round_trip(void **state)
{
    /* stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512, seq 512. */
    const size_t dim = 64, hidden = 172, layers = 5, kv = 32, vocab = 512;
    const size_t emb = 0, att_norm = emb + vocab * dim, wq = att_norm + layers * dim;
    const size_t wk = wq + layers * dim * dim, wv = wk + layers * kv * dim, wo = wv + layers * kv * dim;
    const size_t ffn_norm = wo + layers * dim * dim, w1 = ffn_norm + layers * dim;
    const size_t w2 = w1 + layers * hidden * dim, w3 = w2 + layers * dim * hidden;
    const size_t final_norm = w3 + layers * hidden * dim;
    char path[512];
    size_t file_size, l;
    unsigned char *file = test_read_file(test_shared_path(path, sizeof path, "models/stories260K.bin"), &file_size);
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    const pmpd_model_info *info;
    (void)state;
    assert_non_null(file);
    assert_int_equal(test_stories_container(&c), PMPD_OK);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_OK);
    assert_int_equal(err.code, PMPD_OK);
    info = pmpd_model_get_info(model);
    assert_int_equal(info->dim, 64);
    assert_int_equal(info->hidden_dim, 172);
    assert_int_equal(info->n_layers, 5);
    assert_int_equal(info->n_heads, 8);
    assert_int_equal(info->n_kv_heads, 4);
    assert_int_equal(info->head_dim, 8);
    assert_int_equal(info->vocab_size, 512);
    assert_int_equal(info->seq_len, 512);
    assert_int_equal(info->shared_classifier, 1);
    assert_int_equal(info->bos_id, 1);
    assert_int_equal(info->eos_id, 2);
    assert_true(info->rope_theta == 10000.0f);
    assert_true(info->norm_eps == 1e-5f);
    /* 1 + 1 + 9 per layer; no output.weight since the classifier is shared. */
    assert_int_equal(model->n_tensors, 2 + 9 * layers);
    assert_ptr_equal(model->classifier, model->tok_embedding);
    assert_tensor_matches(model->tok_embedding, file, emb, vocab * dim);
    assert_tensor_matches(model->final_norm, file, final_norm, dim);
    for (l = 0; l < layers; l++) {
        const pmpd_layer_weights *w = &model->layers[l];
        assert_tensor_matches(w->attn_norm, file, att_norm + l * dim, dim);
        assert_tensor_matches(w->wq, file, wq + l * dim * dim, dim * dim);
        assert_tensor_matches(w->wk, file, wk + l * kv * dim, kv * dim);
        assert_tensor_matches(w->wv, file, wv + l * kv * dim, kv * dim);
        assert_tensor_matches(w->wo, file, wo + l * dim * dim, dim * dim);
        assert_tensor_matches(w->ffn_norm, file, ffn_norm + l * dim, dim);
        assert_tensor_matches(w->w_gate, file, w1 + l * hidden * dim, hidden * dim);
        assert_tensor_matches(w->w_down, file, w2 + l * dim * hidden, dim * hidden);
        assert_tensor_matches(w->w_up, file, w3 + l * hidden * dim, hidden * dim);
        assert_int_equal(w->wk->dims[0], kv);
        assert_int_equal(w->wk->dims[1], dim);
        assert_int_equal(w->w_down->dims[0], dim);
        assert_int_equal(w->w_down->dims[1], hidden);
    }
    assert_int_equal(model->tokenizer.n_tokens, 512);
    assert_non_null(pmpd_model_find_section(model, PMPD_SECTION_TOKENIZER));
    assert_ptr_equal(pmpd_model_find_tensor(model, "blk.3.ffn_up.weight"), model->layers[3].w_up);
    assert_null(pmpd_model_find_tensor(model, "output.weight"));
    pmpd_model_close(model);
    test_container_free(&c);
    free(file);
}

static void assert_builds_equal(const pmpd_build_model *a, const pmpd_build_model *b)
{
    uint32_t i;
    assert_memory_equal(&a->info, &b->info, sizeof a->info);
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (i = 0; i < a->n_tensors; i++) {
        const pmpd_build_tensor *t = pmpd_build_find(b, a->tensors[i].name);
        assert_non_null(t);
        assert_int_equal(t->type, a->tensors[i].type);
        assert_memory_equal(t->dims, a->tensors[i].dims, sizeof t->dims);
        assert_int_equal(t->size, a->tensors[i].size);
        assert_memory_equal(t->data, a->tensors[i].data, (size_t)t->size);
    }
}

static void test_version1_equals_legacy(void **state)
{
    pmpd_build_model legacy, v1;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &legacy), PMPD_OK);
    assert_int_equal(test_import_shared("models/stories260K_v1.bin", NULL, &v1), PMPD_OK);
    assert_builds_equal(&legacy, &v1);
    pmpd_build_free(&legacy);
    pmpd_build_free(&v1);
}

static void test_open_file_matches_memory(void **state)
{
    char model_path[512], tok_path[512];
    const char *out = "build/test_container_stories.pmpd";
    pmpd_convert_options options;
    pmpd_convert_summary summary;
    pmpd_error err;
    pmpd_arena arena;
    pmpd_model *model;
    test_container c;
    FILE *f;
    (void)state;
    memset(&options, 0, sizeof options);
    options.tokenizer_path = test_shared_path(tok_path, sizeof tok_path, "models/tok512.bin");
    assert_int_equal(pmpd_convert_file(test_shared_path(model_path, sizeof model_path, "models/stories260K.bin"), out,
                                       &options, &summary, &err),
                     PMPD_OK);
    assert_int_equal(summary.n_tensors, 47);
    assert_int_equal(summary.parameters, 264128 - 4096); /* every float of the file but the RoPE tables */
    assert_int_equal(test_stories_container(&c), PMPD_OK);
    assert_int_equal(summary.bytes, c.size);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_file(out, &arena, &model, &err), PMPD_OK);
    assert_int_equal(model->byte_count, c.size);
    assert_memory_equal(model->bytes, c.data, c.size);
    pmpd_model_close(model);
    remove(out);
    f = fopen("build/test_container_stories.pmpd.tmp", "rb");
    assert_null(f);
    test_container_free(&c);
}

static void test_f16_matrices(void **state)
{
    pmpd_build_model b;
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    const pmpd_tensor *wq, *norm;
    const pmpd_build_tensor *ref;
    size_t i;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &b), PMPD_OK);
    assert_int_equal(pmpd_build_convert_matrices(&b, PMPD_TENSOR_F16), PMPD_OK);
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    pmpd_build_free(&b);
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &b), PMPD_OK);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, NULL), PMPD_OK);
    wq = model->layers[0].wq;
    norm = model->layers[0].attn_norm;
    assert_int_equal(wq->type, PMPD_TENSOR_F16);
    assert_int_equal(wq->size, 64 * 64 * 2);
    assert_int_equal(norm->type, PMPD_TENSOR_F32);
    ref = pmpd_build_find(&b, "blk.0.attn_q.weight");
    for (i = 0; i < 64 * 64; i++) {
        /* Decode the half by its definition and compare within half an ulp. */
        const unsigned char *h = (const unsigned char *)wq->data + 2 * i;
        unsigned bits = h[0] | (h[1] << 8);
        int e = (int)((bits >> 10) & 31);
        double mant = (double)(bits & 1023), v, x, ulp;
        float fx;
        memcpy(&fx, ref->data + 4 * i, 4);
        x = fx;
        assert_true(e != 31);
        v = e == 0 ? mant / 16777216.0 : (1.0 + mant / 1024.0) * (double)(1 << e) / 32768.0;
        if (bits & 0x8000)
            v = -v;
        ulp = e == 0 ? 1.0 / 16777216.0 : (double)(1 << e) / 32768.0 / 1024.0;
        assert_true((v - x) * (v - x) <= 0.25 * ulp * ulp * 1.0000001);
    }
    pmpd_build_free(&b);
    test_container_free(&c);
}

static void test_sections_unknown_optional_and_required(void **state)
{
    static const unsigned char blob[5] = {1, 2, 3, 4, 5};
    pmpd_build_model b;
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    (void)state;
    assert_int_equal(test_import_shared("models/stories260K.bin", NULL, &b), PMPD_OK);
    assert_int_equal(pmpd_build_add_section(&b, 77, 3, 0, blob, sizeof blob), PMPD_OK);
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_OK);
    assert_int_equal(model->tokenizer.n_tokens, 0);
    test_container_free(&c);
    b.sections[0].flags = PMPD_SECTION_FLAG_REQUIRED;
    assert_int_equal(test_serialize(&b, &c), PMPD_OK);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err),
                     PMPD_ERR_FORMAT_REQUIRED_SECTION);
    assert_int_equal(err.code, PMPD_ERR_FORMAT_REQUIRED_SECTION);
    assert_true(err.offset >= 128 && err.offset < 128 + 47 * 136 + 32);
    assert_non_null(strstr(err.message, "77"));
    test_container_free(&c);
    pmpd_build_free(&b);
}

static void test_arena_too_small_leaves_arena_unchanged(void **state)
{
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    size_t capacity, needed, skew;
    (void)state;
    assert_int_equal(test_stories_container(&c), PMPD_OK);
    /* The high-water mark of one open is exactly what an open needs. */
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_OK);
    /* Sizes below count from the arena's aligned start. */
    skew = (64 - (uintptr_t)arena_memory % 64) % 64;
    needed = arena.high_water;
    pmpd_arena_init(&arena, arena_memory, skew + needed);
    assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_OK);
    for (capacity = 0; capacity < needed; capacity += 8) {
        pmpd_arena_init(&arena, arena_memory, skew + capacity);
        assert_int_equal(pmpd_model_open_memory(c.data, c.size, &arena, &model, &err), PMPD_ERR_OUT_OF_MEMORY);
        assert_int_equal(err.code, PMPD_ERR_OUT_OF_MEMORY);
        assert_int_equal(arena.used, 0);
        assert_null(model);
    }
    test_container_free(&c);
}

static void test_unaligned_memory_refused(void **state)
{
    test_container c;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    unsigned char *raw, *copy;
    (void)state;
    assert_int_equal(test_stories_container(&c), PMPD_OK);
    raw = (unsigned char *)malloc(c.size + 128);
    assert_non_null(raw);
    copy = raw + (64 - (uintptr_t)raw % 64) % 64 + 8;
    memcpy(copy, c.data, c.size);
    pmpd_arena_init(&arena, arena_memory, sizeof arena_memory);
    assert_int_equal(pmpd_model_open_memory(copy, c.size, &arena, &model, &err), PMPD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "aligned"));
    free(raw);
    test_container_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_check_value),
        cmocka_unit_test(test_crc32_matches_definition),
        cmocka_unit_test(test_stories_round_trip),
        cmocka_unit_test(test_version1_equals_legacy),
        cmocka_unit_test(test_open_file_matches_memory),
        cmocka_unit_test(test_f16_matrices),
        cmocka_unit_test(test_sections_unknown_optional_and_required),
        cmocka_unit_test(test_arena_too_small_leaves_arena_unchanged),
        cmocka_unit_test(test_unaligned_memory_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
