/* pmpd_model_open_file's read-into-the-arena path.  The Makefile links this
 * test with a POSIX port built with PMPD_USE_MMAP=0, so every open here
 * reads the file.  The model read that way reproduces llama2.c (the prompt's
 * tokens, logits and the greedy continuation in ../shared/vectors), the arena
 * accounting is the one pmpd.h states (the file rounded up to 64 bytes plus
 * what opening the same bytes from memory takes), and short arenas, bad and
 * truncated files are refused with the arena restored. */
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
#include "pmpd_impl/model/model.h"
#include "tests/support/test_models.h"
#include "tests/support/test_support.h"

#define MAX_IDS 600

typedef struct fixture {
    test_container container; /* stories260K + tok512 */
    char path[256];           /* the container written to a file */
    char truncated_path[256]; /* the same, one byte short */
    char empty_path[256];     /* an empty file */
    size_t memory_used;       /* what pmpd_model_open_memory keeps of the arena */
    size_t memory_peak;       /* and its high-water mark */
} fixture;

static size_t round_up_64(size_t n)
{
    return (n + 63) / 64 * 64;
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    void *block;
    pmpd_arena arena;
    pmpd_model *model;
    if (!f || test_stories_container(&f->container) != PMPD_OK)
        return -1;
    snprintf(f->path, sizeof f->path, "/tmp/pmpd-test-read-fallback-%ld.pmpd", (long)getpid());
    snprintf(f->truncated_path, sizeof f->truncated_path, "/tmp/pmpd-test-read-fallback-%ld-short.pmpd",
             (long)getpid());
    write_file(f->path, f->container.data, f->container.size);
    write_file(f->truncated_path, f->container.data, f->container.size - 1);
    snprintf(f->empty_path, sizeof f->empty_path, "/tmp/pmpd-test-read-fallback-%ld-empty.pmpd", (long)getpid());
    write_file(f->empty_path, "", 0);
    block = malloc((1u << 20) + PMPD_ARENA_ALIGNMENT);
    pmpd_arena_init(&arena, test_aligned(block), 1u << 20);
    if (pmpd_model_open_memory(f->container.data, f->container.size, &arena, &model, NULL) != PMPD_OK)
        return -1;
    f->memory_used = arena.used;
    f->memory_peak = arena.high_water;
    free(block);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = (fixture *)*state;
    remove(f->path);
    remove(f->truncated_path);
    remove(f->empty_path);
    test_container_free(&f->container);
    free(f);
    return 0;
}

/* The documented need: the file rounded up to 64 bytes, then the tables. */
static size_t documented_arena_bytes(const fixture *f)
{
    return round_up_64(f->container.size) + f->memory_peak;
}

static void test_reads_into_exactly_the_documented_arena(void **state)
{
    fixture *f = (fixture *)*state;
    size_t need = documented_arena_bytes(f);
    void *block = malloc(need + PMPD_ARENA_ALIGNMENT);
    unsigned char *base = (unsigned char *)test_aligned(block);
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, base, need - 1);
    assert_int_equal(pmpd_model_open_file(f->path, &arena, &model, &err), PMPD_ERR_OUT_OF_MEMORY);
    assert_int_equal(err.code, PMPD_ERR_OUT_OF_MEMORY);
    assert_null(model);
    assert_int_equal(arena.used, 0);
    pmpd_arena_init(&arena, base, need);
    if (pmpd_model_open_file(f->path, &arena, &model, &err) != PMPD_OK)
        fail_msg("open: %s", err.message);
    /* Read, not mapped: the container's bytes are the arena's first bytes. */
    assert_int_equal(model->mapping.is_mapped, 0);
    assert_ptr_equal(model->bytes, base);
    assert_int_equal(model->byte_count, f->container.size);
    assert_memory_equal(model->bytes, f->container.data, f->container.size);
    assert_int_equal(arena.used, round_up_64(f->container.size) + f->memory_used);
    assert_int_equal(arena.high_water, need);
    pmpd_model_close(model);
    free(block);
}

/* llama2.c's prompt tokens, its logits at the first 16 positions and its
 * 256-token greedy run from BOS. */
