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

/* The most threads pmpd_parallel_for runs. */
#define PMPD_PARALLEL_MAX_THREADS 64

/* Calls work(context, begin, end) for consecutive ranges of at most step
 * items covering [0, n), on min(threads, PMPD_PARALLEL_MAX_THREADS)
 * threads, 0 meaning one per core; the calling thread is one of them and
 * the only one where no worker can start.  work must be safe to call from
 * several threads at once on distinct ranges.  Returns when every range is
 * done. */
PMPD_INTERNAL void pmpd_parallel_for(unsigned threads, uint64_t n, uint64_t step,
                                     void (*work)(void *context, uint64_t begin, uint64_t end), void *context);

#endif /* PMPD_OFFLINE */

#endif
