/*
 * A fixed pool of worker threads that splits one range of work items
 * (usually the output rows of a matrix product) over the calling thread and
 * its workers.  The workers are started once, when a session is created,
 * and wait between jobs; a job costs one broadcast and one wait, never a
 * thread start.  All storage comes from the arena.  With one thread, or on
 * a platform without threads, pmpd_pool_run calls the task inline.
 *
 * Results never depend on the thread count as long as each work item is
 * computed the same way whichever thread gets it: the pool only decides who
 * computes which contiguous ranges.
 */
#ifndef PMPD_EXEC_POOL_H
#define PMPD_EXEC_POOL_H

#include "pmpd.h"
#include "pmpd_impl/core/config.h"
#include "pmpd_impl/exec/trace.h"

typedef struct pmpd_pool pmpd_pool;

/* Computes work items [begin, end).  worker is 0 for the calling thread and
 * 1..n_threads-1 for the pool's workers, so a task can index per-thread
 * scratch. */
typedef void (*pmpd_pool_task)(void *ctx, size_t begin, size_t end, unsigned worker);

/* Arena bytes pmpd_pool_create takes for n_threads threads (exact when the
 * arena's fill level is a multiple of PMPD_ARENA_ALIGNMENT). */
PMPD_INTERNAL pmpd_status pmpd_pool_plan(unsigned n_threads, size_t *bytes);

/* Allocates the pool in the arena and starts n_threads - 1 workers, each
 * on a stack of stack_bytes (0: the system's default).
 * Errors: PMPD_ERR_INVALID_ARGUMENT (n_threads 0 or above PMPD_MAX_THREADS),
 * PMPD_ERR_OUT_OF_MEMORY, PMPD_ERR_THREAD (a stack size the system
 * refuses included; the workers already started are stopped again). */
PMPD_INTERNAL pmpd_status pmpd_pool_create(pmpd_arena *arena, unsigned n_threads, size_t stack_bytes,
                                           pmpd_pool **out);

/* Runs task over [0, n_items) and returns when every item is done.  The
 * task is called with contiguous ranges whose bounds are multiples of
 * granule (except the end of the last one), so kernels that process rows
 * in interleaved groups get whole groups: each thread one range of about
 * n_items / n_threads items, and, for jobs of at least 8 granules per
 * thread, a quarter of the items in smaller ranges to whichever thread is
 * free first.  granule 0 is treated as 1.  Not reentrant: one job at a
 * time per pool. */
PMPD_INTERNAL void pmpd_pool_run(pmpd_pool *pool, pmpd_pool_task task, void *ctx,
                                 size_t n_items, size_t granule);

/* The same for a job whose items cost about item_work multiply-adds each:
 * below PMPD_POOL_MIN_PARALLEL_WORK in all, the calling thread does the
 * whole job, because waking the workers would cost more than they save
 * (a tiny model's layers are all such jobs). */
PMPD_INTERNAL void pmpd_pool_run_weighed(pmpd_pool *pool, pmpd_pool_task task, void *ctx, size_t n_items,
                                         size_t granule, size_t item_work);

PMPD_INTERNAL unsigned pmpd_pool_threads(const pmpd_pool *pool);

/* Every share of every job from now on is timed and recorded in trace
 * (NULL: none), under the label its poster gave it (pmpd_trace_label on
 * pmpd_pool_get_trace: a no-op without a trace). */
PMPD_INTERNAL void pmpd_pool_set_trace(pmpd_pool *pool, pmpd_trace *trace);
PMPD_INTERNAL pmpd_trace *pmpd_pool_get_trace(const pmpd_pool *pool);

/* Stops and joins the workers.  The arena storage stays with the caller. */
PMPD_INTERNAL void pmpd_pool_destroy(pmpd_pool *pool);

#endif
