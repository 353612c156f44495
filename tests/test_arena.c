/* Arena: alignment, exhaustion, marks, overflow, measuring mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"

static unsigned char raw_buffer[8192 + 2 * PMPD_ARENA_ALIGNMENT];

/* Aligned start, so capacities in the tests are exact. */
static unsigned char *aligned_buffer(void)
{
    return raw_buffer + (PMPD_ARENA_ALIGNMENT - (uintptr_t)raw_buffer % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
}

static void test_allocations_are_aligned_and_disjoint(void **state)
{
    static const size_t sizes[] = {0, 1, 2, 3, 7, 8, 31, 63, 64, 65, 100, 257};
    static const size_t aligns[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    size_t si, ai, offset;
    (void)state;
    for (offset = 0; offset < 8; offset++) {
        for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (ai = 0; ai < sizeof aligns / sizeof aligns[0]; ai++) {
                pmpd_arena arena;
                void *a = NULL, *b = NULL;
                size_t align = aligns[ai], want = align < PMPD_ARENA_ALIGNMENT ? PMPD_ARENA_ALIGNMENT : align;
                assert_int_equal(pmpd_arena_init(&arena, aligned_buffer() + offset, 4096), PMPD_OK);
                assert_int_equal(pmpd_arena_alloc(&arena, sizes[si], align, &a), PMPD_OK);
                assert_int_equal(pmpd_arena_alloc(&arena, sizes[si], align, &b), PMPD_OK);
                assert_non_null(a);
                assert_non_null(b);
                assert_int_equal((uintptr_t)a % want, 0);
                assert_int_equal((uintptr_t)b % want, 0);
                assert_true((unsigned char *)b >= (unsigned char *)a + sizes[si]);
                assert_true((unsigned char *)b + sizes[si] <= aligned_buffer() + offset + 4096);
                memset(a, 0xAB, sizes[si]);
                memset(b, 0xCD, sizes[si]);
                if (sizes[si])
                    assert_int_equal(((unsigned char *)a)[sizes[si] - 1], 0xAB);
            }
        }
    }
}

static void test_exhaustion_at_every_size_leaves_arena_usable(void **state)
{
    const size_t need = 1000;
    size_t capacity;
    (void)state;
    for (capacity = 0; capacity < need + 64; capacity++) {
        pmpd_arena arena;
        void *p = (void *)1;
        pmpd_status st;
        assert_int_equal(pmpd_arena_init(&arena, aligned_buffer(), capacity), PMPD_OK);
        st = pmpd_arena_alloc(&arena, need, 8, &p);
        if (capacity < need) {
            assert_int_equal(st, PMPD_ERR_OUT_OF_MEMORY);
            assert_null(p);
            assert_int_equal(arena.used, 0);
            /* Still usable for what fits. */
            if (capacity >= 1) {
                assert_int_equal(pmpd_arena_alloc(&arena, capacity, 1, &p), PMPD_OK);
                assert_non_null(p);
            }
        } else {
            assert_int_equal(st, PMPD_OK);
            assert_int_equal(arena.used, need);
        }
    }
}

static void test_marks_restore_exactly(void **state)
{
    pmpd_arena arena;
    pmpd_arena_mark outer, inner;
    void *first, *again, *scratch;
    (void)state;
    assert_int_equal(pmpd_arena_init(&arena, aligned_buffer(), 4096), PMPD_OK);
    assert_int_equal(pmpd_arena_alloc(&arena, 10, 1, &first), PMPD_OK);
    outer = pmpd_arena_save(&arena);
    assert_int_equal(pmpd_arena_alloc(&arena, 100, 1, &scratch), PMPD_OK);
    inner = pmpd_arena_save(&arena);
    assert_int_equal(pmpd_arena_alloc(&arena, 1000, 1, &scratch), PMPD_OK);
    pmpd_arena_restore(&arena, inner);
    assert_int_equal(arena.used, inner.used);
    pmpd_arena_restore(&arena, outer);
    assert_int_equal(arena.used, outer.used);
    assert_int_equal(arena.high_water, 64 + 128 + 1000);
    assert_int_equal(pmpd_arena_alloc(&arena, 100, 1, &again), PMPD_OK);
    assert_ptr_equal(again, (unsigned char *)first + 64);
    /* A mark above the current level (from a later state) is ignored. */
    pmpd_arena_restore(&arena, inner);
    pmpd_arena_restore(&arena, outer);
    inner.used = arena.used + 64;
    pmpd_arena_restore(&arena, inner);
    assert_int_equal(arena.used, outer.used);
}

static void test_overflowing_requests_are_refused(void **state)
{
    pmpd_arena arena;
    void *p = (void *)1;
    (void)state;
    assert_int_equal(pmpd_arena_init(&arena, aligned_buffer(), 4096), PMPD_OK);
    assert_int_equal(pmpd_arena_alloc(&arena, 1, 1, &p), PMPD_OK);
    assert_int_equal(pmpd_arena_alloc(&arena, SIZE_MAX, 1, &p), PMPD_ERR_OVERFLOW);
    assert_null(p);
    assert_int_equal(pmpd_arena_alloc(&arena, SIZE_MAX - 32, 64, &p), PMPD_ERR_OVERFLOW);
    assert_int_equal(pmpd_arena_alloc_array(&arena, SIZE_MAX / 2 + 1, 2, 8, &p), PMPD_ERR_OVERFLOW);
    assert_int_equal(pmpd_arena_alloc_array(&arena, (size_t)1 << (sizeof(size_t) * 4),
                                            (size_t)1 << (sizeof(size_t) * 4), 8, &p),
                     PMPD_ERR_OVERFLOW);
    assert_int_equal(pmpd_arena_alloc(&arena, 4096, 1, &p), PMPD_ERR_OUT_OF_MEMORY);
    assert_int_equal(arena.used, 1);
}

static void test_bad_arguments(void **state)
{
    pmpd_arena arena;
    void *p;
    (void)state;
    assert_int_equal(pmpd_arena_init(NULL, aligned_buffer(), 10), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_arena_init(&arena, aligned_buffer(), 4096), PMPD_OK);
    assert_int_equal(pmpd_arena_alloc(&arena, 8, 3, &p), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_arena_alloc(&arena, 8, 0, &p), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_arena_alloc(&arena, 8, 8, NULL), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_arena_alloc(NULL, 8, 8, &p), PMPD_ERR_INVALID_ARGUMENT);
}

static void test_measuring_arena_counts_what_a_real_one_uses(void **state)
{
    static const size_t sizes[] = {3, 64, 100, 1, 640, 17};
    pmpd_arena measure, real;
    size_t i;
    void *p;
    (void)state;
    assert_int_equal(pmpd_arena_init(&measure, NULL, SIZE_MAX), PMPD_OK);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(pmpd_arena_alloc(&measure, sizes[i], 16, &p), PMPD_OK);
        assert_null(p);
    }
    assert_int_equal(pmpd_arena_init(&real, aligned_buffer(), measure.used), PMPD_OK);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        assert_int_equal(pmpd_arena_alloc(&real, sizes[i], 16, &p), PMPD_OK);
    assert_int_equal(real.used, measure.used);
    assert_int_equal(pmpd_arena_remaining(&real), 0);
}

static void test_strerror_names_every_status(void **state)
{
    int code;
    (void)state;
    assert_string_equal(pmpd_strerror(PMPD_OK), "ok");
    assert_string_equal(pmpd_strerror((pmpd_status)12345), "unknown status");
    for (code = -60; code <= 0; code++) {
        const char *s = pmpd_strerror((pmpd_status)code);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
    }
    assert_string_not_equal(pmpd_strerror(PMPD_ERR_FORMAT_MAGIC), pmpd_strerror(PMPD_ERR_FORMAT_VERSION));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocations_are_aligned_and_disjoint),
        cmocka_unit_test(test_exhaustion_at_every_size_leaves_arena_usable),
        cmocka_unit_test(test_marks_restore_exactly),
        cmocka_unit_test(test_overflowing_requests_are_refused),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_measuring_arena_counts_what_a_real_one_uses),
        cmocka_unit_test(test_strerror_names_every_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
