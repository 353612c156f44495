#include "pmpd_impl/exec/pool.h"

#include "platform/platform.h"

typedef struct pmpd_pool_worker {
    pmpd_pool *pool;
    unsigned index;
    pmpd_thread thread;
} pmpd_pool_worker;

struct pmpd_pool {
    unsigned n_threads;
    unsigned n_started;
    pmpd_pool_worker *workers;
    pmpd_mutex mutex;
    pmpd_cond start;
    pmpd_cond done;
    /* Shared without the mutex (pmpd_atomic_*): workers notice a new job by
     * the generation changing and report their share done through pending;
     * a thread about to block says so (sleepers, caller_waiting) so the
     * other side knows to signal under the mutex. */
    unsigned long generation;
    unsigned long pending;
    unsigned long sleepers;
    unsigned long caller_waiting;
    unsigned long stop;
    /* The job, written before the generation changes. */
    pmpd_pool_task task;
    void *ctx;
    size_t n_items;
    size_t granule;
    /* Granules [0, static_groups) are split into one contiguous range per
     * thread; the rest, the tail, goes in chunks of chunk_groups to
     * whichever thread asks next (next_chunk, atomic). */
    size_t static_groups, chunk_groups, n_chunks;
    unsigned long next_chunk;
    pmpd_trace *trace;
};

/* bytes rounded up to PMPD_ARENA_ALIGNMENT (small, fixed sizes: no overflow). */
static size_t pmpd_pool_round(size_t bytes)
{
    return (bytes + PMPD_ARENA_ALIGNMENT - 1) / PMPD_ARENA_ALIGNMENT * PMPD_ARENA_ALIGNMENT;
}

static pmpd_status pmpd_pool_allocate(pmpd_arena *arena, unsigned n_threads, pmpd_pool **pool,
                                      pmpd_pool_worker **workers)
{
    pmpd_status st;
    void *p;
    size_t worker_bytes;
    if (n_threads == 0 || n_threads > PMPD_MAX_THREADS)
        return PMPD_ERR_INVALID_ARGUMENT;
    /* Both blocks are whole multiples of PMPD_ARENA_ALIGNMENT, so the pool
     * leaves the fill level aligned and its planned size adds up with
     * others. */
    st = pmpd_arena_alloc(arena, pmpd_pool_round(sizeof(pmpd_pool)), PMPD_ARENA_ALIGNMENT, &p);
    if (st != PMPD_OK)
        return st;
    *pool = (pmpd_pool *)p;
    *workers = NULL;
    if (n_threads == 1)
        return PMPD_OK;
    worker_bytes = pmpd_pool_round((n_threads - 1) * sizeof(pmpd_pool_worker));
    st = pmpd_arena_alloc(arena, worker_bytes, PMPD_ARENA_ALIGNMENT, &p);
    *workers = (pmpd_pool_worker *)p;
    return st;
}

PMPD_INTERNAL pmpd_status pmpd_pool_plan(unsigned n_threads, size_t *bytes)
{
    pmpd_arena measure;
    pmpd_pool *pool;
    pmpd_pool_worker *workers;
    pmpd_status st;
    if (!bytes)
        return PMPD_ERR_INVALID_ARGUMENT;
    pmpd_arena_init(&measure, NULL, SIZE_MAX);
    st = pmpd_pool_allocate(&measure, n_threads, &pool, &workers);
    *bytes = measure.high_water;
    return st;
}

/* Granules [first, first + count) as items, the last clamped to n_items
 * (first * granule cannot exceed n_items + granule - 1). */
static void pmpd_pool_items(const pmpd_pool *pool, size_t first, size_t count, size_t *begin, size_t *end)
{
    size_t b = first * pool->granule, e = (first + count) * pool->granule;
    *begin = b < pool->n_items ? b : pool->n_items;
    *end = e < pool->n_items ? e : pool->n_items;
}

/* The static range of thread t: whole granules, spread as evenly as
 * possible (the first static_groups % n threads get one more). */
static void pmpd_pool_range(const pmpd_pool *pool, unsigned t, size_t *begin, size_t *end)
{
    size_t base = pool->static_groups / pool->n_threads, extra = pool->static_groups % pool->n_threads;
    pmpd_pool_items(pool, base * t + (t < extra ? t : extra), base + (t < extra), begin, end);
}

