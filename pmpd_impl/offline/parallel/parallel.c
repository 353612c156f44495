#include "pmpd_impl/offline/parallel/parallel.h"

#if PMPD_OFFLINE

#include "platform/platform.h"

typedef struct parallel_job {
    const pmpd_parallel_work *work;
    uint64_t n, step;
    pmpd_mutex lock;
    uint64_t next;       /* under lock: the first item no thread has taken */
    uint64_t done;       /* under lock */
    uint64_t failed;     /* under lock: the first item of the lowest failed range */
    pmpd_status status;  /* under lock: that range's status */
} parallel_job;

typedef struct parallel_worker {
    parallel_job *job;
    unsigned index;
    pmpd_thread thread;
} parallel_worker;

/* Ranges until none is left or one has failed. */
static void parallel_steps(void *arg)
{
    const parallel_worker *worker = (const parallel_worker *)arg;
    parallel_job *job = worker->job;
    for (;;) {
        uint64_t begin, end, done;
        pmpd_status status;
        pmpd_mutex_lock(&job->lock);
        begin = job->next;
        end = job->n - begin < job->step ? job->n : begin + job->step;
        job->next = end;
        status = job->status;
        pmpd_mutex_unlock(&job->lock);
        if (begin == end || status != PMPD_OK)
            return;
        status = job->work->run(job->work->context, worker->index, begin, end);
        pmpd_mutex_lock(&job->lock);
        job->done += end - begin;
        done = job->done;
        if (status != PMPD_OK && (job->status == PMPD_OK || begin < job->failed)) {
            job->status = status;
            job->failed = begin;
        }
        pmpd_mutex_unlock(&job->lock);
        if (worker->index == 0 && job->work->progress)
            job->work->progress(job->work->context, done);
    }
}

PMPD_INTERNAL unsigned pmpd_parallel_threads(unsigned threads, uint64_t n, uint64_t step)
{
    uint64_t ranges = step ? n / step + (n % step != 0) : n;
    unsigned count = threads;
    if (count == 0) {
        int cpus = pmpd_platform_cpu_count();
        count = cpus < 1 ? 1 : (unsigned)cpus;
    }
    count = count > PMPD_PARALLEL_MAX_THREADS ? PMPD_PARALLEL_MAX_THREADS : count;
    count = ranges < count ? (unsigned)ranges : count;
    return count ? count : 1;
}

PMPD_INTERNAL pmpd_status pmpd_parallel_run(unsigned threads, uint64_t n, uint64_t step,
                                            const pmpd_parallel_work *work, uint64_t *failed)
{
    parallel_worker workers[PMPD_PARALLEL_MAX_THREADS];
    parallel_job job;
    unsigned count = pmpd_parallel_threads(threads, n, step), started, i;
    job.work = work;
    job.n = n;
    job.step = step ? step : 1;
    job.next = job.done = job.failed = 0;
    job.status = PMPD_OK;
    if (pmpd_mutex_init(&job.lock) != PMPD_OK) {
        if (failed)
            *failed = n; /* no item: the failure is the lock's */
        return PMPD_ERR_THREAD;
    }
    for (i = 0; i < count; i++) {
        workers[i].job = &job;
        workers[i].index = i;
    }
    for (started = 1; started < count; started++)
        if (pmpd_thread_start(&workers[started].thread, parallel_steps, &workers[started], 0) != PMPD_OK)
            break; /* fewer threads: the same work */
    parallel_steps(&workers[0]);
    for (i = 1; i < started; i++)
        pmpd_thread_join(&workers[i].thread);
    pmpd_mutex_destroy(&job.lock);
    if (failed && job.status != PMPD_OK)
        *failed = job.failed;
    return job.status;
}

#endif /* PMPD_OFFLINE */
