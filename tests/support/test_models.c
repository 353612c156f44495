#include "tests/support/test_models.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/import/import.h"
#include "pmpd_impl/offline/quant/build.h"
#include "pmpd_impl/offline/weights/encoders.h"
#include "tests/support/test_support.h"

pmpd_status test_import_shared(const char *model, const char *tokenizer, pmpd_build_model *b)
{
    char path[512];
    unsigned char *data;
    size_t size;
    pmpd_status status;
    pmpd_vocab vocab;
    pmpd_build_init(b);
    data = test_read_file(test_shared_path(path, sizeof path, model), &size);
    if (!data)
        return PMPD_ERR_NOT_FOUND;
    status = size >= 4 && memcmp(data, "GGUF", 4) == 0 ? pmpd_import_gguf(data, size, b, NULL)
                                                       : pmpd_import_llama2c(data, size, b, NULL);
    free(data);
    if (status != PMPD_OK || !tokenizer)
        return status;
    data = test_read_file(test_shared_path(path, sizeof path, tokenizer), &size);
    if (!data)
        return PMPD_ERR_NOT_FOUND;
    status = pmpd_import_llama2c_tokenizer(data, size, b->info.vocab_size, &vocab, NULL);
    free(data);
    if (status != PMPD_OK)
        return status;
    status = pmpd_build_add_vocab(b, &vocab);
    pmpd_vocab_free(&vocab);
    return status;
}

pmpd_status test_serialize(const pmpd_build_model *b, test_container *c)
{
    return pmpd_build_serialize(b, &c->block, &c->data, &c->size);
}

pmpd_status test_stories_container(test_container *c)
{
    pmpd_build_model b;
    pmpd_status status = test_import_shared("models/stories260K.bin", "models/tok512.bin", &b);
    memset(c, 0, sizeof *c);
    if (status == PMPD_OK)
        status = test_serialize(&b, c);
    pmpd_build_free(&b);
    return status;
}

void test_container_free(test_container *c)
{
    free(c->block);
    memset(c, 0, sizeof *c);
}

#define TEST_OPENED_ARENA_BYTES ((size_t)1 << 20)

pmpd_status test_open_built(pmpd_build_model *b, const pmpd_convert_options *options, test_opened_model *m)
{
    pmpd_arena arena;
    pmpd_status status = PMPD_OK;
    memset(m, 0, sizeof *m);
    if (options && options->type != PMPD_TENSOR_F32) {
        /* The converter's row for the type, as pmpd-convert runs it. */
        const pmpd_weight_encoder *encoder = pmpd_weight_encoder_of((uint32_t)options->type);
        status = encoder ? encoder->convert(b, options) : PMPD_ERR_INVALID_ARGUMENT;
    }
    if (status == PMPD_OK)
        status = test_serialize(b, &m->container);
    pmpd_build_free(b);
    if (status != PMPD_OK)
        return status;
    m->arena_block = malloc(TEST_OPENED_ARENA_BYTES);
    if (!m->arena_block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, m->arena_block, TEST_OPENED_ARENA_BYTES);
    return pmpd_model_open_memory(m->container.data, m->container.size, &arena, &m->model, NULL);
}

pmpd_status test_open_shared(const char *model, const char *tokenizer, uint32_t type, test_opened_model *m)
{
    pmpd_build_model b;
    pmpd_convert_options options;
    pmpd_status status = test_import_shared(model, tokenizer, &b);
    memset(m, 0, sizeof *m);
    if (status != PMPD_OK)
        return status;
    memset(&options, 0, sizeof options);
    options.type = (pmpd_tensor_type)type;
    return test_open_built(&b, &options, m);
}

float *test_forced_logits(const pmpd_model *model, const int32_t *ids, size_t n)
{
    size_t vocab = pmpd_model_get_info(model)->vocab_size, i;
    float *out = (float *)malloc(n * vocab * sizeof(float));
    pmpd_session_config config;
    const float *logits;
    void *block;
    pmpd_session *s;
    pmpd_session_config_init(&config);
    s = test_session_open(model, &config, &block);
    assert_non_null(out);
    assert_non_null(s);
    assert_int_equal(pmpd_session_prefill(s, ids, 1, &logits), PMPD_OK);
    memcpy(out, logits, vocab * sizeof(float));
    for (i = 1; i < n; i++) {
        assert_int_equal(pmpd_session_decode(s, ids[i], &logits), PMPD_OK);
        memcpy(out + i * vocab, logits, vocab * sizeof(float));
    }
    test_session_close(s, block);
    return out;
}

void test_opened_close(test_opened_model *m)
{
    pmpd_model_close(m->model);
    free(m->arena_block);
    test_container_free(&m->container);
    m->model = NULL;
    m->arena_block = NULL;
}

void *test_aligned(void *block)
{
    uintptr_t a = (uintptr_t)block;
    return (unsigned char *)block + (PMPD_ARENA_ALIGNMENT - a % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
}

pmpd_session *test_session_open(const pmpd_model *model, const pmpd_session_config *config, void **block)
{
    size_t bytes = 0;
    pmpd_arena arena;
    pmpd_session *s = NULL;
    assert_int_equal(pmpd_session_plan(model, config, &bytes), PMPD_OK);
    *block = malloc(bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(*block);
    assert_int_equal(pmpd_arena_init(&arena, test_aligned(*block), bytes), PMPD_OK);
    assert_int_equal(pmpd_session_create(model, config, &arena, &s), PMPD_OK);
    return s;
}

void test_session_close(pmpd_session *s, void *block)
{
    pmpd_session_destroy(s);
    free(block);
}

pmpd_status test_convert_stories(uint32_t type, const char *path)
{
    char in[512], tok[512];
    pmpd_convert_options options;
    memset(&options, 0, sizeof options);
    options.type = (pmpd_tensor_type)type;
    options.tokenizer_path = test_shared_path(tok, sizeof tok, "models/tok512.bin");
    return pmpd_convert_file(test_shared_path(in, sizeof in, "models/stories260K.bin"), path, &options, NULL, NULL);
}

pmpd_status test_open_file(const char *path, test_opened_file *o)
{
    const size_t bytes = (size_t)16 << 20;
    pmpd_arena arena;
    o->model = NULL;
    o->block = malloc(bytes);
    if (!o->block)
        return PMPD_ERR_OUT_OF_MEMORY;
    pmpd_arena_init(&arena, o->block, bytes);
    return pmpd_model_open_file(path, &arena, &o->model, NULL);
}

void test_file_close(test_opened_file *o)
{
    pmpd_model_close(o->model);
    free(o->block);
}