/* Jobs of at least this many granules per thread keep a quarter of them
 * as a shared tail: a thread that finishes its own range early (another
 * was descheduled, or its memory was slower) takes chunks of the tail
 * instead of waiting.  Measured with pmpd-run --trace on a 16-core Xeon
 * VM: threads waited for the slowest one 17% (8 threads) and 22% (16) of
 * every shared job.  Every thread still gets a static range, so every
 * thread takes part in a job big enough to split. */
#define PMPD_POOL_TAIL_MIN_GROUPS 8u
#define PMPD_POOL_TAIL_CHUNKS 2u /* tail chunks per thread */

static void pmpd_pool_plan_job(pmpd_pool *pool)
{
    size_t n_groups = pool->n_items / pool->granule + (pool->n_items % pool->granule != 0);
    size_t tail = n_groups >= (size_t)PMPD_POOL_TAIL_MIN_GROUPS * pool->n_threads ? n_groups / 4 : 0;
    pool->static_groups = n_groups - tail;
    pool->chunk_groups = tail / ((size_t)PMPD_POOL_TAIL_CHUNKS * pool->n_threads);
    if (pool->chunk_groups == 0)
        pool->chunk_groups = 1;
    pool->n_chunks = (tail + pool->chunk_groups - 1) / pool->chunk_groups;
    pmpd_atomic_store(&pool->next_chunk, 0);
}

/* task over [begin, end) on thread t, timed when the pool keeps a trace. */
static void pmpd_pool_call(const pmpd_pool *pool, pmpd_pool_task task, void *ctx, size_t begin, size_t end,
                           unsigned t)
{
    uint64_t start;
    if (!pool->trace) {
        task(ctx, begin, end, t);
        return;
    }
    start = pmpd_platform_now_ns();
    task(ctx, begin, end, t);
    pmpd_trace_record(pool->trace, t, start, pmpd_platform_now_ns());
}

static void pmpd_pool_do_share(pmpd_pool *pool, unsigned t)
{
    size_t begin, end, tail_groups = 0;
    unsigned long chunk;
    pmpd_pool_range(pool, t, &begin, &end);
    if (begin < end)
        pmpd_pool_call(pool, pool->task, pool->ctx, begin, end, t);
    if (pool->n_chunks)
        tail_groups = (pool->n_items / pool->granule + (pool->n_items % pool->granule != 0)) - pool->static_groups;
    while (pool->n_chunks && (chunk = pmpd_atomic_add(&pool->next_chunk, 1) - 1) < pool->n_chunks) {
        size_t first = (size_t)chunk * pool->chunk_groups, count = pool->chunk_groups;
        if (first + count > tail_groups)
            count = tail_groups - first;
        pmpd_pool_items(pool, pool->static_groups + first, count, &begin, &end);
        if (begin < end)
            pmpd_pool_call(pool, pool->task, pool->ctx, begin, end, t);
    }
}

/* Before blocking on a condition variable, a thread spins on the word it
 * waits for for about this long: products come back to back (a decode step
 * runs dozens), and waking a blocked thread costs 10-50 us, ~200 us for a
 * halted vCPU of a VM.  3 ms outlasts the caller's work between two decode
 * steps (sampling over the vocabulary): with 0.5 ms, traces on a 16-vCPU
 * Xeon showed parts of products starting ~210 us late, and alternating
 * builds there gave 3 ms +9% (16 threads) and +13% (8 threads) decode.
 * The spin reads an atomic word, not the mutex, so 15 spinning workers do
 * not queue on a lock the posting thread needs (with a mutex per poll,
 * 16-thread decode on a 16-core Xeon fell to 8 tokens/s from 60 at 8
 * threads). */
#ifndef PMPD_POOL_SPIN_NS
#define PMPD_POOL_SPIN_NS 3000000u
#endif

/* Spins until (*word == value) equals until_equal or the pool stops;
 * returns 1 if that happened, 0 when the time budget ran out. */
