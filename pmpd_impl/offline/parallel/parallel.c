#include "pmpd_impl/offline/parallel/parallel.h"

#if PMPD_OFFLINE

#include "platform/platform.h"

typedef struct parallel_job {
    pmpd_mutex lock;
    uint64_t next, n, step;
    void (*work)(void *context, uint64_t begin, uint64_t end);
    void *context;
} parallel_job;

static void parallel_steps(void *arg)
{
    parallel_job *job = (parallel_job *)arg;
    for (;;) {
        uint64_t begin, end;
        pmpd_mutex_lock(&job->lock);
        begin = job->next;
        end = job->n - begin < job->step ? job->n : begin + job->step;
        job->next = end;
        pmpd_mutex_unlock(&job->lock);
        if (begin == end)
            return;
        job->work(job->context, begin, end);
    }
}

PMPD_INTERNAL void pmpd_parallel_for(unsigned threads, uint64_t n, uint64_t step,
                                     void (*work)(void *context, uint64_t begin, uint64_t end), void *context)
{
    pmpd_thread workers[PMPD_PARALLEL_MAX_THREADS];
    parallel_job job;
    unsigned count = threads, started, i;
    if (count == 0) {
        int cpus = pmpd_platform_cpu_count();
        count = cpus < 1 ? 1 : (unsigned)cpus;
    }
    count = count > PMPD_PARALLEL_MAX_THREADS ? PMPD_PARALLEL_MAX_THREADS : count;
    step = step ? step : 1;
    if (count == 1 || n <= step || pmpd_mutex_init(&job.lock) != PMPD_OK) {
        /* One thread (or no lock to share): the ranges in order, here. */
        uint64_t begin;
        for (begin = 0; begin < n; begin += n - begin < step ? n - begin : step)
            work(context, begin, n - begin < step ? n : begin + step);
        return;
    }
    job.next = 0;
    job.n = n;
    job.step = step;
    job.work = work;
    job.context = context;
    for (started = 1; started < count; started++)
        if (pmpd_thread_start(&workers[started], parallel_steps, &job) != PMPD_OK)
            break; /* fewer threads: the same work */
    parallel_steps(&job);
    for (i = 1; i < started; i++)
        pmpd_thread_join(&workers[i]);
    pmpd_mutex_destroy(&job.lock);
}

#endif /* PMPD_OFFLINE */
