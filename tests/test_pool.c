/* Worker pool: every item computed exactly once, ranges in whole granules,
 * many jobs in a row on the same workers, small jobs kept on the calling
 * thread, exact arena figure, bad counts.  Under emulation
 * (PMPD_TEST_REDUCED) 5 jobs in a row instead of 50, and the arena figure
 * for 1-8, 16 and the largest thread count only: emulated threads above
 * the host's cores spin slowly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd.h"
#include "pmpd_impl/exec/pool.h"
#include "tests/support/test_support.h"

#define N_ITEMS 1000

typedef struct pool_test_job {
    unsigned hits[N_ITEMS];
    unsigned owner[N_ITEMS];
    unsigned long sum[PMPD_MAX_THREADS];
    size_t count[PMPD_MAX_THREADS];
} pool_test_job;

static void pool_test_task(void *ctx, size_t begin, size_t end, unsigned worker)
{
    pool_test_job *job = (pool_test_job *)ctx;
    size_t i;
    for (i = begin; i < end; i++) {
        job->hits[i]++;
        job->owner[i] = worker;
        job->sum[worker] += (unsigned long)i;
        job->count[worker]++;
    }
}

static unsigned char pool_raw[(1 << 16) + PMPD_ARENA_ALIGNMENT];

/* Aligned, so the planned figures are exact. */
static unsigned char *pool_buffer_start(void)
{
    return pool_raw + (PMPD_ARENA_ALIGNMENT - (uintptr_t)pool_raw % PMPD_ARENA_ALIGNMENT) % PMPD_ARENA_ALIGNMENT;
}
#define pool_buffer pool_buffer_start()

static void check_job(unsigned n_threads, size_t n_items, size_t granule)
{
    static pool_test_job job;
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    unsigned long total = 0;
    unsigned t, used_workers = 0, round;
    size_t i;
    assert_int_equal(pmpd_arena_init(&arena, pool_buffer, (size_t)1 << 16), PMPD_OK);
    assert_int_equal(pmpd_pool_create(&arena, n_threads, 0, &pool), PMPD_OK);
    assert_int_equal(pmpd_pool_threads(pool), n_threads);
    for (round = 0; round < (test_reduced() ? 5u : 50u); round++) {
        memset(&job, 0, sizeof job);
        pmpd_pool_run(pool, pool_test_task, &job, n_items, granule);
        for (i = 0; i < n_items; i++) {
            assert_int_equal(job.hits[i], 1);
            /* A thread's range starts on a granule boundary. */
            if (i % (granule ? granule : 1) != 0)
                assert_int_equal(job.owner[i], job.owner[i - 1]);
        }
        for (; i < N_ITEMS; i++)
            assert_int_equal(job.hits[i], 0);
    }
    for (t = 0; t < PMPD_MAX_THREADS; t++) {
        total += job.sum[t];
        used_workers += job.count[t] != 0;
    }
    assert_true(total == (unsigned long)n_items * (n_items - 1) / 2);
    if (n_items > 0 && n_threads > 1 && n_items / (granule ? granule : 1) >= n_threads)
        assert_int_equal(used_workers, n_threads);
    pmpd_pool_destroy(pool);
}

static void test_every_item_once_for_every_thread_count(void **state)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 64, 999, 1000};
    static const size_t granules[] = {0, 1, 4, 8, 33};
    unsigned n;
    size_t c, g;
    (void)state;
    for (n = 1; n <= (PMPD_MAX_THREADS < 4 ? PMPD_MAX_THREADS : 4); n++)
        for (c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (g = 0; g < sizeof granules / sizeof granules[0]; g++)
                check_job(n, counts[c], granules[g]);
}

/* Workers that computed at least one item of a weighed job. */
static unsigned weighed_workers(pmpd_pool *pool, size_t item_work)
{
    static pool_test_job job;
    unsigned t, used = 0;
    size_t i;
    memset(&job, 0, sizeof job);
    pmpd_pool_run_weighed(pool, pool_test_task, &job, N_ITEMS, 4, item_work);
    for (i = 0; i < N_ITEMS; i++)
        assert_int_equal(job.hits[i], 1);
    for (t = 0; t < PMPD_MAX_THREADS; t++)
        used += job.count[t] != 0;
    return used;
}

static void test_small_jobs_stay_on_the_caller(void **state)
{
    const size_t threshold_item = PMPD_POOL_MIN_PARALLEL_WORK / N_ITEMS;
    unsigned n = PMPD_MAX_THREADS < 3 ? PMPD_MAX_THREADS : 3;
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    (void)state;
    assert_int_equal(pmpd_arena_init(&arena, pool_buffer, (size_t)1 << 16), PMPD_OK);
    assert_int_equal(pmpd_pool_create(&arena, n, 0, &pool), PMPD_OK);
    assert_int_equal(weighed_workers(pool, 0), 1);
    assert_int_equal(weighed_workers(pool, 1), 1);
    assert_int_equal(weighed_workers(pool, threshold_item - 1), 1);
    assert_int_equal(weighed_workers(pool, threshold_item + 1), n);
    /* n_items * item_work would overflow: still one big job. */
    assert_int_equal(weighed_workers(pool, SIZE_MAX), n);
    pmpd_pool_destroy(pool);
}

static void test_plan_is_exact(void **state)
{
    unsigned n;
    (void)state;
    for (n = 1; n <= PMPD_MAX_THREADS; n++) {
        pmpd_arena arena;
        if (test_reduced() && n > 8 && n != 16 && n != PMPD_MAX_THREADS)
            continue;
        pmpd_pool *pool = NULL;
        size_t bytes = 0;
        assert_int_equal(pmpd_pool_plan(n, &bytes), PMPD_OK);
        assert_int_equal(pmpd_arena_init(&arena, pool_buffer, bytes - 1), PMPD_OK);
        assert_int_equal(pmpd_pool_create(&arena, n, 0, &pool), PMPD_ERR_OUT_OF_MEMORY);
        assert_null(pool);
        assert_int_equal(arena.used, 0);
        assert_int_equal(pmpd_arena_init(&arena, pool_buffer, bytes), PMPD_OK);
        assert_int_equal(pmpd_pool_create(&arena, n, 0, &pool), PMPD_OK);
        assert_int_equal(arena.used, bytes);
        pmpd_pool_destroy(pool);
    }
}

static void test_bad_thread_counts(void **state)
{
    pmpd_arena arena;
    pmpd_pool *pool = NULL;
    size_t bytes;
    (void)state;
    assert_int_equal(pmpd_arena_init(&arena, pool_buffer, (size_t)1 << 16), PMPD_OK);
    assert_int_equal(pmpd_pool_create(&arena, 0, 0, &pool), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pool_create(&arena, PMPD_MAX_THREADS + 1, 0, &pool), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(pmpd_pool_plan(0, &bytes), PMPD_ERR_INVALID_ARGUMENT);
    assert_int_equal(arena.used, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_once_for_every_thread_count),
        cmocka_unit_test(test_small_jobs_stay_on_the_caller),
        cmocka_unit_test(test_plan_is_exact),
        cmocka_unit_test(test_bad_thread_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