static int pmpd_pool_spin(pmpd_pool *pool, const unsigned long *word, unsigned long value, int until_equal)
{
    uint64_t deadline = 0;
    unsigned polls;
    for (polls = 0;; polls++) {
        if ((pmpd_atomic_load(word) == value) == until_equal || pmpd_atomic_load(&pool->stop))
            return 1;
        /* The clock is read every 64 polls only. */
        if (polls % 64 == 0) {
            uint64_t now = pmpd_platform_now_ns();
            if (!deadline)
                deadline = now + PMPD_POOL_SPIN_NS;
            else if (now > deadline)
                return 0;
        }
        pmpd_cpu_relax();
    }
}

static void pmpd_pool_worker_main(void *arg)
{
    pmpd_pool_worker *worker = (pmpd_pool_worker *)arg;
    pmpd_pool *pool = worker->pool;
    unsigned long seen = 0;
    for (;;) {
        if (!pmpd_pool_spin(pool, &pool->generation, seen, 0)) {
            /* Say so before the last look: the poster, having bumped the
             * generation, reads sleepers and signals under the mutex. */
            pmpd_mutex_lock(&pool->mutex);
            pmpd_atomic_store(&pool->sleepers, pmpd_atomic_load(&pool->sleepers) + 1);
            while (pmpd_atomic_load(&pool->generation) == seen && !pmpd_atomic_load(&pool->stop))
                pmpd_cond_wait(&pool->start, &pool->mutex);
            pmpd_atomic_sub(&pool->sleepers, 1);
            pmpd_mutex_unlock(&pool->mutex);
        }
        if (pmpd_atomic_load(&pool->stop))
            return;
        /* The caller posts the next job only after every share of this one
         * is done, so the generation has moved exactly once. */
        seen = pmpd_atomic_load(&pool->generation);
        pmpd_pool_do_share(pool, worker->index);
        if (pmpd_atomic_sub(&pool->pending, 1) == 0 && pmpd_atomic_load(&pool->caller_waiting)) {
            pmpd_mutex_lock(&pool->mutex);
            pmpd_cond_broadcast(&pool->done);
            pmpd_mutex_unlock(&pool->mutex);
        }
    }
}

static void pmpd_pool_stop_workers(pmpd_pool *pool)
{
    unsigned i;
    pmpd_mutex_lock(&pool->mutex);
    pmpd_atomic_store(&pool->stop, 1);
    pmpd_cond_broadcast(&pool->start);
    pmpd_mutex_unlock(&pool->mutex);
    for (i = 0; i < pool->n_started; i++)
        pmpd_thread_join(&pool->workers[i].thread);
    pool->n_started = 0;
}

static pmpd_status pmpd_pool_init_sync(pmpd_pool *pool)
{
    if (pmpd_mutex_init(&pool->mutex) != PMPD_OK)
        return PMPD_ERR_THREAD;
    if (pmpd_cond_init(&pool->start) != PMPD_OK) {
        pmpd_mutex_destroy(&pool->mutex);
        return PMPD_ERR_THREAD;
    }
    if (pmpd_cond_init(&pool->done) != PMPD_OK) {
        pmpd_cond_destroy(&pool->start);
        pmpd_mutex_destroy(&pool->mutex);
        return PMPD_ERR_THREAD;
    }
    return PMPD_OK;
}

static void pmpd_pool_destroy_sync(pmpd_pool *pool)
{
    pmpd_cond_destroy(&pool->done);
    pmpd_cond_destroy(&pool->start);
    pmpd_mutex_destroy(&pool->mutex);
}

