/* pmpd_model_open_file's huge-page read (platform/posix.c).  The Makefile
 * links this test with a POSIX port built with PMPD_HUGE_PAGES_MIN_BYTES=1,
 * so even stories260K's small file takes that path where the kernel has
 * transparent huge pages on.  What is checked, against the container bytes
 * and the process's own memory map (/proc/self/maps), not the port's code:
 * the model's bytes are the file's; with huge pages on they lie in private
 * anonymous memory that starts on a 2 MiB boundary and is read-only, with
 * them off (or no /proc) the file is mapped as before; either way the model
 * decodes llama2.c's greedy run, and bad files get the mapped path's errors. */
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

#define ARENA_BYTES ((size_t)1 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

typedef struct fixture {
    test_container container; /* stories260K + tok512 */
    char path[256];
    char truncated_path[256];
} fixture;

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
    if (!f || test_stories_container(&f->container) != PMPD_OK)
        return -1;
    snprintf(f->path, sizeof f->path, "/tmp/pmpd-test-huge-%ld.pmpd", (long)getpid());
    snprintf(f->truncated_path, sizeof f->truncated_path, "/tmp/pmpd-test-huge-%ld-short.pmpd", (long)getpid());
    write_file(f->path, f->container.data, f->container.size);
    write_file(f->truncated_path, f->container.data, f->container.size - 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = (fixture *)*state;
    remove(f->path);
    remove(f->truncated_path);
    test_container_free(&f->container);
    free(f);
    return 0;
}

/* 1 when the kernel's THP setting is "always" or "madvise", 0 when "never"
 * or absent. */
static int huge_pages_on(void)
{
    char setting[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    if (!fgets(setting, sizeof setting, f))
        setting[0] = '\0';
    fclose(f);
    return strstr(setting, "[always]") != NULL || strstr(setting, "[madvise]") != NULL;
}

/* The /proc/self/maps line of the mapping holding address: its permissions
 * and its pathname ("" for anonymous memory).  0 when there is no such file. */
static int mapping_of(const void *address, char *perms, char *pathname, size_t pathname_size)
{
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    uintptr_t a = (uintptr_t)address;
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char p[8], name[400] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %399[^\n]", &lo, &hi, p, name) < 3)
            continue;
        if (a >= lo && a < hi) {
            strcpy(perms, p);
            snprintf(pathname, pathname_size, "%s", name);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void test_large_file_lands_in_read_only_huge_page_memory(void **state)
{
    fixture *f = (fixture *)*state;
    void *block = malloc(ARENA_BYTES + PMPD_ARENA_ALIGNMENT);
    char perms[8] = "", pathname[400] = "";
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, test_aligned(block), ARENA_BYTES);
    if (pmpd_model_open_file(f->path, &arena, &model, &err) != PMPD_OK)
        fail_msg("open: %s", err.message);
    assert_int_equal(model->mapping.is_mapped, 1);
    assert_int_equal(model->byte_count, f->container.size);
    assert_memory_equal(model->bytes, f->container.data, f->container.size);
    if (mapping_of(model->bytes, perms, pathname, sizeof pathname)) {
        assert_string_equal(perms, "r--p");
        if (huge_pages_on()) {
            assert_int_equal((uintptr_t)model->bytes % HUGE_PAGE, 0);
            if (pathname[0] != '\0')
                fail_msg("expected anonymous memory, found a mapping of %s", pathname);
        } else if (!strstr(pathname, "pmpd-test-huge-")) {
            fail_msg("huge pages off: expected the file mapped, found \"%s\"", pathname);
        }
    }
    pmpd_model_close(model);
    /* Released: the address is no longer part of the process. */
    if (mapping_of(model->bytes, perms, pathname, sizeof pathname))
        fail_msg("model memory still mapped after pmpd_model_close (%s %s)", perms, pathname);
    free(block);
}

static void test_model_from_huge_pages_reproduces_llama2c(void **state)
{
    fixture *f = (fixture *)*state;
    static int32_t bos_ids[600];
    size_t n_bos = test_read_vector_ids("stories260K_bos_greedy.ids", bos_ids, 600), pos;
    void *block = malloc(ARENA_BYTES + PMPD_ARENA_ALIGNMENT), *session_block;
    const float *logits = NULL;
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_session *s;
    assert_int_equal(n_bos, 257);
    pmpd_arena_init(&arena, test_aligned(block), ARENA_BYTES);
    assert_int_equal(pmpd_model_open_file(f->path, &arena, &model, NULL), PMPD_OK);
    s = test_session_open(model, NULL, &session_block);
    for (pos = 0; pos + 1 < n_bos; pos++) {
        int32_t next;
        assert_int_equal(pmpd_session_decode(s, bos_ids[pos], &logits), PMPD_OK);
        next = test_argmax(logits, 512);
        if (next != bos_ids[pos + 1])
            fail_msg("position %zu: pmpd %d, llama2.c %d", pos + 1, (int)next, (int)bos_ids[pos + 1]);
    }
    test_session_close(s, session_block);
    pmpd_model_close(model);
    free(block);
}

static void test_bad_files_refused_as_when_mapped(void **state)
{
    fixture *f = (fixture *)*state;
    void *block = malloc(ARENA_BYTES + PMPD_ARENA_ALIGNMENT);
    pmpd_arena arena;
    pmpd_model *model;
    pmpd_error err;
    pmpd_arena_init(&arena, test_aligned(block), ARENA_BYTES);
    assert_int_equal(pmpd_model_open_file(f->truncated_path, &arena, &model, &err), PMPD_ERR_FORMAT_TRUNCATED);
    assert_int_equal(err.offset, PMPD_HDR_FILE_SIZE);
    assert_null(model);
    assert_int_equal(arena.used, 0);
    assert_int_equal(pmpd_model_open_file("/nonexistent/model.pmpd", &arena, &model, &err), PMPD_ERR_NOT_FOUND);
    assert_int_equal(pmpd_model_open_file("/", &arena, &model, &err), PMPD_ERR_IO);
    assert_int_equal(arena.used, 0);
    free(block);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_file_lands_in_read_only_huge_page_memory),
        cmocka_unit_test(test_model_from_huge_pages_reproduces_llama2c),
        cmocka_unit_test(test_bad_files_refused_as_when_mapped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
