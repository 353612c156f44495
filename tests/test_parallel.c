/* The offline threads helper (offline/parallel/parallel.h) against what a
 * serial loop over the items gives: every item run exactly once on a
 * worker index below pmpd_parallel_threads, progress on the calling thread
 * only and never backwards, and after failures the lowest failed range's
 * status and first item, whatever the thread count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pmpd_impl/offline/parallel/parallel.h"
#include "platform/platform.h"

#define PT_ITEMS 1000

typedef struct pt_job {
    pmpd_mutex lock;
    unsigned runs[PT_ITEMS];   /* under lock */
    unsigned bad_worker;       /* under lock: a worker index out of range */
    unsigned threads;          /* pmpd_parallel_threads' answer */
    uint64_t fail_from;        /* items at or past it fail (PT_ITEMS: none) */
    uint64_t last_progress;    /* calling thread only */
    int progress_backwards;
    uint64_t step;
} pt_job;

static pmpd_status pt_run(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    pt_job *job = (pt_job *)context;
    uint64_t i;
    pmpd_status status = PMPD_OK;
    pmpd_mutex_lock(&job->lock);
    if (worker >= job->threads || end - begin > job->step)
        job->bad_worker = 1;
    for (i = begin; i < end; i++) {
        job->runs[i]++;
        if (i >= job->fail_from && status == PMPD_OK)
            status = i % 2 ? PMPD_ERR_FORMAT_VALUE : PMPD_ERR_OUT_OF_MEMORY;
    }
    pmpd_mutex_unlock(&job->lock);
    /* Every range takes a while, so all threads hold ranges at once, and
     * failing ranges above the lowest finish late, after it: a helper
     * keeping the last failure instead of the lowest reports one of them. */
    if (job->fail_from < PT_ITEMS) {
        volatile unsigned spin = 0;
        const unsigned spins = begin > job->fail_from ? 3000000u : 20000u;
        while (spin < spins)
            spin++;
    }
    return status;
}

static void pt_progress(void *context, uint64_t done)
{
    pt_job *job = (pt_job *)context;
    if (done < job->last_progress || done > PT_ITEMS)
        job->progress_backwards = 1;
    job->last_progress = done;
}

static pmpd_status pt_go(pt_job *job, unsigned threads, uint64_t step, uint64_t fail_from, uint64_t *failed)
{
    const pmpd_parallel_work work = {pt_run, pt_progress, job};
    memset(job->runs, 0, sizeof job->runs);
    job->bad_worker = 0;
    job->threads = pmpd_parallel_threads(threads, PT_ITEMS, step);
    job->fail_from = fail_from;
    job->last_progress = 0;
    job->progress_backwards = 0;
    job->step = step;
    return pmpd_parallel_run(threads, PT_ITEMS, step, &work, failed);
}

static void test_every_item_once(void **state)
{
    static const unsigned threads[] = {1, 2, 3, 7, 0};
    static const uint64_t steps[] = {1, 7, 64, 999, 1000, 5000};
    pt_job job;
    size_t t, s, i;
    (void)state;
    assert_int_equal(pmpd_mutex_init(&job.lock), PMPD_OK);
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++)
        for (s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            assert_int_equal(pt_go(&job, threads[t], steps[s], PT_ITEMS, NULL), PMPD_OK);
            for (i = 0; i < PT_ITEMS; i++)
                assert_int_equal(job.runs[i], 1);
            assert_int_equal(job.bad_worker, 0);
            assert_int_equal(job.progress_backwards, 0);
            assert_true(job.threads >= 1 && job.threads <= PMPD_PARALLEL_MAX_THREADS);
            assert_true(job.threads <= (PT_ITEMS + steps[s] - 1) / steps[s]);
        }
    pmpd_mutex_destroy(&job.lock);
}

/* Items from 600 on fail: the status is the lowest failed range's (600 is
 * even: out of memory) and so is the item reported, with one thread or
 * seven; nothing is run twice. */
static void test_lowest_failure(void **state)
{
    static const unsigned threads[] = {1, 2, 7};
    pt_job job;
    size_t t, i;
    (void)state;
    assert_int_equal(pmpd_mutex_init(&job.lock), PMPD_OK);
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        uint64_t failed = 12345;
        assert_int_equal(pt_go(&job, threads[t], 10, 600, &failed), PMPD_ERR_OUT_OF_MEMORY);
        assert_int_equal(failed, 600);
        for (i = 0; i < PT_ITEMS; i++)
            assert_true(job.runs[i] <= 1);
        for (i = 0; i < 600; i++)
            assert_int_equal(job.runs[i], 1);
        /* One item per step, failing from 601 (odd): its own status. */
        assert_int_equal(pt_go(&job, threads[t], 1, 601, &failed), PMPD_ERR_FORMAT_VALUE);
        assert_int_equal(failed, 601);
    }
    pmpd_mutex_destroy(&job.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_once),
        cmocka_unit_test(test_lowest_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