PMPD_INTERNAL pmpd_status pmpd_pool_create(pmpd_arena *arena, unsigned n_threads, size_t stack_bytes,
                                           pmpd_pool **out)
{
    pmpd_arena_mark mark;
    pmpd_pool *pool;
    pmpd_pool_worker *workers;
    pmpd_status st;
    unsigned i;
    if (!arena || !out)
        return PMPD_ERR_INVALID_ARGUMENT;
    *out = NULL;
    mark = pmpd_arena_save(arena);
    st = pmpd_pool_allocate(arena, n_threads, &pool, &workers);
    if (st != PMPD_OK) {
        pmpd_arena_restore(arena, mark);
        return st;
    }
    pool->n_threads = n_threads;
    pool->n_started = 0;
    pool->workers = workers;
    pool->generation = 0;
    pool->pending = 0;
    pool->sleepers = 0;
    pool->caller_waiting = 0;
    pool->stop = 0;
    pool->task = NULL;
    pool->ctx = NULL;
    pool->n_items = 0;
    pool->granule = 1;
    pool->static_groups = pool->chunk_groups = pool->n_chunks = 0;
    pool->next_chunk = 0;
    pool->trace = NULL;
    if (n_threads > 1) {
        if (pmpd_pool_init_sync(pool) != PMPD_OK) {
            pmpd_arena_restore(arena, mark);
            return PMPD_ERR_THREAD;
        }
        for (i = 0; i + 1 < n_threads; i++) {
            workers[i].pool = pool;
            workers[i].index = i + 1;
            if (pmpd_thread_start(&workers[i].thread, pmpd_pool_worker_main, &workers[i], stack_bytes) != PMPD_OK) {
                pmpd_pool_stop_workers(pool);
                pmpd_pool_destroy_sync(pool);
                pmpd_arena_restore(arena, mark);
                return PMPD_ERR_THREAD;
            }
            pool->n_started++;
        }
    }
    *out = pool;
    return PMPD_OK;
}

PMPD_INTERNAL void pmpd_pool_run(pmpd_pool *pool, pmpd_pool_task task, void *ctx,
                                 size_t n_items, size_t granule)
{
    if (n_items == 0)
        return;
    if (granule == 0)
        granule = 1;
    if (pool->n_threads == 1 || n_items <= granule) {
        pmpd_pool_call(pool, task, ctx, 0, n_items, 0);
        return;
    }
    pool->task = task;
    pool->ctx = ctx;
    pool->n_items = n_items;
    pool->granule = granule;
    pmpd_pool_plan_job(pool);
    pmpd_atomic_store(&pool->pending, pool->n_threads - 1);
    /* Publishes the job (sequentially consistent), then wakes whoever sleeps. */
    pmpd_atomic_store(&pool->generation, pmpd_atomic_load(&pool->generation) + 1);
    if (pmpd_atomic_load(&pool->sleepers) > 0) {
        pmpd_mutex_lock(&pool->mutex);
        pmpd_cond_broadcast(&pool->start);
        pmpd_mutex_unlock(&pool->mutex);
    }

    pmpd_pool_do_share(pool, 0);

    if (!pmpd_pool_spin(pool, &pool->pending, 0, 1)) {
        pmpd_mutex_lock(&pool->mutex);
        pmpd_atomic_store(&pool->caller_waiting, 1);
        while (pmpd_atomic_load(&pool->pending) > 0)
            pmpd_cond_wait(&pool->done, &pool->mutex);
        pmpd_atomic_store(&pool->caller_waiting, 0);
        pmpd_mutex_unlock(&pool->mutex);
    }
}

PMPD_INTERNAL void pmpd_pool_run_weighed(pmpd_pool *pool, pmpd_pool_task task, void *ctx, size_t n_items,
                                         size_t granule, size_t item_work)
{
    /* Compared by division, so a huge job cannot overflow into a small one. */
    if (n_items == 0 || item_work == 0 || n_items < PMPD_POOL_MIN_PARALLEL_WORK / item_work) {
        if (n_items > 0)
            pmpd_pool_call(pool, task, ctx, 0, n_items, 0);
        return;
    }
    pmpd_pool_run(pool, task, ctx, n_items, granule);
}

PMPD_INTERNAL unsigned pmpd_pool_threads(const pmpd_pool *pool)
{
    return pool->n_threads;
}

PMPD_INTERNAL void pmpd_pool_set_trace(pmpd_pool *pool, pmpd_trace *trace)
{
    pool->trace = trace;
}

PMPD_INTERNAL pmpd_trace *pmpd_pool_get_trace(const pmpd_pool *pool)
{
    return pool ? pool->trace : NULL;
}

PMPD_INTERNAL void pmpd_pool_destroy(pmpd_pool *pool)
{
    if (!pool || pool->n_threads == 1)
        return;
    pmpd_pool_stop_workers(pool);
    pmpd_pool_destroy_sync(pool);
    pool->n_threads = 1;
}

#undef PMPD_POOL_SPIN_NS
#undef PMPD_POOL_TAIL_MIN_GROUPS
#undef PMPD_POOL_TAIL_CHUNKS
