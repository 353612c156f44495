/* Converts the layer matrices of a model being built to ANYPREC tensors, a
 * tensor at a time, its rows spread over threads.  Every row is quantized
 * on its own into bytes of its own, so the output is the same whichever
 * thread takes which rows and however many there are. */
#include <stdlib.h>
#include <string.h>

#include "pmpd_impl/offline/parallel/parallel.h"
#include "pmpd_impl/offline/precision/anyprec_build.h"
#include "pmpd_impl/offline/precision/anyprec_quantize.h"
#include "pmpd_impl/offline/quant/build.h"
#include "pmpd_impl/weights/grouped/qformat.h"
#include "pmpd_impl/weights/anyprec/anyprec.h"

/* Rows per step a thread takes: small enough to balance two threads on a
 * 256-row matrix and to show progress often, large enough that the lock
 * and the quantizer's per-call setup cost nothing; a multiple of 64 keeps
 * threads off each other's cache lines. */
#define ANYPREC_BUILD_ROWS_PER_STEP 64

PMPD_INTERNAL int pmpd_anyprec_build_nests_vocabulary(uint64_t rows, uint64_t cols, unsigned parent_bits)
{
    uint64_t q8;
    return pmpd_qformat_tensor_bytes(PMPD_TENSOR_Q8, rows, cols, &q8) == PMPD_OK &&
           pmpd_anyprec_read_bytes(rows, pmpd_anyprec_stored_cols(cols, pmpd_anyprec_tail_shift(cols)), parent_bits) <
               q8;
}

/* The tensors one conversion pass takes: the layer matrices, or the
 * vocabulary matrices that pmpd_anyprec_build_nests_vocabulary picks. */
static int anyprec_build_wanted(const pmpd_build_tensor *t, int vocabulary, unsigned parent_bits)
{
    if (t->n_dims != 2 || t->type != PMPD_TENSOR_F32 || pmpd_quant_build_is_vocabulary(t) != vocabulary)
        return 0;
    return !vocabulary || pmpd_anyprec_build_nests_vocabulary(t->dims[0], t->dims[1], parent_bits);
}

/* One tensor's rows, shared out a step at a time (pmpd_parallel_run): a
 * thread slowed by other work (a benchmark on the next core) takes fewer
 * steps instead of holding the others up at the end. */
typedef struct anyprec_build_job {
    const float *w;
    const float *importance;
    uint64_t rows, cols;
    unsigned seed_bits, parent_bits;
    unsigned char *out;
    size_t out_size;
    /* Progress: done_before + rows done, of total. */
    uint64_t done_before, total;
    void (*progress)(void *context, uint64_t done, uint64_t total);
    void *context;
} anyprec_build_job;

static pmpd_status anyprec_build_rows(void *context, unsigned worker, uint64_t begin, uint64_t end)
{
    const anyprec_build_job *job = (const anyprec_build_job *)context;
    (void)worker;
    return pmpd_anyprec_quantize_rows(job->w, job->rows, job->cols, job->importance, job->seed_bits,
                                      job->parent_bits, begin, end, job->out, job->out_size, 0);
}

static void anyprec_build_progress(void *context, uint64_t done)
{
    const anyprec_build_job *job = (const anyprec_build_job *)context;
    if (job->progress)
        job->progress(job->context, job->done_before + done, job->total);
}

/* Quantizes a whole tensor on threads threads (as pmpd_parallel_run's). */
static pmpd_status anyprec_build_tensor(anyprec_build_job *job, unsigned threads)
{
    const pmpd_parallel_work work = {anyprec_build_rows, anyprec_build_progress, job};
    /* The header first, alone: the threads read it. */
    pmpd_status status = pmpd_anyprec_quantize_rows(job->w, job->rows, job->cols, job->importance, job->seed_bits,
                                                    job->parent_bits, 0, 0, job->out, job->out_size, 1);
    if (status != PMPD_OK)
        return status;
    return pmpd_parallel_run(threads, job->rows, ANYPREC_BUILD_ROWS_PER_STEP, &work, NULL);
}

