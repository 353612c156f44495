/* Offline work spread over threads: items [0, n) handed out a step at a
 * time under a lock to the calling thread and up to threads - 1 workers,
 * so a thread slowed by other work takes fewer steps.  For encoders whose
 * output for an item does not depend on which thread computes it (the
 * output is then the same for any thread count). */
#ifndef PMPD_OFFLINE_PARALLEL_PARALLEL_H
#define PMPD_OFFLINE_PARALLEL_PARALLEL_H

#include <stdint.h>

#include "pmpd.h"
#include "pmpd_impl/core/config.h"

#if PMPD_OFFLINE

/* The most threads pmpd_parallel_run runs. */
#define PMPD_PARALLEL_MAX_THREADS 64

typedef struct pmpd_parallel_work {
    /* Items [begin, end) on thread worker: 0 is the calling thread, the
     * others are below pmpd_parallel_threads(), so per-thread scratch can
     * be indexed by it.  Must be safe to call from several threads at once
     * on distinct ranges.  A status other than PMPD_OK stops the handing
     * out of further ranges. */
    pmpd_status (*run)(void *context, unsigned worker, uint64_t begin, uint64_t end);
    /* NULL, or called on the calling thread after each of its ranges with
     * the items all threads have finished so far. */
    void (*progress)(void *context, uint64_t done);
    void *context;
} pmpd_parallel_work;

/* The threads pmpd_parallel_run(threads, n, step, ...) may use: threads (0
 * meaning one per core), at most PMPD_PARALLEL_MAX_THREADS and the number
 * of ranges, at least 1. */
PMPD_INTERNAL unsigned pmpd_parallel_threads(unsigned threads, uint64_t n, uint64_t step);

/* Runs work->run for consecutive ranges of at most step items covering
 * [0, n) on pmpd_parallel_threads(threads, n, step) threads, the calling
 * thread one of them (the only one where no worker can start).  Returns
 * when every range is done or, after a failure, when the ranges already
 * running are: the failure of the lowest range that failed (the same for
 * any thread count when failures depend only on the items), its first
 * item in *failed where failed is not NULL; else PMPD_OK.  When the lock
 * cannot be created no item runs: PMPD_ERR_THREAD, *failed = n. */
PMPD_INTERNAL pmpd_status pmpd_parallel_run(unsigned threads, uint64_t n, uint64_t step,
                                            const pmpd_parallel_work *work, uint64_t *failed);

#endif /* PMPD_OFFLINE */

#endif
