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
    /* The job: workers notice a new one by the generation changing. */
    unsigned long generation;
    unsigned long pending;
    int stop;
    pmpd_pool_task task;
    void *ctx;
    size_t n_items;
    size_t granule;
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

/* The contiguous range of thread t: whole granules, spread as evenly as
 * possible (the first n_groups % n threads get one more). */
static void pmpd_pool_range(const pmpd_pool *pool, unsigned t, size_t *begin, size_t *end)
{
    size_t granule = pool->granule;
    size_t n_groups = pool->n_items / granule + (pool->n_items % granule != 0);
    size_t base = n_groups / pool->n_threads, extra = n_groups % pool->n_threads;
    size_t first = base * t + (t < extra ? t : extra);
    size_t count = base + (t < extra);
    size_t b = first * granule, e = (first + count) * granule;
    /* first * granule cannot exceed n_items + granule - 1; clamp the tail. */
    *begin = b < pool->n_items ? b : pool->n_items;
    *end = e < pool->n_items ? e : pool->n_items;
}

static void pmpd_pool_do_share(pmpd_pool *pool, unsigned t)
{
    size_t begin, end;
    pmpd_pool_range(pool, t, &begin, &end);
    if (begin < end)
        pool->task(pool->ctx, begin, end, t);
}

/* Before blocking on a condition variable, a thread polls the state it waits
 * for this many times (~0.1 us each, ~0.5 ms in all):
 * products come back to back (a decode step runs dozens), and waking a
 * blocked thread costs 10-50 us, so without polling every product paid a
 * worker wake-up at its start and a caller wake-up at its end.  Measured
 * (4096x4096 one-token GEMV, 2 threads): q4 20 -> 27 GB/s, q2cb 19 -> 25. */
#define PMPD_POOL_POLLS 4096

/* Called and returns with the mutex held: polls until (*value == v) equals
 * until_equal, the pool stops or the budget is spent (the caller then
 * blocks if need be).  Between polls the mutex stays free for a while, so
 * the thread that posts or finishes the job rarely finds it taken (a
 * blocked lock would cost the very wake-up polling avoids). */
static void pmpd_pool_poll(pmpd_pool *pool, const unsigned long *value, unsigned long v, int until_equal)
{
    unsigned polls;
    for (polls = 0; polls < PMPD_POOL_POLLS && (*value == v) != until_equal && !pool->stop; polls++) {
        volatile unsigned pause;
        pmpd_mutex_unlock(&pool->mutex);
        for (pause = 0; pause < 64; pause++)
            continue;
        pmpd_mutex_lock(&pool->mutex);
    }
}

static void pmpd_pool_worker_main(void *arg)
{
    pmpd_pool_worker *worker = (pmpd_pool_worker *)arg;
    pmpd_pool *pool = worker->pool;
    unsigned long seen = 0;
    for (;;) {
        pmpd_mutex_lock(&pool->mutex);
        pmpd_pool_poll(pool, &pool->generation, seen, 0);
        while (pool->generation == seen && !pool->stop)
            pmpd_cond_wait(&pool->start, &pool->mutex);
        if (pool->stop) {
            pmpd_mutex_unlock(&pool->mutex);
            return;
        }
        seen = pool->generation;
        pmpd_mutex_unlock(&pool->mutex);

        pmpd_pool_do_share(pool, worker->index);

        pmpd_mutex_lock(&pool->mutex);
        if (--pool->pending == 0)
            pmpd_cond_broadcast(&pool->done);
        pmpd_mutex_unlock(&pool->mutex);
    }
}

static void pmpd_pool_stop_workers(pmpd_pool *pool)
{
    unsigned i;
    pmpd_mutex_lock(&pool->mutex);
    pool->stop = 1;
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

PMPD_INTERNAL pmpd_status pmpd_pool_create(pmpd_arena *arena, unsigned n_threads, pmpd_pool **out)
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
    pool->stop = 0;
    pool->task = NULL;
    pool->ctx = NULL;
    pool->n_items = 0;
    pool->granule = 1;
    if (n_threads > 1) {
        if (pmpd_pool_init_sync(pool) != PMPD_OK) {
            pmpd_arena_restore(arena, mark);
            return PMPD_ERR_THREAD;
        }
        for (i = 0; i + 1 < n_threads; i++) {
            workers[i].pool = pool;
            workers[i].index = i + 1;
            if (pmpd_thread_start(&workers[i].thread, pmpd_pool_worker_main, &workers[i]) != PMPD_OK) {
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
        task(ctx, 0, n_items, 0);
        return;
    }
    pmpd_mutex_lock(&pool->mutex);
    pool->task = task;
    pool->ctx = ctx;
    pool->n_items = n_items;
    pool->granule = granule;
    pool->pending = pool->n_threads - 1;
    pool->generation++;
    pmpd_cond_broadcast(&pool->start);
    pmpd_mutex_unlock(&pool->mutex);

    pmpd_pool_do_share(pool, 0);

    pmpd_mutex_lock(&pool->mutex);
    pmpd_pool_poll(pool, &pool->pending, 0, 1);
    while (pool->pending > 0)
        pmpd_cond_wait(&pool->done, &pool->mutex);
    pmpd_mutex_unlock(&pool->mutex);
}

PMPD_INTERNAL void pmpd_pool_run_weighed(pmpd_pool *pool, pmpd_pool_task task, void *ctx, size_t n_items,
                                         size_t granule, size_t item_work)
{
    /* Compared by division, so a huge job cannot overflow into a small one. */
    if (n_items == 0 || item_work == 0 || n_items < PMPD_POOL_MIN_PARALLEL_WORK / item_work) {
        if (n_items > 0)
            task(ctx, 0, n_items, 0);
        return;
    }
    pmpd_pool_run(pool, task, ctx, n_items, granule);
}

PMPD_INTERNAL unsigned pmpd_pool_threads(const pmpd_pool *pool)
{
    return pool->n_threads;
}

PMPD_INTERNAL void pmpd_pool_destroy(pmpd_pool *pool)
{
    if (!pool || pool->n_threads == 1)
        return;
    pmpd_pool_stop_workers(pool);
    pmpd_pool_destroy_sync(pool);
    pool->n_threads = 1;
}

#undef PMPD_POOL_POLLS
