/* Converts the layer matrices of a model being built to ANYPREC tensors, a
 * tensor at a time, its rows spread over every core (progress per tensor). */
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"

#include "platform/platform.h"

/* Rows per call of the quantizer: a multiple of every row block a layout
 * interleaves, so threads working on different steps never share bytes. */
#define ANYPREC_BUILD_ROWS_PER_STEP 64
#define ANYPREC_BUILD_MAX_THREADS 64

static int anyprec_build_wanted(const pmpd_build_tensor *t)
{
    return t->n_dims == 2 && t->type == PMPD_TENSOR_F32 && strcmp(t->name, "token_embd.weight") != 0 &&
           strcmp(t->name, "output.weight") != 0;
}

/* One tensor's rows, quantized by several threads: thread i takes the
 * row steps i, i + n, i + 2n, ... (steps are whole multiples of any row
 * block the layout interleaves, so no two threads write the same bytes). */
typedef struct anyprec_build_job {
    const float *w;
    const float *importance;
    uint64_t rows, cols;
    unsigned seed_bits, parent_bits;
    unsigned char *out;
    size_t out_size;
    unsigned n_threads;
    pmpd_status status[ANYPREC_BUILD_MAX_THREADS];
} anyprec_build_job;

typedef struct anyprec_build_worker {
    anyprec_build_job *job;
    unsigned index;
    pmpd_thread thread;
} anyprec_build_worker;

static void anyprec_build_rows(void *arg)
{
    anyprec_build_worker *worker = (anyprec_build_worker *)arg;
    anyprec_build_job *job = worker->job;
    uint64_t row;
    pmpd_status status = PMPD_OK;
    for (row = (uint64_t)worker->index * ANYPREC_BUILD_ROWS_PER_STEP; row < job->rows && status == PMPD_OK;
         row += (uint64_t)job->n_threads * ANYPREC_BUILD_ROWS_PER_STEP) {
        uint64_t end;
        if (row == 0)
            continue; /* done before the threads started: it writes the header the others read */
        end = job->rows - row < ANYPREC_BUILD_ROWS_PER_STEP ? job->rows : row + ANYPREC_BUILD_ROWS_PER_STEP;
        status = pmpd_anyprec_quantize(job->w, job->rows, job->cols, job->importance, job->seed_bits,
                                       job->parent_bits, row, end, job->out, job->out_size);
    }
    job->status[worker->index] = status;
}

/* Quantizes a whole tensor on n_threads threads, the calling thread taking
 * share 0 (and the share of any thread that could not start). */
static pmpd_status anyprec_build_tensor(anyprec_build_job *job)
{
    anyprec_build_worker workers[ANYPREC_BUILD_MAX_THREADS];
    unsigned i, started;
    pmpd_status status = PMPD_OK;
    for (i = 0; i < job->n_threads; i++) {
        workers[i].job = job;
        workers[i].index = i;
        job->status[i] = PMPD_OK;
    }
    /* The first step alone: it writes the tensor's header. */
    status = pmpd_anyprec_quantize(job->w, job->rows, job->cols, job->importance, job->seed_bits, job->parent_bits, 0,
                                   job->rows < ANYPREC_BUILD_ROWS_PER_STEP ? job->rows : ANYPREC_BUILD_ROWS_PER_STEP,
                                   job->out, job->out_size);
    if (status != PMPD_OK)
        return status;
    for (started = 1; started < job->n_threads; started++)
        if (pmpd_thread_start(&workers[started].thread, anyprec_build_rows, &workers[started]) != PMPD_OK)
            break;
    anyprec_build_rows(&workers[0]);
    for (i = started; i < job->n_threads; i++)
        anyprec_build_rows(&workers[i]);
    for (i = 1; i < started; i++)
        pmpd_thread_join(&workers[i].thread);
    for (i = 0; i < job->n_threads; i++)
        if (job->status[i] != PMPD_OK)
            status = job->status[i];
    return status;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert(pmpd_build_model *b, unsigned seed_bits, unsigned parent_bits,
                                                     const pmpd_anyprec_importance *importance,
                                                     void (*progress)(void *context, uint64_t done, uint64_t total),
                                                     void *context)
{
    uint64_t total = 0, done = 0, bytes;
    uint32_t i;
    int cpus = pmpd_platform_cpu_count();
    unsigned n_threads = cpus < 1 ? 1 : cpus > ANYPREC_BUILD_MAX_THREADS ? ANYPREC_BUILD_MAX_THREADS : (unsigned)cpus;
    for (i = 0; i < b->n_tensors; i++)
        if (anyprec_build_wanted(&b->tensors[i]))
            total += b->tensors[i].dims[0];
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        anyprec_build_job job;
        unsigned char *out;
        float *w;
        pmpd_status status;
        if (!anyprec_build_wanted(t))
            continue;
        status = pmpd_anyprec_size(t->dims[0], t->dims[1], seed_bits, parent_bits, &bytes);
        if (status != PMPD_OK)
            return status;
        if (bytes > SIZE_MAX || t->size > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)calloc((size_t)bytes, 1);
        w = (float *)malloc((size_t)t->size);
        if (!out || !w) {
            free(out);
            free(w);
            return PMPD_ERR_OUT_OF_MEMORY;
        }
        /* Builder data are little-endian floats, the host order pmpd supports. */
        memcpy(w, t->data, (size_t)t->size);
        memset(&job, 0, sizeof job);
        job.w = w;
        job.importance = pmpd_anyprec_importance_find(importance, t->name, t->dims[1]);
        job.rows = t->dims[0];
        job.cols = t->dims[1];
        job.seed_bits = seed_bits;
        job.parent_bits = parent_bits;
        job.out = out;
        job.out_size = (size_t)bytes;
        job.n_threads = n_threads;
        status = anyprec_build_tensor(&job);
        done += t->dims[0];
        if (progress)
            progress(context, done, total);
        free(w);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        pmpd_build_replace_data(t, PMPD_TENSOR_ANYPREC, out, bytes);
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_add(pmpd_build_model *b, const char *name, uint64_t rows, uint64_t cols,
                                                 const void *bytes, uint64_t size)
{
    const uint64_t placeholder_dims[2] = {1, 1};
    const float placeholder = 0.0f;
    pmpd_anyprec_matrix m;
    pmpd_build_tensor *t;
    unsigned char *copy;
    pmpd_status status = pmpd_anyprec_view(bytes, size, rows, cols, 0, &m, NULL);
    if (status != PMPD_OK)
        return status;
    if (size > SIZE_MAX)
        return PMPD_ERR_OVERFLOW;
    copy = (unsigned char *)malloc((size_t)size);
    if (!copy)
        return PMPD_ERR_OUT_OF_MEMORY;
    memcpy(copy, bytes, (size_t)size);
    /* The builder sizes tensors by type and shape, which ANYPREC's header
     * overrides: enter a placeholder, then give it the real bytes (as the
     * conversion above does in place). */
    status = pmpd_build_add_f32(b, name, 2, placeholder_dims, &placeholder);
    if (status != PMPD_OK) {
        free(copy);
        return status;
    }
    t = &b->tensors[b->n_tensors - 1];
    free(t->data);
    t->data = copy;
    t->size = size;
    t->type = PMPD_TENSOR_ANYPREC;
    t->dims[0] = rows;
    t->dims[1] = cols;
    return PMPD_OK;
}

#undef ANYPREC_BUILD_ROWS_PER_STEP