/* One matrix quantized into out on threads threads; progress (may be
 * NULL) hears done_before + rows done, of total. */
static pmpd_status anyprec_build_quantize(const float *w, uint64_t rows, uint64_t cols, const float *importance,
                                          unsigned seed_bits, unsigned parent_bits, unsigned char *out,
                                          size_t out_size, unsigned threads, uint64_t done_before, uint64_t total,
                                          void (*progress)(void *context, uint64_t done, uint64_t total),
                                          void *context)
{
    anyprec_build_job job;
    memset(&job, 0, sizeof job);
    job.w = w;
    job.importance = importance;
    job.rows = rows;
    job.cols = cols;
    job.seed_bits = seed_bits;
    job.parent_bits = parent_bits;
    job.out = out;
    job.out_size = out_size;
    job.done_before = done_before;
    job.total = total;
    job.progress = progress;
    job.context = context;
    return anyprec_build_tensor(&job, threads);
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_matrix(const float *w, uint64_t rows, uint64_t cols,
                                                    const float *importance, unsigned seed_bits,
                                                    unsigned parent_bits, unsigned threads, unsigned char *out,
                                                    size_t out_size)
{
    return anyprec_build_quantize(w, rows, cols, importance, seed_bits, parent_bits, out, out_size,
                                  threads, 0, rows, NULL, NULL);
}

static pmpd_status anyprec_build_convert_pass(pmpd_build_model *b, int vocabulary, unsigned seed_bits,
                                              unsigned parent_bits, const pmpd_anyprec_importance *importance,
                                              unsigned threads,
                                              void (*progress)(void *context, uint64_t done, uint64_t total),
                                              void *context)
{
    uint64_t total = 0, done = 0, bytes;
    uint32_t i;
    for (i = 0; i < b->n_tensors; i++)
        if (anyprec_build_wanted(&b->tensors[i], vocabulary, parent_bits))
            total += b->tensors[i].dims[0];
    for (i = 0; i < b->n_tensors; i++) {
        pmpd_build_tensor *t = &b->tensors[i];
        unsigned char *out;
        pmpd_status status;
        if (!anyprec_build_wanted(t, vocabulary, parent_bits))
            continue;
        status = pmpd_anyprec_size(t->dims[0], t->dims[1], seed_bits, parent_bits, &bytes);
        if (status != PMPD_OK)
            return status;
        if (bytes > SIZE_MAX)
            return PMPD_ERR_OVERFLOW;
        out = (unsigned char *)calloc((size_t)bytes, 1);
        if (!out)
            return PMPD_ERR_OUT_OF_MEMORY;
        /* Builder data are little-endian floats (the host order pmpd
         * supports) in a malloc'ed block: read in place, not copied. */
        status = anyprec_build_quantize((const float *)(const void *)t->data, t->dims[0], t->dims[1],
                                        pmpd_anyprec_importance_find(importance, t->name, t->dims[1]), seed_bits,
                                        parent_bits, out, (size_t)bytes, threads, done, total, progress, context);
        if (status != PMPD_OK) {
            free(out);
            return status;
        }
        done += t->dims[0];
        /* Other threads may have finished the tensor's last steps. */
        if (progress)
            progress(context, done, total);
        pmpd_build_replace_data(t, PMPD_TENSOR_ANYPREC, out, bytes);
    }
    return PMPD_OK;
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert(pmpd_build_model *b, unsigned seed_bits, unsigned parent_bits,
                                                     const pmpd_anyprec_importance *importance, unsigned threads,
                                                     void (*progress)(void *context, uint64_t done, uint64_t total),
                                                     void *context)
{
    return anyprec_build_convert_pass(b, 0, seed_bits, parent_bits, importance, threads, progress, context);
}

PMPD_INTERNAL pmpd_status pmpd_anyprec_build_convert_vocabulary(pmpd_build_model *b, unsigned seed_bits,
                                                                unsigned parent_bits, unsigned threads)
{
    return anyprec_build_convert_pass(b, 1, seed_bits, parent_bits, NULL, threads, NULL, NULL);
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
