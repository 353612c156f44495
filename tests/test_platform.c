/* The POSIX port: file mapping and reading, clock, threads. */
/* pthread_getattr_np, to read a thread's stack size back (glibc, musl). */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#include <cmocka.h>

#include "platform/platform.h"
#include "tests/support/test_support.h"

static void test_map_and_read_agree(void **state)
{
    char path[512];
    pmpd_mapped_file file;
    uint64_t size = 0;
    unsigned char head[28];
    (void)state;
    test_shared_path(path, sizeof path, "models/stories260K.bin");
    assert_int_equal(pmpd_platform_file_size(path, &size), PMPD_OK);
    assert_true(size > sizeof head);
    assert_int_equal(pmpd_platform_map_file(path, &file), PMPD_OK);
    assert_true(file.size == size);
    assert_int_equal(pmpd_platform_read_file(path, head, sizeof head), PMPD_OK);
    assert_int_equal(pmpd_platform_sync_file(path), PMPD_OK);
    assert_memory_equal(head, file.data, sizeof head);
    pmpd_platform_unmap_file(&file);
    assert_null(file.data);
}

static void test_missing_file(void **state)
{
    pmpd_mapped_file file;
    uint64_t size;
    char buffer[4];
    (void)state;
    assert_int_equal(pmpd_platform_map_file("/nonexistent/pmpd-model", &file), PMPD_ERR_NOT_FOUND);
    assert_int_equal(pmpd_platform_file_size("/nonexistent/pmpd-model", &size), PMPD_ERR_NOT_FOUND);
    assert_int_equal(pmpd_platform_read_file("/nonexistent/pmpd-model", buffer, 4), PMPD_ERR_NOT_FOUND);
    assert_int_equal(pmpd_platform_sync_file("/nonexistent/pmpd-model"), PMPD_ERR_NOT_FOUND);
    /* A directory is not a model file. */
    assert_int_equal(pmpd_platform_map_file("/", &file), PMPD_ERR_IO);
}

static void test_read_past_end_is_an_error(void **state)
{
    char path[512];
    uint64_t size = 0;
    static unsigned char big[1 << 20];
    (void)state;
    test_shared_path(path, sizeof path, "models/tok512.bin");
    assert_int_equal(pmpd_platform_file_size(path, &size), PMPD_OK);
    assert_true(size + 1 < sizeof big);
    assert_int_equal(pmpd_platform_read_file(path, big, (size_t)size + 1), PMPD_ERR_IO);
}

static void test_clock_is_monotonic(void **state)
{
    uint64_t a, b;
    (void)state;
    a = pmpd_platform_now_ns();
    b = pmpd_platform_now_ns();
    assert_true(a > 0);
    assert_true(b >= a);
    assert_true(pmpd_platform_cpu_count() >= 1);
}

typedef struct counter_job {
    pmpd_mutex *mutex;
    pmpd_cond *cond;
    int *shared_counter;
    int *arrived;
    int go;
} counter_job;

static void count_to_thousand(void *raw)
{
    counter_job *job = (counter_job *)raw;
    int i;
    pmpd_mutex_lock(job->mutex);
    (*job->arrived)++;
    pmpd_cond_broadcast(job->cond);
    pmpd_mutex_unlock(job->mutex);
    for (i = 0; i < 1000; i++) {
        pmpd_mutex_lock(job->mutex);
        (*job->shared_counter)++;
        pmpd_mutex_unlock(job->mutex);
    }
}

static void test_threads_mutex_and_condition(void **state)
{
    enum { N = 4 };
    pmpd_thread threads[N];
    counter_job jobs[N];
    pmpd_mutex mutex;
    pmpd_cond cond;
    int counter = 0, arrived = 0, i;
    (void)state;
    assert_int_equal(pmpd_mutex_init(&mutex), PMPD_OK);
    assert_int_equal(pmpd_cond_init(&cond), PMPD_OK);
    for (i = 0; i < N; i++) {
        jobs[i].mutex = &mutex;
        jobs[i].cond = &cond;
        jobs[i].shared_counter = &counter;
        jobs[i].arrived = &arrived;
        assert_int_equal(pmpd_thread_start(&threads[i], count_to_thousand, &jobs[i], 0), PMPD_OK);
    }
    pmpd_mutex_lock(&mutex);
    while (arrived < N)
        pmpd_cond_wait(&cond, &mutex);
    pmpd_mutex_unlock(&mutex);
    for (i = 0; i < N; i++)
        pmpd_thread_join(&threads[i]);
    assert_int_equal(counter, N * 1000);
    pmpd_cond_destroy(&cond);
    pmpd_mutex_destroy(&mutex);
}

/* Reads the stack size of the thread it runs on, where the C library can
 * tell (0 elsewhere). */
static void read_stack_size(void *arg)
{
    size_t *size = (size_t *)arg;
    *size = 0;
#if defined(__GLIBC__)
    {
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstacksize(&attr, size) != 0)
                *size = 0;
            pthread_attr_destroy(&attr);
        }
    }
#endif
}

/* A thread gets the stack asked for, and a size below any system's
 * minimum is refused rather than replaced. */
static void test_thread_stack_size(void **state)
{
    pmpd_thread thread;
    size_t size = 1;
    (void)state;
    assert_int_equal(pmpd_thread_start(&thread, read_stack_size, &size, 256 * 1024), PMPD_OK);
    pmpd_thread_join(&thread);
#if defined(__GLIBC__)
    assert_int_equal(size, 256 * 1024);
#endif
    assert_int_equal(pmpd_thread_start(&thread, read_stack_size, &size, 1000), PMPD_ERR_THREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_and_read_agree),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_read_past_end_is_an_error),
        cmocka_unit_test(test_clock_is_monotonic),
        cmocka_unit_test(test_threads_mutex_and_condition),
        cmocka_unit_test(test_thread_stack_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
