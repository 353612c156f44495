/* End to end against llama2.c's run.c, through the real pipeline: the
 * checkpoint (or the GGUF file) converted by the offline importer, the
 * container opened from memory, the prompt encoded by the model's
 * tokenizer, and greedy decoding through the session API.  The oracle is
 * ../shared/vectors (see its README). */
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

#include "pmpd.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define MAX_IDS 600

typedef struct opened_model {
    void *block;         /* malloc'ed: container bytes, then the model's arena */
    pmpd_model *model;
} opened_model;

static int32_t bos_ids[MAX_IDS], once_ids[MAX_IDS];
static size_t n_bos_ids, n_once_ids;

/* Converts models/<name> (+ tokenizer) to a temporary container, loads it
 * into an aligned heap block and opens it from memory.  Returns 0 when this
 * build's converter does not support the input kind. */
static int open_converted(const char *name, const char *tokenizer, opened_model *out)
{
    char relative[256], in[512], tok[512], out_path[512];
    pmpd_convert_options options;
    pmpd_error err;
    pmpd_arena arena;
    unsigned char *bytes, *aligned;
    size_t size, arena_bytes = (size_t)4 << 20;
    pmpd_status st;
    snprintf(relative, sizeof relative, "models/%s", name);
    test_shared_path(in, sizeof in, relative);
    snprintf(out_path, sizeof out_path, "/tmp/pmpd-test-vectors-%ld-%s.pmpd", (long)getpid(), name);
    memset(&options, 0, sizeof options);
    options.type = PMPD_TENSOR_F32;
    if (tokenizer) {
        snprintf(relative, sizeof relative, "models/%s", tokenizer);
        options.tokenizer_path = test_shared_path(tok, sizeof tok, relative);
    }
    st = pmpd_convert_file(in, out_path, &options, NULL, &err);
    if (st == PMPD_ERR_UNSUPPORTED) {
        printf("skipped: %s: %s\n", name, err.message);
        return 0;
    }
    if (st != PMPD_OK)
        fail_msg("converting %s: %s", name, err.message);
    bytes = test_read_file(out_path, &size);
    remove(out_path);
    assert_non_null(bytes);
    out->block = malloc(size + arena_bytes + PMPD_ARENA_ALIGNMENT);
    assert_non_null(out->block);
    aligned = (unsigned char *)out->block +
              (PMPD_ARENA_ALIGNMENT - (uintptr_t)out->block % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
    memcpy(aligned, bytes, size);
    free(bytes);
    size = (size + PMPD_ARENA_ALIGNMENT - 1) / PMPD_ARENA_ALIGNMENT * PMPD_ARENA_ALIGNMENT;
    pmpd_arena_init(&arena, aligned + size, arena_bytes);
    st = pmpd_model_open_memory(aligned, size, &arena, &out->model, &err);
    if (st != PMPD_OK)
        fail_msg("opening the converted %s: %s", name, err.message);
    return 1;
}

static void close_converted(opened_model *m)
{
    pmpd_model_close(m->model);
    free(m->block);
}

/* Prefills ids[0..n_prompt), then greedy decoding must reproduce the rest. */
static void check_greedy(const pmpd_model *model, const int32_t *ids, size_t n_ids, size_t n_prompt)
{
    pmpd_sampler_config config = {0.0f, 0, 0.0f};
    pmpd_sampler sampler;
    pmpd_arena arena;
    unsigned char sampler_memory[512 * 8 + 2 * PMPD_ARENA_ALIGNMENT];
    const float *logits = NULL;
    void *block;
    pmpd_session *s = test_session_open(model, NULL, &block);
    size_t i;
    pmpd_arena_init(&arena, sampler_memory, sizeof sampler_memory);
    assert_int_equal(pmpd_sampler_init(&sampler, &config, pmpd_model_get_info(model)->vocab_size, &arena),
                     PMPD_OK);
    assert_int_equal(pmpd_session_prefill(s, ids, n_prompt, &logits), PMPD_OK);
    for (i = n_prompt; i < n_ids; i++) {
        int32_t next = -1;
        assert_int_equal(pmpd_sampler_sample(&sampler, logits, NULL, &next), PMPD_OK);
        if (next != ids[i])
            fail_msg("position %zu: pmpd %d, llama2.c %d", i, (int)next, (int)ids[i]);
        if (i + 1 < n_ids)
            assert_int_equal(pmpd_session_decode(s, next, &logits), PMPD_OK);
    }
    pmpd_session_destroy(s);
    free(block);
}

static int setup(void **state)
{
    (void)state;
    n_bos_ids = test_read_vector_ids("stories260K_bos_greedy.ids", bos_ids, MAX_IDS);
    n_once_ids = test_read_vector_ids("stories260K_once_greedy.ids", once_ids, MAX_IDS);
    return n_bos_ids == 257 && n_once_ids == 161 ? 0 : -1;
}

static void test_checkpoint_greedy_from_bos(void **state)
{
    opened_model m;
    (void)state;
    assert_true(open_converted("stories260K.bin", "tok512.bin", &m));
    check_greedy(m.model, bos_ids, n_bos_ids, 1);
    close_converted(&m);
}

static void test_checkpoint_once_upon_a_time(void **state)
{
    opened_model m;
    int32_t prompt[64];
    size_t n_prompt = 0;
    pmpd_arena scratch;
    unsigned char scratch_memory[4096];
    (void)state;
    assert_true(open_converted("stories260K.bin", "tok512.bin", &m));
    pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
    assert_int_equal(pmpd_tokenize(m.model, "Once upon a time", 1, 0, prompt, 64, &n_prompt, &scratch),
                     PMPD_OK);
    assert_true(n_prompt >= 2 && n_prompt < n_once_ids);
    assert_memory_equal(prompt, once_ids, n_prompt * sizeof(int32_t));
    check_greedy(m.model, once_ids, n_once_ids, n_prompt);
    close_converted(&m);
}

static void test_checkpoint_first_16_logits(void **state)
{
    char path[512];
    opened_model m;
    size_t size = 0, pos;
    float *expect = (float *)test_read_file(test_shared_path(path, sizeof path, "vectors/stories260K_bos_logits16.f32"), &size);
    float worst = 0.0f;
    void *block;
    pmpd_session *s;
    (void)state;
    assert_non_null(expect);
    assert_int_equal(size, 16 * 512 * sizeof(float));
    assert_true(open_converted("stories260K.bin", "tok512.bin", &m));
    s = test_session_open(m.model, NULL, &block);
    for (pos = 0; pos < 16; pos++) {
        const float *logits = NULL;
        size_t i;
        assert_int_equal(pmpd_session_decode(s, bos_ids[pos], &logits), PMPD_OK);
        for (i = 0; i < 512; i++) {
            float d = fabsf(logits[i] - expect[pos * 512 + i]);
            if (!(d <= worst))
                worst = d;
        }
    }
    printf("converted stories260K, logits at positions 0..15: max |pmpd - llama2.c| = %.3g\n", (double)worst);
    assert_true(worst <= 1e-4f);
    pmpd_session_destroy(s);
    free(block);
    close_converted(&m);
    free(expect);
}

static void test_gguf_greedy_from_bos(void **state)
{
    opened_model m;
    (void)state;
    if (!open_converted("stories260K.gguf", NULL, &m))
        skip();
    check_greedy(m.model, bos_ids, n_bos_ids, 1);
    close_converted(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_greedy_from_bos),
        cmocka_unit_test(test_checkpoint_once_upon_a_time),
        cmocka_unit_test(test_checkpoint_first_16_logits),
        cmocka_unit_test(test_gguf_greedy_from_bos),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