static void test_read_model_reproduces_llama2c(void **state)
{
    fixture *f = (fixture *)*state;
    static int32_t bos_ids[MAX_IDS], once_ids[MAX_IDS];
    char path[512];
    size_t n_bos = test_read_vector_ids("stories260K_bos_greedy.ids", bos_ids, MAX_IDS);
    size_t n_once = test_read_vector_ids("stories260K_once_greedy.ids", once_ids, MAX_IDS);
    size_t need = documented_arena_bytes(f), n_prompt = 0, logits_size = 0, pos, i;
    float *expected_logits = (float *)test_read_file(
        test_shared_path(path, sizeof path, "vectors/stories260K_bos_logits16.f32"), &logits_size);
    void *block = malloc(need + PMPD_ARENA_ALIGNMENT), *session_block;
    unsigned char scratch_memory[4096];
    int32_t prompt[64];
    const float *logits = NULL;
    float worst = 0.0f;
    pmpd_arena arena, scratch;
    pmpd_model *model;
    pmpd_session *s;
    assert_true(n_bos == 257 && n_once > 8);
    assert_non_null(expected_logits);
    assert_int_equal(logits_size, 16 * 512 * sizeof(float));
    pmpd_arena_init(&arena, test_aligned(block), need);
    assert_int_equal(pmpd_model_open_file(f->path, &arena, &model, NULL), PMPD_OK);
    pmpd_arena_init(&scratch, scratch_memory, sizeof scratch_memory);
    assert_int_equal(pmpd_tokenize(model, "Once upon a time", 1, 0, prompt, 64, &n_prompt, &scratch), PMPD_OK);
    assert_true(n_prompt >= 2 && n_prompt < n_once);
    assert_memory_equal(prompt, once_ids, n_prompt * sizeof(int32_t));
    s = test_session_open(model, NULL, &session_block);
    for (pos = 0; pos + 1 < n_bos; pos++) {
        int32_t next;
        assert_int_equal(pmpd_session_decode(s, bos_ids[pos], &logits), PMPD_OK);
        for (i = 0; pos < 16 && i < 512; i++) {
            float d = fabsf(logits[i] - expected_logits[pos * 512 + i]);
            if (!(d <= worst))
                worst = d;
        }
        next = test_argmax(logits, 512);
        if (next != bos_ids[pos + 1])
            fail_msg("position %zu: pmpd %d, llama2.c %d", pos + 1, (int)next, (int)bos_ids[pos + 1]);
    }
    assert_true(worst <= 1e-4f);
    test_session_close(s, session_block);
    pmpd_model_close(model);
    free(expected_logits);
    free(block);
}

static void expect_refusal(const char *path, size_t arena_bytes, pmpd_status status, uint64_t offset,
                           const char *word)
{
    void *block = malloc(arena_bytes + PMPD_ARENA_ALIGNMENT);
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, test_aligned(block), arena_bytes);
    assert_int_equal(pmpd_model_open_file(path, &arena, &model, &err), status);
    assert_int_equal(err.code, status);
    assert_int_equal(err.offset, offset);
    if (!strstr(err.message, word))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, word);
    assert_null(model);
    assert_int_equal(arena.used, 0);
    free(block);
}

static void test_refusals_restore_the_arena(void **state)
{
    fixture *f = (fixture *)*state;
    size_t need = documented_arena_bytes(f);
    expect_refusal(f->truncated_path, need, PMPD_ERR_FORMAT_TRUNCATED, PMPD_HDR_FILE_SIZE, "file_size");
    expect_refusal(f->empty_path, need, PMPD_ERR_FORMAT_TRUNCATED, 0, "empty");
    /* Not even the file fits. */
    expect_refusal(f->path, f->container.size / 2, PMPD_ERR_OUT_OF_MEMORY, PMPD_NO_OFFSET, "arena too small to read");
    expect_refusal("/nonexistent/model.pmpd", need, PMPD_ERR_NOT_FOUND, PMPD_NO_OFFSET, "/nonexistent/model.pmpd");
    expect_refusal("/", need, PMPD_ERR_IO, PMPD_NO_OFFSET, "cannot read the size");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_into_exactly_the_documented_arena),
        cmocka_unit_test(test_read_model_reproduces_llama2c),
        cmocka_unit_test(test_refusals_restore_the_arena),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
